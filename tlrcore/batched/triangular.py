"""Batched Cholesky factorization and triangular solves, fixed or variable size."""

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
from tlrcore.errors import NotPositiveDefiniteError

__all__ = ["cholesky", "solve_triangular"]


@overload
def cholesky(
    mats: NDArray[Any],
    strategy: Strategy = ...,
    check_finite: bool = ...,
    backend: str | Backend | None = ...,
) -> BackendArray: ...


@overload
def cholesky(
    mats: BatchList,
    strategy: Strategy = ...,
    check_finite: bool = ...,
    backend: str | Backend | None = ...,
) -> list[BackendArray]: ...


# The implementation: its types are those of the overloads above.
@one_blas_thread
def cholesky(mats, strategy="auto", check_finite=True, backend=None):
    """Lower Cholesky factors of a batch of symmetric positive definite matrices.

    Parameters
    ----------
    mats : array of shape (b, m, m), or list or tuple of square 2-D arrays
        A fixed-size batch, or a variable-size batch of any orders; lower triangles read,
        nothing modified.
    strategy : {"auto", "group", "pad"}, default "auto"
        One stacked call per distinct order (``"group"``), or per order of a grid about 9 %
        apart, padding with identity blocks (``"pad"``); ``"auto"``: the back end's choice.
        The factors agree to rounding.
    check_finite : bool, default True
        Reject NaN and infinite entries.
    backend : str or Backend, optional
        Default: the back end of `mats` (of its first matrix for a list).

    Returns
    -------
    array of shape (b, m, m), or list of 2-D arrays
        ``L[i]`` with ``L[i] @ L[i].T = mats[i]``, in the form of `mats` (possibly views).

    Raises
    ------
    TypeError
        `mats` is neither form, or holds complex or non-numeric values.
    ValueError
        Wrong dimensions, a non-square matrix, non-finite values, or an unknown `strategy`.
    tlrcore.NotPositiveDefiniteError
        ``.tile`` is the index of the first matrix that is not numerically positive definite,
        the message gives its failing leading minor.

    Examples
    --------
    >>> import numpy as np, tlrcore as tlr
    >>> [L.tolist() for L in tlr.batched.cholesky([4.0 * np.eye(2), np.array([[9.0]])])]
    [[[2.0, 0.0], [0.0, 2.0]], [[3.0]]]
    """
    plan.check_strategy(strategy)
    backend = _checks.choose_backend(backend, mats)
    fixed, batch = _checks.as_batch(mats, "mats", backend, square=True)
    shapes = _checks.shapes(batch, fixed)
    orders = np.array([s[:1] for s in shapes], dtype=int).reshape(len(shapes), 1)
    computed = plan.computed_dims(orders, strategy, backend, factor=True)
    work = _run.units(backend, plan.buckets(computed), lambda shape: 16 * shape[0] ** 2)

    def factor(indices, shape):
        stack = plan.pack(backend, batch, fixed, indices, shape * 2, identity=True)
        bad = _checks.first_nonfinite(backend, stack, indices) if check_finite else None
        if bad is not None:
            return None, bad
        if len(stack) > 1:
            return backend.cholesky(stack), None
        # One matrix: the back end's single-matrix path (on the CPU, LAPACK without NumPy's
        # copies in and out of a stack).
        L, info = backend.cholesky(stack[0])
        return (L[None], info), None

    results = _run.Results(backend, fixed, shapes, tuple(batch.shape[1:]) if fixed else None)
    failed, nonfinite = [], []
    for (indices, _), (factors, bad) in _run.run(backend, work, factor):
        if bad is not None:
            nonfinite.append(bad)
            continue
        L, info = factors
        info = np.asarray(info).reshape(-1)
        failed.extend((int(indices[j]), int(info[j])) for j in np.flatnonzero(info))
        results.put(indices, L)
    if nonfinite:
        raise _checks.nonfinite_error("mats", min(nonfinite))
    if failed:
        index, order = min(failed)
        raise NotPositiveDefiniteError(
            f"mats[{index}] is not positive definite (leading minor of order {order} of "
            f"{shapes[index][0]}); it is the first such matrix of the batch. Check that it is "
            "symmetric with positive eigenvalues, or add a small multiple of the identity to it.",
            tile=index,
        )
    return results.value()


