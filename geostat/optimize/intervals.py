r"""Confidence intervals for the covariance parameters of a fitted :class:`~geostat.SpatialGP`.

At level :math:`1 - \alpha`, with :math:`z = \Phi^{-1}(1 - \alpha / 2)` and the standard
errors of the expected Fisher information (``stderr_``):

* ``"wald"``: :math:`\hat\theta \pm z\,\mathrm{se}(\hat\theta)`;
* ``"log-wald"``: :math:`\exp(\log\hat\theta \pm z\,\mathrm{se}(\hat\theta) / \hat\theta)`,
  the Wald interval of :math:`\log\theta` by the delta method;
* ``"profile"``: :math:`\{\theta : 2(\hat\ell - \ell_p(\theta)) \le \chi^2_1(1 - \alpha)\}`
  for the profile log-likelihood :math:`\ell_p(\theta) = \max_\psi \ell(\theta, \psi)`.

:math:`\ell_p` runs the fit's local search with the parameter held (:func:`held_space`),
warm-started along the profile path. An endpoint is the root of
:math:`z_\chi - \sqrt{2(\hat\ell - \ell_p)}` (:math:`z_\chi^2 = \chi^2_1(1 - \alpha)`; the
signed root of the deviance is nearly linear in :math:`\log\theta`), by Brent's method in
:math:`\log\theta` to :data:`LOG_XTOL` or :data:`ROOT_TOL`, in a bracket grown outward
from the log-Wald endpoint; a bound of the search box reached first is the endpoint,
flagged ``at_bound``.

An estimate on a bound (:func:`estimate_at_bound`) gets a one-sided interval: the bound,
and on the other side the end where
:math:`2(\hat\ell - \ell_p) = \chi^2_1(1 - 2\alpha)`, the :math:`1 - \alpha` quantile of
the null mixture :math:`\tfrac12\chi^2_0 + \tfrac12\chi^2_1` (Self and Liang 1987; 2.706
at level 0.95). Its Wald and log-Wald intervals are that profile interval when computed,
else :func:`one_sided_wald`.

References
----------
Self, S. G. and Liang, K.-Y. (1987). Asymptotic properties of maximum likelihood
estimators and likelihood ratio tests under nonstandard conditions. *Journal of the
American Statistical Association* 82(398), 605-610.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats
from sklearn.utils.validation import check_is_fitted

from geostat.checks import check_choice, check_mapping
from geostat.kernels.models import axis_spans
from geostat.optimize.objective import Objective
from geostat.optimize.scaling import VARIANCE_LIKE, residual_variance
from geostat.optimize.search import ZERO_NUGGET_TRIAL, local_maximize, natural_estimate
from geostat.optimize.space import ParameterSpace

__all__ = [
    "METHODS",
    "ONE_SIDED",
    "ProfileLikelihood",
    "confidence_intervals",
    "estimate_at_bound",
    "one_sided_critical",
    "parameter_bounds",
    "profile_loglik",
]

#: Interval constructions of :func:`confidence_intervals`.
METHODS = ("profile", "wald", "log-wald")
#: What the ``one_sided`` column of :func:`confidence_intervals` flags.
ONE_SIDED = "one-sided (estimate at bound)"
#: Endpoints are located to this absolute tolerance in ``log theta`` (relative in theta),
LOG_XTOL = 1e-4
#: or where the signed root of the deviance is this close to its critical value (at 95 %:
#: a deviance within 0.002 of the chi-square quantile), whichever comes first.
ROOT_TOL = 5e-4
#: The first outward step in ``log theta`` is the log-Wald half-width clipped to this range.
FIRST_STEP = (0.05, 2.0)
#: First step when the standard error is not finite.
DEFAULT_STEP = 0.5
#: Values equal to this many significant digits are profiled once (``exp(log x)`` may
#: differ from ``x`` in the last bit).
KEY_DIGITS = 13
#: A warm start extrapolates the path of the other parameters at most this many times the
#: gap between the two optima it is drawn from.
MAX_EXTRAPOLATION = 3.0
#: L-BFGS-B tolerances of a profile maximization (exact likelihood), on the negative
#: log-likelihood per observation: they leave a profile value within about ``1e-5`` of the
#: maximum, a deviance far inside :data:`ROOT_TOL`'s 0.002.
PROFILE_TOLERANCES = {"ftol": 1e-9, "gtol": 1e-5}
#: The tangent path moves a logarithm by at most this much.
MAX_LOG_MOVE = 20.0
#: The second start of a profile maximization whose warm start has a nugget near zero puts
#: the nugget at this fraction of the variance (the smallest ratio of the fit's start grid).
INTERIOR_RATIO = 0.01
#: Outward trials aim this far beyond the endpoint predicted by linear extrapolation.
OVERSHOOT = 1.3


def check_level(level: float) -> float:
    """`level` (a confidence level) as a float in (0, 1); ValueError otherwise."""
    if (
        isinstance(level, (bool, np.bool_))
        or not isinstance(level, numbers.Real)
        or not 0 < level < 1
    ):
        raise ValueError(
            f"level must be a number strictly between 0 and 1, such as 0.95; got {level!r}."
        )
    return float(level)


# `estimator` is a fitted geostat.SpatialGP (not named here: geostat.estimator imports this module).
def confidence_intervals(
    estimator: Any, level: float = 0.95, method: Literal["profile", "wald", "log-wald"] = "profile"
) -> pd.DataFrame:
    """Confidence intervals for the estimated covariance parameters of a fitted estimator.

    Parameters
    ----------
    estimator : geostat.SpatialGP
        A fitted estimator.
    level : float, default 0.95
        Confidence level, in (0, 1).
    method : {"profile", "wald", "log-wald"}, default "profile"
        The construction (module docstring); an estimate on a bound gets a one-sided interval.

    Returns
    -------
    pandas.DataFrame
        Indexed by the estimated parameters; columns ``estimate``, ``lower``, ``upper`` (never
        NaN), for ``"profile"`` ``at_bound`` (an endpoint is a bound of the parameter space),
        and ``one_sided`` (:data:`ONE_SIDED`). ``attrs`` holds ``level`` and ``method``.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If `estimator` is not fitted.
    ValueError
        If `level` is not in (0, 1) or `method` is not one of :data:`METHODS`.
    """
    check_is_fitted(estimator)
    level = check_level(level)
    method = check_choice(method, "method", METHODS)
    names = list(estimator.result_.estimated)
    estimate = np.array([estimator.params_[n] for n in names], dtype=float)
    sides = estimate_at_bound(estimator)
    frame = pd.DataFrame({"estimate": estimate}, index=pd.Index(names, name="parameter"))
    if method == "profile":
        profile = ProfileLikelihood.of(estimator)
        rows = [profile.interval(name, level) for name in names]
        frame["lower"] = [r[0] for r in rows]
        frame["upper"] = [r[1] for r in rows]
        frame["at_bound"] = [r[2] for r in rows]
    else:
        stderr = np.array([estimator.stderr_[n] for n in names], dtype=float)
        z = stats.norm.ppf(0.5 + level / 2)
        lower, upper = (
            wald(estimate, stderr, z) if method == "wald" else log_wald(estimate, stderr, z)
        )
        if sides:
            bounds = parameter_bounds(estimator)
            kept = ProfileLikelihood.kept(estimator)
            for name, side in sides.items():
                i = names.index(name)
                known = None if kept is None else kept.intervals.get((name, level))
                lower[i], upper[i] = (
                    known[:2]
                    if known is not None
                    else one_sided_wald(
                        estimate[i],
                        stderr[i],
                        level,
                        bounds[name],
                        side,
                        logarithmic=method == "log-wald",
                    )
                )
        frame["lower"], frame["upper"] = lower, upper
    frame["one_sided"] = [name in sides for name in names]
    frame.attrs.update(level=level, method=method)
    return frame


def wald(estimate, stderr, z):
    """``(estimate - z stderr, estimate + z stderr)`` (arrays)."""
    return estimate - z * stderr, estimate + z * stderr


def log_wald(estimate, stderr, z):
    """``exp(log estimate -/+ z stderr / estimate)``; ``(0, NaN)`` where the estimate is 0
    (:func:`confidence_intervals` replaces those: such an estimate is on a bound)."""
    positive = estimate > 0
    safe = np.where(positive, estimate, 1.0)
    half = z * stderr / safe
    lower = np.where(positive, safe * np.exp(-half), 0.0)
    upper = np.where(positive, safe * np.exp(half), np.nan)
    return lower, upper


def one_sided_critical(level):
    """The signed root of the deviance at the free end of a one-sided interval at `level`.

    The likelihood-ratio statistic of a parameter whose true value is on the boundary is
    asymptotically :math:`\\tfrac12\\chi^2_0 + \\tfrac12\\chi^2_1` (Self and Liang 1987), whose
    :math:`1 - \\alpha` quantile is :math:`\\chi^2_1(1 - 2\\alpha)`: the root is
    :math:`\\Phi^{-1}(\\max(\\text{level}, 1/2))`, 1.645 at 0.95 (a deviance of 2.706).
    """
    return float(stats.norm.ppf(max(check_level(level), 0.5)))


def one_sided_wald(estimate, stderr, level, bounds, side, logarithmic=False):
    """``(lower, upper)`` of the one-sided Wald interval of an estimate on the bound `side`.

    The end on `side` (-1: lower, +1: upper) is that end of `bounds`; the other is
    :math:`\\hat\\theta \\mp z_{1-\\alpha}\\,\\mathrm{se}` (with `logarithmic`, for a positive
    estimate, :math:`\\hat\\theta \\exp(\\mp z_{1-\\alpha}\\,\\mathrm{se}/\\hat\\theta)`), with
    :math:`z_{1-\\alpha}` = :func:`one_sided_critical` of `level`, kept within `bounds`, or the
    other bound where `stderr` is not finite.
    """
    low, high = bounds
    if not math.isfinite(stderr):
        return low, high
    z = one_sided_critical(level)
    if logarithmic and estimate > 0:
        other = estimate * math.exp(-side * z * stderr / estimate)
    else:
        other = estimate - side * z * stderr
    other = min(max(other, low), high)
    return (low, other) if side < 0 else (other, high)


def parameter_bounds(estimator):
    """``{name: (low, high)}`` of the estimated parameters of a fitted estimator, in natural
    units: the box the fit searched, with 0 below a nugget and a quarter turn either side of
    an anisotropy angle (its axes repeat beyond)."""
    check_is_fitted(estimator)
    space, factor = fitted_space(estimator), estimator._scale.factor
    return {
        name: _natural_bounds(space, factor, estimator.params_, name)
        for name in estimator.result_.estimated
    }


def _natural_bounds(space, factor, estimate, name):
    """:func:`parameter_bounds` of one parameter (`space` in fitting units, `factor` the
    data scale)."""
    if name == "anisotropy_angle":
        return estimate[name] - 0.5 * math.pi, estimate[name] + 0.5 * math.pi
    low, high = space.natural_bounds[name]
    factor = factor**2 if name in VARIANCE_LIKE else 1.0
    return (0.0 if name == "nugget" else low * factor), high * factor


def estimate_at_bound(estimator):
    """``{name: side}`` of a fitted estimator's estimates on a bound (-1 lower, +1 upper).

    A nugget of 0 or in ``result_.at_bounds`` is on its lower bound 0; another parameter in
    ``result_.at_bounds`` (on its search bound, or a model edge of
    :data:`~geostat.optimize.search.MODEL_EDGES`) on the nearer end of its box, on the scale
    it is searched on. An anisotropy angle is never on a bound.
    """
    check_is_fitted(estimator)
    result = estimator.result_
    named = set(result.at_bounds) | ({"nugget"} if estimator.params_.get("nugget") == 0 else set())
    named = [n for n in result.estimated if n in named and n != "anisotropy_angle"]
    if not named:
        return {}
    bounds = parameter_bounds(estimator)
    linear = estimator.kernel_.linear_shape
    sides = {}
    for name in named:
        if name == "nugget":
            sides[name] = -1
            continue
        low, high = bounds[name]
        value = estimator.params_[name]
        if name in linear:
            sides[name] = -1 if abs(value - low) <= abs(high - value) else 1
        else:
            sides[name] = -1 if abs(math.log(value / low)) <= abs(math.log(high / value)) else 1
    return sides


def profile_loglik(estimator: Any, parameter: str, values: ArrayLike) -> NDArray[np.float64]:
    """Profile log-likelihood of one covariance parameter of a fitted estimator.

    :math:`\\ell_p(\\theta) = \\max_\\psi \\ell(\\theta, \\psi)` over the other covariance
    parameters (restricted with ``reml=True``); ``loglik_`` at the estimate.

    Parameters
    ----------
    estimator : geostat.SpatialGP
        A fitted estimator.
    parameter : str
        One of its estimated parameters (``estimator.result_.estimated``).
    values : array-like of float
        Values in the units of ``params_``: positive (a nugget non-negative; an angle or the
        separability finite).

    Returns
    -------
    ndarray of shape (len(values),)

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If `estimator` is not fitted.
    ValueError
        If `parameter` is not estimated or `values` are not valid.
    """
    check_is_fitted(estimator)
    profile = ProfileLikelihood.of(estimator)
    name = profile.check_parameter(parameter)
    values = _check_values(values, name, profile._linear(name))
    coordinate = profile._coordinate(name)
    # Nearest to the estimate first: each value is warm-started from a neighbour's optimum.
    order = np.argsort(
        np.abs(coordinate(values) - coordinate(estimator.params_[name])), kind="stable"
    )
    out = np.empty(values.size)
    for i in order:
        out[i] = profile(name, float(values[i]))
    return out


def _log(values):
    """``log`` with 0 mapped to a finite floor (nearest-value bookkeeping only)."""
    return np.log(np.maximum(values, np.finfo(float).tiny))


def _check_values(values, name, linear=False):
    try:
        array = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(
            f"values must be an array of numbers (values of {name!r}); got {values!r}."
        ) from None
    ok = np.isfinite(array) & (
        True if linear else (array >= 0) if name == "nugget" else (array > 0)
    )
    if array.size == 0 or not ok.all():
        need = "" if linear else "non-negative" if name == "nugget" else "positive"
        raise ValueError(
            f"values of {name!r} must be {need} finite numbers (at least one); got {values!r}."
        )
    return array


def fitted_space(estimator):
    """The :class:`~geostat.optimize.ParameterSpace` of an estimator's fit, in its fitting
    units (as built by ``SpatialGP.fit``)."""
    likelihood, scale = estimator._likelihood, estimator._scale
    natural = ParameterSpace(
        estimator.kernel_,
        nugget=estimator.nugget,
        fixed=check_mapping(estimator.fixed, "fixed", "{'range': 100.0}"),
        bounds=check_mapping(estimator.bounds, "bounds", "{'range': (1.0, 500.0)}"),
        max_distance=likelihood.max_distance,
        data_variance=residual_variance(likelihood.y, likelihood.design) * scale.factor**2,
        spans=axis_spans(estimator.kernel_, likelihood.coords),
        known_noise=likelihood.noise is not None,
    )
    return scale.space_to_unit(natural)


def held_space(space, name, value):
    """`space` with parameter `name` held at `value` (fitting units): through ``fixed``,
    ``nugget=value`` or a kernel with that shape value fixed; its bound is dropped."""
    bounds = {k: v for k, v in space.bounds.items() if k != name}
    if name in ("variance", "range"):
        return dataclasses.replace(space, fixed={**space.fixed, name: value}, bounds=bounds)
    if name == "nugget":
        return dataclasses.replace(space, nugget=value, bounds=bounds)
    return dataclasses.replace(space, kernel=space.kernel.with_fixed(name, value), bounds=bounds)


def start_in(space, params):
    """The optimizer's vector of `space` at natural `params`, clipped to its box (a nugget
    of 0 goes to the lower bound of its logarithm)."""
    values = {**params, "ratio": params["nugget"] / params["variance"]}
    with np.errstate(divide="ignore"):
        z = space.to_z(values)
    low, high = np.array(space.z_bounds(), dtype=float).T
    return np.clip(z, low, high)


class ProfileLikelihood:
    """Profile log-likelihoods and profile intervals of a fitted `estimator`, evaluated on
    its own likelihood object (a TLR likelihood's cached factor is replaced); the optima
    found are kept, per parameter, as warm starts."""

    def __init__(self, estimator):
        check_is_fitted(estimator)
        self.likelihood = estimator._likelihood
        self.scale = estimator._scale
        self.space = fitted_space(estimator)
        self.estimated = list(estimator.result_.estimated)
        self.covariance = np.asarray(estimator.result_.covariance, dtype=float)
        self.estimate = dict(estimator.params_)
        self.stderr = dict(estimator.stderr_)
        self.loglik = self._maximum(estimator)
        #: ``{name: side}`` of the estimates on a bound (:func:`estimate_at_bound`).
        self.sides = estimate_at_bound(estimator)
        #: ``{(name, level): (lower, upper, at_bound)}`` of the intervals computed.
        self.intervals = {}
        seed = (
            estimator.random_state if isinstance(estimator.random_state, (int, np.integer)) else 0
        )
        self.rng = np.random.default_rng(int(seed))
        unit = self.scale.params_to_unit(self.estimate)
        self.optima = {name: [(unit[name], unit)] for name in self.estimated}
        self.values = {_key(name, self.estimate[name]): self.loglik for name in self.estimated}

    @classmethod
    def of(cls, estimator):
        """The :class:`ProfileLikelihood` of a fitted `estimator`, made once per fit and kept
        with it, so that its optima and values serve every later interval, profile and
        plot of that fit."""
        check_is_fitted(estimator)
        kept = estimator._fitted_solvers().profile
        if "profile" not in kept:
            kept["profile"] = cls(estimator)
        return kept["profile"]

    @classmethod
    def kept(cls, estimator):
        """The profile likelihood kept with `estimator`'s fit (:meth:`of`), or None when
        no interval or profile was asked for since the fit."""
        check_is_fitted(estimator)
        return estimator._fitted_solvers().profile.get("profile")

    def _maximum(self, estimator):
        """The maximum the profile is compared with: ``loglik_``, or for TLR the value at
        the estimate at the fit's own accuracy, the accuracy of every profile value
        (``loglik_`` is reported from a more accurate evaluation, and a difference of
        accuracies would move the endpoints)."""
        if self.likelihood.accuracy is None:
            return float(estimator.loglik_)
        unit = self.scale.params_to_unit(self.estimate)
        return self.scale.loglik_from_unit(
            self.likelihood.log_likelihood(unit), self.likelihood.n_eff
        )

    def check_parameter(self, parameter):
        """`parameter` if it is estimated, else ValueError listing those."""
        if parameter not in self.estimated:
            raise ValueError(
                f"parameter={parameter!r} is not an estimated parameter of this fit; "
                f"use one of {self.estimated}."
            )
        return parameter

    def profiled_values(self, name):
        """The values of `name` (natural units) whose profile log-likelihood is known, the
        estimate's included, sorted."""
        return np.array(sorted(value for key, value in self.values if key == name))

    def __call__(self, name, value):
        """Profile log-likelihood (in the units of the fitted ``y``) at `name` = `value`
        (natural units); each value is maximized once (the estimate gives ``loglik_``)."""
        key = _key(name, value)
        if key not in self.values:
            self.values[key] = self._maximize(name, value)
        return self.values[key]

    def _maximize(self, name, value):
        unit = value / self.scale.factor**2 if name in VARIANCE_LIKE else value
        space = held_space(self.space, name, unit)
        z = np.zeros(0)
        if space.names:
            objective = Objective(self.likelihood, space)
            runs = [
                local_maximize(
                    self.likelihood,
                    space,
                    objective,
                    start,
                    self.rng,
                    refine=False,
                    tolerances=PROFILE_TOLERANCES,
                )[0]
                for start in self._starts(name, unit, space)
            ]
            z = min(runs, key=lambda run: run.fun).x
        params, loglik = natural_estimate(self.likelihood, space, z)
        self.optima[name].append((unit, params))
        return self.scale.loglik_from_unit(loglik, self.likelihood.n_eff)

    def _starts(self, name, unit, space):
        """Starting points of one profile maximization: the warm start and, when its nugget
        is below ``ZERO_NUGGET_TRIAL`` times the variance, the same point with the nugget at
        :data:`INTERIOR_RATIO` times the variance (at the floor of its logarithm the
        gradient in the nugget vanishes, and a search started there stays there)."""
        start = self._warm_start(name, unit, space)
        coordinate = "ratio" if "ratio" in space.names else "nugget"
        if coordinate not in space.names:
            return [start]
        i = space.names.index(coordinate)
        floor = math.log(ZERO_NUGGET_TRIAL)
        if coordinate == "nugget":
            floor += (
                start[space.names.index("variance")]
                if "variance" in space.names
                else math.log(space.fixed["variance"])
            )
        if start[i] >= floor:
            return [start]
        interior = start.copy()
        interior[i] = floor + math.log(INTERIOR_RATIO / ZERO_NUGGET_TRIAL)
        return [start, interior]

    def _warm_start(self, name, unit, space):
        """Start for `name` = `unit` in the optimizer's coordinates of `space`: on the line
        through the optima at the two nearest values profiled (at most
        :data:`MAX_EXTRAPOLATION` gaps beyond them), or with only the estimate known on the
        tangent of the profile path (:meth:`_tangent_path`)."""
        coordinate = self._coordinate(name)
        target = coordinate(unit)
        near = sorted(self.optima[name], key=lambda pair: abs(coordinate(pair[0]) - target))[:2]
        if len(near) < 2:
            return start_in(space, self._tangent_path(name, unit))
        (v0, p0), (v1, p1) = near
        z0, z1 = start_in(space, p0), start_in(space, p1)
        gap = coordinate(v1) - coordinate(v0)
        if gap == 0:
            return z0
        weight = np.clip((target - coordinate(v0)) / gap, -MAX_EXTRAPOLATION, MAX_EXTRAPOLATION)
        low, high = np.array(space.z_bounds(), dtype=float).T
        return np.clip(z0 + weight * (z1 - z0), low, high)

    def _tangent_path(self, name, unit):
        """The estimate (fitting units) with every other positive parameter moved by the
        regression of its logarithm on ``log theta`` under the inverse Fisher information,
        ``d log psi / d log theta = Sigma_psi,theta theta / (Sigma_theta,theta psi)``: the
        first-order profile path."""
        estimate = self.scale.params_to_unit(self.estimate)
        i = self.estimated.index(name)
        column = self.covariance[:, i]
        linear = self._linear(name)
        if not (
            (linear or (unit > 0 and estimate[name] > 0))
            and np.all(np.isfinite(column))
            and column[i] > 0
        ):
            return estimate
        shift = unit - estimate[name] if linear else math.log(unit / estimate[name])
        out = dict(estimate)
        for j, other in enumerate(self.estimated):
            if other != name and self.estimate[other] > 0:
                slope = (
                    column[j]
                    * (1.0 if linear else self.estimate[name])
                    / (column[i] * self.estimate[other])
                )
                out[other] = estimate[other] * math.exp(
                    np.clip(slope * shift, -MAX_LOG_MOVE, MAX_LOG_MOVE)
                )
        return out

    def _linear(self, name):
        """Whether `name` is profiled on its natural scale (an angle, the separability: the
        kernel's :attr:`~geostat.kernels.Kernel.linear_shape`), not in its logarithm."""
        return name in self.space.kernel.linear_shape

    def _coordinate(self, name):
        """The scale on which the profile path of `name` is followed: natural or log."""
        return (lambda value: value) if self._linear(name) else _log

    def bounds(self, name):
        """``(low, high)`` of a parameter in natural units: the fit's box, 0 below a nugget,
        a quarter turn either side of an anisotropy angle (its axes repeat beyond)."""
        return _natural_bounds(self.space, self.scale.factor, self.estimate, name)

    def nugget_floor(self):
        """The smallest positive nugget the fit searches (natural units)."""
        return self.space.natural_bounds["nugget"][0] * self.scale.factor**2

    def interval(self, name, level):
        """``(lower, upper, at_bound)`` of the profile interval of `name` at `level` (one-sided
        for an estimate on a bound, :attr:`sides`), computed once per `name` and `level`."""
        self.check_parameter(name)
        level = check_level(level)
        if (name, level) not in self.intervals:
            self.intervals[name, level] = self._interval(name, level)
        return self.intervals[name, level]

    def _interval(self, name, level):
        """:meth:`interval`, computed."""
        side = self.sides.get(name)
        critical = (
            math.sqrt(stats.chi2.ppf(level, 1)) if side is None else one_sided_critical(level)
        )

        def excess(value):
            # The signed root of the deviance is nearly linear in log theta: Brent's
            # interpolation steps converge in few profile evaluations. A value where the
            # likelihood cannot be evaluated counts as outside the interval.
            loglik = self(name, value)
            if not math.isfinite(loglik):
                return -critical
            return critical - math.sqrt(max(2.0 * (self.loglik - loglik), 0.0))

        if side is not None:
            low, high = self.bounds(name)
            if critical == 0:  # a level of at most 1/2: the estimate itself
                return (
                    (low, self.estimate[name], True)
                    if side < 0
                    else (self.estimate[name], high, True)
                )
            other, _ = self._endpoint(name, excess, critical, -side, level)
            return (low, other, True) if side < 0 else (other, high, True)
        lower, lower_open = self._endpoint(name, excess, critical, -1, level)
        upper, upper_open = self._endpoint(name, excess, critical, +1, level)
        return lower, upper, bool(lower_open or upper_open)

    def _first_step(self, name, level):
        """The log-Wald half-width (clipped to :data:`FIRST_STEP`)."""
        estimate, stderr = self.estimate[name], self.stderr[name]
        if estimate <= 0 or not 0 < stderr < np.inf:
            return DEFAULT_STEP
        return float(np.clip(stats.norm.ppf(0.5 + level / 2) * stderr / estimate, *FIRST_STEP))

    def _linear_endpoint(self, name, excess, critical, direction):
        """:meth:`_endpoint` of a parameter on its natural scale: trials at the estimate
        plus `direction` times ``critical * stderr`` (a tenth of the box without one),
        doubling, then the root between the last two."""
        estimate = self.estimate[name]
        low, high = self.bounds(name)
        bound = high if direction > 0 else low
        stderr = self.stderr[name]
        step = critical * stderr if 0 < stderr < np.inf else 0.1 * (high - low)
        inner = estimate
        if direction * (bound - estimate) <= 0:
            return bound, True
        while True:
            outer = estimate + direction * step
            if direction * (outer - bound) >= 0:
                outer = bound
            if excess(outer) < 0:
                return _root(excess, inner, outer, linear=True), False
            if outer == bound:
                return bound, True
            inner, step = outer, 2.0 * step

    def _endpoint(self, name, excess, critical, direction, level):
        """One endpoint (`direction` -1: lower, +1: upper) and whether it is a bound: trials step
        outward in ``log theta`` from the estimate, each extrapolating the root linearly (times
        :data:`OVERSHOOT`, 1.5 to 4 times the step); from an estimate of 0 (a nugget) they are
        ``t0 exp(s)``, ``s = 0, d, 3d, 7d, ...``."""
        if self._linear(name):
            return self._linear_endpoint(name, excess, critical, direction)
        estimate = self.estimate[name]
        low, high = self.bounds(name)
        bound = high if direction > 0 else low
        if direction < 0 and (estimate <= low or (name == "nugget" and excess(0.0) >= 0)):
            return low, True
        # Below the nugget's search floor the next trial is 0 itself (known to be outside).
        limit = self.nugget_floor() if name == "nugget" and direction < 0 else bound
        first = self._first_step(name, level)
        from_estimate = estimate > 0
        base = estimate if from_estimate else self._zero_start(name)
        inner, step = estimate, (first if from_estimate else 0.0)
        while True:
            outer = base * math.exp(direction * step)
            if direction * (outer - limit) >= 0:
                outer = bound
            value = excess(outer)
            if value < 0:
                return _root(excess, inner, outer), False
            if outer == bound:
                return bound, True
            inner = outer
            if from_estimate:
                root = critical - value
                predicted = step * critical / root if root > 0 else np.inf
                step = float(np.clip(OVERSHOOT * predicted, 1.5 * step, 4.0 * step))
            else:
                step = 2.0 * step + first

    def _zero_start(self, name):
        """First trial value above an estimate of 0: its standard error, or 1% of the variance."""
        stderr = self.stderr[name]
        return stderr if 0 < stderr < np.inf else 0.01 * self.estimate["variance"]


def _key(name, value):
    """Memo key of a profile value: equal to :data:`KEY_DIGITS` significant digits."""
    return name, float(f"{value:.{KEY_DIGITS}g}")


class _CloseEnough(Exception):
    """Raised with the value where `excess` came within :data:`ROOT_TOL` of 0."""


def _root(excess, inner, outer, linear=False):
    """Root of `excess` between `inner` (excess >= 0) and `outer` (< 0): in ``log theta``
    when both are positive and the parameter is not `linear`, else (an end at 0, an
    angle) in ``theta``; the first value where ``|excess| <= ROOT_TOL`` ends the search."""

    def stopping(value):
        found = excess(value)
        if abs(found) <= ROOT_TOL:
            raise _CloseEnough(value)
        return found

    a, b = sorted((inner, outer))
    try:
        if a > 0 and not linear:
            return math.exp(
                optimize.brentq(
                    lambda t: stopping(math.exp(t)), math.log(a), math.log(b), xtol=LOG_XTOL
                )
            )
        return optimize.brentq(stopping, a, b, xtol=LOG_XTOL * max(abs(a), abs(b)))
    except _CloseEnough as close:
        return close.args[0]
