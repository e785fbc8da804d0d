"""The kernel of a model from the estimator's settings: anisotropy and the time column."""

from __future__ import annotations

import numpy as np

from geostat.kernels._base import Kernel
from geostat.kernels.anisotropic import Anisotropic
from geostat.kernels.space_time import SpaceTime

__all__ = ["axis_spans", "model_kernel", "time_column"]


def model_kernel(kernel: Kernel, anisotropy: str | None, n_axes: int, distance_name: str) -> Kernel:
    """The kernel of a model: `kernel`, made geometrically anisotropic when asked.

    Parameters
    ----------
    kernel : Kernel
        From :func:`geostat.kernels.get_kernel`.
    anisotropy : None or "geometric"
        ``"geometric"`` wraps the (spatial) family in :class:`Anisotropic`, with a
        vertical range when there are three spatial coordinates.
    n_axes : int
        Coordinate columns of the data (the time column included).
    distance_name : str
        The resolved distance (on longitude/latitude an anisotropy is measured in a tangent
        plane, :class:`geostat.distance.TangentPlaneDistance`).

    Returns
    -------
    Kernel

    Raises
    ------
    ValueError
        When the kernel does not apply to the coordinates or the distance (great-circle; see
        :meth:`~geostat.kernels.lags.LagKernel.check_axes`), or `anisotropy` is given
        for a kernel that is anisotropic already.
    """
    if anisotropy is not None:
        space = kernel.space if isinstance(kernel, SpaceTime) else kernel
        if isinstance(space, Anisotropic):
            raise ValueError(
                f"anisotropy={anisotropy!r} is given but {kernel!r} is anisotropic already; drop one."
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
                f"{kernel!r} reads coordinate differences, which great-circle distances do not have; "
                "use distance='chordal' (or 'auto') for longitude/latitude."
            )
        kernel.check_axes(n_axes, distance_name != "euclidean")
    return kernel


def time_column(kernel: Kernel, time, X):
    """The `time` argument of :func:`geostat.data.prepare_coords` for a model.

    Parameters
    ----------
    kernel : Kernel
    time : None, str or int
        The estimator's setting.
    X : array-like or DataFrame

    Returns
    -------
    None, str, int or True
        None without a space-time kernel; else `time`, or the column named ``"time"``
        of a DataFrame, else True (the last coordinate column).

    Raises
    ------
    ValueError
        If `time` is given for a kernel without time.
    """
    if not kernel.time_axis:
        if time is not None:
            raise ValueError(
                f"time={time!r} applies to a space-time kernel, but kernel={kernel!r}; pass "
                "kernel=geostat.SpaceTime(...), or drop time= (replicates at independent times are columns of y)."
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
    """Extent of the coordinate axis of each of the kernel's
    :attr:`~geostat.kernels.Kernel.spanned` parameters (max minus min).

    Raises
    ------
    ValueError
        If such an axis has a single value (all observations at one time, or at one
        height): its range cannot be estimated.
    """
    spans = {}
    for name, axis in kernel.spanned.items():
        spans[name] = float(np.ptp(coords[:, axis]))
        if not spans[name] > 0:
            what, fix = _SINGLE_VALUE.get(name, ("value of its axis", "drop that axis"))
            raise ValueError(
                f"X has a single {what} ({coords[0, axis]:g}), so {name!r} cannot be estimated; {fix}."
            )
    return spans
