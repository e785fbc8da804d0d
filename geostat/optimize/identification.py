r"""Weakly identified covariance parameters of a fit: why, and what to do about it.

Where the likelihood is nearly flat along some direction, the estimate wanders along it,
its standard error is large and Wald intervals mislead. :func:`weakly_identified` flags an
estimated parameter with one of these signs, with reasons and :data:`REMEDIES` (fix the
smoothness or the range, REML [1]_, a profile interval, fix the nugget or a shape
parameter, widen bounds):

* a **relative standard error** :math:`\mathrm{se}(\hat\theta) / \hat\theta
  \approx \mathrm{se}(\log\hat\theta)` of a scale parameter above :data:`RELATIVE_ERROR`
  (beyond :math:`1 / 1.96` the 95 % Wald interval reaches below zero), or an infinite one;
* a confidence **interval** that is unbounded, spans more than a factor
  :data:`SPAN_FACTOR`, or (profile) reaches the search bound;
* an **estimate on its search bound** (a nugget of 0 and the model edges of
  :data:`geostat.optimize.search.MODEL_EDGES` are answers, not flagged);
* a **range** of at least :data:`RANGE_FRACTION` of the largest site separation: under
  fixed-domain asymptotics only :math:`\sigma^2 / \text{range}^{2\nu}` is then
  consistently estimable [2]_.

References
----------
.. [1] Harville, D. A. (1977). Maximum likelihood approaches to variance component
   estimation and to related problems. *Journal of the American Statistical Association*
   72(358), 320-338.
.. [2] Zhang, H. (2004). Inconsistent estimation and asymptotically equal interpolations
   in model-based geostatistics. *Journal of the American Statistical Association*
   99(465), 250-261.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sklearn.utils.validation import check_is_fitted

from geostat.optimize.intervals import fitted_space, parameter_bounds
from geostat.optimize.search import MODEL_EDGES

__all__ = [
    "RANGE_FRACTION",
    "RELATIVE_ERROR",
    "REMEDIES",
    "SPAN_FACTOR",
    "WeakIdentification",
    "identification_of",
    "weakly_identified",
]

#: A relative standard error ``stderr / estimate`` above this flags a parameter (about
#: 1 / 1.96, where the 95 % Wald interval reaches 0).
RELATIVE_ERROR = 0.5
#: An interval whose ends differ by more than this factor flags a parameter.
SPAN_FACTOR = 100.0
#: A range of at least this fraction of the largest site separation flags it.
RANGE_FRACTION = 0.5
#: Relative tolerance of "a profile interval's end on a bound" (the profile search ends
#: exactly there).
BOUND_RTOL = 1e-9
#: Relative tolerance of "an estimate at a model edge", that of ``result_.at_bounds``.
EDGE_RTOL = 1e-6
#: Remedies by key, worded for the Python interface (``{name}``: the parameter).
REMEDIES = {
    "fix_smoothness": "fix the smoothness (e.g. smoothness=0.5 or 1.5)",
    "fix_range": "fix the range (fixed={{'range': value}})",
    "reml": "use reml=True",
    "profile": "compute a profile interval (confidence_intervals(method='profile'))",
    "fix_nugget": "fix the nugget (nugget=0, or a known measurement-error variance)",
    "fix_shape": "fix {name} (give the kernel its value)",
    "widen_bounds": "widen bounds[{name!r}]",
}


@dataclass(frozen=True)
class WeakIdentification:
    """Why one `parameter` is weakly identified (`reasons`, in words with their numbers), and
    what may help (`remedies`, keys of :data:`REMEDIES`, the most useful first)."""

    parameter: str
    reasons: tuple[str, ...]
    remedies: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The reasons in one line."""
        return "; ".join(self.reasons)

    def remedy_text(self, texts: Mapping[str, str] = REMEDIES) -> str:
        """The remedies in one line, worded by `texts` (a mapping like :data:`REMEDIES`)."""
        return "; ".join(texts[key].format(name=self.parameter) for key in self.remedies)

    @property
    def remedy(self) -> str:
        """The remedies in one line, worded for the Python interface."""
        return self.remedy_text()


