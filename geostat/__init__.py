"""geostat: Gaussian-process maximum likelihood for geostatistics.

Kernels
    :class:`Exponential`, :class:`Matern`, :class:`PoweredExponential`,
    :class:`Gaussian` — ``C(h) = variance * M(h / range) + nugget * I`` in the
    convention of ExaGeoStat and R fields.
Estimation
    :class:`SpatialGP` — scikit-learn estimator: ``fit``, ``predict(return_std=...)``,
    ``sample_y``, ``score``, ``log_likelihood``; fitted ``params_``, ``stderr_``,
    ``coef_``, ``loglik_``.
Functions
    :func:`log_likelihood` — exact Gaussian log-likelihood at given parameters;
    :func:`simulate` — unconditional Gaussian random fields.
Modules
    :mod:`geostat.datasets` (``names()``, ``load(name)``), :mod:`geostat.distance`
    (euclidean, chordal, great-circle), :mod:`geostat.optimize` (``MLEResult``).
"""

from geostat import datasets, distance
from geostat.estimator import SpatialGP
from geostat.kernels import Exponential, Gaussian, Kernel, Matern, PoweredExponential
from geostat.loglik import log_likelihood
from geostat.optimize import GeostatWarning, MLEResult
from geostat.simulate import simulate
from geostat.safeguard import PerturbationWarning
from tlrcore import NotPositiveDefiniteError

__all__ = [
    "SpatialGP",
    "Kernel",
    "Exponential",
    "Matern",
    "PoweredExponential",
    "Gaussian",
    "log_likelihood",
    "simulate",
    "datasets",
    "distance",
    "MLEResult",
    "GeostatWarning",
    "NotPositiveDefiniteError",
    "PerturbationWarning",
]
__version__ = "0.1.0"
