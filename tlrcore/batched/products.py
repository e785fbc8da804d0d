"""Batched matrix products ``C[i] = alpha op(A[i]) op(B[i]) + beta C[i]`` of varying shapes.

The tile algorithms multiply ``b x r_i`` by ``r_i x s`` factors with a rank of their own
per tile: the products are stacked by shape (``"group"``) or padded with zeros to a grid
(``"pad"``), one ``matmul`` per stack."""

from __future__ import annotations

from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

import tlrcore.batched._checks as _checks
import tlrcore.batched._run as _run
from tlrcore._typing import BackendArray, BatchList, Strategy
from tlrcore.backends import Backend
from tlrcore.batched import plan
from tlrcore.concurrency.threads import one_blas_thread

__all__ = ["gemm"]


def _op_shape(shape, trans):
    return shape[::-1] if trans else shape


@overload
def gemm(
    As: NDArray[Any],
    Bs: NDArray[Any],
    transa: bool = ...,
    transb: bool = ...,
    alpha: float = ...,
    beta: float = ...,
    Cs: NDArray[Any] | None = ...,
    strategy: Strategy = ...,
    check_finite: bool = ...,
    backend: str | Backend | None = ...,
) -> BackendArray: ...


@overload
def gemm(
    As: BatchList,
    Bs: BatchList,
    transa: bool = ...,
    transb: bool = ...,
    alpha: float = ...,
    beta: float = ...,
    Cs: BatchList | None = ...,
    strategy: Strategy = ...,
    check_finite: bool = ...,
    backend: str | Backend | None = ...,
) -> list[BackendArray]: ...


# The implementation: its types are those of the overloads above.
@one_blas_thread
def gemm(
    As,
    Bs,
    transa=False,
    transb=False,
    alpha=1.0,
    beta=0.0,
    Cs=None,
    strategy="auto",
    check_finite=True,
    backend=None,
):
    """Products ``C[i] = alpha op(A[i]) op(B[i]) + beta C[i]``, ``op(X) = X`` or ``X^T``.

    Parameters
    ----------
    As, Bs : array of shape (b, m, k), or list or tuple of 2-D arrays
        Fixed- or variable-size batches of one form; ``op(Bs[i])`` has as many rows as
        ``op(As[i])`` has columns.
    transa, transb : bool, default False
    alpha, beta : float, default 1.0 and 0.0
    Cs : array or list or tuple of 2-D arrays, optional
        In the form of `As`, of the shape of the product; needed for ``beta != 0``, ignored
        otherwise, not modified.
    strategy : {"auto", "group", "pad"}, default "auto"
        Stack equal shapes (``"group"``), or pad with zeros to a grid about 9 % apart
        (``"pad"``); ``"auto"``: the back end's choice.
    check_finite : bool, default True
    backend : str or Backend, optional
        Default: the back end of `As`.

    Returns
    -------
    array of shape (b, m, n), or list of 2-D arrays
        New arrays in the form of `As` (possibly views into larger stacks).

    Raises
    ------
    TypeError
        An argument is neither form, the forms differ, values are complex or non-numeric, or
        `alpha` or `beta` is not a real number.
    ValueError
        Different numbers of matrices, wrong dimensions, shapes that do not agree, ``beta !=
        0`` without `Cs`, non-finite values, or an unknown `strategy`.

    Examples
    --------
    >>> import numpy as np, tlrcore as tlr
    >>> As = [np.ones((2, 3)), np.ones((2, 1))]
    >>> Bs = [np.ones((3, 1)), 2.0 * np.ones((1, 1))]
    >>> [C.ravel().tolist() for C in tlr.batched.gemm(As, Bs)]
    [[3.0, 3.0], [2.0, 2.0]]
    """
    plan.check_strategy(strategy)
    alpha, beta = _checks.check_scalar(alpha, "alpha"), _checks.check_scalar(beta, "beta")
    if beta != 0.0 and Cs is None:
        raise ValueError(f"beta={beta} needs Cs; pass Cs or beta=0.")
    backend = _checks.choose_backend(backend, As, Bs)
    fixed, As = _checks.as_batch(As, "As", backend)
    fixed_b, Bs = _checks.as_batch(Bs, "Bs", backend)
    _checks.check_pairs("As", As, "Bs", Bs, fixed, fixed_b)
    a_shapes = [(label, _op_shape(s, transa)) for label, s in _checks.labeled_shapes(As, fixed)]
    b_shapes = [_op_shape(s, transb) for _, s in _checks.labeled_shapes(Bs, fixed)]
    for (label, a), b in zip(a_shapes, b_shapes, strict=True):
        if a[1] != b[0]:
            raise ValueError(
                f"op(As{label}) has {a[1]} columns but op(Bs{label}) has {b[0]} rows; they must "
                "agree (check transa and transb)."
            )
    shapes = [(a[0], b[1]) for (_, a), b in zip(a_shapes, b_shapes, strict=True)]
    if Cs is not None:
        fixed_c, Cs = _checks.as_batch(Cs, "Cs", backend)
        _checks.check_pairs("As", As, "Cs", Cs, fixed, fixed_c)
        for shape, (label, c_shape) in zip(shapes, _checks.labeled_shapes(Cs, fixed), strict=True):
            if shape != c_shape:
                raise ValueError(
                    f"Cs{label} has shape {c_shape} but op(As{label}) op(Bs{label}) has shape "
                    f"{shape}."
                )
    dims = np.array(
        [(a[0], a[1], b[1]) for (_, a), b in zip(a_shapes, b_shapes, strict=True)], dtype=int
    ).reshape(-1, 3)
    if fixed:
        fixed_shape = shapes[0]
        shapes, dims = shapes * len(As), np.repeat(dims, len(As), axis=0)
    work = _run.units(
        backend,
        plan.buckets(plan.computed_dims(dims, strategy, backend)),
        lambda shape: 8 * (shape[0] * shape[1] + shape[1] * shape[2] + 2 * shape[0] * shape[2]),
    )
    operands = [("As", As), ("Bs", Bs)] + ([("Cs", Cs)] if beta != 0.0 else [])

    def multiply(indices, shape):
        m, k, n = shape
        stored = [_op_shape((m, k), transa), _op_shape((k, n), transb), (m, n)]
        stacks = [
            plan.pack(backend, batch, fixed, indices, s)
            for (_, batch), s in zip(operands, stored, strict=False)
        ]
        if check_finite:
            bad = [
                (i, name)
                for (name, _), stack in zip(operands, stacks, strict=True)
                if (i := _checks.first_nonfinite(backend, stack, indices)) is not None
            ]
            if bad:
                return None, min(bad)
        C = backend.xp.matmul(
            stacks[0].swapaxes(-1, -2) if transa else stacks[0],
            stacks[1].swapaxes(-1, -2) if transb else stacks[1],
        )
        if alpha != 1.0:
            C *= alpha
        if beta != 0.0:
            C += beta * stacks[2]
        return C, None

    return _run.assemble(backend, work, multiply, fixed, shapes, fixed_shape if fixed else None)
