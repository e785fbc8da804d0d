r"""Space-time correlation: separable products and Gneiting's non-separable class.

For sites ``s_i, s_j`` at times ``t_i, t_j``, with ``u_s`` the spatial scaled distance
(``||s_i - s_j|| / range``, or the anisotropic one of
:class:`~geostat.kernels.anisotropic.Anisotropic`), ``tau = |t_i - t_j| / a_t``
(``a_t`` = ``time_range``, in the units of the time coordinate) and
``psi = 1 + tau^2``,

.. math::

    \rho(s, t) = T(\tau)\;\psi^{-\beta d / 2}\;M\!\bigl(u_s\,\psi^{-\beta/2}\bigr),

where ``M`` is the spatial family, ``T`` the temporal one, ``d`` the dimension of the
spatial coordinates (2 in a plane, 3 for the chordal embedding of longitude/latitude) and
``beta`` in ``[0, 1]`` the ``separability`` (space-time interaction) parameter.

* ``beta = 0`` is the separable model ``T(tau) M(u_s)`` (a likelihood-ratio test of
  separability compares fits with ``separability=0`` and estimated).
* ``beta > 0`` is Gneiting's non-separable class [1]_ (Theorem 2 with
  ``psi(t^2) = 1 + t^2 / a_t^2`` and ``M`` a normal scale mixture, as every Matérn,
  powered exponential and Gaussian is) times the temporal correlation ``T``: positive
  definite for every ``beta`` in ``[0, 1]``. ExaGeoStat's space-time Matérn [2]_ is this
  form with a generalized Cauchy ``T = psi^{-delta}``.

Derivatives (``G = T psi^{-beta d/2}``, ``v = u_s psi^{-beta/2}``,
``K = d M(v) + v M'(v)``): along a spatial parameter ``p``,
``G v M'(v) (du_s^2/dp) / (2 u_s^2)``; along ``beta``, ``-(log psi / 2) G K``; along
``a_t``, ``(dT/da_t) psi^{-beta d/2} M(v) + G (beta tau^2 / (a_t psi)) K``.

References
----------
.. [1] Gneiting, T. (2002). Nonseparable, stationary covariance functions for
   space-time data. Journal of the American Statistical Association, 97(458), 590-600.
   doi:10.1198/016214502760047113
.. [2] Salvaña, M. L. O., Abdulah, S., Huang, H., Ltaief, H., Sun, Y., Genton, M. G.,
   Keyes, D. E. (2021). High performance multivariate geospatial statistics on manycore
   systems. IEEE Transactions on Parallel and Distributed Systems, 32(11), 2719-2733.
"""

from __future__ import annotations

import math

from geostat.kernels._base import Kernel, _check_real, array_namespace
from geostat.kernels.anisotropic import Anisotropic
from geostat.kernels.lags import (
    LagKernel,
    as_float,
    family_derivatives,
    requested_names,
    scaled_derivative,
)

__all__ = ["SpaceTime"]

TIME_RANGE = "time_range"
SEPARABILITY = "separability"
_TIME_PREFIX = "time_"


