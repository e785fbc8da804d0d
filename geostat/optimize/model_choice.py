r"""Choosing between fitted models: the likelihood-ratio test of nested covariance models.

For a small model ``M0`` that restricts a big one ``M1``, fitted to the same data, the
statistic ``T = 2 (l1 - l0) >= 0`` of their maximized (restricted, with ``reml=True``)
log-likelihoods follows under ``M0``, as the data grow (increasing-domain asymptotics
[3]_), a chi-square with ``q`` degrees of freedom for ``q`` parameters fixed at interior
values [1]_, and for ``m`` more fixed on the edge of the parameter space [2]_ (a nugget of
0, a ``separability`` of 0 or 1 [4]_, a ``power`` of 2) the mixture
``sum_j C(m, j) 2^-m chi2(q + j)`` (``chi2(0)`` the point mass at 0), exact when their
estimates are asymptotically independent.

Isotropy inside geometric anisotropy is ``anisotropy_ratio = 1``, where the angle is not
identified; ``(ratio, angle)`` are polar coordinates of the deviation
``(A11 - A22, 2 A12) = (1 - ratio^-2) range^-2 (cos 2 angle, sin 2 angle)`` of the
metric ``sqrt(h^T A h)`` from isotropy, an interior point of that plane, so ``T`` is taken
as ``chi2(2)`` [1]_, conservative against the cone mixture ``0.5 chi2(1) + 0.5 chi2(2)``
(``chi2(3)`` with a vertical range; with the angle fixed, ``0.5 chi2(0) + 0.5 chi2(1)``).
Models that are not nested are compared by ``aic_`` and ``bic_``.

References
----------
.. [1] Wilks, S. S. (1938). The large-sample distribution of the likelihood ratio for
   testing composite hypotheses. *Annals of Mathematical Statistics* 9(1), 60-62.
.. [2] Self, S. G. and Liang, K.-Y. (1987). Asymptotic properties of maximum likelihood
   estimators and likelihood ratio tests under nonstandard conditions. *Journal of the
   American Statistical Association* 82(398), 605-610.
.. [3] Mardia, K. V. and Marshall, R. J. (1984). Maximum likelihood estimation of models
   for residual covariance in spatial regression. *Biometrika* 71(1), 135-146.
.. [4] Gneiting, T. (2002). Nonseparable, stationary covariance functions for space-time
   data. *Journal of the American Statistical Association* 97(458), 590-600.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
from scipy import stats
from sklearn.utils.validation import check_is_fitted

from geostat.errors import GeostatWarning
from geostat.kernels import (
    Anisotropic,
    Exponential,
    Gaussian,
    Kernel,
    Matern,
    PoweredExponential,
    SpaceTime,
)

__all__ = ["LikelihoodRatioTest", "likelihood_ratio_test"]

_RATIO, _ANGLE, _VERTICAL = "anisotropy_ratio", "anisotropy_angle", "vertical_range"
_NOT_NESTED = (
    "the models are not nested, so the likelihood-ratio test does not apply; "
    "compare them by aic_ or bic_"
)


@dataclasses.dataclass(frozen=True)
class LikelihoodRatioTest:
    """The result of :func:`likelihood_ratio_test`.

    Attributes
    ----------
    statistic : float
        ``2 (big.loglik_ - small.loglik_)``.
    df : int
        Estimated parameters of the big model not estimated by the small one.
    p_value : float
        ``P(T >= statistic)`` under `null_distribution`; 1 when the statistic is 0 to
        rounding (``1e-8 |loglik_|``) or negative.
    null_distribution : str
        In words, e.g. ``"0.5 chi2(0) + 0.5 chi2(1)"``.
    weights : tuple of (float, int)
        It as ``(weight, degrees of freedom)`` pairs (``chi2(0)``: the point mass at 0).
    restricted : tuple of str
        The parameters the small model restricts.
    boundary : tuple of bool
        For each of `restricted`, whether its value under the small model is on the edge of
        the big model's parameter space (a nugget of 0, a separability of 0, a ratio of 1).
    """

    statistic: float
    df: int
    p_value: float
    null_distribution: str
    weights: tuple[tuple[float, int], ...]
    restricted: tuple[str, ...]
    boundary: tuple[bool, ...]


def likelihood_ratio_test(small, big) -> LikelihoodRatioTest:
    r"""Likelihood-ratio test of a fitted covariance model against a bigger one it is nested in.

    Parameters
    ----------
    small : SpatialGP
        The fitted null model: it fixes some of `big`'s covariance parameters
        (``nugget=False``, ``SpaceTime(separability=0.0)``, a smoothness), or restricts its
        kernel (isotropic against ``anisotropy="geometric"``, exponential against Matérn,
        Gaussian against powered exponential).
    big : SpatialGP
        The fitted alternative, on the same data and trend, with the same distance and ``reml``.

    Returns
    -------
    LikelihoodRatioTest
        ``T = 2 (big.loglik_ - small.loglik_)`` and its p-value from the asymptotic null
        distribution: chi-square [2]_, or a chi-square mixture for restrictions on the edge of
        the parameter space [1]_.

    Raises
    ------
    TypeError
        If either is not a :class:`geostat.SpatialGP`.
    sklearn.exceptions.NotFittedError
        If either is not fitted.
    ValueError
        If the models are not nested (the message says why) or estimate the same parameters.

    Warns
    -----
    geostat.GeostatWarning
        If the statistic is negative (the big model fitted worse); the p-value is then 1.

    Notes
    -----
    The p-value is asymptotic; on few sites, or with a barely identified range, calibrate it
    by simulation from the small model's estimates (:func:`geostat.simulate`).

    References
    ----------
    .. [1] Self, S. G. and Liang, K.-Y. (1987). Asymptotic properties of maximum
       likelihood estimators and likelihood ratio tests under nonstandard conditions.
       *Journal of the American Statistical Association* 82(398), 605-610.
    .. [2] Wilks, S. S. (1938). The large-sample distribution of the likelihood ratio for
       testing composite hypotheses. *Annals of Mathematical Statistics* 9(1), 60-62.

    Examples
    --------
    >>> separable = gs.SpatialGP(kernel=gs.SpaceTime(separability=0.0)).fit(X, y)  # doctest: +SKIP
    >>> gneiting = gs.SpatialGP(kernel=gs.SpaceTime()).fit(X, y)  # doctest: +SKIP
    >>> gs.likelihood_ratio_test(separable, gneiting).p_value  # doctest: +SKIP
    """
    _check_model(small, "small")
    _check_model(big, "big")
    _check_same_data(small, big)
    restricted, boundary, regular = _restrictions(small, big)
    boundary_count = sum(b for b, r in zip(boundary, regular, strict=True) if not r)
    q = len(restricted) - boundary_count
    weights = tuple(
        (math.comb(boundary_count, j) / 2**boundary_count, q + j) for j in range(boundary_count + 1)
    )
    statistic = 2.0 * (float(big.loglik_) - float(small.loglik_))
    # A statistic this close to 0 is 0: P(T >= 0) = 1.
    rounding = 1e-8 * max(1.0, abs(float(big.loglik_)))
    if statistic <= rounding:
        if statistic < -rounding:
            errors = abs(small.loglik_error_) + abs(big.loglik_error_)
            warnings.warn(
                f"the big model's log-likelihood ({big.loglik_:.6g}) is below the small "
                f"model's ({small.loglik_:.6g}), "
                f"although it contains it: its fit stopped at a local optimum"
                + (
                    f", or the TLR error (about {errors:.2g}) exceeds the difference"
                    if errors
                    else ""
                )
                + "; the p-value is set to 1. Refit the big model with more n_starts "
                "(or method='exact', or a tighter accuracy) to test properly.",
                GeostatWarning,
                stacklevel=2,
            )
        p_value = 1.0
    else:
        p_value = sum(w * _chi2_sf(statistic, k) for w, k in weights)
    return LikelihoodRatioTest(
        statistic=statistic,
        df=len(restricted),
        p_value=float(min(1.0, max(0.0, p_value))),
        null_distribution=_describe(weights),
        weights=weights,
        restricted=tuple(restricted),
        boundary=tuple(boundary),
    )


def _check_model(model, argname):
    from geostat.estimator import SpatialGP

    if not isinstance(model, SpatialGP):
        raise TypeError(
            f"{argname} must be a fitted geostat.SpatialGP; got {type(model).__name__}."
        )
    check_is_fitted(model)


def _check_same_data(small, big):
    """ValueError unless both models were fitted on the same data (with the same known
    noise variances), trend, likelihood (``reml``) and distance; a replicate model against
    a space-time one is named as such."""
    if small.kernel_.time_axis != big.kernel_.time_axis:
        which = "small" if big.kernel_.time_axis else "big"
        raise ValueError(
            f"the {which} model treats times as independent replicates and the other fits a "
            f"space-time kernel: {_NOT_NESTED} (of the same observations, with the same trend)."
        )
    a, b = small._training, big._training
    # The scale is a power of two: exact.
    same_y = a.y.shape == b.y.shape and np.array_equal(
        a.y * small._scale.factor, b.y * big._scale.factor, equal_nan=True
    )
    if not (a.coords.shape == b.coords.shape and np.array_equal(a.coords, b.coords) and same_y):
        raise ValueError(
            "small and big were fitted on different data (sites, coordinates or observations); "
            "fit both on the same X and y."
        )
    # In the units of y^2: exact (powers of two).
    noise_a, noise_b = small.noise_variance_, big.noise_variance_
    if (
        (noise_a is None) != (noise_b is None)
        or noise_a is not None
        and not np.array_equal(noise_a, noise_b)
    ):
        raise ValueError(
            "small and big were fitted with different known noise variances (noise_variance), "
            "so their likelihoods are of different models of the errors; fit both with the same "
            "noise_variance."
        )
    if not (a.design.shape == b.design.shape and np.array_equal(a.design, b.design)):
        raise ValueError(
            "small and big have different trends (trend designs); the test compares covariance "
            "models, so fit both with the same trend."
        )
    if bool(small.result_.reml) != bool(big.result_.reml):
        raise ValueError(
            f"small has reml={small.result_.reml} and big reml={big.result_.reml}; their "
            "likelihoods are of different data: fit both with the same reml."
        )
    if small.distance_ != big.distance_:
        raise ValueError(
            f"small uses the {small.distance_} distance and big the {big.distance_} one; "
            f"{_NOT_NESTED}."
        )


def _family(kernel):
    """``(family key, implied values)``: the family a kernel is a case of, with the shape
    values it fixes as that case (the exponential is the Matérn of smoothness 0.5, which its
    parameters already say; the Gaussian the powered exponential of power 2)."""
    if isinstance(kernel, (Matern, Exponential)):
        return "matern", {}
    if isinstance(kernel, Gaussian):
        return "powered_exponential", {"power": 2.0}
    if isinstance(kernel, PoweredExponential):
        return "powered_exponential", {}
    return type(kernel).__name__, {}


def _structure(kernel: Kernel):
    """``(time family, space family, anisotropic, vertical, implied values)`` of a kernel."""
    implied = {}
    time = None
    space = kernel
    if isinstance(kernel, SpaceTime):
        time, time_implied = _family(kernel.time)
        implied.update({f"time_{k}": v for k, v in time_implied.items()})
        space = kernel.space
    anisotropic = isinstance(space, Anisotropic)
    family, family_implied = _family(space.family if isinstance(space, Anisotropic) else space)
    implied.update(family_implied)
    vertical = isinstance(space, Anisotropic) and space.vertical
    return time, family, anisotropic, vertical, implied


def _restrictions(small, big):
    """``(restricted names, on the edge, regular)``: the big model's estimated parameters
    that the small one restricts, whether each restriction is on the edge of the
    parameter space, and whether it is nonetheless regular (the isotropy pair, see the
    module docstring); ValueError when the small model is not nested in the big one."""
    s_time, s_family, s_aniso, s_vertical, implied = _structure(small.kernel_)
    b_time, b_family, b_aniso, b_vertical, _ = _structure(big.kernel_)
    if s_time != b_time or s_family != b_family:
        raise ValueError(
            f"small has the kernel {small.kernel_!r} and big {big.kernel_!r}, of different "
            f"families; {_NOT_NESTED}."
        )
    if s_aniso and not b_aniso:
        raise ValueError(
            "small is anisotropic and big isotropic, so small is the bigger model: pass the "
            "isotropic model first, likelihood_ratio_test(isotropic, anisotropic)."
        )
    isotropy = b_aniso and not s_aniso
    if s_aniso and s_vertical != b_vertical:
        raise ValueError(
            "small and big differ in their vertical range "
            f"(vertical={s_vertical} and {b_vertical}); {_NOT_NESTED}."
        )
    small_est, big_est = list(small.result_.estimated), list(big.result_.estimated)
    extra = [name for name in small_est if name not in big_est]
    if extra:
        raise ValueError(
            f"small estimates {extra}, which big "
            f"{'fixes' if extra[0] in big.params_ else 'lacks'}: the "
            "small model must estimate a subset of the big one's parameters; "
            "swap the arguments if big is the smaller model."
        )
    small_params, big_params = small.params_, big.params_
    angle_free = _ANGLE in big_est
    # Parameters the big model fixes: the small one at the same value.
    for name, value in big_params.items():
        if name in big_est or (isotropy and name == _ANGLE):
            continue
        if isotropy and name in (_RATIO, _VERTICAL):
            raise ValueError(
                f"big fixes {name} at {value!r}; an isotropic model is nested only in an "
                f"anisotropic one that estimates it. {_NOT_NESTED}."
            )
        mine = small_params.get(name, implied.get(name))
        if mine is None or not math.isclose(mine, value, rel_tol=1e-12, abs_tol=0.0):
            raise ValueError(
                f"big fixes {name} at {value!r} and small has {mine!r}; {_NOT_NESTED}."
            )
    restricted, edge, regular = [], [], []
    for name in big_est:
        if name in small_est:
            continue
        if isotropy and name in (_RATIO, _ANGLE):
            restricted.append(name)
            edge.append(name == _RATIO)
            # Ratio and angle free: a regular 2-D restriction; angle fixed: an edge.
            regular.append(angle_free)
            continue
        if isotropy and name == _VERTICAL:  # vertical_range = range: interior
            restricted.append(name)
            edge.append(False)
            regular.append(True)
            continue
        value = small_params.get(name, implied.get(name))
        if value is None:
            raise ValueError(
                f"big estimates {name}, which small neither estimates nor fixes; {_NOT_NESTED}."
            )
        on_edge = _on_edge(name, float(value), big.kernel_)
        restricted.append(name)
        edge.append(on_edge)
        regular.append(not on_edge)
    if not restricted:
        raise ValueError(
            "small and big estimate the same parameters: there is nothing to test. Give as small "
            "a model that fixes some of big's parameters (e.g. nugget=False, "
            "SpaceTime(separability=0.0))."
        )
    return restricted, edge, regular


def _on_edge(name, value, kernel):
    """Whether `value` of parameter `name` is on the edge of `kernel`'s parameter space."""
    if name == "nugget":
        return value == 0.0
    if name == "separability":
        return value in (0.0, 1.0)
    if name in kernel.shape_names:
        low, high, high_inclusive = kernel._SHAPE_DOMAIN[name]
        return high_inclusive and value == high
    return False


def _chi2_sf(statistic, df):
    """``P(chi2(df) >= statistic)``; ``chi2(0)`` is the point mass at 0."""
    if df == 0:
        return 1.0 if statistic <= 0 else 0.0
    return float(stats.chi2.sf(statistic, df))


def _describe(weights):
    """The mixture in words: ``"chi2(2)"`` or ``"0.5 chi2(0) + 0.5 chi2(1)"``."""
    if len(weights) == 1:
        return f"chi2({weights[0][1]})"
    return " + ".join(f"{w:g} chi2({k})" for w, k in weights)
