r"""Geometric anisotropy: an isotropic family on rotated and stretched coordinates.

With the major axis at angle ``theta`` (radians, counterclockwise from the x / east axis)
and the differences ``(dx, dy)`` of two sites,

.. math::

    a = \cos\theta\,dx + \sin\theta\,dy, \qquad b = -\sin\theta\,dx + \cos\theta\,dy,
    \qquad u^2 = \frac{a^2 + (b/\rho)^2}{r^2} \;\Bigl[+ \frac{dz^2}{r_z^2}\Bigr],

and the correlation is ``M(u)``: range ``r`` along the major axis, ``rho r`` across it
(``rho`` = ``anisotropy_ratio`` in (0, 1]), and a separate ``vertical_range`` ``r_z`` of
a third coordinate. A linear map of the coordinates keeps ``M`` positive definite [1]_.
The angle is identified modulo ``pi`` (not at all when ``rho = 1``); it is searched on a
wider interval and reported in ``[0, pi)``.

Derivatives of ``u^2``: ``d/dr = -2 (a^2 + b^2/rho^2) / r^3``,
``d/drho = -2 b^2 / (rho^3 r^2)``, ``d/dtheta = 2 a b (1 - 1/rho^2) / r^2``,
``d/dr_z = -2 dz^2 / r_z^3`` (see :mod:`geostat.kernels.lags` for ``dM``).

References
----------
.. [1] Chilès, J.-P., Delfiner, P. (2012). Geostatistics: Modeling Spatial Uncertainty,
   2nd ed., Section 2.5.2. Wiley.
"""

from __future__ import annotations

import math

from geostat.kernels._base import Kernel, array_namespace
from geostat.kernels.lags import (
    LagKernel,
    as_float,
    check_real_axes,
    family_derivatives,
    requested_names,
    scaled_derivative,
)

__all__ = ["Anisotropic"]

RATIO = "anisotropy_ratio"
ANGLE = "anisotropy_angle"
VERTICAL = "vertical_range"


