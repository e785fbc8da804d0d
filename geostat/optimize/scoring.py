r"""Fisher scoring through a likelihood whose derivative traces are estimated (TLR).

Each iteration evaluates the likelihood at ``z`` (one TLR factorization) and, through
the same factor, the score ``g`` and the expected Fisher information ``I`` in the
optimizer's coordinates (:meth:`geostat.likelihood.TLRLikelihood.probe_traces`): the
quadratic forms exactly, the traces ``tr(P dK)`` and ``tr(P dK P dK)`` as averages over
fixed Rademacher probes. With the variance profiled out, ``I`` is the Schur complement of
the full information over (variance, free coordinates), the expected curvature of the
profile likelihood. The step is ``s = B^{-1} g`` (at most :data:`MAX_STEP` long in each
coordinate) for the information ``B = I`` at the first point (as GpGp takes it [1]_) and,
after steps, the information corrected in their span to the curvature their scores
measured (:func:`_curvature`): on real data, where the model is an approximation, the
curvature of the log-likelihood can differ from the expected one by a factor of three
either way, and ``I`` alone then misjudges both the step and the Monte Carlo loss. The
step is accepted when the log-likelihood increases, halved otherwise; the iteration stops
when the predicted gain ``1/2 g^T B^{-1} g`` falls below :data:`GAIN_TOLERANCE` (or twice
the Monte Carlo loss, which it includes in expectation), or after a step of predicted gain
below :data:`FINAL_GAIN` taken from a score within the Monte Carlo target (the gain
it leaves follows from its increase against the prediction, :func:`_gain_left`; where the
increase shows a curvature far below ``I``, as for a nugget of 1e-6 of the variance, the
iteration goes on).

**Monte Carlo error.** The same probes serve every iteration (common random numbers), so
the estimated score is a smooth function of ``z`` and the iteration converges to its
zero, which is off the true optimum by about ``B^{-1} d`` for the score error ``d``; the
log-likelihood lost there is ``1/2 d^T B^{-1} d``, whose expectation
``1/2 tr(B^{-1} Cov(d))`` is estimated from the spread of the per-probe scores. Probes
are added in blocks until it is below :data:`LOSS_TARGET` or a tenth of the predicted
gain (far from the optimum a rough score makes as good a step), at most
:data:`MAX_PROBES`; the probes of one iteration include those of the previous ones. For
``p`` coordinates it is about ``p / (2 m)`` with ``m`` probes (the Hutchinson variance of
``tr(P dK)`` is about ``4 I``), so the target takes a few hundred probes. The information
needs far fewer (its relative error is about ``sqrt(2 / (m r))`` for an effective rank
``r`` of the whitened derivatives): once its diagonal is within :data:`INFORMATION_RTOL`,
further blocks give the traces only: a block of 64 then costs one backward TLR solve and
one product with each compressed ``dR``, without the ``1 + #theta`` forward solves of the
products.

**Accuracy.** For a likelihood with ``accuracy="auto"`` every comparison is made at an
accuracy whose TLR error is well below the predicted gain
(:class:`geostat.optimize.accuracy.AccuracyPolicy`): the start's far from the optimum,
tighter near it. A step that no halving makes increase the likelihood is first blamed on that error:
it is measured again at the current point and, where it is larger than the gain allows,
the point is evaluated more accurately and the step tried again.

**Bounds.** The steps are projected on the box, and a coordinate on a bound whose score
points out of the box stays there (a projected Newton method [3]_): a nugget whose
maximum is zero ends on its bound by scoring, and the gain and loss are those of the
other coordinates.

**Fallback.** A step that cannot be made to increase the likelihood by halving (and not
for a TLR error), a singular information or the iteration limit hands the best point to
the derivative-free search (:func:`geostat.optimize.polish.polish_without_gradient`,
without its subsample refinement).

**Distance to the maximum.** At convergence the report bounds, at confidence
:data:`BOUND_LEVEL`, how far the scoring optimum's log-likelihood lies below the maximum
of the likelihood whose score was estimated: the gain predicted at the last point, or after
a final step the gain it left (``(1 - rho)^2 / rho`` of the prediction for the curvature
``rho`` times the information that its increase shows, at least a quarter of it), combined
with the Monte Carlo loss's quantile as score errors combine, ``(sqrt(gain) +
sqrt(loss))^2`` (:func:`monte_carlo_loss_quantile`).
:func:`geostat.optimize.search.maximize_likelihood` adds the TLR error of the values.

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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeResult
from scipy.stats import chi2

from geostat.optimize.accuracy import AccuracyPolicy
from geostat.optimize.polish import polish_without_gradient

__all__ = [
    "ScoringReport",
    "fisher_scoring",
    "monte_carlo_loss",
    "monte_carlo_loss_quantile",
    "natural_information",
    "score_and_information",
]

logger = logging.getLogger(__name__)

#: Expected log-likelihood lost to the Monte Carlo error of the score at the optimum.
LOSS_TARGET = 2e-3
#: Scoring stops when the predicted gain of the next step is below this, or below
#: :data:`NOISE_GAIN` times the Monte Carlo loss (:func:`_settled`).
GAIN_TOLERANCE = 1e-3
NOISE_GAIN = 2.0
#: A step of smaller predicted gain, from a score within :data:`LOSS_TARGET`, is the last:
#: the gain left after it is about ``(1 - rho)^2 / rho`` times this for a curvature ``rho``
#: times the information along the step (0.1 of it for ``rho`` in [0.75, 1.3]).
FINAL_GAIN = 0.02
#: A step that no halving makes increase the likelihood, from a precise score (loss at most
#: :data:`LOSS_TARGET`) predicting less than this gain, ends the search where it is: the
#: gain left is within a few times the Monte Carlo loss (e.g. a start already at the optimum,
#: from a subsample that is the whole data), which the derivative-free search cannot improve
#: on by more than the target 0.01.
STALL_GAIN = 0.01
#: Most probes per replicate group.
MAX_PROBES = 1024
#: Products (the information's) are computed for further probes while the largest relative
#: Monte Carlo error of the information's diagonal is above this: that of the standard
#: errors (``geostat.optimize.search.FISHER_RTOL``), so that the report serves them.
INFORMATION_RTOL = 0.02
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
        The last point where the information was estimated: the optimum found, or the
        point before the final step (within ``sqrt(2 FINAL_GAIN) = 0.2`` standard errors
        of it).
    information : ndarray of shape (k, k)
        Expected Fisher information over the space's estimated natural parameters at `z`.
    information_error : float
        Largest relative Monte Carlo standard error of its diagonal.
    n_probes : int
        Probes per replicate group.
    loss : float
        Expected log-likelihood lost to the score's Monte Carlo error at `z`.
    params : dict
        Natural parameters at `z`.
    fell_back : bool
        Whether the derivative-free search finished the job.
    x : ndarray or None
        The optimum found by scoring (None after a fallback).
    loss_quantile : float
        The :data:`BOUND_LEVEL` quantile of the log-likelihood lost to the score's Monte
        Carlo error at `z` (:func:`monte_carlo_loss_quantile`).
    gain_left : float
        Predicted gain left at the optimum found: the gain predicted at `z` where no step
        was taken from it, what a final step left of it after (:func:`_gain_left`; NaN before
        convergence).
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
    (`derivative_names`; ``V``, the known noise, only where it has ``"noise"``).

    ``"variance"`` and ``"nugget"`` are those of ``C = variance R + nugget I + V``, with
    ``R = K - eta I - V / variance``; ``"scale"`` and ``"ratio"`` those of
    ``C = scale (R + ratio I)``.
    """
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


