"""Checks of the public entry points' settings that more than one entry point shares.

Each raises :class:`ValueError`, :class:`TypeError` or :class:`MemoryError` with the
argument's name and the fix, before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from geostat.solvers import NUMPY

__all__ = [
    "MIN_TILE_SIZE",
    "ORDERINGS",
    "check_bool",
    "check_choice",
    "check_mapping",
    "check_memory",
    "check_params",
    "check_positive_int",
    "check_probabilities",
    "check_random_state",
    "check_tile_size",
]

#: Smallest tile size the statistics front end accepts: below it the TLR method does more
#: Python bookkeeping per tile than arithmetic, and nothing is gained.
MIN_TILE_SIZE = 32
#: Site orderings of the TLR method (:func:`geostat.ordering.order_points`).
ORDERINGS = ("kdtree", "morton", "none")


def check_choice(value, argname, choices):
    """`value` if it is one of `choices`, else ValueError naming `argname` and the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{argname}={value!r} is not one of {choices}.")
    return value


def check_bool(value, argname):
    """`value` as a bool if it is True or False, else TypeError naming `argname`."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{argname} must be True or False; got {value!r}.")
    return bool(value)


def check_random_state(random_state, argname="random_state"):
    """A NumPy ``Generator`` from `random_state`: None draws fresh entropy, a
    non-negative integer seeds a new one, a ``Generator`` is used as it is, a legacy
    ``RandomState`` seeds a new one from one draw."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31))
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(
        random_state, (int, np.integer)
    ):
        raise TypeError(
            f"{argname} must be None, a non-negative integer or a numpy.random.Generator; "
            f"got {random_state!r} ({type(random_state).__name__})."
        )
    if random_state < 0:
        raise ValueError(f"{argname} must be a non-negative integer seed; got {random_state}.")
    return np.random.default_rng(int(random_state))


def check_mapping(value, argname, example):
    """`value` as a new dict (None: empty); TypeError naming `argname` for anything but a
    mapping."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{argname} must be a dict such as {example}; got {type(value).__name__}.")
    return dict(value)


def check_positive_int(value, argname):
    """`value` as an int if it is a positive integer, else ValueError naming `argname`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{argname} must be a positive integer; got {value!r}.")
    return int(value)


def check_probabilities(values, argname, example):
    """`values` as a non-empty 1-D float array of probabilities in (0, 1), else ValueError
    naming `argname` with an `example`."""
    try:
        out = np.atleast_1d(np.asarray(values, dtype=float))
    except (TypeError, ValueError):
        out = None
    if out is None or out.ndim != 1 or out.size == 0 or not np.all((out > 0) & (out < 1)):
        raise ValueError(
            f"{argname} must be probabilities in (0, 1), e.g. {example}; got {values!r}."
        )
    return out


def check_tile_size(tile_size, argname="tile_size"):
    """`tile_size` if it is None or an integer of at least :data:`MIN_TILE_SIZE`.

    A tile size above the number of sites is allowed (it is clipped to one tile).
    """
    if tile_size is None:
        return None
    tile_size = check_positive_int(tile_size, argname)
    if tile_size < MIN_TILE_SIZE:
        raise ValueError(
            f"{argname}={tile_size} is too small: tiles below {MIN_TILE_SIZE} sites cost more in "
            f"bookkeeping than they save. Use {argname}=None (chosen from the number of sites) "
            f"or a value of at least {MIN_TILE_SIZE}, typically 256 to 2048."
        )
    return tile_size


def check_memory(need, what, advice):
    """Refuse work whose arrays need more than 90 % of the available host memory
    (``free_memory`` of the NumPy back end).

    `need` is in bytes; the MemoryError names `what` (e.g. ``"the exact likelihood at
    n = 40,000"``), the memory needed and available, and the `advice`.
    """
    available = NUMPY.free_memory()
    if need > 0.9 * available:
        raise MemoryError(
            f"{what} needs about {need / 2**30:.1f} GiB but {available / 2**30:.1f} GiB is "
            f"available; {advice}"
        )


def check_params(params, kernel, argname="params"):
    """Check a parameter dict against a kernel and return it as plain floats.

    Parameters
    ----------
    params : dict
        ``variance`` and ``range`` (positive), ``nugget`` (non-negative, default 0) and
        the kernel's shape parameters (required when the kernel estimates them; when the
        kernel fixes them they may be omitted or must agree).
    kernel : geostat.kernels.Kernel
    argname : str

    Returns
    -------
    dict
        ``variance``, ``range``, every shape parameter of the kernel, ``nugget``.

    Raises
    ------
    TypeError, ValueError
        For a non-mapping, non-numbers, missing, unknown or non-finite values, a
        non-positive variance or range, a negative nugget, or a shape value outside the
        kernel's domain.
    """
    if not hasattr(params, "keys"):
        raise TypeError(
            f"{argname} must be a dict such as {{'variance': 1.0, 'range': 0.1}}; got "
            f"{type(params).__name__}."
        )
    allowed = {"variance", "range", "nugget", *kernel.shape_names}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(
            f"{argname} has unknown keys {unknown}; {kernel!r} takes {sorted(allowed)}."
        )
    out = {}
    for name in ("variance", "range", *kernel.shape_names, "nugget"):
        if name not in params:
            if name == "nugget":
                out[name] = 0.0
                continue
            if name in kernel.fixed_shape:
                out[name] = float(kernel.fixed_shape[name])
                continue
            raise ValueError(f"{argname} is missing {name!r}; give it a positive value.")
        value = params[name]
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"{argname}[{name!r}] must be a number; got {type(value).__name__}.")
        value = float(value)
        if name in kernel.shape_names:  # the family's domain: an angle, a separability of 0
            value = kernel._check_shape_value(name, value, f"{argname}[{name!r}]")
        elif not (np.isfinite(value) and (value >= 0 if name == "nugget" else value > 0)):
            need = "non-negative" if name == "nugget" else "positive"
            raise ValueError(f"{argname}[{name!r}] must be {need} and finite; got {value}.")
        if name in kernel.fixed_shape and not np.isclose(
            value, kernel.fixed_shape[name], rtol=1e-12, atol=0
        ):
            raise ValueError(
                f"{argname}[{name!r}] = {value} conflicts with {kernel!r}; build the kernel with "
                f"{name}=None to vary it."
            )
        out[name] = value
    return out
