"""geostat: Gaussian-process maximum likelihood for geostatistics.

Kernels
    :class:`Exponential`, :class:`Matern`, :class:`PoweredExponential`,
    :class:`Gaussian` — ``C(h) = variance * M(h / range) + nugget * I`` in the
    convention of ExaGeoStat and R fields; :class:`Anisotropic` (geometric anisotropy)
    and :class:`SpaceTime` (separable and Gneiting space-time correlations).
Estimation
    :class:`SpatialGP` — scikit-learn estimator: ``fit``, ``predict(return_std=...)``,
    ``sample_y``, ``score``, ``log_likelihood``; fitted ``params_``, ``stderr_``,
    ``coef_``, ``loglik_``; ``save(path)``.
Model files
    :func:`load` — a model written by :meth:`SpatialGP.save` (JSON and ``.npy`` arrays,
    read without pickle; versioned).
Functions
    :func:`log_likelihood` — exact Gaussian log-likelihood at given parameters;
    :func:`simulate` — unconditional Gaussian random fields.
Modules
    :mod:`geostat.datasets` (``names()``, ``load(name)``), :mod:`geostat.distance`
    (euclidean, chordal, great-circle), :mod:`geostat.optimize` (``MLEResult``).
Errors and warnings
    :mod:`geostat.errors`: :class:`GeostatWarning`, :class:`PerturbationWarning`,
    :class:`TrendNotIdentifiableError`, :class:`ModelFileError` and tlrcore's
    :class:`NotPositiveDefiniteError`, :class:`FactorizationError`, :class:`GeneratorError`,
    :class:`ConsumedMatrixError` (``docs/errors.md``).
"""

from geostat import datasets, distance, errors
from geostat._version import __version__ as __version__
from geostat.api import log_likelihood
from geostat.errors import (
    ConsumedMatrixError,
    FactorizationError,
    GeneratorError,
    GeostatWarning,
    ModelFileError,
    NotPositiveDefiniteError,
    PerturbationWarning,
    TrendNotIdentifiableError,
)
from geostat.estimator import SpatialGP, load
from geostat.kernels import (
    Anisotropic,
    Exponential,
    Gaussian,
    Kernel,
    Matern,
    PoweredExponential,
    SpaceTime,
)
from geostat.optimize import MLEResult
from geostat.optimize.model_choice import likelihood_ratio_test
from geostat.simulate import simulate

__all__ = [
    "SpatialGP",
    "load",
    "Kernel",
    "Exponential",
    "Matern",
    "PoweredExponential",
    "Gaussian",
    "Anisotropic",
    "SpaceTime",
    "log_likelihood",
    "likelihood_ratio_test",
    "simulate",
    "datasets",
    "distance",
    "MLEResult",
    "errors",
    "GeostatWarning",
    "PerturbationWarning",
    "NotPositiveDefiniteError",
    "FactorizationError",
    "GeneratorError",
    "ConsumedMatrixError",
    "TrendNotIdentifiableError",
    "ModelFileError",
]
