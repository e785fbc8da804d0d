"""Maximum-likelihood estimation of the covariance parameters.

Modules
-------
space
    :class:`ParameterSpace`: what is estimated, bounds, the optimizer's coordinates.
objective
    The negative log-likelihood per observation in those coordinates, and L-BFGS-B.
search
    :func:`maximize_likelihood`: starting grid on a pilot subsample, L-BFGS-B, the
    awkward optima; :class:`MLEResult`; :func:`standard_errors`.
polish
    The derivative-free polish of a TLR estimate.
progress
    The progress of a fit (``SpatialGP(verbose=...)``): evaluations by stage, shown by
    tqdm or not, and their log records.
scaling
    :class:`DataScale`: fitting in units in which the data variance is near one.
intervals
    :func:`confidence_intervals` (Wald, log-Wald, profile likelihood; one-sided for an
    estimate on a bound) and :func:`profile_loglik` of a fitted estimator.
identification
    :func:`weakly_identified` parameters of a fit, with reasons and remedies, and
    :func:`identification_of` a fitted estimator.
model_choice
    :func:`likelihood_ratio_test` of nested fitted models (information criteria are the
    estimator's ``aic_`` and ``bic_``).
"""

from geostat.optimize.identification import identification_of, weakly_identified
from geostat.optimize.intervals import confidence_intervals, profile_loglik
from geostat.optimize.search import MLEResult, maximize_likelihood, standard_errors
from geostat.optimize.space import ParameterSpace

__all__ = [
    "MLEResult",
    "ParameterSpace",
    "confidence_intervals",
    "identification_of",
    "maximize_likelihood",
    "profile_loglik",
    "standard_errors",
    "weakly_identified",
]
