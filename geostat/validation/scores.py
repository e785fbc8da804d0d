r"""Scores of Gaussian predictive distributions of held-out observations.

With :math:`N(\mu, \sigma^2)` the predictive distribution of an observation :math:`y`
and :math:`z = (y - \mu) / \sigma`: ``rmse`` and ``mae`` of :math:`y - \mu`; ``crps``,
the closed-form Gaussian CRPS (:func:`gaussian_crps`); ``log_score``, the negative log
predictive density (:func:`gaussian_log_score`); ``coverage``, the fraction inside
:math:`\mu \pm \Phi^{-1}((1 + \text{level})/2)\,\sigma`; ``standardized_mean`` and
``standardized_std`` (``ddof=1``) of :math:`z`, ideally 0 and 1. All are means over the
observations; lower is better for the first four. CRPS and the log score are strictly
proper [1]_.

References
----------
.. [1] Gneiting, T., Raftery, A. E. (2007). Strictly proper scoring rules, prediction,
   and estimation. Journal of the American Statistical Association, 102(477), 359-378.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

__all__ = ["SCORES", "check_scoring", "gaussian_crps", "gaussian_log_score", "score_predictions"]

#: The scores :func:`score_predictions` computes, in the order they are reported.
SCORES = ("rmse", "mae", "crps", "log_score", "coverage", "standardized_mean", "standardized_std")


def check_scoring(scoring: str | Iterable[str] | None) -> tuple[str, ...]:
    """The score names asked for: all of :data:`SCORES` for None, one name, or several.

    Raises
    ------
    ValueError
        Naming `scoring`, the unknown names and the valid ones.
    TypeError
        If `scoring` is neither None, a str nor an iterable of str.
    """
    if scoring is None:
        return SCORES
    names = (scoring,) if isinstance(scoring, str) else scoring
    try:
        names = tuple(names)
    except TypeError:
        raise TypeError(
            f"scoring must be None, a score name or a sequence of names from {SCORES}; "
            f"got {type(scoring).__name__}."
        ) from None
    unknown = [name for name in names if not isinstance(name, str) or name not in SCORES]
    if unknown:
        raise ValueError(
            f"scoring has unknown score name(s) {unknown}; choose among {SCORES} "
            "(or scoring=None for all)."
        )
    if not names:
        raise ValueError(
            f"scoring names no score; give names from {SCORES}, or scoring=None for all."
        )
    return tuple(dict.fromkeys(names))


def gaussian_crps(observed: ArrayLike, mean: ArrayLike, std: ArrayLike) -> NDArray[np.float64]:
    r"""Continuous ranked probability score of :math:`N(\mu, \sigma^2)` at each observation.

    .. math::

        \mathrm{CRPS}(N(\mu, \sigma^2), y) = \sigma\left[z\,(2\Phi(z) - 1) + 2\varphi(z)
        - \frac{1}{\sqrt\pi}\right], \qquad z = \frac{y - \mu}{\sigma}.

    `observed`, `mean` and `std` (positive) broadcast together; the result is in the
    units of `observed` (eq. 21 of [1]_).

    References
    ----------
    .. [1] Gneiting, T., Raftery, A. E. (2007). Strictly proper scoring rules, prediction,
       and estimation. Journal of the American Statistical Association, 102(477), 359-378.
    """
    std = np.asarray(std, dtype=np.float64)
    z = (np.asarray(observed, dtype=np.float64) - np.asarray(mean, dtype=np.float64)) / std
    return std * (
        z * (2.0 * stats.norm.cdf(z) - 1.0) + 2.0 * stats.norm.pdf(z) - 1.0 / np.sqrt(np.pi)
    )


def gaussian_log_score(observed: ArrayLike, mean: ArrayLike, std: ArrayLike) -> NDArray[np.float64]:
    r"""Negative log predictive density of :math:`N(\mu, \sigma^2)` at each observation.

    .. math::

        -\log \varphi_{\mu, \sigma}(y) = \tfrac12 \log(2\pi\sigma^2) + \tfrac12 z^2,
        \qquad z = \frac{y - \mu}{\sigma}.

    The negative of the (positively oriented) logarithmic score; it depends on the units
    of `observed`. `observed`, `mean` and `std` (positive) broadcast together.
    """
    std = np.asarray(std, dtype=np.float64)
    z = (np.asarray(observed, dtype=np.float64) - np.asarray(mean, dtype=np.float64)) / std
    return 0.5 * np.log(2.0 * np.pi * std**2) + 0.5 * z**2


def score_predictions(
    observed: ArrayLike,
    mean: ArrayLike,
    std: ArrayLike,
    names: Iterable[str] = SCORES,
    level: float = 0.9,
) -> dict[str, float]:
    """The scores `names` (from :data:`SCORES`) of Gaussian predictions `mean`, `std`
    (positive) of `observed`, each ``(m,)``, as a dict in the order of `names`; `level`
    is the nominal probability of the ``coverage`` interval."""
    observed, mean, std = (np.asarray(a, dtype=np.float64) for a in (observed, mean, std))
    error = observed - mean
    z = error / std
    compute = {
        "rmse": lambda: np.sqrt(np.mean(error**2)),
        "mae": lambda: np.mean(np.abs(error)),
        "crps": lambda: np.mean(gaussian_crps(observed, mean, std)),
        "log_score": lambda: np.mean(gaussian_log_score(observed, mean, std)),
        "coverage": lambda: np.mean(np.abs(z) <= stats.norm.ppf(0.5 + 0.5 * level)),
        "standardized_mean": lambda: np.mean(z),
        "standardized_std": lambda: np.std(z, ddof=1) if z.size > 1 else np.nan,
    }
    return {name: float(compute[name]()) for name in names}
