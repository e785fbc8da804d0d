"""Powered exponential correlation ``M(u) = exp(-u**power)``, ``0 < power <= 2``."""

from __future__ import annotations

from collections.abc import Mapping

from geostat.kernels._base import Kernel

__all__ = ["PoweredExponential"]


class PoweredExponential(Kernel):
    """Powered exponential correlation ``M(u) = exp(-u**power)``, ``u = d / range``.

    ``power = 1`` is the exponential kernel and ``power = 2`` the Gaussian kernel.

    Parameters
    ----------
    power : float or None, default None
        Exponent in ``(0, 2]``; ``None`` marks it as free (estimated).
    bounds : dict, optional
        Estimation bounds ``{"power": (low, high)}``; default ``(0.05, 2.0)``.

    Notes
    -----
    Derivatives: ``u dM/du = -power u**power M`` and
    ``dM/dpower = -u**power log(u) M`` (0 at ``u = 0``). Positive definite with
    great-circle distance only for ``power <= 1``.
    """

    name = "powered_exponential"
    _SHAPE_NAMES = ("power",)
    _SHAPE_DOMAIN = {"power": (0.0, 2.0, True)}
    _DEFAULT_BOUNDS = {"power": (0.05, 2.0)}
    _DEFAULT_START = {"power": 1.0}
    _LINEAR_SHAPE = ("power",)

    def __init__(
        self, power: float | None = None, bounds: dict[str, tuple[float, float]] | None = None
    ) -> None:
        super().__init__({"power": power}, bounds)

    def great_circle_valid_at(self, shape: Mapping[str, float | None]) -> bool:
        """bool: True only for a power <= 1."""
        power = shape.get("power")
        return power is not None and power <= 1.0

    def _formula(self, u, shape, xp, derivatives):
        power = shape["power"]
        cap = 10.0 ** min(300.0 / power, 308.0)  # u**power stays below about 1e300; M = 0 there
        if u.size and float(u.max()) > cap:
            u = xp.minimum(u, cap)
        t = u**power
        m = xp.exp(xp.negative(t))
        if derivatives is None:
            return m, None, {}
        dshape = {}
        if "power" in derivatives:
            positive = u > 0
            log_u = xp.where(positive, xp.log(xp.where(positive, u, 1.0)), 0.0)
            dshape["power"] = -((t * log_u) * m)
        t *= m
        t *= -power
        return m, t, dshape