def score_and_information(space, z, terms, traces):
    """Score, information and their Monte Carlo spread in the optimizer's coordinates.

    Parameters
    ----------
    space : geostat.optimize.ParameterSpace
    z : ndarray
    terms : geostat.likelihood.terms.Terms
        The evaluation at `z`.
    traces : geostat.likelihood.stochastic_fisher.ProbeTraces
        Its probes.

    Returns
    -------
    score : ndarray of shape (p,)
        Derivative of the log-likelihood (profiled when the space profiles the variance).
    information : ndarray of shape (p, p)
    covariance : ndarray of shape (p, p)
        Monte Carlo covariance of `score`, from the spread of the per-probe scores.
    """
    free, _, eta, _ = _point(space, z)
    variance = terms.quadratic / terms.n_eff if space.profiled else space.natural(free)["variance"]
    names = (["scale"] if space.profiled else []) + list(space.names)
    M = _rows(names, traces.names, variance, eta)
    # Per probe: 1/2 M (alpha^T D alpha / s - z^T G z), and the mean information 1/2 M T M^T.
    samples = 0.5 * (traces.quad / variance - traces.traces) @ M.T
    if space.profiled:
        samples = samples[:, 1:]
    chain = np.where(space.log_scale, np.array([free[n] for n in space.names]), 1.0)
    samples = samples * chain
    score = samples.mean(axis=0)
    covariance = np.atleast_2d(np.cov(samples, rowvar=False)) / samples.shape[0]
    return (
        score,
        _curvature_in(space, chain, 0.5 * M @ traces.products.mean(axis=0) @ M.T),
        covariance,
    )


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
    """Quantile `level` of the loss ``1/2 d^T I^{-1} d`` for a Gaussian score error ``d``
    of covariance `covariance`.

    The loss is ``sum_i lambda_i chi^2_1`` over the eigenvalues ``lambda_i`` of ``1/2
    I^{-1} Cov``; its quantile is taken from the scaled chi-square with the same mean and
    variance (Welch-Satterthwaite), ``c chi^2_k`` with ``c = sum lambda^2 / sum lambda``
    and ``k = (sum lambda)^2 / sum lambda^2``.
    """
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
    full-data objective. The number of probes only grows, so the probes of one iteration
    include those of the previous ones."""

    def __init__(self, likelihood, space, objective, random_state):
        self.likelihood, self.space, self.objective = likelihood, space, objective
        self.random_state = random_state
        self.n_probes = 0

    def value(self, z, accuracy=None):
        """Log-likelihood at `z` (``-inf`` where the covariance is not positive definite),
        at the likelihood's accuracy or at `accuracy`."""
        failures = self.objective.n_failures
        f = self.objective.evaluate(z, gradient=False, accuracy=accuracy)
        return -np.inf if self.objective.n_failures > failures else -f * self.likelihood.n_obs

    def derivatives(self, z, bounds, history=()):
        """Score, curvature, the score's Monte Carlo covariance, the step, its Monte Carlo
        loss and predicted gain, terms and probe traces at `z` (the factor at `z` is the
        one just evaluated), for a step within `bounds`.

        The curvature is the information corrected along the steps of the `history` (pairs
        of a step and the score before it; :func:`_curvature`). The step moves the free
        coordinates (:func:`_free_coordinates`) only, and its gain and loss are theirs.
        Probes are added while the loss exceeds both :data:`LOSS_TARGET` and a tenth of
        the predicted gain (a long step needs no precise score), up to
        :data:`MAX_PROBES`; their products (the information's) only while its relative
        Monte Carlo error exceeds :data:`INFORMATION_RTOL`.
        """
        values, theta, eta, noise_ratio = _point(self.space, z)
        terms, blocks = self.likelihood.probe_traces(
            theta, eta, self.random_state, noise_ratio=noise_ratio
        )
        params = _natural_params(self.space, values, terms)
        traces = next(blocks)
        while True:
            if traces.n_probes >= self.n_probes:
                score, info, covariance = score_and_information(self.space, z, terms, traces)
                curvature = _curvature(info, score, history)
                step, gain, loss = _projected_step(z, score, curvature, covariance, bounds, info)
                if loss <= max(LOSS_TARGET, 0.1 * gain) or traces.n_probes >= MAX_PROBES:
                    break
                # The loss shrinks like 1 / probes: ask for what the estimate says, in blocks.
                self.n_probes = traces.n_probes * loss / max(LOSS_TARGET, 0.1 * gain)
            # The information is precise with fewer probes than the score: the further
            # blocks give traces only (one TLR solve instead of 2 + #theta).
            traces = blocks.send(
                natural_information(self.space, params, traces)[1] > INFORMATION_RTOL
            )
        self.n_probes = traces.n_probes
        return score, (curvature, info), covariance, step, loss, gain, terms, traces


