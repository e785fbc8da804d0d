"""Every exception and warning that geostat raises, in one place.

Misuse (a bad argument, a bad column, data that cannot identify the model) raises
:class:`ValueError` or :class:`TypeError` with the argument's name and the fix in the
message; the classes below refine them where a caller may want to catch one case.
Numerical failure raises a :class:`numpy.linalg.LinAlgError` subclass from
:mod:`tlrcore` (re-exported here). ``docs/errors.md`` lists when each is raised and
what to do.
"""

from tlrcore.errors import (
    ConsumedMatrixError,
    FactorizationError,
    GeneratorError,
    NotPositiveDefiniteError,
)

__all__ = [
    "ConsumedMatrixError",
    "FactorizationError",
    "GeneratorError",
    "GeostatWarning",
    "ModelFileError",
    "NotPositiveDefiniteError",
    "PerturbationWarning",
    "TrendNotIdentifiableError",
]


class TrendNotIdentifiableError(ValueError):
    """The trend design matrix is rank deficient on the observed sites."""


class ModelFileError(ValueError):
    """A file given as a model file (:func:`geostat.load`, ``geostat predict``) is not one
    that :meth:`SpatialGP.save` writes: not a regular file, not a model file, damaged,
    beyond the size limits of :mod:`geostat.data.model_file`, or of a newer format version.
    The message names the file, what is wrong and what to do."""


class GeostatWarning(UserWarning):
    """An estimate needs the user's attention (a parameter on a bound, no convergence)."""


class PerturbationWarning(UserWarning):
    """The covariance at the estimate was changed by a material amount to factor it (see
    :mod:`geostat.likelihood.failure`): the estimates are those of a model with a larger nugget."""