@overload
def solve_triangular(
    Ls: NDArray[Any],
    Bs: NDArray[Any],
    lower: bool = ...,
    trans: bool = ...,
    strategy: Strategy = ...,
    check_finite: bool = ...,
    backend: str | Backend | None = ...,
) -> BackendArray: ...


@overload
def solve_triangular(
    Ls: BatchList,
    Bs: BatchList,
    lower: bool = ...,
    trans: bool = ...,
    strategy: Strategy = ...,
    check_finite: bool = ...,
    backend: str | Backend | None = ...,
) -> list[BackendArray]: ...


# The implementation: its types are those of the overloads above.
@one_blas_thread
def solve_triangular(
    Ls, Bs, lower=True, trans=False, strategy="auto", check_finite=True, backend=None
):
    """Solve ``op(L[i]) X[i] = B[i]``, ``op(L) = L`` or ``L^T`` (`trans`), for a batch.

    Parameters
    ----------
    Ls : array of shape (b, m, m), or list or tuple of square 2-D arrays
        Triangular; only the triangle named by `lower` is read.
    Bs : array of shape (b, m, k), or list or tuple of 1-D or 2-D arrays
        In the form of `Ls`, ``Bs[i]`` with ``Ls[i].shape[0]`` rows (1-D: one right-hand side).
    lower, trans : bool, default True and False
    strategy : {"auto", "group", "pad"}, default "auto"
        As for :func:`cholesky`, by order and number of columns.
    check_finite : bool, default True
    backend : str or Backend, optional
        Default: the back end of `Ls`.

    Returns
    -------
    array of shape (b, m, k), or list of arrays
        ``X[i]`` with the shape of ``Bs[i]``, in the form of `Bs`.

    Raises
    ------
    TypeError
        An argument is neither form, the forms differ, or values are complex or non-numeric.
    ValueError
        Different numbers of matrices, wrong dimensions, rows of ``Bs[i]`` other than the order
        of ``Ls[i]``, non-finite values, or an unknown `strategy`.
    numpy.linalg.LinAlgError
        On NumPy, a triangular matrix with a zero on its diagonal.
    """
    plan.check_strategy(strategy)
    backend = _checks.choose_backend(backend, Ls, Bs)
    fixed, Ls = _checks.as_batch(Ls, "Ls", backend, square=True)
    fixed_b, Bs = _checks.as_batch(Bs, "Bs", backend, vectors=True)
    _checks.check_pairs("Ls", Ls, "Bs", Bs, fixed, fixed_b)
    vector = [] if fixed else [b.ndim == 1 for b in Bs]
    if not fixed:
        Bs = [b[:, None] if v else b for b, v in zip(Bs, vector, strict=True)]
    for (label, l_shape), (_, b_shape) in zip(
        _checks.labeled_shapes(Ls, fixed), _checks.labeled_shapes(Bs, fixed), strict=True
    ):
        if l_shape[0] != b_shape[0]:
            raise ValueError(
                f"Bs{label} has {b_shape[0]} rows but Ls{label} has order {l_shape[0]}; they must "
                "agree."
            )
    shapes = _checks.shapes(Bs, fixed)
    dims = np.array(shapes, dtype=int).reshape(len(shapes), 2)
    work = _run.units(
        backend,
        plan.buckets(plan.computed_dims(dims, strategy, backend)),
        lambda shape: 8 * shape[0] * (shape[0] + 2 * shape[1]),
    )

    def solve(indices, shape):
        m, k = shape
        L = plan.pack(backend, Ls, fixed, indices, (m, m), identity=True)
        B = plan.pack(backend, Bs, fixed, indices, (m, k))
        if check_finite:
            bad = [
                (i, name)
                for name, stack in (("Ls", L), ("Bs", B))
                if (i := _checks.first_nonfinite(backend, stack, indices)) is not None
            ]
            if bad:
                return None, min(bad)
        return backend.solve_triangular(L, B, lower=lower, trans=trans), None

    out = _run.assemble(backend, work, solve, fixed, shapes, tuple(Bs.shape[1:]) if fixed else None)
    return out if fixed else [x[:, 0] if v else x for x, v in zip(out, vector, strict=True)]
