"""What the likelihood does when a covariance matrix is not positive definite.

A covariance of a smooth kernel with a long range, or of near-duplicate sites without a
nugget, is numerically singular; its dense or TLR Cholesky factorization can fail. The
``on_failure`` policy of the likelihood (and of :class:`geostat.SpatialGP`) decides:

``"shift"`` (default)
    Factor ``K + s I`` with the smallest ``s`` from a doubling (TLR) or tenfold (dense)
    schedule that succeeds, and report it: each factor has ``.shift`` and
    ``.relative_perturbation = ||s I||_F / ||K||_F``. This is the likelihood of the model
    with ``s`` (times the variance) added to the nugget. A positive definite ``K`` is never
    changed. A perturbation at the estimate above :func:`warning_threshold`, relative to
    ``||K||_F`` or (the shift times the variance) to the variance of the data, raises a
    :class:`~geostat.PerturbationWarning`.
``"compensate"``
    TLR factorizations: after a failure, factor again with the always-on compensation of
    the diagonal tiles (``tlrcore.cholesky(..., safeguard="compensate-block+shift")``:
    the compression tail of every diagonal update added back, H2Opus sec. 5.1.1, and each
    nearly singular tile lifted by the recorded compression errors of its tile row), and
    shift only if that fails too. The tail is added in full-block form, not the paper's
    diagonal rowsum form: on the rescue cases of ``benchmarks/tlr_safeguards.py`` it
    perturbs less (``||E||_F`` 5.8-8.2 against 6.9-9.8 times the accuracy), and on a
    positive definite covariance it moves the log-likelihood about 190 times less (the
    rowsum of a tail of Frobenius norm ``tau`` reaches ``sqrt(b) tau``), at the same cost. Its perturbation is reported as the
    shift's is. On a covariance this singular nearly every tile is lifted by about the
    tolerance, so it is no gentler than ``"shift"`` on the estimates
    (``benchmarks/tlr_safeguards.py`` part 3 compares them); exact factorizations treat
    it as ``"shift"``.
``"step"``
    The evaluation fails; the optimizer treats it as a point worse than any seen and
    steps away, so the estimate is one where no change was needed.
``"raise"``
    :class:`tlrcore.NotPositiveDefiniteError` propagates out of the fit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NEGLIGIBLE", "ON_FAILURE", "check_on_failure", "dense_shifts", "warning_threshold"]

ON_FAILURE = ("shift", "compensate", "step", "raise")

#: ``sqrt(eps)``: sites closer than this fraction of the largest separation coincide to half
#: the digits of double precision, and a nugget below this fraction of the data variance
#: cannot keep the covariance of such twins regular.
NEGLIGIBLE = float(np.sqrt(np.finfo(float).eps))

#: Relative perturbation above which an exact (dense) fit warns: far above rounding
#: (``1e-10`` per entry), far below any statistically visible nugget.
EXACT_WARNING = 1e-8


def check_on_failure(value):
    """`value` if it names a policy, else ValueError with the choices."""
    if value not in ON_FAILURE:
        raise ValueError(f"on_failure must be one of {ON_FAILURE}; got {value!r}.")
    return value


def dense_shifts(diagonal):
    """Shifts to try after a dense Cholesky failure: ``1e-10 d 10^m``, ``m = 0..6``, with
    ``d`` the diagonal of the correlation matrix plus nugget ratio. Smaller shifts would
    succeed too, but leave ``cond(K + s I)`` near ``1 / eps``, where the quadratic form
    and the log-determinant are rounding noise (measured: ``-1.4e11`` against ``-687`` at
    ``s = 1e-10``, Gaussian kernel, 600 sites)."""
    return [1e-10 * diagonal * 10.0**m for m in range(7)]


def warning_threshold(accuracy):
    """Relative ``||E||_F / ||K||_F`` above which the estimate warns: the compression
    accuracy for TLR (a change larger than the approximation already made), or
    :data:`EXACT_WARNING` for exact factorizations (``accuracy=None``)."""
    return EXACT_WARNING if accuracy is None else float(accuracy)
