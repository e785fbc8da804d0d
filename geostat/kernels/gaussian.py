"""Gaussian (squared exponential) correlation ``M(u) = exp(-u**2)``."""

from __future__ import annotations

from collections.abc import Mapping

from geostat.kernels._base import Kernel

__all__ = ["Gaussian"]


class Gaussian(Kernel):
    """Gaussian correlation ``M(u) = exp(-u**2)``, ``u = d / range``.

    scikit-learn's ``RBF(length_scale=l)`` equals this kernel with
    ``range = sqrt(2) * l``. Not positive definite with great-circle distance; its
    covariance matrices are often numerically singular without a nugget.
    """

    name = "gaussian"

    def __init__(self) -> None:
        super().__init__()

    def great_circle_valid_at(self, shape: Mapping[str, float | None]) -> bool:
        """bool: Always False."""
        return False

    def _formula(self, u, shape, xp, derivatives):
        if u.size and float(u.max()) > 1e100:  # keep u**2 finite; M = 0 there anyway
            u = xp.minimum(u, 1e100)
        u2 = xp.multiply(u, u)
        m = xp.exp(xp.negative(u2))
        if derivatives is None:
            return m, None, {}
        u2 *= m  # u dM/du = -2 u^2 exp(-u^2)
        u2 *= -2.0
        return m, u2, {}