def weakly_identified(
    params: Mapping[str, float],
    stderr: Mapping[str, float],
    intervals: pd.DataFrame | Mapping[str, tuple[float, float]] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    *,
    estimated: list[str] | None = None,
    at_bounds: tuple[str, ...] | list[str] = (),
    max_distance: float | None = None,
    reml: bool = False,
    absolute: tuple[str, ...] | list[str] = ("anisotropy_angle", "separability"),
    relative_error: float = RELATIVE_ERROR,
    span_factor: float = SPAN_FACTOR,
    range_fraction: float = RANGE_FRACTION,
) -> dict[str, WeakIdentification]:
    """The weakly identified parameters among the estimated ones, with reasons and remedies.

    Parameters
    ----------
    params, stderr : mapping of str to float
        Estimates and standard errors by name (``params_``, ``stderr_``).
    intervals : pandas.DataFrame or mapping, optional
        As :func:`geostat.optimize.confidence_intervals` returns them, or
        ``{name: (lower, upper)}`` profile intervals.
    bounds : mapping of str to (float, float), optional
        The search box in the units of `params`
    (:func:`~geostat.optimize.intervals.parameter_bounds`).
    estimated : list of str, optional
        The estimated parameters (default: those with a non-zero standard error).
    at_bounds : sequence of str, default ()
        Parameters whose estimate is on a bound (``result_.at_bounds``).
    max_distance : float, optional
        Largest separation of the sites, in the units of the range.
    reml : bool, default False
        Whether the fit was REML (then not suggested).
    absolute : sequence of str
        Parameters that are no scale (an angle, the separability): no relative error or span.
    relative_error, span_factor, range_fraction : float
        Thresholds of the signs in the module docstring.

    Returns
    -------
    dict of str to WeakIdentification
        The flagged parameters only, in the order of `params`.
    """
    names = [
        n
        for n in params
        if (n in estimated if estimated is not None else stderr.get(n, 0.0) != 0.0)
    ]
    rows, profile, one_sided = _intervals(intervals)
    bounds = bounds or {}
    smoothness_free = "smoothness" in names
    out = {}
    for name in names:
        value, se = float(params[name]), float(stderr.get(name, math.nan))
        reasons = []
        on_bound = name in at_bounds or (name == "nugget" and value == 0.0)
        boundary = name == "nugget" or any(
            abs(value - edge) <= EDGE_RTOL * max(1.0, abs(edge))
            for edge in MODEL_EDGES.get(name, ())
        )
        if math.isinf(se):
            reasons.append("infinite standard error (singular Fisher information: not identified)")
        elif name not in absolute and value > 0 and not on_bound and se / value > relative_error:
            reasons.append(f"relative standard error {se / value:.2g} > {relative_error:g}")
        if on_bound and not boundary:
            reasons.append(f"estimate {value:.4g} on its search bound")
        if name in rows:
            reasons += _interval_reasons(
                name,
                value,
                rows[name],
                bounds.get(name),
                name in one_sided,
                profile,
                name not in absolute,
                span_factor,
            )
        if name == "range" and max_distance and value >= range_fraction * max_distance:
            reasons.append(
                f"range {value:.4g} comparable to or beyond the largest site separation "
                f"{max_distance:.4g}: only variance / range^(2 smoothness) is well identified"
            )
        if reasons:
            remedies = _remedies(name, on_bound and not boundary, smoothness_free, reml, profile)
            out[name] = WeakIdentification(name, tuple(reasons), remedies)
    return out


def _intervals(intervals):
    """``({name: (lower, upper)}, profile?, one-sided names)`` of the `intervals` argument."""
    if intervals is None:
        return {}, False, set()
    if isinstance(intervals, pd.DataFrame):
        rows = {
            name: (float(row["lower"]), float(row["upper"])) for name, row in intervals.iterrows()
        }
        one_sided = (
            set(intervals.index[intervals["one_sided"]]) if "one_sided" in intervals else set()
        )
        return rows, intervals.attrs.get("method", "profile") == "profile", one_sided
    return {name: (float(low), float(high)) for name, (low, high) in intervals.items()}, True, set()


def _interval_reasons(name, value, interval, bounds, one_sided, profile, relative, span_factor):
    """The signs of weak identification in one interval."""
    lower, upper = interval
    kind = "profile interval" if profile else "interval"
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return [f"{kind} unbounded"]
    reasons = []
    if relative and lower > 0 and upper / lower > span_factor:
        reasons.append(f"{kind} spans a factor {upper / lower:.3g} (> {span_factor:g})")
    if bounds is not None and profile:  # a Wald interval is not confined to the box
        low, high = bounds
        # The end at an estimate's own bound (a one-sided interval) is that bound by construction.
        own = None if not one_sided else (-1 if abs(value - low) <= abs(high - value) else 1)
        reaches_low = name != "nugget" and own != -1 and lower <= low + BOUND_RTOL * abs(low)
        reaches_high = own != 1 and upper >= high - BOUND_RTOL * abs(high)
        if reaches_low or reaches_high:
            reasons.append(f"{kind} reaches the search bound {low if reaches_low else high:.4g}")
    return reasons


def _remedies(name, on_search_bound, smoothness_free, reml, profile):
    """Remedy keys for a flagged parameter, the most useful first."""
    if name in ("variance", "range"):
        keys = ["fix_smoothness"] if smoothness_free else []
        keys += ["fix_range"] + ([] if reml else ["reml"])
    elif name == "smoothness":
        keys = ["fix_smoothness"]
    elif name == "nugget":
        keys = ["fix_nugget"]
    else:
        keys = ["fix_shape"]
    if on_search_bound:
        keys.append("widen_bounds")
    if not profile:
        keys.append("profile")
    return tuple(keys)


# `estimator`: a fitted geostat.SpatialGP (not named here: geostat.estimator may import this).
def identification_of(
    estimator: Any, intervals: pd.DataFrame | None = None
) -> dict[str, WeakIdentification]:
    """:func:`weakly_identified` of a fitted `estimator`, from its fitted attributes, search
    box and largest site separation, with its `intervals` (``confidence_intervals(...)``)
    where computed; NotFittedError if it is not fitted."""
    check_is_fitted(estimator)
    result = estimator.result_
    return weakly_identified(
        estimator.params_,
        estimator.stderr_,
        intervals,
        parameter_bounds(estimator),
        estimated=list(result.estimated),
        at_bounds=list(result.at_bounds),
        max_distance=fitted_space(estimator).max_distance,
        reml=bool(estimator.reml),
    )
