r"""Fisher scoring of a likelihood whose derivative traces are estimated (TLR).

At each iterate, :func:`fisher_scoring` evaluates the log-likelihood and, through the same
factor, the score ``g`` and the information ``I``, with ``tr(P dK)`` and ``tr(P dK P dK)``
averaged over fixed Rademacher probes [2]_ (the first with a control variate,
:mod:`~geostat.likelihood.stochastic_fisher`). The step ``s = B^{-1} g`` of predicted gain
``1/2 g^T B^{-1} g`` has ``B = I`` [1]_ or the start's observed information, corrected
along the steps to the curvature their scores measured [4]_; at most :data:`MAX_STEP` in
each coordinate (to a zero nugget down its plateau), projected on the box [3]_ and halved
until it increases the likelihood.

With fixed probes the iteration converges to the zero of the estimated score, at an
expected loss ``1/2 tr(B^{-1} Cov(d))`` for the score's Monte Carlo error ``d``; probes
are added until it is below ``max(LOSS_TARGET, gain / 10)``. A point near the last one
estimated by a plain average (the anchor) takes the anchor's traces plus their change over
its own first probes, a control variate [5]_: near the optimum a few probes of its own
serve where the anchor needed many. Scoring converges when the predicted gain is below
``max(GAIN_TOLERANCE, NOISE_GAIN * loss)``, or after a step of predicted gain below
:data:`FINAL_GAIN` from a score within :data:`LOSS_TARGET`; the TLR accuracy follows the
gain (:class:`~geostat.optimize.accuracy.AccuracyPolicy`). A step that no halving makes
increase the likelihood, a singular information or :data:`MAX_ITERATIONS` hand over to
:func:`~geostat.optimize.polish.polish_without_gradient`. At confidence :data:`BOUND_LEVEL`
the optimum is within ``(sqrt(gain_left) + sqrt(loss_quantile))^2`` of the estimated max.

References
----------
.. [1] Guinness, J. (2021). Gaussian process learning via Fisher scoring of Vecchia's
   approximation. Statistics and Computing 31, 25. doi:10.1007/s11222-021-09999-2
.. [2] Hutchinson, M. F. (1990). A stochastic estimator of the trace of the influence
   matrix for Laplacian smoothing splines. Communications in Statistics - Simulation and
   Computation 19(2), 433-450. doi:10.1080/03610919008812866
.. [3] Bertsekas, D. P. (1982). Projected Newton methods for optimization problems with
   simple constraints. SIAM Journal on Control and Optimization 20(2), 221-246.
   doi:10.1137/0320018
.. [4] Schnabel, R. B. (1983). Quasi-Newton methods using multiple secant equations.
   Technical Report CU-CS-247-83, Department of Computer Science, University of Colorado
   at Boulder.
.. [5] Glasserman, P. (2003). Monte Carlo Methods in Financial Engineering, section 4.1
   (control variates). Springer. doi:10.1007/978-0-387-21617-1
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeResult
from scipy.stats import chi2

from geostat.optimize.accuracy import MEASURE_GAIN, UNMEASURED_INCREASE, AccuracyPolicy
from geostat.optimize.polish import polish_without_gradient
from geostat.optimize.space import PLATEAU_RATIO

__all__ = [
    "ScoreEstimate",
    "ScoringReport",
    "fisher_scoring",
    "monte_carlo_loss",
    "monte_carlo_loss_quantile",
    "natural_information",
    "score_and_information",
]

logger = logging.getLogger(__name__)

#: Expected log-likelihood lost to the Monte Carlo error of the score at the optimum. The
#: loss is a weighted chi-square whose 95 % quantile is about three times its mean for two
#: or three parameters: 1e-3 keeps most fits within 0.005 of the maximum.
LOSS_TARGET = 1e-3
#: Scoring stops when the predicted gain of the next step is below this, or below
#: :data:`NOISE_GAIN` times the Monte Carlo loss (:func:`_settled`). The predicted gain
#: includes the loss in expectation; a step taken leaves the loss, one not taken the true
#: gain: with ``NOISE_GAIN = 1`` a predicted gain above the loss is taken.
GAIN_TOLERANCE = 1e-3
NOISE_GAIN = 1.0
#: A step of smaller predicted gain, from a score within :data:`LOSS_TARGET`, is the last:
#: the gain left after it is about ``(1 - rho)^2 / rho`` times this for a curvature ``rho``
#: times the information along the step (at most half of it for ``rho`` in [0.5, 2]).
FINAL_GAIN = 0.005
#: A step that no halving makes increase the likelihood, from a score within
#: :data:`LOSS_TARGET` (or from :data:`MAX_PROBES`) predicting less than this gain, ends the
#: search where it is (the
#: derivative-free search could not gain more than the target 0.01 there).
STALL_GAIN = 0.01
#: Share of :data:`LOSS_TARGET` an average of probes aims at when the step from it is not
#: the last: the next point's estimate is that average plus the change at the new point
#: (:func:`_trace_estimates`), which needs part of the target. From an anchor at
#: :data:`MAX_PROBES`, an estimate that owes this share of its loss to the anchor is final.
ANCHOR_SHARE = 0.8
#: Below this predicted gain the next points are usually the last (a step closes most of
#: the gain): an average that anchors them aims at ``ANCHOR_SHARE * LOSS_TARGET`` at once.
ANCHOR_GAIN = 0.05
#: Most probes per replicate group.
MAX_PROBES = 1024
#: Products (the information's) are computed for further probes while the largest relative
#: Monte Carlo error of the information's diagonal is above this: that of the standard
#: errors (``geostat.optimize.search.FISHER_RTOL``), so that the report serves them.
INFORMATION_RTOL = 0.02
#: Most probes of the information's own estimate, the standard errors' where scoring's does
#: not serve them (:func:`~geostat.likelihood.stochastic_fisher.stochastic_fisher_information`).
INFORMATION_MAX_PROBES = 256
#: Iterations before handing over to the derivative-free search.
MAX_ITERATIONS = 8
#: Halvings of a step that does not increase the likelihood.
MAX_HALVINGS = 3
#: Longest step in any of the optimizer's coordinates (mostly logarithms: a factor e), as
#: GpGp limits its steps far from the optimum.
MAX_STEP = 1.0
#: Range of the information's correction along the last steps (:func:`_curvature`).
CURVATURE_MIN, CURVATURE_MAX = 0.25, 4.0
#: Smallest sine of the angle between a step and the span of newer steps for its secant to
#: correct the information (:func:`_curvature`).
SECANT_ANGLE = 0.3
#: A step is compared with a value at ``z`` of a coarser accuracy, with both errors as
#: margin, only while the margin is below this share of its predicted gain.
MARGIN_SHARE = 0.5
#: Confidence of :attr:`ScoringReport.gap_bound`.
BOUND_LEVEL = 0.95
#: Smallest share of a final step's predicted gain that the bound takes as left after it.
FINAL_GAIN_LEFT = 0.25


@dataclass
class ScoringReport:
    """What the scoring iteration leaves for the standard errors and the log.

    Attributes
    ----------
    z : ndarray
        The last point where the information was estimated: the optimum found, or the point
        before the final step (within ``sqrt(2 FINAL_GAIN) = 0.1`` standard errors).
    information, information_error : ndarray of shape (k, k), float
        Expected Fisher information over the estimated natural parameters at `z`, and the
        largest relative Monte Carlo standard error of its diagonal.
    n_information_probes : int
        Probes per replicate group the information rests on.
    n_probes : int
        Probes per replicate group the score at `z` rests on (its anchor's, where it
        took the anchor's traces).
    loss, loss_quantile : float
        Expected log-likelihood lost to the score's Monte Carlo error at `z`, and its
        :data:`BOUND_LEVEL` quantile (:func:`monte_carlo_loss_quantile`).
    params : dict
        Natural parameters at `z`.
    fell_back : bool
        Whether the derivative-free search finished the job.
    x : ndarray or None
        The optimum found by scoring (None after a fallback).
    gain_left : float
        Predicted gain left at `x` (NaN before convergence).
    tlr_change : float or None
        The change of the log-likelihood from a ten times coarser accuracy than the end's,
        measured near `x` (:meth:`~geostat.optimize.accuracy.AccuracyPolicy.nearby_change`),
        or None.
    """

    z: np.ndarray
    information: np.ndarray
    information_error: float
    n_probes: int
    loss: float
    params: dict
    loss_quantile: float = 0.0
    fell_back: bool = False
    x: np.ndarray | None = None
    gain_left: float = float("nan")
    tlr_change: float | None = None
    n_information_probes: int = 0

    @property
    def gap_bound(self):
        """Bound, at confidence :data:`BOUND_LEVEL`, on how far the optimum found lies
        below the maximum of the estimated likelihood, ``(sqrt(gain_left) +
        sqrt(loss_quantile))^2``; ``inf`` after a fallback or before convergence."""
        if self.fell_back or self.x is None or not np.isfinite(self.gain_left):
            return float("inf")
        return float((np.sqrt(self.gain_left) + np.sqrt(self.loss_quantile)) ** 2)


def _point(space, z):
    """Free values, correlation parameters, nugget ratio and noise ratio (None without
    known noise) at `z` (:meth:`~geostat.optimize.ParameterSpace.point`)."""
    free = space.to_natural(np.asarray(z, dtype=float))
    return (free, *space.point(free))


def _rows(names, derivative_names, variance, eta):
    """``M`` with ``dC_a = variance * sum_j M_aj D_j`` over ``D = (K, I, V, dR/dtheta...)``
    (`derivative_names`; ``V`` the known noise): ``"variance"``, ``"nugget"`` of
    ``C = variance R + nugget I + V``, ``"scale"``, ``"ratio"`` of ``C = scale (R + ratio I)``."""
    M = np.zeros((len(names), len(derivative_names)))
    for a, name in enumerate(names):
        if name == "variance":
            M[a, :2] = 1.0 / variance, -eta / variance
            if "noise" in derivative_names:
                M[a, derivative_names.index("noise")] = -1.0 / variance**2
        elif name == "nugget":
            M[a, 1] = 1.0 / variance
        elif name == "scale":
            M[a, 0] = 1.0 / variance
        elif name == "ratio":
            M[a, 1] = 1.0
        else:
            M[a, derivative_names.index(name)] = 1.0
    return M


@dataclass
class ScoreEstimate:
    """The score at a point with its Monte Carlo covariance, and the information.

    Attributes
    ----------
    score : ndarray of shape (k,)
    information : ndarray of shape (k, k)
        Expected Fisher information (optimizer's coordinates).
    covariance : ndarray of shape (k, k)
        Monte Carlo covariance of `score`.
    n_probes : int
        Probes the traces rest on: the point's own, or its anchor's.
    anchor_share : float
        Share of the Monte Carlo loss owed to the anchor's probes (0 for a plain average):
        probes at the point itself lower the loss by at most ``1 - anchor_share`` until
        they are as many as the anchor's.
    own_probes : int
        Probes at the point itself that the score rests on.
    """

    score: np.ndarray
    information: np.ndarray
    covariance: np.ndarray
    n_probes: int
    anchor_share: float = 0.0
    own_probes: int = 0


def score_and_information(space, z, terms, traces, anchor=None):
    """The :class:`ScoreEstimate` at `z` in the optimizer's coordinates, from the evaluation
    `terms` and its probe `traces`; profiled when the space profiles the variance.

    With the probe traces of an earlier point, `anchor`, the traces may be estimated as the
    anchor's mean plus the mean change over the probes of `traces` (:func:`_trace_estimates`);
    the estimate of the smaller Monte Carlo loss is taken.
    """
    free, _, eta, _ = _point(space, z)
    variance = terms.quadratic / terms.n_eff if space.profiled else space.natural(free)["variance"]
    names = (["scale"] if space.profiled else []) + list(space.names)
    M = _rows(names, traces.names, variance, eta)
    # score = (quad / s - t) A for the traces t, A = 1/2 M^T (and the chain rule).
    chain = np.where(space.log_scale, np.array([free[n] for n in space.names]), 1.0)
    A = (0.5 * M.T)[:, 1:] if space.profiled else 0.5 * M.T
    A = A * chain
    info = _curvature_in(space, chain, 0.5 * M @ traces.products.mean(axis=0) @ M.T)
    best, best_loss = None, np.inf
    for mean, covariance, n_probes, anchored in _trace_estimates(traces, anchor):
        covariance = A.T @ covariance @ A
        loss = monte_carlo_loss(info, covariance)
        if best is None or loss < best_loss:
            share = 0.0 if anchored is None else monte_carlo_loss(info, A.T @ anchored @ A) / loss
            best_loss = loss
            best = ScoreEstimate(
                (traces.quad / variance - mean) @ A,
                info,
                covariance,
                n_probes,
                share,
                traces.n_probes,
            )
    return best


def _trace_estimates(traces, anchor=None):
    """Estimates of the mean traces from per-probe `traces`: ``(mean, covariance, probes,
    anchored)``, the plain average, and with the traces of the same probes at an earlier
    point, `anchor` (more of them), a control variate [5]_: the anchor's mean plus the
    mean change over the first ``m`` probes, ``mean(T_a) + mean(T_m - T_a,m)``.

    Its covariance sums over the probes: ``m Cov(T_a / m_a + (T - T_a) / m)`` over the
    first ``m`` and ``(m_a - m) Cov(T_a) / m_a^2`` over the others. Close to the anchor the
    changes vary little, and the estimate is nearly as precise as the anchor's with ``m``
    probes at the new point; it is the plain average when ``m = m_a``. ``anchored`` is the
    covariance of the anchor's mean alone (None for the plain average).
    """
    T = traces.traces
    m = T.shape[0]
    yield T.mean(axis=0), _covariance(T) / m, m, None
    if anchor is None or anchor.n_probes <= m:
        return
    Ta = anchor.traces
    ma = Ta.shape[0]
    change = T - Ta[:m]
    anchored = _covariance(Ta) / ma
    covariance = m * _covariance(Ta[:m] / ma + change / m) + (ma - m) / ma * anchored
    yield Ta.mean(axis=0) + change.mean(axis=0), covariance, ma, anchored


def _covariance(samples):
    """Sample covariance of the rows of `samples`, as a matrix."""
    return np.atleast_2d(np.cov(samples, rowvar=False))


def _curvature_in(space, chain, matrix):
    """A curvature over (the scale when profiled, then) the space's natural coordinates in
    the optimizer's: the Schur complement over the scale (the curvature of the profile
    likelihood, whose score is zero at the profiled scale) and the chain rule of the log
    coordinates."""
    if space.profiled:
        matrix = matrix[1:, 1:] - np.outer(matrix[1:, 0], matrix[0, 1:]) / matrix[0, 0]
    return 0.5 * (matrix + matrix.T) * np.outer(chain, chain)


def monte_carlo_loss(information, covariance):
    """Expected log-likelihood lost at the zero of a score with Monte Carlo error of
    covariance `covariance`: ``1/2 E[d^T I^{-1} d] = 1/2 tr(I^{-1} Cov)``."""
    return 0.5 * float(np.trace(np.linalg.solve(information, covariance)))


def monte_carlo_loss_quantile(information, covariance, level=BOUND_LEVEL):
    """Quantile `level` of the loss ``1/2 d^T I^{-1} d`` for a Gaussian score error ``d`` of
    covariance `covariance`: ``sum_i lambda_i chi^2_1`` over the eigenvalues of
    ``1/2 I^{-1} Cov``, taken as ``c chi^2_k`` of the same mean and variance
    (Welch-Satterthwaite; ``c = sum lambda^2 / sum lambda``, ``k = sum lambda / c``)."""
    weights = np.clip(
        0.5 * np.linalg.eigvals(np.linalg.solve(information, covariance)).real, 0.0, None
    )
    total, squares = float(weights.sum()), float(np.sum(weights**2))
    if total <= 0.0:
        return 0.0
    return float(squares / total * chi2.ppf(level, total**2 / squares))


def natural_information(space, params, traces):
    """Expected Fisher information over ``space.estimated`` at natural `params`, and the
    largest relative Monte Carlo standard error of its diagonal."""
    eta = params["nugget"] / params["variance"]
    M = _rows(space.estimated, traces.names, params["variance"], eta)
    samples = 0.5 * np.einsum("aj,mjk,bk->mab", M, traces.products, M)
    info = samples.mean(axis=0)
    diagonal = np.abs(np.diag(info))
    error = np.diagonal(samples, axis1=1, axis2=2).std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    relative = np.divide(error, diagonal, out=np.zeros_like(error), where=diagonal > 0)
    relative = np.where((diagonal == 0) & (error > 0), np.inf, relative)
    return 0.5 * (info + info.T), float(np.max(relative, initial=0.0))


class _Probed:
    """Evaluations with probes at points of the optimizer's coordinates, counted by the
    full-data objective. The traces of the last point estimated by the plain average are
    the anchor of the next points' estimates (:func:`_trace_estimates`)."""

    def __init__(self, likelihood, space, objective, random_state, curvature=None):
        self.likelihood, self.space, self.objective = likelihood, space, objective
        self.random_state, self.prior = random_state, curvature
        self.anchor = None
        #: The probes' control variates as the first point chose them, for every point.
        self.control = None
        #: The last point's probe generator and natural parameters (:meth:`informed`); the
        #: generator holds the point's factors and derivative matrices, and is let go at the
        #: next evaluation.
        self._blocks = self._params = None

    def value(self, z, accuracy=None):
        """Log-likelihood at `z` (``-inf`` where the covariance is not positive definite),
        at the likelihood's accuracy or at `accuracy`."""
        self._blocks = self._params = None
        failures = self.objective.n_failures
        f = self.objective.evaluate(z, gradient=False, accuracy=accuracy)
        return -np.inf if self.objective.n_failures > failures else -f * self.likelihood.n_obs

    def derivatives(self, z, bounds, history=()):
        """:class:`ScoreEstimate`, curvature, step, Monte Carlo loss, predicted gain, terms and
        probe traces at `z`, the curvature corrected along the `history` (pairs of a step
        and the score before it). Probes are
        added while the loss exceeds ``max(LOSS_TARGET, gain / 10)`` (:data:`ANCHOR_SHARE`
        of it for an average that will anchor the next point), up to
        :data:`MAX_PROBES` or, from an anchor at :data:`MAX_PROBES`, until the anchor owes
        :data:`ANCHOR_SHARE` of the loss; their products only while the information errs
        by more than :data:`INFORMATION_RTOL`."""
        values, theta, eta, noise_ratio = _point(self.space, z)
        terms, blocks = self.likelihood.probe_traces(
            theta, eta, self.random_state, noise_ratio=noise_ratio, control=self.control
        )
        params = _natural_params(self.space, values, terms)
        traces = next(blocks)
        self.control = traces.controlled
        while True:
            estimate = score_and_information(self.space, z, terms, traces, self.anchor)
            score, info = estimate.score, estimate.information
            curvature = _curvature(info, score, history, self.prior)
            step, gain, loss = _projected_step(
                z, score, curvature, estimate.covariance, bounds, info
            )
            anchored = estimate.n_probes > traces.n_probes
            target = max(LOSS_TARGET, 0.1 * gain)
            if not anchored and gain >= FINAL_GAIN:
                # An average that will anchor the next point's estimates leaves them room,
                # and near the optimum that of the last ones.
                target = ANCHOR_SHARE * (LOSS_TARGET if gain < ANCHOR_GAIN else target)
            if (
                loss <= target
                or traces.n_probes >= MAX_PROBES
                # as precise as an anchor at the most probes allows
                or (estimate.n_probes >= MAX_PROBES and estimate.anchor_share >= ANCHOR_SHARE)
            ):
                break
            # The information is precise with fewer probes than the score: the further
            # blocks give traces only (one TLR solve instead of 2 + #theta).
            traces = blocks.send(
                natural_information(self.space, params, traces)[1] > INFORMATION_RTOL
            )
        self._blocks, self._params = blocks, params
        if not anchored:
            self.anchor = traces
        return estimate, curvature, step, loss, gain, terms, traces

    def informed(self, traces):
        """The last point's `traces` with products drawn on until the information errs by
        at most :data:`INFORMATION_RTOL` or rests on as many probes as the standard errors'
        own estimate would (:data:`INFORMATION_MAX_PROBES`): at the optimum it serves them.
        As they are where an evaluation came after the point's probes; the point's probe
        generator is let go either way."""
        while (
            self._blocks is not None
            and traces.n_information_probes < INFORMATION_MAX_PROBES
            and natural_information(self.space, self._params, traces)[1] > INFORMATION_RTOL
        ):
            traces = self._blocks.send(True)
        self._blocks = self._params = None
        return traces


def fisher_scoring(likelihood, space, objective, start, rng, random_state=0, curvature=None):
    """Maximize a TLR likelihood by Fisher scoring from `start` (module docstring).

    Parameters
    ----------
    likelihood : geostat.likelihood.TLRLikelihood
        With ``adaptive`` set, the accuracy of its evaluations follows the iteration.
    space : geostat.optimize.ParameterSpace
    objective : geostat.optimize.objective.Objective
        The full-data objective; it counts the evaluations.
    start : ndarray
        Starting point in the optimizer's coordinates.
    rng : numpy.random.Generator
        Draws the subsample of the derivative-free fallback.
    random_state : int, default 0
        Seeds the probes.
    curvature : ndarray of shape (k, k), optional
        An observed information near `start` (of an approximation of the likelihood),
        which the steps' curvature starts from instead of the expected information
        (:func:`_curvature`).

    Returns
    -------
    result : scipy.optimize.OptimizeResult
        ``x``, ``fun`` (negative log-likelihood per observation), ``success``, ``message``,
        ``nit``.
    subsample_evaluations : int
        Exact evaluations on a subsample by the fallback.
    report : ScoringReport or None
    """
    bounds = np.array(space.z_bounds(), dtype=float)
    probed = _Probed(likelihood, space, objective, random_state, curvature)
    policy = AccuracyPolicy(likelihood) if likelihood.adaptive else None
    z = np.clip(np.asarray(start, dtype=float), bounds[:, 0], bounds[:, 1])
    value = probed.value(z)
    if not np.isfinite(value):
        return _fall_back(
            likelihood, space, objective, z, rng, None, "the start is not positive definite"
        )
    report, history = None, []
    for iteration in range(1, MAX_ITERATIONS + 1):
        try:
            estimate, curvature, step, loss, gain, terms, traces = probed.derivatives(
                z, bounds, history
            )
        except np.linalg.LinAlgError:
            return _fall_back(
                likelihood, space, objective, z, rng, report, "the information is singular"
            )
        score = estimate.score
        report = _report(
            space, z, terms, traces, estimate, curvature, loss, _free_coordinates(z, score, bounds)
        )
        # Where scoring settles its information serves the standard errors: products are
        # drawn on now, before evaluations elsewhere let the point's derivatives go (the
        # score keeps the probes it settled with).
        informed = probed.informed(traces) if _settled(gain, loss) else None
        logger.info(
            "scoring iteration %d: loglik %.6f, predicted gain %.3g, %d probes "
            "(%d here, %d for the information; expected Monte Carlo loss %.2g)",
            iteration,
            value,
            gain,
            estimate.n_probes,
            estimate.own_probes,
            traces.n_information_probes,
            loss,
        )
        margin = 0.0
        if policy is not None and (policy.change is not None or gain < MEASURE_GAIN):
            # The values compared next at an accuracy fit for the gain; at the optimum, the
            # score again at the accuracy of the end, if it was not that accurate.
            if policy.change is None:
                policy.measure(functools.partial(probed.value, z))
            previous = policy.accuracy
            converged = _settled(gain, loss)
            if not (converged and policy.settled()) and policy.follow(gain, step=not converged):
                if converged:
                    value = probed.value(z)
                    continue
                # The value at z errs by more than this comparison allows: a step that clears
                # the errors of both values needs no new one. A step not expected to clear
                # them (they exceed half its predicted gain) has z evaluated again first, so
                # that the point accepted is the last one evaluated and its factors serve
                # the estimate.
                margin = policy.error(previous) + policy.error()
                if margin >= MARGIN_SHARE * gain:
                    value, margin = probed.value(z), 0.0
        if _settled(gain, loss):
            report = _report(
                space,
                z,
                terms,
                informed,
                estimate,
                curvature,
                loss,
                _free_coordinates(z, score, bounds),
            )
            return _converged(
                likelihood, z, value, iteration, f"predicted gain {gain:.2g}", report, gain, policy
            )
        # as precise as the probes make it: within the target, or at the most probes
        precise = loss <= LOSS_TARGET or estimate.n_probes >= MAX_PROBES
        final = gain < FINAL_GAIN and precise
        # A final step of gain below STALL_GAIN is tried once: what it could still gain is
        # small, and stays in the bound.
        halvings = 0 if final and gain < STALL_GAIN else MAX_HALVINGS
        trial, trial_value = _line_search(
            probed, z, value + margin, step, bounds, 0 if margin else halvings
        )
        if margin and trial_value <= value + margin:
            value, margin = probed.value(z), 0.0
            trial, trial_value = _line_search(
                probed, z, value, step, bounds, halvings, first=trial_value
            )
        if trial_value <= value and halvings and policy is not None:
            # Noise or curvature? Measure the TLR error here; where it is too large for the
            # gain, evaluate more accurately and try again.
            policy.measure(functools.partial(probed.value, z))
            if policy.follow(gain):
                value = probed.value(z)
                trial, trial_value = _line_search(probed, z, value, step, bounds, MAX_HALVINGS)
        measured_at = None
        if (
            policy is not None
            and policy.change is None
            and 0 < trial_value - value <= UNMEASURED_INCREASE
        ):
            # An increase this small may be the TLR error's: measure it at the trial (whose
            # factors are the likelihood's) and, where it is too large for the comparison,
            # compare again more accurately.
            measured_at = trial
            policy.measure(functools.partial(probed.value, trial))
            if policy.follow(gain):
                value = probed.value(z)
                trial, trial_value = _line_search(probed, z, value, step, bounds, MAX_HALVINGS)
        increase = trial_value - value
        accepted = increase > 0
        if accepted:
            logger.info("scoring step: loglik %+.3g (predicted %+.3g)", increase, gain)
            if policy is not None and not np.array_equal(trial, measured_at):
                policy.stepped(gain)
            history.append((trial - z, score))
            z, value = trial, trial_value
        if final and not accepted and gain < STALL_GAIN:
            return _converged(
                likelihood,
                z,
                value,
                iteration,
                f"no increase from a final step of predicted gain {gain:.2g}",
                report,
                gain,
                policy,
            )
        if final and accepted and not margin and policy is not None:
            margin = policy.comparison_error(gain)
        left = _gain_left(increase, gain, margin) if final and accepted else None
        if left is not None:
            return _converged(
                likelihood,
                z,
                value,
                iteration,
                f"final step of predicted gain {gain:.2g}",
                report,
                left,
                policy,
            )
        if not accepted and gain < STALL_GAIN and precise:
            return _converged(
                likelihood,
                z,
                value,
                iteration,
                f"no step increased the likelihood from a predicted gain of {gain:.2g}",
                report,
                gain,
                policy,
            )
        if not accepted:
            return _fall_back(
                likelihood, space, objective, z, rng, report, "no step increased the likelihood"
            )
    return _fall_back(
        likelihood,
        space,
        objective,
        z,
        rng,
        report,
        f"scoring did not converge in {MAX_ITERATIONS} iterations",
    )


def _settled(gain, loss):
    """Whether predicted gain `gain` is below :data:`GAIN_TOLERANCE` or :data:`NOISE_GAIN`
    times the Monte Carlo loss `loss` (which the predicted gain includes in expectation)."""
    return gain < max(GAIN_TOLERANCE, NOISE_GAIN * loss)


def _gain_left(increase, gain, margin=0.0):
    """The gain left after a final step of predicted gain `gain` that increased the
    log-likelihood by `increase` (within `margin`); None where that shows a curvature below
    :data:`CURVATURE_MIN` times the information. For a curvature ``rho`` times the information
    the increase is ``2 - rho`` and the gain left ``(1 - rho)^2 / rho`` times the prediction:
    the largest over the ``rho`` the increase allows, at least :data:`FINAL_GAIN_LEFT`."""
    high = min(2.0 - (increase - margin) / gain, 2.0)
    if high < CURVATURE_MIN:
        return None
    low = max(2.0 - (increase + margin) / gain, CURVATURE_MIN)
    return gain * max(FINAL_GAIN_LEFT, *((1.0 - rho) ** 2 / rho for rho in (low, high)))


def _line_search(probed, z, value, step, bounds, halvings, first=None):
    """The step from `z` (of log-likelihood `value`), at most :data:`MAX_STEP` long in every
    coordinate, projected on the box and halved up to `halvings` times until it increases
    the log-likelihood: the last point tried and its value (`first`, where given, is the
    value of the whole step, already evaluated)."""
    longest = float(np.max(np.abs(step), initial=0.0))
    if longest > MAX_STEP:
        step = step * (MAX_STEP / longest)
    step = _down_the_plateau(probed.space, z, step, bounds)
    for _ in range(halvings + 1):
        trial = np.clip(z + step, bounds[:, 0], bounds[:, 1])
        trial_value = probed.value(trial) if first is None else first
        first = None
        if trial_value > value:
            break
        step = 0.5 * step
    return trial, trial_value


def _down_the_plateau(space, z, step, bounds):
    """`step`, or where it lowers a nugget-to-variance ratio already below
    ``PLATEAU_RATIO`` in a space whose ratio floor is a zero nugget
    (:meth:`~geostat.optimize.ParameterSpace.with_zero_floor`), the same step with the ratio
    taken to its floor: the log-likelihood is about linear in a ratio that small, so it
    rises all the way to zero where it rises at all, and steps of :data:`MAX_STEP` in the
    log ratio would creep there one evaluation per factor e."""
    if not space.zero_floor:
        return step
    r = space.names.index("ratio")
    if step[r] < 0 and z[r] <= np.log(PLATEAU_RATIO):
        step = step.copy()
        step[r] = bounds[r, 0] - z[r]
    return step


def _curvature(info, score, history, prior=None):
    """The information `info`, or the observed information `prior` within bounds of it
    (:func:`_within`), corrected in the span of the `history`'s steps to the curvature
    their scores measured (a multi-secant quasi-Newton update, Schnabel 1983).

    A step ``s_i`` between points of scores ``g_i`` and ``g_{i+1}`` (`score` for the last)
    measures ``y_i = g_i - g_{i+1} ~ H s_i``. With ``I`` the starting curvature, ``S`` the
    newest steps independent in its metric (:func:`_independent`), ``G = S^T I S`` and
    ``R'`` the symmetric part of ``S^T Y`` within bounds of ``G``,
    ``B = I + I S G^{-1} (R' - G) G^{-1} S^T I``, so that ``S^T B S = R'``.
    """
    if prior is not None:
        root, values = _within(np.linalg.cholesky(info), prior)
        info = root @ np.diag(values) @ root.T
    if not history:
        return info
    befores = [before for _, before in history]
    changes = (b - a for b, a in zip(befores, [*befores[1:], score], strict=True))
    pairs = list(zip((step for step, _ in history), changes, strict=True))
    steps, secants = _independent(info, pairs[::-1])
    if steps.size == 0:
        return info
    gram = steps.T @ info @ steps
    root, values = _within(np.linalg.cholesky(gram), steps.T @ secants)
    change = root @ np.diag(values - 1.0) @ root.T
    across = np.linalg.solve(gram, steps.T @ info)
    return info + across.T @ change @ across


def _within(factor, matrix):
    """``(F V, lambda)`` with ``F V diag(lambda) V^T F^T`` the symmetric part of `matrix` with
    its eigenvalues relative to ``F F^T`` (`factor` lower triangular), ``lambda``, clipped to
    [:data:`CURVATURE_MIN`, :data:`CURVATURE_MAX`] and the non-positive ones set to 1."""
    relative = np.linalg.solve(factor, np.linalg.solve(factor, 0.5 * (matrix + matrix.T)).T)
    values, vectors = np.linalg.eigh(0.5 * (relative + relative.T))
    values = np.where(values > 0.0, np.clip(values, CURVATURE_MIN, CURVATURE_MAX), 1.0)
    return factor @ vectors, values


def _independent(info, pairs):
    """The steps and secants of `pairs` (newest first) that are independent in the metric
    of `info`: each at least :data:`SECANT_ANGLE` (its sine) from the span of those
    kept before it, at most one per coordinate; as columns."""
    kept, basis = [], []
    for step, secant in pairs:
        norm = np.sqrt(max(float(step @ info @ step), 0.0))
        if norm == 0.0 or len(kept) == len(step):
            continue
        rest = step / norm - sum(float(b @ info @ (step / norm)) * b for b in basis)
        length = np.sqrt(max(float(rest @ info @ rest), 0.0))
        if length >= SECANT_ANGLE:
            kept.append((step, secant))
            basis.append(rest / length)
    return np.array([k[0] for k in kept]).T, np.array([k[1] for k in kept]).T


def _projected_step(z, score, curvature, covariance, bounds, information=None):
    """The step ``B^{-1} g`` for the `curvature` ``B`` over the free coordinates (zero in
    the others), its predicted gain ``1/2 g^T B^{-1} g`` and Monte Carlo loss: the larger
    of those for ``B`` and the expected `information` (``B`` may err high along directions
    no step measured)."""
    free = _free_coordinates(z, score, bounds)
    step = np.zeros_like(score)
    if not free.any():
        return step, 0.0, 0.0
    pair = np.ix_(free, free)
    step[free] = np.linalg.solve(curvature[pair], score[free])
    loss = max(
        monte_carlo_loss(metric[pair], covariance[pair])
        for metric in (curvature, information)
        if metric is not None
    )
    return step, 0.5 * float(score[free] @ step[free]), loss


def _free_coordinates(z, score, bounds):
    """The coordinates a step may move: all but those on a bound whose score points out of
    the box (they stay there, as in a projected Newton method)."""
    at_low = (z <= bounds[:, 0] + 1e-10 * np.maximum(1.0, np.abs(bounds[:, 0]))) & (score < 0)
    at_high = (z >= bounds[:, 1] - 1e-10 * np.maximum(1.0, np.abs(bounds[:, 1]))) & (score > 0)
    return ~(at_low | at_high)


def _converged(likelihood, z, value, iteration, how, report, gain_left, policy):
    """:func:`fisher_scoring`'s answer when it converged at `z`, `gain_left` the predicted
    gain left there (`policy`: the accuracy policy, which estimates the value's error)."""
    report.x = np.array(z)
    report.gain_left = float(gain_left)
    if policy is not None:
        report.tlr_change = policy.nearby_change()
    result = OptimizeResult(
        x=z,
        fun=-value / likelihood.n_obs,
        success=True,
        nit=iteration,
        message=f"Fisher scoring converged ({how})",
    )
    return result, 0, report


def _natural_params(space, free, terms):
    """Natural parameters at the free values `free` evaluated as `terms`."""
    return space.natural(
        free, profiled_variance=terms.quadratic / terms.n_eff if space.profiled else None
    )


def _report(space, z, terms, traces, estimate, curvature, loss, free):
    """The information over the estimated natural parameters at `z` and the Monte Carlo
    loss's quantile over the `free` coordinates (the larger for the `curvature` and the
    `estimate`'s information, as :func:`_projected_step`), for the report (`estimate` and
    `curvature` in the optimizer's coordinates)."""
    params = _natural_params(space, _point(space, z)[0], terms)
    info, error = natural_information(space, params, traces)
    pair = np.ix_(free, free)
    covariance = estimate.covariance[pair]
    quantile = (
        max(
            monte_carlo_loss_quantile(metric[pair], covariance)
            for metric in (curvature, estimate.information)
        )
        if free.any()
        else 0.0
    )
    return ScoringReport(
        np.array(z),
        info,
        error,
        estimate.n_probes,
        loss,
        params,
        loss_quantile=quantile,
        n_information_probes=traces.n_information_probes,
    )


def _fall_back(likelihood, space, objective, z, rng, report, reason):
    """The derivative-free search from `z` (no subsample refinement)."""
    logger.info("Fisher scoring hands over to the derivative-free search: %s", reason)
    result, subsample = polish_without_gradient(likelihood, space, objective, z, rng, refine=False)
    result.message = f"{reason}; derivative-free search: {result.message}"
    if report is not None:
        report.fell_back = True
    return result, subsample, report