class SpaceTime(LagKernel):
    """Space-time correlation (see the module docstring); the last coordinate is time.

    Parameters
    ----------
    space : str or Kernel, default "matern"
        The spatial family: a name of :func:`geostat.kernels.get_kernel`, an isotropic
        kernel, or an :class:`~geostat.kernels.anisotropic.Anisotropic` one.
    time : str or Kernel, default "exponential"
        The temporal family ``T``; its shape parameters are named with a ``time_``
        prefix (``time_smoothness`` of a temporal Matérn, ``time_power``).
    separability : float or None, default None
        ``beta`` in ``[0, 1]``: 0 for the separable model, None to estimate it.
    bounds : dict, optional
        Estimation bounds of ``time_range`` (default ``1e-4`` to ``1e2`` times the time
        span of the data), ``separability`` (default ``(0, 1)``) and the temporal
        shape; the spatial family's go to that family.

    Examples
    --------
    >>> SpaceTime(space=Matern(smoothness=1.5), time="exponential", separability=0.0)
    SpaceTime(space=Matern(smoothness=1.5), time=Exponential(), separability=0.0)
    """

    name = "space_time"
    time_axis = True

    def __init__(
        self,
        space: str | Kernel = "matern",
        time: str | Kernel = "exponential",
        separability: float | None = None,
        bounds: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        from geostat.kernels import get_kernel

        self.space = get_kernel(space)
        self.time = get_kernel(time)
        if getattr(self.time, "structured", False):
            raise TypeError(
                f"time must be an isotropic family such as 'exponential', got {self.time!r}."
            )
        if isinstance(self.space, SpaceTime):
            raise TypeError("space must be a spatial kernel, not a SpaceTime one.")
        time_names = tuple(_TIME_PREFIX + n for n in self.time.shape_names)
        self._SHAPE_NAMES = self.space.shape_names + time_names + (TIME_RANGE, SEPARABILITY)
        rename = dict(zip(self.time.shape_names, time_names, strict=True))
        self._SHAPE_DOMAIN = {
            **self.space._SHAPE_DOMAIN,
            **{rename[k]: v for k, v in self.time._SHAPE_DOMAIN.items()},
            TIME_RANGE: (0.0, math.inf, False),
            SEPARABILITY: (0.0, 1.0, True),
        }
        self._DEFAULT_BOUNDS = {
            **self.space.shape_bounds,
            **{rename[k]: v for k, v in self.time.shape_bounds.items()},
            TIME_RANGE: (1e-300, 1e300),
            SEPARABILITY: (0.0, 1.0),
        }
        self._DEFAULT_START = {
            **self.space.shape_start,
            **{rename[k]: v for k, v in self.time.shape_start.items()},
            TIME_RANGE: 1.0,
            SEPARABILITY: 0.5,
        }
        own = {k: v for k, v in (bounds or {}).items() if k in self.space.shape_names}
        if own:
            raise ValueError(
                f"bounds of {sorted(own)} belong to the spatial family: pass them to "
                f"{self.space!r}."
            )
        fixed_time = {rename[k]: v for k, v in self.time.fixed_shape.items()}
        super().__init__(
            {**self.space.fixed_shape, **fixed_time, SEPARABILITY: separability}, bounds
        )
        self._custom_bounds = set(bounds or ())
        self._time_names = rename
        self.anisotropic = self.space.anisotropic

    def _check_shape_value(self, key, value, argname=None):
        if key == SEPARABILITY:  # [0, 1], 0 included
            value = _check_real(value, argname or key)
            if not (0.0 <= value <= 1.0):
                raise ValueError(
                    f"{argname or key} must be in [0, 1] (0: separable), got {value!r}."
                )
            return value
        return super()._check_shape_value(key, value, argname)

    @property
    def linear_shape(self):
        """tuple of str: Shape parameters searched on their natural scale."""
        time_linear = tuple(self._time_names[n] for n in self.time.linear_shape)
        return self.space.linear_shape + time_linear + (SEPARABILITY,)

    @property
    def spanned(self):
        """dict: ``time_range`` (on the last axis) unless its bounds were given."""
        spanned = {k: v for k, v in self.space.spanned.items()}
        if TIME_RANGE not in self._custom_bounds:
            spanned[TIME_RANGE] = -1
        return spanned

    @property
    def costly(self):
        """bool: Whether either family is costly to evaluate."""
        return self.space.costly or self.time.costly

    def wrap(self, values):
        """`values` with the spatial family's canonical representatives (an angle modulo pi)."""
        return self.space.wrap(values)

    def init_arguments(self):
        """The constructor arguments that rebuild this kernel."""
        custom = {k: v for k, v in self._bounds.items() if k in self._custom_bounds}
        return {
            "space": self.space,
            "time": self.time,
            "separability": as_float(self._shape[SEPARABILITY]),
            "bounds": custom or None,
        }

    def check_axes(self, n_axes, lonlat):
        """The spatial family's coordinates, then time."""
        if isinstance(self.space, LagKernel):
            self.space.check_axes(n_axes - 1, lonlat)
        elif n_axes < 2:
            raise ValueError(
                "a space-time kernel needs spatial coordinates and a time coordinate, got one "
                "column."
            )

    def _spatial_square(self, deltas, range_, shape, names):
        """``u_s^2`` and its derivatives along the spatial geometric `names`."""
        if isinstance(self.space, Anisotropic):
            return self.space.scaled_square(deltas, range_, shape, names)
        u2 = deltas[0] * deltas[0]
        for delta in deltas[1:]:
            u2 += delta * delta
        u2 *= 1.0 / (range_ * range_)
        return u2, {"range": (-2.0 / range_) * u2} if "range" in names else {}

    def lag_evaluate(self, deltas, range_, shape, gradient=False):
        xp = array_namespace(deltas[0])
        names = requested_names(self, gradient)
        spatial, lag = deltas[:-1], xp.abs(deltas[-1])
        d = len(spatial)
        beta, a_t = shape[SEPARABILITY], shape[TIME_RANGE]
        space_family = self.space.family if isinstance(self.space, Anisotropic) else self.space
        geometric = tuple(
            n
            for n in names
            if n == "range" or (n in self.space.shape_names and n not in space_family.shape_names)
        )
        u2, du2 = self._spatial_square(spatial, range_, shape, geometric)
        v = xp.sqrt(u2)
        tau2 = log_psi = None
        damp = 1.0
        if beta or gradient:
            tau2 = lag * (1.0 / a_t)
            tau2 *= tau2
            log_psi = xp.log1p(tau2)
        if beta:
            shrink = xp.exp((-0.5 * beta) * log_psi)  # psi^(-beta/2)
            v *= shrink
            damp = shrink * shrink if d >= 2 else shrink  # psi^(-beta d/2)
            for _ in range(d - 2):
                damp *= shrink
        space_names = (
            None if not gradient else tuple(n for n in names if n in space_family.shape_names)
        )
        m, v_dm_dv, space_grads = family_derivatives(
            space_family, v, {k: shape[k] for k in space_family.shape_names}, space_names
        )
        time_shape = {k: shape[p] for k, p in self._time_names.items()}
        time_names = tuple(k for k, p in self._time_names.items() if p in names)
        if not gradient:
            value = self.time.evaluate(lag, a_t, time_shape)[0]
            if beta:
                value *= damp
            value *= m  # (T damp) M, as the gradient path's g M
            return value, {}
        t, time_grads = self.time.evaluate(lag, a_t, time_shape, gradient=("range", *time_names))
        g = t * damp
        grads = {}
        for name in geometric:
            grads[name] = scaled_derivative(g * v_dm_dv, u2, du2[name], xp)
        for name, derivative in space_grads.items():
            grads[name] = g * derivative
        k = d * m + v_dm_dv
        if SEPARABILITY in names:
            grads[SEPARABILITY] = -0.5 * log_psi * g * k
        if TIME_RANGE in names:
            grads[TIME_RANGE] = (
                time_grads["range"] * damp * m + (beta / a_t) * (tau2 / (1.0 + tau2)) * g * k
            )
        for family_name in time_names:
            grads[self._time_names[family_name]] = time_grads[family_name] * damp * m
        return g * m, grads
