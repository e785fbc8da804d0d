r"""The accuracy of a fit's TLR evaluations, chosen to follow the optimizer (``accuracy="auto"``).

Fisher scoring (:mod:`geostat.optimize.scoring`) compares log-likelihood values: a step of
predicted gain ``g`` is taken when it increases the value. A TLR value at accuracy ``a``
errs by some ``e(a)``; the comparison is sound while ``e(a)`` is well below ``g``, and the
estimate's distance to the exact maximum includes up to ``2 e(a)`` of the last values
compared. So each comparison is made at the coarsest accuracy (in decades, from the start
down to :data:`MOST_ACCURATE`) whose estimated error is at most

.. math:: t(g) = \max(\text{ERROR\_SHARE} \cdot g,\ \text{FINAL\_ERROR}),

the start's far from the optimum, tighter at it. A value evaluated less accurately than a
comparison needs is compared with both errors as the margin, and evaluated again only
where the step does not clear it; scoring that converges from values less accurate than
:data:`SETTLED_ERROR` estimates the score once more at ``t(0)``.

**Error model.** The TLR error shrinks about in proportion to the accuracy (the compression
error is ``a ||K||_F``, the factorization's of the same order, and the log-likelihood's
error is linear in them to first order). At the first scoring point, with accuracy
``a_0``, the change ``d = |l(10 a_0) - l(a_0)|`` is measured (from the build at ``a_0``
truncated to ``10 a_0``, :meth:`~geostat.likelihood.TLRLikelihood.keep_coarser`), and
again where a step fails; ``d`` estimates ``e(10 a_0)``, so

.. math:: e(a) \approx \text{ERROR\_FROM\_CHANGE} \cdot d \cdot a / a_0 .

With exact proportionality ``ERROR_FROM_CHANGE`` would be 1/9. The measured ratio
``d / |e(a_0)|`` was 1.6 to 93 on the cases of ``benchmarks/loglik_error.py`` (median 17;
13 on a simulated field with a nugget of 1e-5 of the variance), so 1/4 is a typical
estimate, not a bound: where it is 2.5 times too small a comparison errs by a quarter of
the gain instead of a tenth, still within it. The bound on the distance to the maximum
takes ``d`` itself (:func:`geostat.optimize.search.reported_loglik`). The error depends on
the parameters too (``K^{-1}`` magnifies it by up to ``1 / eta`` for a nugget ratio
``eta``), but scoring starts near the optimum and the fit's final check measures the
change again at the estimate.

Nothing here depends on earlier fits: the policy lives for one scoring run, and a value
depends only on the parameters and the accuracy of its evaluation.

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
#: ... and needs no error below this: the estimate's distance to the exact maximum owes
#: at most twice it to the TLR error of the last values compared.
FINAL_ERROR = 2e-3
#: Scoring converged from values of at most this error stops there; from less accurate
#: ones it estimates the score again at the accuracy of :data:`FINAL_ERROR` (the fit's
#: reported log-likelihood is held to the same 0.01).
SETTLED_ERROR = 1e-2
#: ``e(a_0) ~ ERROR_FROM_CHANGE * |l(10 a_0) - l(a_0)|`` (see the module docstring).
ERROR_FROM_CHANGE = 0.25
#: Finest accuracy the policy chooses; the coarsest is the start. Coarser values would cost
#: less (0.68 s at 1e-7 against 0.87 s at 1e-8 on 8,192 sites), but a search that then
#: stops there needs a finer evaluation for the reported log-likelihood (one more at
#: 65,536 simulated sites: 7.0 evaluation equivalents against 6.7 without).
MOST_ACCURATE = 1e-12
#: Accuracies are chosen in steps of this factor.
STEP = 10.0


class AccuracyPolicy:
    """The accuracy of an adaptive TLR likelihood's evaluations during one scoring run.

    Parameters
    ----------
    likelihood : geostat.likelihood.TLRLikelihood
        With ``adaptive`` set; :meth:`follow` changes its accuracy
        (:meth:`~geostat.likelihood.TLRLikelihood.set_accuracy`), never to coarser than it
        is at the start.

    Attributes
    ----------
    change : float or None
        The measured change ``|l(10 a_0) - l(a_0)|`` (None before :meth:`measure`).
    measured_at : float or None
        ``a_0``.
    """

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
        """Measure the change at a point whose log-likelihood at an accuracy is
        ``value_at(accuracy)`` (``-inf`` where not positive definite): between the current
        accuracy and a ten times coarser one, or where that one fails, a ten times finer
        one (whose change estimates the current error itself)."""
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
        """Set the coarsest accuracy whose error is within :meth:`tolerance` of `gain`.

        Returns
        -------
        bool
            Whether values at the previous accuracy are too inaccurate for `gain` (they
            must be evaluated again before they are compared).
        """
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
