"""Correlation kernels: isotropic families, geometric anisotropy and space-time models.

The covariance between sites at distance ``h`` is
``variance * M(h / range) + nugget * [h == 0]``; a kernel is the correlation ``M``:
:class:`Exponential` (``exp(-u)``), :class:`Matern`, :class:`PoweredExponential`
(``exp(-u**power)``), :class:`Gaussian` (``exp(-u**2)``), and the kernels of coordinate
differences :class:`Anisotropic` and :class:`SpaceTime`. :func:`get_kernel` builds one
from a name of :data:`KERNEL_NAMES`.
"""

from __future__ import annotations

from geostat.kernels._base import Kernel
from geostat.kernels.anisotropic import Anisotropic
from geostat.kernels.exponential import Exponential
from geostat.kernels.gaussian import Gaussian
from geostat.kernels.matern import Matern
from geostat.kernels.powered_exponential import PoweredExponential
from geostat.kernels.space_time import SpaceTime

__all__ = [
    "KERNEL_NAMES",
    "Anisotropic",
    "Exponential",
    "Gaussian",
    "Kernel",
    "Matern",
    "PoweredExponential",
    "SpaceTime",
    "get_kernel",
]

#: Canonical kernel names.
KERNEL_NAMES = ("exponential", "matern", "powered_exponential", "gaussian")

_ALIASES = {
    "exponential": "exponential",
    "matern": "matern",
    "powered_exponential": "powered_exponential",
    "powexp": "powered_exponential",
    "gaussian": "gaussian",
    "squared_exponential": "gaussian",
}


def _smoothness_conflict(kernel, smoothness):
    """Return a message if ``smoothness`` contradicts ``kernel``, else None."""
    fixed = kernel.fixed_shape.get("smoothness")
    if "smoothness" not in kernel.shape_names:
        return f"{kernel!r} has no smoothness"
    if fixed is None:
        return f"{kernel!r} estimates the smoothness"
    if float(smoothness) != fixed:
        return f"{kernel!r} has smoothness {fixed!r}"
    return None


def get_kernel(spec: str | Kernel, smoothness: float | None = None) -> Kernel:
    """A kernel from a name or an instance.

    Parameters
    ----------
    spec : str or Kernel
        A :class:`Kernel` (returned as is) or a case-insensitive name:
        ``"exponential"``, ``"matern"``, ``"powered_exponential"`` (alias
        ``"powexp"``) or ``"gaussian"`` (alias ``"squared_exponential"``).
    smoothness : float or None, default None
        Matérn smoothness; ``None`` means estimated. ``"exponential"`` accepts ``None``
        or ``0.5``, the other names only ``None``; with a Kernel instance it must be None
        or agree with it.

    Raises
    ------
    ValueError
        Unknown name, or a smoothness that does not apply.
    TypeError
        ``spec`` is neither a str nor a Kernel.

    Examples
    --------
    >>> get_kernel("Matern", smoothness=1.5)
    Matern(smoothness=1.5)
    >>> get_kernel("powexp")
    PoweredExponential(power=None)
    """
    if isinstance(spec, Kernel):
        if smoothness is not None:
            conflict = _smoothness_conflict(spec, smoothness)
            if conflict:
                raise ValueError(
                    f"smoothness={smoothness!r} conflicts with the kernel: {conflict}. "
                    "Pass smoothness=None or build the kernel with the value you want."
                )
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f"kernel must be a name ({', '.join(map(repr, KERNEL_NAMES))}) or a Kernel "
            f"instance, got {type(spec).__name__}."
        )
    name = _ALIASES.get(spec.strip().lower())
    if name is None:
        raise ValueError(
            f"Unknown kernel {spec!r}; valid names are {', '.join(map(repr, KERNEL_NAMES))} "
            "(aliases 'powexp', 'squared_exponential')."
        )
    if name == "matern":
        return Matern(smoothness=smoothness)
    if name == "exponential":
        if smoothness is not None and smoothness != 0.5:
            raise ValueError(
                f"kernel='exponential' has smoothness 0.5, got smoothness={smoothness!r}; "
                "use kernel='matern' for other values."
            )
        return Exponential()
    if smoothness is not None:
        raise ValueError(
            f"smoothness applies to the Matérn kernel only, not to {name!r}; pass smoothness=None."
        )
    return PoweredExponential() if name == "powered_exponential" else Gaussian()
