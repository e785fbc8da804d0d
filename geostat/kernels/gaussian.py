"""Gaussian (squared exponential) correlation ``M(u) = exp(-u**2)``."""

import numpy as np

from geostat.kernels._base import Kernel

__all__ = ["Gaussian"]


class Gaussian(Kernel):
    """Gaussian correlation ``M(u) = exp(-u**2)``, ``u = d / range``.

    No shape parameters. scikit-learn's ``RBF(length_scale=l)`` equals this kernel
    with ``range = sqrt(2) * l``. Not positive definite with great-circle distance;
    the covariance matrices of smooth fields are often numerically singular, so a
    nugget is usually needed.
    """

    name = "gaussian"

    def __init__(self):
        super().__init__()

    @property
    def great_circle_valid(self):
        """bool: Always False."""
        return False

    def _fill(self, u, shape, m, u_dm_du, dshape):
        if u.size and u.max() > 1e100:  # keep u**2 finite; M = 0 there anyway
            u = np.minimum(u, 1e100)
        u2 = np.multiply(u, u)
        np.exp(np.negative(u2), out=m)
        if u_dm_du is not None:  # u dM/du = -2 u^2 exp(-u^2)
            np.multiply(u2, m, out=u_dm_du)
            u_dm_du *= -2.0

    def _device_fill(self, u, shape, xp, derivatives):
        u = xp.minimum(u, 1e100)  # keep u**2 finite; M = 0 there anyway
        u2 = u * u
        m = xp.exp(-u2)
        return m, None if derivatives is None else (u2 * m) * -2.0, {}
