"""geostat: Gaussian-process maximum likelihood for geostatistics.

:class:`SpatialGP` is a scikit-learn estimator of the covariance
``C(h) = variance * M(h / range) + nugget * I`` with the kernels :class:`Exponential`,
:class:`Matern`, :class:`PoweredExponential`, :class:`Gaussian`, :class:`Anisotropic`
and :class:`SpaceTime`; :func:`load` reads a model written by :meth:`SpatialGP.save`;
:func:`log_likelihood` evaluates the likelihood at given parameters and
:func:`simulate` draws Gaussian random fields. Errors and warnings are defined in
:mod:`geostat.errors` (``docs/errors.md``).
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
