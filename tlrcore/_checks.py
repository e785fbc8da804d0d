"""Argument checks shared by the public entry points of tlrcore (validate once, at entry)."""

from __future__ import annotations

import numpy as np

__all__ = ["check_accuracy", "check_int", "check_operand", "check_random_state"]


def check_accuracy(accuracy):
    """`accuracy` as a float in (0, 1); TypeError or ValueError naming it."""
    if isinstance(accuracy, bool) or not isinstance(accuracy, (int, float, np.floating)):
        raise TypeError(f"accuracy must be a float in (0, 1); got {type(accuracy).__name__}.")
    if not 0.0 < accuracy < 1.0:
        raise ValueError(f"accuracy must be in (0, 1), e.g. 1e-8; got {accuracy}.")
    return float(accuracy)


def check_int(value, name, low, high=None, allow_none=False):
    """`value` as an int in ``[low, high]``; TypeError or ValueError naming `name`."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer; got {value!r}.")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} must be {bound}; got {value}.")
    return int(value)


def check_random_state(random_state):
    """`random_state` if it seeds ``numpy.random.default_rng``: a non-negative integer or
    a ``Generator``; TypeError or ValueError naming it otherwise."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(
        random_state, (int, np.integer)
    ):
        raise TypeError(
            "random_state must be a non-negative integer or a numpy.random.Generator; got "
            f"{random_state!r}."
        )
    if random_state < 0:
        raise ValueError(f"random_state must be a non-negative integer; got {random_state}.")
    return random_state


def check_operand(x, n, name, xp=np):
    """`x` as a float64 array of the array module `xp`, of shape ``(n,)`` or ``(n, k)``
    with finite entries (a product or solve with NaN would return NaN without a word).

    Raises
    ------
    TypeError
        If `x` is not real numbers.
    ValueError
        For a wrong shape or non-finite entries.
    """
    try:
        x = xp.asarray(x)
    except ValueError as exc:
        raise TypeError(f"{name} must be a real numeric array; it is ragged.") from exc
    if x.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array; got dtype {x.dtype}.")
    x = x.astype(xp.float64, copy=False)
    if x.ndim not in (1, 2) or x.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k); got {x.shape}.")
    if not bool(xp.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or infinite values.")
    return x
