"""Argument checks of the batched kernels: the two batch forms, back end, dtypes, shapes.

A batch is *fixed* (one 3-D array ``(b, m, n)``) or *variable* (a list or tuple of 2-D
arrays). :func:`as_batch` checks one argument and converts it to the back end; finiteness
is checked on the stacks the kernels build (:func:`first_nonfinite`), so a GPU
synchronizes once per stack, not per matrix."""

from __future__ import annotations

import numbers

import numpy as np

from tlrcore.backends import get_backend

_FORMS = "a 3-D array (b, m, n) or a list of 2-D arrays"


def choose_backend(backend, *batches):
    """The back end named by `backend`, else that of the first array among `batches` (a list's
    first item); NumPy for an empty batch."""
    if backend is not None:
        return get_backend(backend)
    for batch in batches:
        first = batch[0] if isinstance(batch, (list, tuple)) and len(batch) else batch
        if hasattr(first, "ndim") and hasattr(first, "dtype"):
            return get_backend(first)
    return get_backend("numpy")


def _real_array(a, backend, label):
    """`a` as a float64 array of `backend`; TypeError naming `label` otherwise."""
    dtype = getattr(a, "dtype", None)
    if dtype is None:
        try:
            a = np.asarray(a)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{label} must be an array of real numbers ({exc}).") from None
        dtype = a.dtype
    if np.dtype(dtype).kind == "c":
        raise TypeError(
            f"{label} is complex ({dtype}); batched kernels take real matrices: pass .real if "
            "the imaginary part is zero."
        )
    if np.dtype(dtype).kind not in "biuf":
        raise TypeError(f"{label} must hold real numbers; got dtype {dtype}.")
    try:
        return backend.asarray(a)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{label} cannot become a {backend.name} array ({exc}); put every matrix on one back "
            "end, or pass backend= naming the one they are on."
        ) from None


def as_batch(value, name, backend, square=False, vectors=False):
    """Check the batch argument `value` (named `name`) and return ``(fixed, batch)``, ``fixed``
    True for the 3-D array form, ``batch`` float64 arrays of `backend`.

    With `square` every matrix must be square; with `vectors` a list may hold 1-D arrays.

    Raises
    ------
    TypeError
        `value` is neither form, holds complex or non-numeric entries, or arrays of another
        back end.
    ValueError
        Wrong number of dimensions, or a non-square matrix where `square`.
    """
    if isinstance(value, (list, tuple)):
        items = [_real_array(a, backend, f"{name}[{i}]") for i, a in enumerate(value)]
        allowed = (1, 2) if vectors else (2,)
        for i, a in enumerate(items):
            if a.ndim not in allowed:
                kind = "1-D or 2-D" if vectors else "2-D"
                raise ValueError(f"{name}[{i}] must be a {kind} array; got shape {a.shape}.")
            if square and a.shape[0] != a.shape[1]:
                raise ValueError(f"{name}[{i}] must be square; got shape {a.shape}.")
        return False, items
    if not (hasattr(value, "ndim") and hasattr(value, "shape")):
        raise TypeError(f"{name} must be {_FORMS}; got {type(value).__name__}.")
    array = _real_array(value, backend, name)
    if array.ndim != 3:
        hint = f" (for one matrix pass {name}[None])" if array.ndim == 2 else ""
        raise ValueError(f"{name} must be {_FORMS}; got an array of shape {array.shape}{hint}.")
    if square and array.shape[1] != array.shape[2]:
        raise ValueError(f"{name} must hold square matrices; got an array of shape {array.shape}.")
    return True, array


def check_pairs(name_a, a, name_b, b, fixed_a, fixed_b):
    """Both batches in one form and of one length."""
    if fixed_a != fixed_b:
        raise TypeError(
            f"{name_a} and {name_b} must both be 3-D arrays or both be lists; got one of each."
        )
    if len(a) != len(b):
        raise ValueError(
            f"{name_a} has {len(a)} matrices but {name_b} has {len(b)}; pass one per pair."
        )


def shapes(batch, fixed):
    """The shape of each matrix of a checked batch, as tuples."""
    return [tuple(batch.shape[1:])] * len(batch) if fixed else [tuple(a.shape) for a in batch]


def labeled_shapes(batch, fixed):
    """``(label, shape)`` pairs to check: one for a fixed batch (label ``""``, even when empty),
    one per matrix of a list (label ``"[i]"``)."""
    if fixed:
        return [("", tuple(batch.shape[1:]))]
    return [(f"[{i}]", tuple(a.shape)) for i, a in enumerate(batch)]


def check_scalar(value, name):
    """`value` as a finite float, else TypeError or ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}.")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value}.")
    return float(value)


def first_nonfinite(backend, stack, indices):
    """The smallest of `indices` whose matrix in `stack` has a NaN or infinity, or None."""
    xp = backend.xp
    finite = backend.to_host(xp.isfinite(stack).all(axis=(-2, -1)))
    bad = np.asarray(indices)[~finite]
    return int(bad.min()) if bad.size else None


def nonfinite_error(name, index):
    """The ValueError for a non-finite entry in matrix `index` of batch `name`."""
    return ValueError(
        f"{name}[{index}] contains NaN or infinite values; remove them, or pass check_finite=False "
        "if they cannot occur."
    )