def fisher_scoring(likelihood, space, objective, start, rng, random_state=0):
    """Maximize a TLR likelihood by Fisher scoring from `start` (see the module docstring).

    Parameters
    ----------
    likelihood : geostat.likelihood.TLRLikelihood
        With ``adaptive`` set, the accuracy of its evaluations follows the iteration.
    space : geostat.optimize.ParameterSpace
    objective : geostat.optimize.objective.Objective
        The full-data objective; it counts the evaluations.
    start : ndarray
        Starting point in the optimizer's coordinates (inside the box).
    rng : numpy.random.Generator
        Draws the subsample of the derivative-free fallback.
    random_state : int, default 0
        Seeds the probes.

    Returns
    -------
    result : scipy.optimize.OptimizeResult
        ``x``, ``fun`` (negative log-likelihood per observation), ``success``,
        ``message``, ``nit``.
    subsample_evaluations : int
        Exact evaluations on a subsample (by the fallback).
    report : ScoringReport or None
        The information at the last point where it was estimated (None if nowhere).
    """
    bounds = np.array(space.z_bounds(), dtype=float)
    probed = _Probed(likelihood, space, objective, random_state)
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
            score, metrics, covariance, step, loss, gain, terms, traces = probed.derivatives(
                z, bounds, history
            )
        except np.linalg.LinAlgError:
            return _fall_back(
                likelihood, space, objective, z, rng, report, "the information is singular"
            )
        report = _report(
            space, z, terms, traces, metrics, covariance, loss, _free_coordinates(z, score, bounds)
        )
        logger.info(
            "scoring iteration %d: loglik %.6f, predicted gain %.3g, %d probes (%d for the information; "
            "expected Monte Carlo loss %.2g)",
            iteration,
            value,
            gain,
            traces.n_probes,
            traces.n_information_probes,
            loss,
        )
        margin = 0.0
        if policy is not None:
            # The values compared next at an accuracy fit for the gain; at the optimum, the
            # score again at the accuracy of the end, if it was not that accurate.
            if policy.change is None:
                policy.measure(lambda accuracy: probed.value(z, accuracy))
            previous = policy.accuracy
            converged = _settled(gain, loss)
            if not (converged and policy.settled()) and policy.follow(gain):
                if converged:
                    value = probed.value(z)
                    continue
                # The value at z errs by more than this comparison allows: a step that clears
                # the errors of both values needs no new one.
                margin = policy.error(previous) + policy.error()
        if _settled(gain, loss):
            return _converged(
                likelihood, z, value, iteration, f"predicted gain {gain:.2g}", report, gain
            )
        final = gain < FINAL_GAIN and loss <= LOSS_TARGET
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
            policy.measure(lambda accuracy: probed.value(z, accuracy))
            if policy.follow(gain):
                value = probed.value(z)
                trial, trial_value = _line_search(probed, z, value, step, bounds, MAX_HALVINGS)
        increase = trial_value - value
        accepted = increase > 0
        if accepted:
            logger.info("scoring step: loglik %+.3g (predicted %+.3g)", increase, gain)
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
            )
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
            )
        if not accepted and gain < STALL_GAIN and loss <= LOSS_TARGET:
            return _converged(
                likelihood,
                z,
                value,
                iteration,
                f"no step increased the likelihood from a predicted gain of {gain:.2g}",
                report,
                gain,
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
    """Whether the search has converged at a point of predicted gain `gain` and Monte Carlo
    loss `loss`: the gain is below :data:`GAIN_TOLERANCE`, or within :data:`NOISE_GAIN`
    times the loss (the Monte Carlo error of the score adds about the loss to the predicted
    gain, ``E[1/2 g^T I^{-1} g] = gain + loss``: the rest is within the loss already
    accepted)."""
    return gain < max(GAIN_TOLERANCE, NOISE_GAIN * loss)


def _gain_left(increase, gain, margin=0.0):
    """The gain left after a final step of predicted gain `gain` that increased the
    log-likelihood by `increase` (within `margin`), or None where the increase shows a
    curvature below :data:`CURVATURE_MIN` times the information, even at the end of the
    margin (the search goes on).

    Along a step ``s = I^{-1} g`` of a log-likelihood with curvature ``rho`` times the
    information, the increase is ``(2 - rho)`` times the prediction and the gain left
    ``(1 - rho)^2 / rho`` times it: the largest over the ``rho`` the increase allows (at
    least :data:`CURVATURE_MIN`), and at least :data:`FINAL_GAIN_LEFT` of the prediction.
    """
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
    for _ in range(halvings + 1):
        trial = np.clip(z + step, bounds[:, 0], bounds[:, 1])
        trial_value = probed.value(trial) if first is None else first
        first = None
        if trial_value > value:
            break
        step = 0.5 * step
    return trial, trial_value


def _curvature(info, score, history):
    """The information `info` at a point of score `score`, corrected in the span of the last
    steps of the `history` to the curvature their scores measured.

    A step ``s_i`` from a point of score ``g_i`` to one of score ``g_{i+1}`` (the next
    step's, or `score` for the last) measures ``s_j^T (g_i - g_{i+1}) = s_j^T H s_i`` for
    the log-likelihood's curvature ``H`` (secants of the scores, smooth at fixed probes).
    On real data, where the model is an approximation, ``H`` differs from the expected
    information: for the smooth co2_true field (8,192 cells, a nugget of 2e-5 of the
    variance) it is a third of it in one direction and 1.8 times it in another, and steps
    by ``I`` alone stop a hundredth of a log-likelihood unit short. With ``S`` the newest
    steps that are independent in the metric of ``I`` (at most one per coordinate, none
    closer than :data:`SECANT_ANGLE` to the span of the newer ones) and ``R`` the
    symmetric part of ``S^T Y`` for their secants ``Y``, the curvature is

        ``B = I + I S G^{-1} (R' - G) G^{-1} S^T I``,  ``G = S^T I S``,

    which has ``S^T B S = R'``: ``R`` with its eigenvalues relative to ``G`` clipped to
    [:data:`CURVATURE_MIN`, :data:`CURVATURE_MAX`], and non-positive ones (no curvature
    measured there) set to 1. One step gives the rank-one correction
    ``I + (rho - 1) (I s)(I s)^T / (s^T I s)`` for ``rho = s^T y / s^T I s``; as many
    independent steps as coordinates, the secant curvature in every direction (a
    multi-secant quasi-Newton update [4]_ from ``I``).
    """
    if not history:
        return info
    befores = [before for _, before in history]
    pairs = list(
        zip((step for step, _ in history), (b - a for b, a in zip(befores, [*befores[1:], score])))
    )
    steps, secants = _independent(info, pairs[::-1])
    if steps.size == 0:
        return info
    gram = steps.T @ info @ steps
    factor = np.linalg.cholesky(gram)
    measured = steps.T @ secants
    relative = np.linalg.solve(factor, np.linalg.solve(factor, 0.5 * (measured + measured.T)).T)
    values, vectors = np.linalg.eigh(0.5 * (relative + relative.T))
    values = np.where(values > 0.0, np.clip(values, CURVATURE_MIN, CURVATURE_MAX), 1.0)
    root = factor @ vectors
    change = root @ np.diag(values - 1.0) @ root.T
    across = np.linalg.solve(gram, steps.T @ info)
    return info + across.T @ change @ across


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
    """The scoring step ``B^{-1} g`` for the `curvature` ``B`` over the free coordinates
    (zero in the others), its predicted gain ``1/2 g^T B^{-1} g`` and Monte Carlo loss,
    theirs too: the larger of those for ``B`` and for the expected `information` where
    given (the loss of a curvature that errs high in a direction the last step did not
    measure is too small there; the information's is not, where the model is right or
    errs the other way)."""
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


def _converged(likelihood, z, value, iteration, how, report, gain_left):
    """:func:`fisher_scoring`'s answer when it converged at `z`, `gain_left` the predicted
    gain left there."""
    report.x = np.array(z)
    report.gain_left = float(gain_left)
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


def _report(space, z, terms, traces, metrics, covariance, loss, free):
    """The information over the estimated natural parameters at `z` and the Monte Carlo
    loss's quantile over the `free` coordinates (the larger for the `metrics`, the
    curvature and the expected information, as :func:`_projected_step`), for the report
    (`metrics` and `covariance` in the optimizer's coordinates)."""
    params = _natural_params(space, _point(space, z)[0], terms)
    info, error = natural_information(space, params, traces)
    pair = np.ix_(free, free)
    quantile = (
        max(monte_carlo_loss_quantile(metric[pair], covariance[pair]) for metric in metrics)
        if free.any()
        else 0.0
    )
    return ScoringReport(
        np.array(z), info, error, traces.n_probes, loss, params, loss_quantile=quantile
    )


def _fall_back(likelihood, space, objective, z, rng, report, reason):
    """The derivative-free search from `z` (no subsample refinement)."""
    logger.info("Fisher scoring hands over to the derivative-free search: %s", reason)
    result, subsample = polish_without_gradient(likelihood, space, objective, z, rng, refine=False)
    result.message = f"{reason}; derivative-free search: {result.message}"
    if report is not None:
        report.fell_back = True
    return result, subsample, report
