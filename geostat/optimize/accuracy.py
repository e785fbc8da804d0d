r"""The accuracy of a fit's TLR evaluations, chosen to follow the optimizer (``accuracy="auto"``).

Fisher scoring (:mod:`geostat.optimize.scoring`) takes a step of predicted gain ``g`` when
it increases the log-likelihood. A TLR value at accuracy ``a`` errs by some ``e(a)``, so
each comparison is made at the coarsest accuracy (in decades, from the start down to
:data:`MOST_ACCURATE`) with ``e(a) <= max(ERROR_SHARE * g, FINAL_ERROR)``; a value less
accurate than that is compared with both errors as margin, and evaluated again only where
the step does not clear it. The error is taken proportional to the accuracy (the
compression error is ``a ||K||_F`` [1]_, the log-likelihood's linear in it to first
order): from the change ``d = |l(10 a_0) - l(a_0)|``, measured at the first scoring point
of predicted gain below :data:`MEASURE_GAIN`, or earlier where a step's comparison needs it
(the tiles at ``a_0`` truncated, :meth:`~geostat.likelihood.TLRLikelihood.keep_coarser`),
``e(a) ~ ERROR_FROM_CHANGE * d * a / a_0``, with ``ERROR_FROM_CHANGE = 1/9`` under exact
proportionality. The value 1/4 is typical, not a bound: an error 2.5 times larger makes a
comparison err by a quarter of the gain.

Two values at one accuracy a short step apart err alike: the compression of nearby
covariances leaves nearly the same error, and their difference errs by a small share of
it. On a real field with a nugget of 2e-5 of the variance, points 0.1 standard errors
apart erred by 0.0026 at accuracy 1e-8 and their differences by at most 5 % of that. A
step of predicted gain ``g`` is about ``sqrt(2 g)`` standard errors long, and its
comparison is taken to err by ``min(1, sqrt(2 g)) e(a)`` (:meth:`AccuracyPolicy.comparison_error`),
twice the share measured (points 0.24 standard errors apart: a tenth; 2.4 apart: one and
a half times the error, where the share is capped at 1 as for a value alone). For the same
reason a change ``d`` measured within :data:`NEAR_DISTANCE` of the estimate serves as the
change at the estimate, an estimate of the error as the change at the estimate is: the
changes differ more than the errors (0.0034 and 0.0015 at points 0.15 standard errors apart
on a simulated field of 65,536 sites), and the change overstates the error (0.0097 against
0.0026 on the real field above). The estimate and the exact maximum are such a pair:
:func:`gap_bound` adds their values' difference, not twice a value's error, to scoring's
bound.

References
----------
.. [1] Abdulah, S., Ltaief, H., Sun, Y., Genton, M. G., and Keyes, D. E. (2018).
   Parallel approximation of the maximum likelihood estimation for the prediction of
   large-scale geostatistics simulations. IEEE CLUSTER, 98-108.
   doi:10.1109/CLUSTER.2018.00089
"""

from __future__ import annotations

import logging
import math

import numpy as np

from geostat.errors import NotPositiveDefiniteError

__all__ = ["AccuracyPolicy", "gap_bound"]

logger = logging.getLogger(__name__)

#: A value is compared with the error it may have at most this share of the predicted gain.
ERROR_SHARE = 0.1
#: ... and needs no error below this.
FINAL_ERROR = 2e-3
#: Scoring converged from values of at most this error stops there; from less accurate
#: ones it estimates the score again at the accuracy of :data:`FINAL_ERROR` (the fit's
#: reported log-likelihood is held to the same 0.01).
SETTLED_ERROR = 1e-2
#: ``e(a_0) ~ ERROR_FROM_CHANGE * |l(10 a_0) - l(a_0)|`` (see the module docstring).
ERROR_FROM_CHANGE = 0.25
#: The error is measured before a step where the predicted gain first falls below this,
#: ``sqrt(2 * MEASURE_GAIN) = NEAR_DISTANCE`` standard errors: when that step is the last,
#: the measurement is near the estimate and serves its bound (:func:`gap_bound`) without a
#: measurement of its own. A step of larger predicted gain is compared at the start's
#: accuracy unmeasured while it increases the log-likelihood by more than
#: :data:`UNMEASURED_INCREASE`; the error is measured at the step's point when it increases
#: it by less, and at the step's origin when it does not increase it.
MEASURE_GAIN = 0.02
#: An increase above this clears an unmeasured comparison: twice the largest error seen at
#: the default accuracy (0.05, on a real field with a nugget of 2e-5 of the variance), which
#: bounds the error of a difference (:meth:`AccuracyPolicy.comparison_error`).
UNMEASURED_INCREASE = 0.1
#: A change measured at most this far (in standard errors, the steps taken since) from
#: the estimate is that of the estimate's value (module docstring).
NEAR_DISTANCE = 0.2
#: Finest accuracy the policy chooses; the coarsest is the start.
MOST_ACCURATE = 1e-12
#: Accuracies are chosen in steps of this factor.
STEP = 10.0


