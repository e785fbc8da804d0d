"""What the likelihood does when a covariance matrix is not positive definite.

A covariance of a smooth kernel with a long range, or of near-duplicate sites without a
nugget, is numerically singular and its Cholesky factorization can fail. The
``on_failure`` policy decides:

``"shift"`` (default)
    Factor ``K + s I`` with the smallest ``s`` of a doubling (TLR) or tenfold (dense)
    schedule that succeeds; each factor reports ``.shift`` and
    ``.relative_perturbation = ||s I||_F / ||K||_F``. This is the likelihood of the model
    with ``s`` times the variance added to the nugget. A positive definite ``K`` is never
    changed. A perturbation at the estimate above :func:`warning_threshold` raises a
    :class:`~geostat.PerturbationWarning`.
``"compensate"``
    TLR: factor again with the compensation of the diagonal tiles of [1]_ (Sec. 5.1.1:
    the compression tail of every diagonal update added back, in full-block form, which
    perturbs less than the diagonal row-sum form; each nearly singular tile lifted by
    the compression errors of its tile row), then shift if that fails too. Exact
    factorizations treat it as ``"shift"``.
``"step"``
    The evaluation fails; the optimizer steps away, so the estimate is one where no
    change was needed.
``"raise"``
    :class:`tlrcore.NotPositiveDefiniteError` propagates out of the fit.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
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
    ``d`` the largest diagonal entry of ``K``. Smaller shifts would succeed too, but leave
    ``cond(K + s I)`` near ``1 / eps``, where the likelihood is rounding noise."""
    return [1e-10 * diagonal * 10.0**m for m in range(7)]


def warning_threshold(accuracy):
    """Relative ``||E||_F / ||K||_F`` above which the estimate warns: the compression
    accuracy for TLR (a change larger than the approximation already made), or
    :data:`EXACT_WARNING` for exact factorizations (``accuracy=None``)."""
    return EXACT_WARNING if accuracy is None else float(accuracy)
