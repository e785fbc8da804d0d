"""The kernel of a model from the estimator's settings: anisotropy and the time column."""

from __future__ import annotations

from typing import cast

import numpy as np

from geostat.kernels._base import Kernel
from geostat.kernels.anisotropic import Anisotropic
from geostat.kernels.lags import LagKernel
from geostat.kernels.space_time import SpaceTime

__all__ = ["axis_spans", "model_kernel", "time_column"]


def model_kernel(kernel: Kernel, anisotropy: str | None, n_axes: int, distance_name: str) -> Kernel:
    """The kernel of a model: `kernel`, made geometrically anisotropic when asked.

    ``anisotropy="geometric"`` wraps the spatial family in :class:`Anisotropic` (with a
    vertical range for three spatial coordinates); `n_axes` counts the coordinate
    columns, time included. Raises ValueError when the kernel does not apply to the
    coordinates or the resolved `distance_name`, or is anisotropic already.
    """
    if anisotropy is not None:
        space = kernel.space if isinstance(kernel, SpaceTime) else kernel
        if isinstance(space, Anisotropic):
            raise ValueError(
                f"anisotropy={anisotropy!r} is given but {kernel!r} is anisotropic already; drop "
                "one."
            )
        vertical = n_axes - kernel.time_axis == 3
        space = Anisotropic(space, vertical=vertical)
        if isinstance(kernel, SpaceTime):
            kernel = SpaceTime(**{**kernel.init_arguments(), "space": space})
        else:
            kernel = space
    if kernel.structured:
        if distance_name == "great_circle":
            raise ValueError(
                f"{kernel!r} reads coordinate differences, which great-circle distances do not "
                "have; use distance='chordal' (or 'auto') for longitude/latitude."
            )
        # a structured kernel is a LagKernel
        cast(LagKernel, kernel).check_axes(n_axes, distance_name != "euclidean")
    return kernel


def time_column(kernel: Kernel, time, X):
    """The `time` argument of :func:`geostat.data.prepare_coords` for a model: None
    without a space-time kernel (ValueError if `time` is given), else `time`, or
    ``"time"`` for a DataFrame with such a column, else True (the last coordinate)."""
    if not kernel.time_axis:
        if time is not None:
            raise ValueError(
                f"time={time!r} applies to a space-time kernel, but kernel={kernel!r}; pass "
                "kernel=geostat.SpaceTime(...), or drop time= (replicates at independent times are "
                "columns of y)."
            )
        return None
    if time is not None:
        return time
    columns = getattr(X, "columns", ())
    return "time" if "time" in columns else True


#: What a single value of a spanned parameter's axis is, and the fix.
_SINGLE_VALUE = {
    "time_range": ("time", "fit a spatial kernel, or observations at more than one time"),
    "vertical_range": (
        "value of the third coordinate",
        "fit on the two horizontal coordinates alone",
    ),
}


def axis_spans(kernel: Kernel, coords: np.ndarray) -> dict[str, float]:
    """Extent (max minus min) of the axis of each :attr:`~geostat.kernels.Kernel.spanned`
    parameter of `kernel`.

    Raises ValueError if such an axis has a single value: its range cannot be estimated.
    """
    spans = {}
    for name, axis in kernel.spanned.items():
        spans[name] = float(np.ptp(coords[:, axis]))
        if not spans[name] > 0:
            what, fix = _SINGLE_VALUE.get(name, ("value of its axis", "drop that axis"))
            raise ValueError(
                f"X has a single {what} ({coords[0, axis]:g}), so {name!r} cannot be estimated; "
                f"{fix}."
            )
    return spans