class AccuracyPolicy:
    """The accuracy of an adaptive TLR `likelihood`'s evaluations during one scoring run:
    :meth:`follow` sets it (never coarser than at the start). Attributes ``change`` and
    ``measured_at`` are ``d`` and ``a_0`` of the module docstring (None before
    :meth:`measure`)."""

    def __init__(self, likelihood):
        self.likelihood = likelihood
        self.coarsest = likelihood.accuracy
        self.change = None
        self.measured_at = None
        self.moved = 0.0

    @property
    def accuracy(self):
        """The likelihood's accuracy in effect."""
        return self.likelihood.accuracy

    def measure(self, value_at):
        """Measure the change ``d`` at a point of log-likelihood ``value_at(accuracy)``
        (``-inf`` where not positive definite) between the current accuracy and a ten
        times coarser one, or where that fails, a ten times finer one (divided by
        :data:`ERROR_FROM_CHANGE`: that change estimates the current error)."""
        accuracy = self.accuracy
        value = value_at(accuracy)
        try:
            coarser = value_at(accuracy * STEP)
        except NotPositiveDefiniteError:  # on_failure="raise": only the finer one then
            coarser = -math.inf
        self.moved = 0.0
        if np.isfinite(coarser):
            self.change, self.measured_at = abs(coarser - value), accuracy
        else:
            self.change, self.measured_at = (
                abs(value_at(accuracy / STEP) - value) / ERROR_FROM_CHANGE,
                accuracy,
            )
        logger.info(
            "TLR error model: change %.2g from accuracy %.0e to %.0e, estimated error %.2g at %.0e",
            self.change,
            self.measured_at * STEP,
            self.measured_at,
            self.error(),
            accuracy,
        )

    def error(self, accuracy=None):
        """Estimated error of a value at `accuracy` (default the current one); ``inf``
        before :meth:`measure`."""
        if self.change is None:
            return math.inf
        return (
            ERROR_FROM_CHANGE
            * self.change
            * (self.accuracy if accuracy is None else accuracy)
            / self.measured_at
        )

    def stepped(self, gain):
        """Record a step of predicted gain `gain` taken since the measurement (about
        ``sqrt(2 gain)`` standard errors long)."""
        self.moved += math.sqrt(2.0 * max(gain, 0.0))

    def nearby_change(self):
        """The change measured at the current accuracy and at most :data:`NEAR_DISTANCE`
        from the current point, or None."""
        if self.change is None or self.moved > NEAR_DISTANCE:
            return None
        return self.change if math.isclose(self.measured_at, self.accuracy) else None

    def comparison_error(self, gain, accuracy=None):
        """Estimated error of the difference of two values at `accuracy` (default the
        current one) a step of predicted gain `gain` apart: ``min(1, sqrt(2 gain))`` times
        :meth:`error` (module docstring)."""
        return _difference_share(gain) * self.error(accuracy)

    def settled(self):
        """Whether values at the current accuracy are accurate enough to stop at
        (:data:`SETTLED_ERROR`)."""
        return self.error() <= SETTLED_ERROR

    @staticmethod
    def tolerance(gain):
        """The error a value may have when compared for a predicted gain `gain`."""
        return max(ERROR_SHARE * gain, FINAL_ERROR)

    def follow(self, gain, step=True):
        """Set the coarsest accuracy whose error is within :meth:`tolerance` of `gain`; return
        whether values at the previous accuracy are too inaccurate for `gain` (to evaluate again
        before they are compared). With `step` the error is that of comparing the values
        of a step of predicted gain `gain` (:meth:`comparison_error`), without it that of a
        value."""

        def error(accuracy):
            return self.comparison_error(gain, accuracy) if step else self.error(accuracy)

        tolerance = self.tolerance(gain)
        stale = error(self.accuracy) > tolerance
        accuracy = self.accuracy
        while accuracy / STEP >= MOST_ACCURATE * (1 - 1e-9) and error(accuracy) > tolerance:
            accuracy /= STEP
        while accuracy * STEP <= self.coarsest * (1 + 1e-9) and error(accuracy * STEP) <= tolerance:
            accuracy *= STEP
        self._set(accuracy)
        return stale

    def _set(self, accuracy):
        accuracy = float(f"{accuracy:.6e}")  # 1e-8 * 10 is 1.0000000000000001e-07
        if accuracy != self.accuracy:
            logger.info(
                "TLR accuracy %.0e -> %.0e (estimated error %.2g -> %.2g)",
                self.accuracy,
                accuracy,
                self.error(),
                self.error(accuracy),
            )
            self.likelihood.set_accuracy(accuracy)


def gap_bound(scoring_gap, error):
    r"""Bound on how far the exact log-likelihood ``l`` at the estimate ``x`` lies below
    its maximum ``x*``, from scoring's bound ``S`` (`scoring_gap`) on that of the TLR
    log-likelihood ``l~ = l + e`` and the `error` ``E`` of TLR values near ``x``.

    ``l(x*) - l(x) <= [l~(x*) - l~(x)] + |e(x*) - e(x)|``: the first term is at most
    ``S``, the second the error of comparing two values a gap ``G`` apart,
    ``min(1, sqrt(2 G)) E`` (module docstring). So ``G <= S + min(1, sqrt(2 G)) E``, whose
    largest solution is ``u^2 / 2`` with ``u = E + sqrt(E^2 + 2 S)`` where ``u <= 1``, else
    ``S + E``.
    """
    u = error + math.sqrt(error**2 + 2.0 * scoring_gap)
    return 0.5 * u**2 if u <= 1.0 else scoring_gap + error


def _difference_share(gain):
    """The share of a value's TLR error by which two values a step of predicted gain
    `gain` apart differ: ``min(1, sqrt(2 gain))``, the step's length in standard errors."""
    return min(1.0, math.sqrt(2.0 * max(gain, 0.0)))
