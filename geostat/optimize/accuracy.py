r"""The accuracy of a fit's TLR evaluations, chosen to follow the optimizer (``accuracy="auto"``).

Fisher scoring (:mod:`geostat.optimize.scoring`) takes a step of predicted gain ``g`` when
it increases the log-likelihood. A TLR value at accuracy ``a`` errs by some ``e(a)``, so
each comparison is made at the coarsest accuracy (in decades, from the start down to
:data:`MOST_ACCURATE`) with ``e(a) <= max(ERROR_SHARE * g, FINAL_ERROR)``; a value less
accurate than that is compared with both errors as margin, and evaluated again only where
the step does not clear it. The error is taken proportional to the accuracy (the
compression error is ``a ||K||_F`` [1]_, the log-likelihood's linear in it to first
order): from the change ``d = |l(10 a_0) - l(a_0)|``, measured at the first scoring point
and where a step fails (the tiles at ``a_0`` truncated,
:meth:`~geostat.likelihood.TLRLikelihood.keep_coarser`),
``e(a) ~ ERROR_FROM_CHANGE * d * a / a_0``, with ``ERROR_FROM_CHANGE = 1/9`` under exact
proportionality. The value 1/4 is typical, not a bound: an error 2.5 times larger makes a
comparison err by a quarter of the gain.

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

__all__ = ["AccuracyPolicy"]

logger = logging.getLogger(__name__)

#: A value is compared with the error it may have at most this share of the predicted gain.
ERROR_SHARE = 0.1
#: ... and needs no error below this (the estimate's distance to the exact maximum owes at
#: most twice it to the TLR error of the last values compared).
FINAL_ERROR = 2e-3
#: Scoring converged from values of at most this error stops there; from less accurate
#: ones it estimates the score again at the accuracy of :data:`FINAL_ERROR` (the fit's
#: reported log-likelihood is held to the same 0.01).
SETTLED_ERROR = 1e-2
#: ``e(a_0) ~ ERROR_FROM_CHANGE * |l(10 a_0) - l(a_0)|`` (see the module docstring).
ERROR_FROM_CHANGE = 0.25
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

    def settled(self):
        """Whether values at the current accuracy are accurate enough to stop at
        (:data:`SETTLED_ERROR`)."""
        return self.error() <= SETTLED_ERROR

    @staticmethod
    def tolerance(gain):
        """The error a value may have when compared for a predicted gain `gain`."""
        return max(ERROR_SHARE * gain, FINAL_ERROR)

    def follow(self, gain):
        """Set the coarsest accuracy whose error is within :meth:`tolerance` of `gain`; return
        whether values at the previous accuracy are too inaccurate for `gain` (to evaluate again
        before they are compared)."""
        tolerance = self.tolerance(gain)
        stale = self.error() > tolerance
        accuracy = self.accuracy
        while accuracy / STEP >= MOST_ACCURATE * (1 - 1e-9) and self.error(accuracy) > tolerance:
            accuracy /= STEP
        while (
            accuracy * STEP <= self.coarsest * (1 + 1e-9)
            and self.error(accuracy * STEP) <= tolerance
        ):
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