class Anisotropic(LagKernel):
    """Geometric anisotropy of an isotropic family (see the module docstring).

    Parameters
    ----------
    kernel : Kernel
        The isotropic family ``M`` (its fixed and free shape parameters carry over).
    ratio : float or None, default None
        Minor-to-major range ratio in ``(0, 1]``; None: estimated.
    angle : float or None, default None
        Direction of the major axis, radians counterclockwise from the x (east) axis;
        None: estimated.
    vertical : bool, default False
        Whether a third coordinate has its own range ``vertical_range`` (estimated).
    bounds : dict, optional
        Estimation bounds overriding the defaults, keyed by shape name: ratio
        ``(0.02, 1)``, angle ``(-pi/2, 3 pi/2)`` (searched beyond ``[0, pi)`` so that
        no optimum sits on a bound), vertical range ``1e-4`` to ``1e2`` times the
        third coordinate's extent.

    Examples
    --------
    >>> Anisotropic(Matern(smoothness=1.5))
    Anisotropic(kernel=Matern(smoothness=1.5))
    """

    name = "anisotropic"
    anisotropic = True

    def __init__(
        self,
        kernel: Kernel,
        ratio: float | None = None,
        angle: float | None = None,
        vertical: bool = False,
        bounds: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        if not isinstance(kernel, Kernel) or getattr(kernel, "structured", False):
            raise TypeError(f"kernel must be an isotropic Kernel such as Matern(), got {kernel!r}.")
        if not isinstance(vertical, bool):
            raise TypeError(f"vertical must be True or False, got {vertical!r}.")
        self.family = kernel
        self.vertical = vertical
        own = (RATIO, ANGLE) + ((VERTICAL,) if vertical else ())
        self._SHAPE_NAMES = kernel.shape_names + own
        self._SHAPE_DOMAIN = {
            **kernel._SHAPE_DOMAIN,
            RATIO: (0.0, 1.0, True),
            ANGLE: (-math.inf, math.inf, False),
            VERTICAL: (0.0, math.inf, False),
        }
        self._DEFAULT_BOUNDS = {
            **kernel.shape_bounds,
            RATIO: (0.02, 1.0),
            ANGLE: (-0.5 * math.pi, 1.5 * math.pi),
            VERTICAL: (1e-300, 1e300),
        }
        self._DEFAULT_START = {
            **kernel.shape_start,
            RATIO: 0.5,
            ANGLE: 0.25 * math.pi,
            VERTICAL: 1.0,
        }
        family_bounds = {k: v for k, v in (bounds or {}).items() if k in kernel.shape_names}
        if family_bounds:
            raise ValueError(
                f"bounds of {sorted(family_bounds)} belong to the family: pass them to {kernel!r}."
            )
        super().__init__({**kernel.fixed_shape, RATIO: ratio, ANGLE: angle}, bounds)
        self._custom_bounds = set(bounds or ())

    @property
    def linear_shape(self):
        """tuple of str: Shape parameters searched on their natural scale (the angle and
        the family's)."""
        return self.family.linear_shape + (ANGLE,)

    @property
    def spanned(self):
        """dict: Shape parameters whose default bounds scale with a coordinate's extent, by axis."""
        return {VERTICAL: 2} if self.vertical and VERTICAL not in self._custom_bounds else {}

    @property
    def costly(self):
        """bool: Whether the family is costly to evaluate."""
        return self.family.costly

    def init_arguments(self):
        """The constructor arguments that rebuild this kernel."""
        custom = {k: v for k, v in self._bounds.items() if k in self._custom_bounds}
        return {
            "kernel": self.family,
            "ratio": as_float(self._shape[RATIO]),
            "angle": as_float(self._shape[ANGLE]),
            "vertical": self.vertical,
            "bounds": custom or None,
        }

    def check_axes(self, n_axes, lonlat):
        """Two coordinates (three with ``vertical=True``), in a plane or longitude/latitude
        (projected on a tangent plane, :class:`geostat.distance.TangentPlaneDistance`)."""
        if lonlat and self.vertical:
            raise ValueError(
                "a vertical range needs projected x/y coordinates and a third one; "
                "longitude/latitude have no vertical axis."
            )
        check_real_axes(n_axes, (3,) if self.vertical else (2,), False, repr(self))

    def wrap(self, values):
        """`values` with the angle reduced to ``[0, pi)`` (the correlation is
        ``pi``-periodic in it)."""
        if ANGLE in values:
            values = {
                **values,
                ANGLE: math.fmod(math.fmod(values[ANGLE], math.pi) + math.pi, math.pi),
            }
        return values

    def scaled_square(self, deltas, range_, shape, names):
        """``u^2`` and its derivatives along `names` (range and geometric names only)."""
        rho, theta = shape[RATIO], shape[ANGLE]
        c, s = math.cos(theta), math.sin(theta)
        dx, dy = deltas[0], deltas[1]
        a = c * dx + s * dy
        b = c * dy - s * dx
        a2, b2 = a * a, b * b
        q = (a2 + b2 / (rho * rho)) / (range_ * range_)
        u2 = q
        if self.vertical:
            rz = shape[VERTICAL]
            dz2 = deltas[2] * deltas[2] / (rz * rz)
            u2 = q + dz2
        du2 = {}
        for name in names:
            if name == "range":
                du2[name] = -2.0 * q / range_
            elif name == RATIO:
                du2[name] = -2.0 * b2 / (rho**3 * range_ * range_)
            elif name == ANGLE:
                du2[name] = (2.0 * (1.0 - 1.0 / (rho * rho)) / (range_ * range_)) * (a * b)
            elif name == VERTICAL:
                du2[name] = -2.0 * dz2 / shape[VERTICAL]
        return u2, du2

    def lag_evaluate(self, deltas, range_, shape, gradient=False):
        names = requested_names(self, gradient)
        own = tuple(n for n in names if n == "range" or n not in self.family.shape_names)
        xp = array_namespace(deltas[0])
        u2, du2 = self.scaled_square(deltas, range_, shape, own)
        family_shape = {k: shape[k] for k in self.family.shape_names}
        family_names = (
            None if not gradient else tuple(n for n in names if n in self.family.shape_names)
        )
        m, u_dm_du, grads = family_derivatives(self.family, xp.sqrt(u2), family_shape, family_names)
        for name in own:
            grads[name] = scaled_derivative(u_dm_du, u2, du2[name], xp)
        return m, grads
