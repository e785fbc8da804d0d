"""Maximum-likelihood estimation of the covariance parameters.

:func:`maximize_likelihood` scores a grid of starts on a pilot subsample of at most
``pilot_size`` sites and explores the pilot by L-BFGS-B from the ``n_starts`` best; it
maximizes from the best pilot optimum on the full data (:func:`local_maximize`): by
L-BFGS-B for an exact likelihood, for TLR by an exact fit of the block Vecchia likelihood
(of all the data up to :data:`~geostat.optimize.polish.REFINE_SIZE` sites) followed by
Fisher scoring (:mod:`~geostat.optimize.scoring`) or a derivative-free search
(:mod:`~geostat.optimize.polish`). Scoring searches a space whose ratio floor is a zero
nugget (:meth:`~geostat.optimize.ParameterSpace.with_zero_floor`); elsewhere a small nugget
that zero beats is set to zero (:func:`natural_estimate`). Other estimates on a bound are
reported with a warning, standard errors come from the expected Fisher information
(:func:`standard_errors`) and a TLR log-likelihood is reported to within
:data:`LOGLIK_TOLERANCE` (:func:`reported_loglik`).

With ``l`` the exact and ``l~`` the TLR log-likelihood, ``e = l~ - l``, the estimate ``x``
and the exact maximum ``x*``, ``l(x*) - l(x) <= [l~(x*) - l~(x)] + |e(x*) - e(x)|``:
:attr:`MLEResult.gap_bound` combines Fisher scoring's bound on the first term
(:attr:`~geostat.optimize.scoring.ScoringReport.gap_bound`) with the TLR error estimated by
:func:`reported_loglik` (:func:`~geostat.optimize.accuracy.gap_bound`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from geostat.checks import check_choice
from geostat.errors import GeostatWarning, NotPositiveDefiniteError
from geostat.optimize.accuracy import gap_bound as tlr_gap_bound
from geostat.optimize.objective import Objective, run_lbfgsb
from geostat.optimize.polish import (
    REFINE_SIZE,
    observed_curvature,
    polish_without_gradient,
    refine_start,
    subsample_objective,
    vecchia_objective,
)
from geostat.optimize.progress import current_progress
from geostat.optimize.scaling import VARIANCE_LIKE
from geostat.optimize.scoring import INFORMATION_MAX_PROBES, fisher_scoring
from geostat.optimize.space import PLATEAU_RATIO

__all__ = [
    "MLEResult",
    "local_maximize",
    "maximize_likelihood",
    "natural_estimate",
    "standard_errors",
]

logger = logging.getLogger(__name__)

#: A nugget below this fraction of the variance is compared with zero (:func:`natural_estimate`).
ZERO_NUGGET_TRIAL = 1e-3
#: A start of the refinement below ``PLATEAU_RATIO`` (:mod:`~geostat.optimize.space`) is
#: on the plateau of :func:`_off_the_nugget_plateau`, which also tries these ratios.
PLATEAU_TRIALS = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3)
#: A refinement whose ratio fell below ``PLATEAU_RATIO`` by at least this in its logarithm
#: at each of its last this many iterations is creeping down the plateau (:class:`_Creeping`).
CREEP_STEP, CREEP_ITERATIONS = 0.3, 2
#: A nugget below this fraction of the variance is at the numerical resolution of a
#: smooth covariance: it is reported in ``at_bounds`` even when zero itself scores lower.
NUMERICAL_ZERO = 1e-8
#: Largest estimated error of the reported TLR log-likelihood.
LOGLIK_TOLERANCE = 0.01
#: Each round of the reported log-likelihood is this many times more accurate.
ACCURACY_STEP = 10.0
#: Most accurate TLR evaluation tried for the reported log-likelihood.
FINEST_ACCURACY = 1e-14
#: Local searches of a likelihood without gradients (:func:`maximize_likelihood`'s `search`).
SEARCHES = ("scoring", "polish")
#: Relative Monte Carlo error of the Fisher information's diagonal for standard errors.
FISHER_RTOL = 0.02


@dataclass
class MLEResult:
    """Outcome of :func:`maximize_likelihood`.

    Attributes
    ----------
    params, stderr : dict
        Natural parameters and their standard errors (0.0 for fixed ones).
    covariance : ndarray
        Inverse Fisher information over :attr:`estimated`.
    estimated : list of str
    coef, coef_stderr : ndarray of shape (r, p)
        GLS trend coefficients per replicate and their standard errors.
    loglik : float
        Maximized log-likelihood (restricted when ``reml``).
    n_iter, n_evaluations, n_pilot_evaluations, n_failures : int
        Iterations of the final local search; full-data evaluations (TLR: factorizations,
        the accuracy check included); pilot, subsample and block Vecchia evaluations;
        evaluations where the covariance was not positive definite.
    converged : bool
    message : str
    at_bounds : list of str
        Estimated parameters on a bound (a nugget also below :data:`NUMERICAL_ZERO` times the
        variance).
    elapsed : float
        Wall time in seconds.
    method : {"exact", "tlr"}
    accuracy, loglik_accuracy : float or None
        TLR accuracy of the fit and of the evaluation that gave :attr:`loglik`.
    loglik_error : float
        Estimated TLR error of :attr:`loglik`, at most :data:`LOGLIK_TOLERANCE` unless
        :data:`FINEST_ACCURACY` was reached.
    fisher_relative_error : float
        Relative Monte Carlo error of the Fisher information's diagonal.
    n_probes, scoring_loss : int, float
        Fisher scoring's probes per replicate group, and its expected log-likelihood loss to
        the score's Monte Carlo error, ``1/2 tr(I^{-1} Cov(score))``.
    gap_bound : float
        Bound, at confidence :data:`~geostat.optimize.scoring.BOUND_LEVEL`, on how far the
        exact log-likelihood at the estimate lies below the exact maximum (module
        docstring): 0.0 for a converged exact fit, ``inf`` where unknown.
    """

    params: dict[str, float]
    stderr: dict[str, float]
    covariance: NDArray[np.float64]
    estimated: list[str]
    coef: NDArray[np.float64]
    coef_stderr: NDArray[np.float64]
    loglik: float
    n_iter: int
    n_evaluations: int
    n_pilot_evaluations: int
    n_failures: int
    converged: bool
    message: str
    at_bounds: list[str]
    reml: bool = False
    elapsed: float = 0.0
    method: str = "exact"
    accuracy: float | None = None
    loglik_error: float = 0.0
    fisher_relative_error: float = 0.0
    loglik_accuracy: float | None = None
    n_probes: int = 0
    scoring_loss: float = 0.0
    gap_bound: float = 0.0


def _start_grid(space, likelihood_scale):
    """Candidate starting points (named free values) spread over the box."""
    axes = {}
    for name in space.names:
        low, high = space.natural_bounds[name]
        if name == "range":
            grid = [f * space.max_distance for f in (0.03, 0.1, 0.3, 1.0)]
        elif name == "ratio":
            grid = [0.01, 0.1, 1.0]
        elif name == "smoothness":
            grid = [0.5, 1.5]
        elif name in ("power", "time_power"):
            grid = [1.0, 1.8]
        elif name == "time_smoothness":
            grid = [0.5, 1.5]
        elif name == "variance":
            grid = [likelihood_scale]
        elif name == "nugget":  # in full mode
            grid = [0.01 * likelihood_scale, 0.3 * likelihood_scale]
        elif name in space.kernel.spanned:  # a time or vertical range
            grid = [f * space.spans.get(name, 1.0) for f in (0.05, 0.3)]
        else:
            grid = _SHAPE_GRID.get(name, [space.kernel.shape_start.get(name, 0.5 * (low + high))])
        axes[name] = [min(max(v, low * 1.001), high * 0.999) for v in grid]
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


#: Starting values of the shape parameters of anisotropic and space-time kernels: the
#: angle of the major axis at four directions (a likelihood of the angle can have a
#: saddle across the true direction), a moderate ratio and interaction.
_SHAPE_GRID = {
    "anisotropy_ratio": [0.5],
    "anisotropy_angle": [0.0, 0.25 * np.pi, 0.5 * np.pi, 0.75 * np.pi],
    "separability": [0.5],
}

_EXPLORE = {"maxiter": 20, "ftol": 1e-9, "gtol": 1e-6, "maxls": 30}
#: An exploration on a pilot subsample stops once an iterate is within this distance (largest
#: coordinate difference, in the optimizer's coordinates) of an earlier exploration's optimum:
#: it has joined that optimum's basin, whose value is known.
JOINED = 0.05
_POLISH = {"ftol": 1e-12, "gtol": 1e-8, "maxls": 40}


def _projected_gradient(z, grad, bounds):
    g = np.array(grad, dtype=float)
    for i, (low, high) in enumerate(bounds):
        if z[i] <= low + 1e-10 and g[i] > 0:
            g[i] = 0.0
        if z[i] >= high - 1e-10 and g[i] < 0:
            g[i] = 0.0
    return float(np.max(np.abs(g))) if g.size else 0.0


def maximize_likelihood(
    likelihood,
    space,
    *,
    n_starts=3,
    pilot_size=500,
    random_state=0,
    maxiter=300,
    search="scoring",
    start=None,
):
    """Maximize the likelihood over the free parameters of `space`.

    Parameters
    ----------
    likelihood : ExactLikelihood or TLRLikelihood
    space : ParameterSpace
    n_starts : int, default 3
        Grid points from which the pilot explorations start.
    pilot_size : int, default 500
        Sites of the pilot subsample (none for fewer sites and a likelihood with gradients).
    random_state : int, numpy Generator or None
        Seeds the subsamples and the probes.
    maxiter : int, default 300
        Iteration limit of each L-BFGS-B run.
    search : {"scoring", "polish"}, default "scoring"
        Local search without gradients (TLR): Fisher scoring or the derivative-free search
        alone (:mod:`~geostat.optimize.polish`).
    start : ndarray, optional
        The optimizer's vector to search from: a warm start, without the pilot subsample
        and, for TLR, without moving the start by an exact fit first.

    Returns
    -------
    MLEResult

    Raises
    ------
    ValueError
        If `search` is not one of :data:`SEARCHES`.
    tlrcore.NotPositiveDefiniteError
        If the covariance is not positive definite at any starting point.
    """
    check_choice(search, "search", SEARCHES)
    with _coarser_copies(likelihood):
        return _maximize(
            likelihood,
            space,
            n_starts,
            pilot_size,
            random_state,
            maxiter,
            search == "scoring",
            start,
        )


@contextlib.contextmanager
def _coarser_copies(likelihood):
    """Keep the tiles of the TLR likelihood's last build during the block (``keep_coarser``),
    for the first round of :func:`reported_loglik`."""
    coarser = None if likelihood.accuracy is None else likelihood.accuracy * ACCURACY_STEP
    if coarser is None or coarser >= 1:
        yield
        return
    likelihood.keep_coarser(coarser)
    try:
        yield
    finally:
        likelihood.keep_coarser(None)


def _maximize(likelihood, space, n_starts, pilot_size, random_state, maxiter, scoring, start):
    """:func:`maximize_likelihood`."""
    start_time = time.perf_counter()
    rng = np.random.default_rng(random_state)
    bounds = space.z_bounds()
    # Fisher scoring (TLR) meets a zero nugget at the ratio's floor, where its last factor
    # then serves the estimate (ParameterSpace.with_zero_floor).
    search_space = space.with_zero_floor() if scoring and not likelihood.has_gradient else space
    full = Objective(likelihood, search_space)
    factorizations = getattr(likelihood, "n_factorizations", 0)
    pilot_evaluations = 0
    best = report = None
    z = np.zeros(0)
    if space.names:
        warm = start is not None
        if not warm:
            start, pilot_evaluations = _starting_point(
                likelihood, space, full, n_starts, pilot_size, rng
            )
        best, refine_evaluations = local_maximize(
            likelihood,
            space,
            full,
            np.clip(np.asarray(start, dtype=float), *np.transpose(bounds)),
            rng,
            maxiter=maxiter,
            refine=not warm,
            scoring=scoring,
        )
        pilot_evaluations += refine_evaluations
        report = best.get("scoring")
        z = best.x
    at_bounds = [
        "nugget" if name == "ratio" else name
        for name, value, (low, high) in zip(space.names, z, bounds, strict=True)
        if value <= low + 1e-6 * max(1.0, abs(low)) or value >= high - 1e-6 * max(1.0, abs(high))
    ]
    # Scoring's projected steps end a nugget whose maximum is zero on its floor, which its
    # space scores as zero; one inside the box is its optimum, and zero is not tried (an
    # evaluation saved).
    scored_inside = (
        report is not None
        and report.x is not None
        and (search_space.zero_floor or "nugget" not in at_bounds)
    )
    params, loglik = natural_estimate(likelihood, search_space, z, zero_trial=not scored_inside)
    tiny_nugget = params["nugget"] <= NUMERICAL_ZERO * params["variance"]
    if space.nugget_value is None and tiny_nugget and "nugget" not in at_bounds:
        at_bounds.append("nugget")
    message = str(best.message).strip().rstrip(":") if best is not None else "no free parameters"
    if message == "ABNORMAL":  # SciPy's L-BFGS-B gives no reason for this one
        message = "ABNORMAL: the line search found no decrease, usually a flat or noisy likelihood"
    if best is None:
        converged = True
    elif likelihood.has_gradient:
        converged = bool(best.success or _projected_gradient(z, full(z)[1], bounds) < 1e-5)
    else:
        converged = bool(best.success)
    if not converged:
        warnings.warn(
            f"the likelihood maximization did not converge ({message}); the estimates may be "
            "inaccurate. Try other bounds, fix the smoothness, or a simpler trend.",
            GeostatWarning,
            stacklevel=3,
        )
    _warn_bounds(at_bounds, params)
    progress = current_progress()

    def take_the_fit_count():
        # the full-data count as the result gives it: a TLR fit's factorizations
        if likelihood.accuracy is not None:
            progress.recount(likelihood.n_factorizations - factorizations)

    take_the_fit_count()
    progress.stage("standard errors")
    information = None
    # Scoring's information serves only where it was estimated at the estimate itself: a
    # final step moves the estimate by up to 0.2 standard errors, which changes the standard
    # error of a variance on a ridge by several percent.
    if report is not None and report.x is not None and np.array_equal(report.z, z):
        # Not when the nugget was set to zero: the information is then another one's.
        same_nugget = (params["nugget"] == 0) == (report.params["nugget"] == 0)
        # as precise as their own estimate would be: within FISHER_RTOL, or on as many probes
        precise = (
            report.information_error <= FISHER_RTOL
            or report.n_information_probes >= INFORMATION_MAX_PROBES
        )
        if same_nugget and precise:
            information = (report.information, report.information_error)
    stderr, covariance, fisher_error = standard_errors(
        likelihood, params, space.estimated, information
    )
    coef, coef_cov = likelihood.gls(params)
    loglik_error, loglik_accuracy = 0.0, None
    gap_bound = 0.0 if converged else np.inf
    if likelihood.accuracy is not None:
        take_the_fit_count()
        progress.stage("accuracy check")
        loglik, loglik_error, loglik_accuracy, own_error = reported_loglik(
            likelihood,
            params,
            loglik,
            known_change=report.tlr_change if scored_inside else None,
        )
        gap_bound = np.inf if report is None else tlr_gap_bound(report.gap_bound, own_error)
        logger.info(
            "distance to the exact maximum at most %.2g (scoring %.2g, TLR error %.2g)",
            gap_bound,
            np.inf if report is None else report.gap_bound,
            own_error,
        )
    coef_stderr = np.sqrt(np.maximum(np.diagonal(coef_cov, axis1=1, axis2=2), 0.0))
    logger.debug(
        "MLE (fitting units) %s loglik=%.10g evaluations=%d", params, loglik, full.n_evaluations
    )
    return MLEResult(
        params=params,
        stderr=stderr,
        covariance=covariance,
        estimated=list(space.estimated),
        coef=coef,
        coef_stderr=coef_stderr,
        loglik=loglik,
        n_iter=int(best.nit) if best is not None else 0,
        n_evaluations=(
            full.n_evaluations
            if likelihood.accuracy is None
            else likelihood.n_factorizations - factorizations
        ),
        n_pilot_evaluations=pilot_evaluations,
        n_failures=full.n_failures,
        converged=converged,
        message=message,
        at_bounds=at_bounds,
        reml=likelihood.reml,
        elapsed=time.perf_counter() - start_time,
        method=likelihood.method,
        accuracy=likelihood.accuracy,
        loglik_error=loglik_error,
        fisher_relative_error=fisher_error,
        loglik_accuracy=loglik_accuracy,
        n_probes=report.n_probes if report is not None else 0,
        scoring_loss=report.loss if report is not None else 0.0,
        gap_bound=float(gap_bound),
    )


def reported_loglik(likelihood, params, loglik, known_change=None):
    """The TLR log-likelihood to report at `params`: ``(loglik, error, accuracy, own_error)``.

    The first round takes ``|loglik - l(ACCURACY_STEP a)|`` for the likelihood's accuracy
    ``a`` as the error estimate (the tiles kept by ``keep_coarser`` make the coarser value
    cheap; the TLR error shrinking about in proportion to the accuracy, its change overstates
    the error of `loglik`). While the estimate exceeds :data:`LOGLIK_TOLERANCE`, each further
    round evaluates :data:`ACCURACY_STEP` times more accurately, down to
    :data:`FINEST_ACCURACY`, and reports that value with its change as the estimate.
    `own_error` is the error estimate of the given `loglik`: where finer rounds were made,
    its distance from the value reported plus that value's estimate (a measurement of the
    error at ``a`` itself, where the first round's change is about that at ``ACCURACY_STEP
    a``, and the changes between accuracies need not shrink one after the other), else the
    first round's change (``inf`` if none). A `known_change` (measured near `params` from
    the coarser accuracy, ``ScoringReport.tlr_change``) takes the first round's place.
    """
    accuracy = likelihood.accuracy
    error = own_error = np.inf
    given = loglik
    if known_change is not None:
        error = own_error = float(known_change)
        logger.info(
            "log-likelihood at accuracy %.0e: %.6f (change from %.0e, measured nearby: %.2g)",
            accuracy,
            loglik,
            accuracy * ACCURACY_STEP,
            error,
        )
    elif accuracy * ACCURACY_STEP < 1:
        coarser = accuracy * ACCURACY_STEP
        try:
            error = abs(loglik - likelihood.log_likelihood(params, accuracy=coarser))
            own_error = error
        except NotPositiveDefiniteError:
            pass
        logger.info(
            "log-likelihood at accuracy %.0e: %.6f (change from %.0e: %.2g)",
            accuracy,
            loglik,
            coarser,
            error,
        )
    # (the accuracies are repeated divisions: 1e-6 / 10^8 is 1.0000000000000002e-14)
    finer_rounds = False
    while error > LOGLIK_TOLERANCE and accuracy > FINEST_ACCURACY * (1 + 1e-9):
        accuracy /= ACCURACY_STEP
        finer = likelihood.log_likelihood(params, accuracy=accuracy)
        error, loglik, finer_rounds = abs(finer - loglik), finer, True
        logger.info("log-likelihood at accuracy %.0e: %.6f (change %.2g)", accuracy, loglik, error)
    if finer_rounds:
        own_error = abs(given - loglik) + error
    return loglik, error, accuracy, own_error


def _starting_point(likelihood, space, full, n_starts, pilot_size, rng):
    """The best point of short L-BFGS-B runs from the best points of a grid, on a pilot
    subsample (more than `pilot_size` sites, or no gradient) or the full data."""
    pilot = full
    if likelihood.n > pilot_size or not likelihood.has_gradient:
        size = min(pilot_size, likelihood.n)
        sites = np.sort(rng.choice(likelihood.n, size=size, replace=False))
        pilot = Objective(likelihood.subset(sites), space, stage="pilot subsample")
    grid = [space.to_z(point) for point in _start_grid(space, space.data_variance)]
    scores = np.array([pilot.evaluate(z, gradient=False) for z in grid])
    if pilot.n_failures == len(grid):
        raise NotPositiveDefiniteError(
            "the covariance was not positive definite at any starting point; "
            "estimate a nugget (nugget=True) or remove duplicate sites.",
            tile=0,
        )
    order = np.argsort(scores, kind="stable")[: max(1, n_starts)]
    runs = []
    for i in order:
        # On all the data the explorations run to their end (their optimum is the search's
        # start); on a subsample one that joins an earlier optimum stops there.
        joined = None if pilot is full else _stop_when_joined([run.x for run in runs])
        runs.append(run_lbfgsb(pilot, grid[i], space.z_bounds(), _EXPLORE, callback=joined))
    best = min(runs, key=lambda r: r.fun).x
    return best, (0 if pilot is full else pilot.n_evaluations)


def _stop_when_joined(optima):
    """An L-BFGS-B callback that stops the run at an iterate within :data:`JOINED` of one
    of `optima` (None when there are none)."""
    if not optima:
        return None

    def callback(intermediate_result):
        z = intermediate_result.x
        if any(np.max(np.abs(z - optimum)) <= JOINED for optimum in optima):
            raise StopIteration

    return callback


def local_maximize(
    likelihood,
    space,
    objective,
    start,
    rng,
    *,
    maxiter=300,
    refine=True,
    tolerances=None,
    scoring=False,
):
    """Maximize from `start` on the full data: the local stage of :func:`maximize_likelihood`.

    Parameters
    ----------
    likelihood : ExactLikelihood or TLRLikelihood
        With gradients, L-BFGS-B; without (TLR), Fisher scoring with `scoring`, else the
        derivative-free search.
    space : ParameterSpace
        With at least one free coordinate.
    objective : geostat.optimize.objective.Objective
        The full-data objective of `likelihood` on `space`.
    start : ndarray
        Starting point in the optimizer's coordinates.
    rng : numpy.random.Generator
        Draws the subsamples and the blocks of the block Vecchia likelihood.
    maxiter : int, default 300
    refine : bool, default True
        Without gradients, move `start` by an exact fit first (False: a warm start).
    tolerances : dict, optional
        L-BFGS-B's ``ftol`` and ``gtol`` instead of ``1e-12`` and ``1e-8``.
    scoring : bool, default False

    Returns
    -------
    result : scipy.optimize.OptimizeResult
        ``x``, ``fun``, ``success``, ``message``, ``nit``; with `scoring` also ``scoring``
        (a :class:`~geostat.optimize.scoring.ScoringReport` or None).
    subsample_evaluations : int
        Evaluations on a subsample or of the block Vecchia likelihood.
    """
    if likelihood.has_gradient:
        options = {**_POLISH, **(tolerances or {}), "maxiter": maxiter}
        return run_lbfgsb(objective, start, space.z_bounds(), options), 0
    if not scoring:
        return polish_without_gradient(likelihood, space, objective, start, rng, refine=refine)
    subsample, curvature = 0, None
    if refine:
        start, curvature, subsample = _refined_start(likelihood, space, start, rng)
    result, fallback, report = fisher_scoring(
        likelihood,
        objective.space,
        objective,
        start,
        rng,
        random_state=int(rng.integers(2**31)),
        curvature=curvature,
    )
    result.scoring = report
    return result, subsample + fallback


def _refined_start(likelihood, space, start, rng):
    """The start of Fisher scoring moved by an exact fit (:func:`refine_start`), the
    observed information of that fit there where it sees all the data (else None), and
    the evaluations it took; the fit's objective (and its worker processes' blocks) is
    freed on return."""
    # Beyond REFINE_SIZE, the block Vecchia likelihood: it sees the sites at their own
    # spacing, which a random subsample does not.
    small = likelihood.n <= REFINE_SIZE
    objective = (subsample_objective if small else vecchia_objective)(likelihood, space, rng)
    bounds = space.z_bounds()
    creeping = _Creeping(space)
    start, gradient = refine_start(
        objective, _off_the_nugget_plateau(objective, space, start), bounds, callback=creeping
    )
    if creeping.stopped:
        # down the plateau at once: the log-likelihood is about linear in the ratio there,
        # so where it rises towards zero it is highest at the floor
        floor = start.copy()
        floor[creeping.index] = bounds[creeping.index][0]
        if objective.evaluate(floor, gradient=False) < creeping.value:
            start = floor
        start, gradient = refine_start(objective, start, bounds)
    # Real fields are not exactly of the model's family: where the observed information
    # departs from the expected one, it is the curvature that predicts scoring's steps.
    # That of a subset of the blocks is another data set's (at 65,536 simulated sites it
    # predicted worse than the expected information).
    if objective.likelihood.n_obs < likelihood.n_obs:
        return start, None, objective.n_evaluations
    curvature = observed_curvature(objective, start, np.asarray(bounds, dtype=float), gradient)
    return start, curvature, objective.n_evaluations


class _Creeping:
    """An L-BFGS-B callback that stops a run creeping down the nugget plateau: its
    nugget-to-variance ratio below ``PLATEAU_RATIO`` and lowered by at least
    :data:`CREEP_STEP` (in its logarithm) at each of the last :data:`CREEP_ITERATIONS`
    iterations. ``stopped``, ``value`` (the objective at the stop) and ``index`` (the ratio's
    coordinate) tell the caller."""

    def __init__(self, space):
        self.index = space.names.index("ratio") if "ratio" in space.names else None
        self.ratios = []
        self.stopped, self.value = False, np.inf

    def __call__(self, intermediate_result):
        if self.index is None:
            return
        self.ratios.append(float(intermediate_result.x[self.index]))
        recent = self.ratios[-CREEP_ITERATIONS - 1 :]
        if (
            len(recent) == CREEP_ITERATIONS + 1
            and recent[-1] <= np.log(PLATEAU_RATIO)
            and all(b <= a - CREEP_STEP for a, b in zip(recent, recent[1:], strict=False))
        ):
            self.stopped, self.value = True, float(intermediate_result.fun)
            raise StopIteration


def _off_the_nugget_plateau(objective, space, start):
    """`start`, or where its nugget-to-variance ratio is below :data:`PLATEAU_RATIO`, the best
    on `objective` of it and the same point with the ratios :data:`PLATEAU_TRIALS`: at small
    ratios the log-likelihood is flat in the log ratio, and L-BFGS-B creeps."""
    free = space.to_natural(start)
    name = "ratio" if "ratio" in space.names else "nugget" if "nugget" in space.names else None
    if name is None:
        return start
    scale = 1.0 if name == "ratio" else space.natural(free)["variance"]
    if free[name] >= PLATEAU_RATIO * scale:
        return start
    low, high = space.z_bounds()[space.names.index(name)]
    candidates = [start] + [space.to_z({**free, name: ratio * scale}) for ratio in PLATEAU_TRIALS]
    candidates = [z for z in candidates if low <= z[space.names.index(name)] <= high]
    return min(candidates, key=lambda z: objective.evaluate(z, gradient=False))


def natural_estimate(likelihood, space, z, zero_trial=True):
    """Natural parameters and log-likelihood at the optimizer's point `z`; with `zero_trial`,
    a nugget below :data:`ZERO_NUGGET_TRIAL` times the variance (towards which L-BFGS-B only
    creeps in log coordinates) is set to zero where that does not lower the likelihood, keeps
    the covariance positive definite and the user gave the nugget no bound."""
    free = space.to_natural(z)

    def evaluate(values):
        theta, eta, noise_ratio = space.point(values)
        if space.profiled:
            terms = likelihood.terms(theta, eta)
            params = space.natural(values, profiled_variance=terms.quadratic / terms.n_eff)
        else:
            params = space.natural(values)
            terms = likelihood.terms(theta, eta, noise_ratio=noise_ratio)
        return params, float(terms.full_value(params["variance"]))

    params, loglik = evaluate(free)
    trial = zero_trial and space.nugget_value is None and "nugget" not in space.bounds
    if trial and params["nugget"] < ZERO_NUGGET_TRIAL * params["variance"]:
        name = "ratio" if space.profiled else "nugget"
        try:
            zero_params, zero_loglik = evaluate({**free, name: 0.0})
        except NotPositiveDefiniteError:
            return params, loglik
        if zero_loglik >= loglik - 1e-10 * max(1.0, abs(loglik)):
            return zero_params, zero_loglik
    return params, loglik


#: Values at which a parameter is on the edge of the model itself, not of a search box: an
#: isotropic field (ratio 1), a separable or a fully non-separable space-time field. An
#: estimate there is an answer, not a reason to widen bounds.
MODEL_EDGES = {"anisotropy_ratio": (1.0,), "separability": (0.0, 1.0)}


def _warn_bounds(at_bounds, params):
    for name in at_bounds:
        if name == "nugget" or params.get(name) in MODEL_EDGES.get(name, ()):
            continue
        hint = {
            "range": "only variance / range^(2 smoothness) is identified on a flat ridge; "
            "fix the range or the smoothness, or widen bounds['range']",
        }.get(name, f"widen bounds[{name!r}] or fix it")
        warnings.warn(
            f"the estimate of {name} ended on its bound; {hint}.", GeostatWarning, stacklevel=4
        )


def _typical_magnitudes(params, names):
    """The size of each estimated parameter: its value, or where it is 0 (a nugget on its
    bound) the variance for variance-like ones and 1 for the others."""

    def size(name):
        if params[name]:
            return abs(params[name])
        return abs(params["variance"]) if name in VARIANCE_LIKE else 1.0

    return np.array([size(name) for name in names])


def standard_errors(likelihood, params, names, information=None):
    """Standard errors from the inverse expected Fisher information.

    Parameters
    ----------
    likelihood : ExactLikelihood or TLRLikelihood
    params : dict
        Natural parameters at the estimate.
    names : list of str
        Estimated parameters.
    information : tuple (ndarray, float), optional
        The information over `names` at `params` and its relative error, when estimated.

    Returns
    -------
    stderr : dict
        Per parameter of `params`: 0.0 if fixed, ``inf`` if not identified (singular
        information, with a :class:`~geostat.GeostatWarning`).
    covariance : ndarray of shape (len(names), len(names))
    relative_error : float
        Relative error of the information's diagonal (0.0 when exact).
    """
    stderr = dict.fromkeys(params, 0.0)
    if not names:
        return stderr, np.zeros((0, 0)), 0.0
    if information is None:
        information = likelihood.fisher_information(params, names, return_error=True)
    info, relative_error = information
    # Scale to unit diagonal: the parameters differ by orders of magnitude. A parameter with
    # no information at rounding level is left unscaled at zero (its row is singular).
    # "Rounding level" compares the information about each parameter's relative change,
    # I_ii theta_i^2, which does not depend on the units of the sites or observations.
    diagonal = np.diag(info)
    relative = diagonal * _typical_magnitudes(params, names) ** 2
    informed = (diagonal > 0.0) & (relative > np.finfo(float).eps * max(float(relative.max()), 0.0))
    scale = np.zeros_like(diagonal)
    scale[informed] = 1.0 / np.sqrt(diagonal[informed])
    scaled = info * np.outer(scale, scale)
    values, vectors = np.linalg.eigh(scaled)
    singular = values <= 1e-10 * values[-1]
    if singular.any():
        warnings.warn(
            "the Fisher information is singular: some parameters are not identified by the "
            "data; their standard errors are reported as inf.",
            GeostatWarning,
            stacklevel=3,
        )
        covariance = np.linalg.pinv(scaled) * np.outer(scale, scale)
        unidentified = np.abs(vectors[:, singular]).sum(axis=1) > 1e-8
        covariance[unidentified, unidentified] = np.inf
    else:
        covariance = (vectors / values) @ vectors.T * np.outer(scale, scale)
    for i, name in enumerate(names):
        stderr[name] = float(np.sqrt(max(covariance[i, i], 0.0)))
    return stderr, covariance, relative_error
