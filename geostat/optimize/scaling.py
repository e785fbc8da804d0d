r"""Fits in units where the observations are of order one.

In floating point the Fisher information (of order ``n / variance^2``) overflows at
``y ~ 1e-100`` and its products at ``y ~ 1e100``. :class:`~geostat.SpatialGP` therefore
fits ``y / s``, with ``s`` the power of two nearest the root-mean-square residual around
an ordinary least-squares trend (which rounds no observation), and reports in the units
of ``y`` through

.. math:: \ell(\sigma^2, \tau^2, \beta; y) = \ell(\sigma^2 / s^2, \tau^2 / s^2, \beta / s; y / s)
    - N_\text{eff} \log s + \textstyle\sum_i \log g'(y_i),

with ``N_eff`` the number of observed values (minus ``r p`` for REML) and the last term
the log-Jacobian of a target transform ``g`` (:mod:`geostat.transforms`). Variance and
nugget scale by ``s^2``, trend coefficients and predictions by ``s``, the other
parameters not at all.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["DataScale", "residual_variance"]

#: Names of the parameters measured in units of ``y^2``.
VARIANCE_LIKE = ("variance", "nugget")
#: Observations and their variation around the trend must lie in this range of magnitudes,
#: so that their variance (a square) and its bounds are normal double-precision numbers.
MAGNITUDE_LIMITS = (1e-152, 1e152)
#: A residual below this fraction of the data's root mean square is rounding error of the
#: least-squares trend (``eps`` times its condition number), not variation to model.
RESIDUAL_RTOL = 1e-12


def residual_variance(y, design):
    """Mean square of `y` (shape (n, r), NaN for a missing value) around an ordinary
    least-squares trend of `design`.

    Raises
    ------
    ValueError
        If `y` is constant (each replicate) or fitted by the trend to within rounding, or its
        squares would leave :data:`MAGNITUDE_LIMITS`.
    """
    observed = [y[~np.isnan(y[:, j]), j] for j in range(y.shape[1])]
    if all(np.all(v == v[0]) for v in observed):
        raise ValueError(
            "y is constant (every observed value of each replicate is the same, "
            f"e.g. {float(observed[0][0]):g}): there is no spatial variation to estimate a "
            "covariance from. Check that the value column is the right one."
        )
    largest = max(float(np.max(np.abs(v))) for v in observed)
    if largest > MAGNITUDE_LIMITS[1]:
        raise ValueError(
            f"y has values up to {largest:.3g}: their variance (the square) would overflow "
            "double precision. Rescale y, e.g. to other units."
        )
    # Squares of y / s0, with s0 a power of two near the largest |y|, neither over- nor underflow.
    s0 = 2.0 ** round(math.log2(largest))
    resid = []
    for j, yj in enumerate(observed):
        F = design[~np.isnan(y[:, j])]
        resid.append(
            yj / s0 - F @ np.linalg.lstsq(F, yj / s0, rcond=None)[0] if F.shape[1] else yj / s0
        )
    variance = float(np.mean(np.concatenate(resid) ** 2))
    mean_square = float(np.mean((np.concatenate(observed) / s0) ** 2))
    if variance <= RESIDUAL_RTOL**2 * mean_square:
        raise ValueError(
            f"y is explained by the trend to within rounding (residual root mean square "
            f"{s0 * math.sqrt(variance):.3g} against {s0 * math.sqrt(mean_square):.3g}): "
            "there is no spatial variation left to estimate a covariance from. "
            "Use a simpler trend."
        )
    if s0 * math.sqrt(variance) < MAGNITUDE_LIMITS[0]:
        raise ValueError(
            f"y varies by about {s0 * math.sqrt(variance):.3g} around its trend: its variance "
            "would underflow double precision. Rescale y, e.g. to other units."
        )
    return variance * s0**2


@dataclasses.dataclass(frozen=True)
class DataScale:
    """The power of two ``s`` (`factor`) that observations are divided by, and the
    log-Jacobian ``sum_i log g'(y_i)`` of the target transform ``g`` (0 without one), added to
    every log-likelihood reported."""

    factor: float
    log_jacobian: float = 0.0

    @classmethod
    def nearest(cls, magnitude):
        """The power of two nearest to `magnitude` (a positive float), e.g. the root mean
        square of the observations."""
        return cls(2.0 ** round(math.log2(magnitude)))

    def params_to_unit(self, params):
        """`params` (a dict) with the variance-like entries in fitting units."""
        return {k: (v / self.factor**2 if k in VARIANCE_LIKE else v) for k, v in params.items()}

    def params_from_unit(self, params):
        """`params` (a dict) with the variance-like entries in the units of ``y^2``."""
        return {k: (v * self.factor**2 if k in VARIANCE_LIKE else v) for k, v in params.items()}

    def loglik_from_unit(self, value, n_eff):
        """A log-likelihood of ``g(y) / s`` as one of ``y``."""
        return value - n_eff * math.log(self.factor) + self.log_jacobian

    def space_to_unit(self, space):
        """A :class:`~geostat.optimize.ParameterSpace` (fixed values, bounds, fixed nugget
        and data variance) in fitting units."""
        nugget = space.nugget
        if not isinstance(nugget, (bool, np.bool_)):
            nugget = nugget / self.factor**2
        bounds = {
            k: tuple(v / self.factor**2 for v in pair) if k in VARIANCE_LIKE else pair
            for k, pair in space.bounds.items()
        }
        return dataclasses.replace(
            space,
            nugget=nugget,
            fixed=self.params_to_unit(space.fixed),
            bounds=bounds,
            data_variance=space.data_variance / self.factor**2,
        )

    def result_from_unit(self, result, n_eff):
        """An :class:`~geostat.optimize.MLEResult` of ``y / s`` in the units of ``y``."""
        per_name = np.array(
            [self.factor**2 if name in VARIANCE_LIKE else 1.0 for name in result.estimated]
        )
        # Two products, not one with per_name^2 (which over- or underflows for |y| far from
        # 1 and turns an inf entry into NaN): entries of order variance^2 that double
        # precision cannot hold become inf or 0.
        with np.errstate(over="ignore", under="ignore"):
            covariance = result.covariance * per_name[:, None] * per_name[None, :]
        return dataclasses.replace(
            result,
            params=self.params_from_unit(result.params),
            stderr=self.params_from_unit(result.stderr),
            covariance=covariance,
            coef=result.coef * self.factor,
            coef_stderr=result.coef_stderr * self.factor,
            loglik=self.loglik_from_unit(result.loglik, n_eff),
        )
