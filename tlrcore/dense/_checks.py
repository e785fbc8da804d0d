"""Argument validation shared by the dense factorizations."""

import numpy as np

from tlrcore.errors import FactorizationError

#: ``max|M - M^T| <= SYMMETRY_RTOL * max|M|`` is accepted as symmetric.
SYMMETRY_RTOL = 1e-10
#: Side of the pieces :func:`asymmetry` compares.
_BLOCK = 128

PIVOTING = ("bk", "rook")


def check_choice(value, name, choices):
    """Return `value` if it is one of the strings `choices`, else raise naming `name`."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}; got {type(value).__name__}.")
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not supported; use one of {choices}.")
    return value


def working_copy(M, check_finite=True):
    """A Fortran-ordered float64 copy of the symmetric `M` (never modified): TypeError if complex
    or not numeric; ValueError if not a non-empty square matrix, not finite (with
    `check_finite`), or not symmetric to a relative ``SYMMETRY_RTOL`` in the max norm."""
    M = np.asarray(M)
    if np.iscomplexobj(M) or not (np.issubdtype(M.dtype, np.number) or M.dtype == bool):
        raise TypeError(f"M must be a real numeric matrix; got dtype {M.dtype}.")
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise ValueError(f"M must be a non-empty square matrix; got shape {M.shape}.")
    a = np.array(M, dtype=np.float64, order="F")
    if check_finite and not np.isfinite(a).all():
        raise ValueError(
            "M contains NaN or infinite values; remove them or pass check_finite=False."
        )
    check_symmetric(a)
    return a


def asymmetry(a, b=None):
    """``max|a - b^T|`` (``b`` defaults to the square `a`), on any back end.

    tlrcore's symmetry criterion is ``asymmetry(a) <= SYMMETRY_RTOL max|a|``. NumPy arrays are
    scanned in ``_BLOCK x _BLOCK`` pieces (the transposed operand stays in cache), for
    ``b = a`` the lower triangle only."""
    square = b is None
    b = a if square else b
    step = _BLOCK if isinstance(a, np.ndarray) else max(a.shape)
    worst = 0.0
    for i in range(0, a.shape[0], step):
        for j in range(0, i + 1 if square else a.shape[1], step):
            worst = max(
                worst,
                float(abs(a[i : i + step, j : j + step] - b[j : j + step, i : i + step].T).max()),
            )
    return worst


def check_symmetric(M, name="M"):
    """Raise a ValueError naming `name` unless the square NumPy `M` is symmetric to
    rounding: ``max|M - M^T| <= SYMMETRY_RTOL * max|M|``."""
    excess = asymmetry(M)
    if excess > SYMMETRY_RTOL * max(M.max(), -M.min()):
        raise ValueError(
            f"{name} is not symmetric: max|{name} - {name}.T| = {excess:.3g} > {SYMMETRY_RTOL:g} * "
            f"max|{name}|; pass ({name} + {name}.T) / 2 to use its symmetric part."
        )


def check_finite_result(*arrays):
    """Raise :class:`~tlrcore.errors.FactorizationError` unless every array is finite."""
    if not all(np.isfinite(x).all() for x in arrays):
        raise FactorizationError(
            "the factorization overflowed (non-finite factors); M has entries too close to the "
            "floating-point limits: rescale it, e.g. factor M / max|M|."
        )
