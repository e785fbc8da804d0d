"""Validation of user-supplied covariance parameters."""

from __future__ import annotations

import numpy as np

__all__ = ["check_params"]


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
    TypeError
        If `params` is not a mapping or holds non-numbers.
    ValueError
        For missing, unknown, non-finite or non-positive values.
    """
    if not hasattr(params, "keys"):
        raise TypeError(f"{argname} must be a dict such as {{'variance': 1.0, 'range': 0.1}}; got {type(params).__name__}.")
    allowed = {"variance", "range", "nugget", *kernel.shape_names}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"{argname} has unknown keys {unknown}; {kernel!r} takes {sorted(allowed)}.")
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
        positive = value >= 0 if name == "nugget" else value > 0
        if not (np.isfinite(value) and positive):
            need = "non-negative" if name == "nugget" else "positive"
            raise ValueError(f"{argname}[{name!r}] must be {need} and finite; got {value}.")
        if name in kernel.fixed_shape and not np.isclose(value, kernel.fixed_shape[name], rtol=1e-12, atol=0):
            raise ValueError(
                f"{argname}[{name!r}] = {value} conflicts with {kernel!r}; build the kernel with "
                f"{name}=None to vary it."
            )
        out[name] = value
    if "power" in out and not out["power"] <= 2.0:
        raise ValueError(f"{argname}['power'] must be in (0, 2]; got {out['power']}.")
    return out
