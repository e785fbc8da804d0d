"""Maximum-likelihood estimation of the covariance parameters.

:class:`ParameterSpace` says what is estimated and in which coordinates;
:func:`maximize_likelihood` (:mod:`~geostat.optimize.search`) maximizes the likelihood,
through Fisher scoring (:mod:`~geostat.optimize.scoring`) or a derivative-free search
(:mod:`~geostat.optimize.polish`) for TLR; :func:`confidence_intervals`,
:func:`profile_loglik` and :func:`weakly_identified` describe a fit's uncertainty, and
:mod:`~geostat.optimize.model_choice` tests nested fits.
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
