"""Derivative-free maximization of a likelihood without gradients (TLR evaluation).

:func:`polish_without_gradient` fits the exact likelihood of at most :data:`REFINE_SIZE`
random sites from the start (:func:`refine_start`), maps the optimizer's coordinates to
``u`` with ``z = z_sub + T u`` and ``T T^T`` the inverse Hessian there (each direction
capped to ``[MIN_STEP, MAX_STEP]``; one unit of ``u`` is about one subsample standard
error, correlated parameters decoupled), and runs COBYQA (Powell's derivative-free
trust-region method) on the full data from ``u = 0``, with a unit initial radius and a
final one of :data:`FINAL_FRACTION` of the full-data standard error
(``sqrt(n_sub / n)`` times the subsample's).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import LinearConstraint, OptimizeResult, minimize

from geostat.likelihood.vecchia import BlockVecchiaLikelihood
from geostat.optimize.objective import Objective, run_lbfgsb

__all__ = [
    "REFINE_SIZE",
    "observed_curvature",
    "polish_without_gradient",
    "refine_start",
    "subsample_objective",
    "vecchia_objective",
]

#: Sites of the exact subsample fit that starts the derivative-free search.
REFINE_SIZE = 2048
#: Smallest and largest whitened step, in the optimizer's (mostly log) coordinates.
MIN_STEP, MAX_STEP = 1e-3, 1.0
#: The search stops at this fraction of the predicted full-data standard error.
FINAL_FRACTION = 0.05
#: The subsample fit stops when an iteration gains less log-likelihood than this: its
#: optimum is only a start, far further from the full-data one.
REFINE_TOLERANCE = 1e-3
_REFINE = {"gtol": 1e-8, "maxls": 40, "maxiter": 200}


def polish_without_gradient(
    likelihood,
    space,
    objective,
    start,
    rng,
    refine_size=REFINE_SIZE,
    max_evaluations=None,
    refine=True,
):
    """Maximize a likelihood that has no gradient, starting near `start` (module docstring).

    Parameters
    ----------
    likelihood : geostat.likelihood.TLRLikelihood
        With ``subset(sites)`` returning an exact likelihood.
    space : geostat.optimize.ParameterSpace
    objective : geostat.optimize.objective.Objective
        The full-data objective.
    start : ndarray
        Starting point in the optimizer's coordinates.
    rng : numpy.random.Generator
        Draws the subsample of `refine_size` sites.
    max_evaluations : int, optional
        Full-data evaluations allowed (default ``20 + 10 * len(start)``).
    refine : bool, default True
        Move `start` by the exact subsample fit first (False: a warm start).

    Returns
    -------
    result : scipy.optimize.OptimizeResult
        ``x`` in the optimizer's coordinates, ``fun``, ``success``, ``message``, ``nit``.
    subsample_evaluations : int
    """
    bounds = np.array(space.z_bounds(), dtype=float)
    sub = subsample_objective(likelihood, space, rng, refine_size)
    z0, gradient = (
        refine_start(sub, start, bounds)
        if refine
        else (np.clip(start, bounds[:, 0], bounds[:, 1]), None)
    )
    transform = _whitening(sub, z0, bounds, gradient)
    final = max(MIN_STEP, FINAL_FRACTION * np.sqrt(sub.likelihood.n / likelihood.n))

    def to_z(u):
        return np.clip(z0 + transform @ u, bounds[:, 0], bounds[:, 1])

    def fun(u):
        return objective.evaluate(to_z(u), gradient=False)

    p = z0.size
    result = minimize(
        fun,
        np.zeros(p),
        method="COBYQA",
        constraints=[LinearConstraint(transform, bounds[:, 0] - z0, bounds[:, 1] - z0)],
        options={
            "maxfev": max_evaluations or 20 + 10 * p,
            "initial_tr_radius": 1.0,
            "final_tr_radius": final,
            "scale": False,
        },
    )
    out = OptimizeResult(
        x=to_z(result.x),
        fun=result.fun,
        success=bool(result.success),
        message=str(result.message),
        nit=int(result.get("nit", 0)),
    )
    return out, sub.n_evaluations


def subsample_objective(likelihood, space, rng, refine_size=REFINE_SIZE):
    """The exact objective on at most `refine_size` sites drawn by `rng`."""
    n_sites = likelihood.n
    sites = (
        np.sort(rng.choice(n_sites, size=refine_size, replace=False))
        if n_sites > refine_size
        else np.arange(n_sites)
    )
    return Objective(likelihood.subset(sites), space, stage="polish subsample")


def vecchia_objective(likelihood, space, rng):
    """The block Vecchia objective of `likelihood`'s data, blocks drawn by `rng`
    (:class:`~geostat.likelihood.vecchia.BlockVecchiaLikelihood`)."""
    return Objective(BlockVecchiaLikelihood(likelihood, rng=rng), space, stage="block Vecchia")


def refine_start(objective, start, bounds, callback=None):
    """The L-BFGS-B optimum of an exact objective (a subsample, the block Vecchia likelihood)
    from `start` within `bounds`, to about :data:`REFINE_TOLERANCE` in log-likelihood, and
    the objective's gradient there (a `callback` raising ``StopIteration`` ends the run at
    its iterate)."""
    bounds = np.asarray(bounds, dtype=float)
    # L-BFGS-B's ftol is relative to max(|f|, 1) for f the log-likelihood per observation.
    options = {**_REFINE, "ftol": REFINE_TOLERANCE / objective.likelihood.n_obs}
    result = run_lbfgsb(objective, start, bounds, options, callback=callback)
    return np.clip(result.x, bounds[:, 0], bounds[:, 1]), result.jac


def observed_curvature(objective, z, bounds, gradient=None, step=1e-4):
    """Minus the Hessian of the log-likelihood of `objective` at `z` in the optimizer's
    coordinates: the observed information, by forward differences (into the box `bounds`)
    of its analytic gradients from `gradient`, the objective's at `z` (evaluated when not
    given), symmetrized. The truncation error is ``O(step)`` relative to third derivatives
    over second ones; the gradients' rounding is divided by `step`."""
    p = z.size
    if gradient is None:
        gradient = objective(z)[1]
    hessian = np.zeros((p, p))
    for j in range(p):
        moved = z.copy()
        moved[j] += step if z[j] + step <= bounds[j, 1] else -step
        hessian[:, j] = (objective(moved)[1] - gradient) / (moved[j] - z[j])
    return 0.5 * (hessian + hessian.T) * objective.likelihood.n_obs


def _whitening(objective, z, bounds, gradient=None):
    """``T`` with ``T T^T`` the inverse Hessian of the log-likelihood at `z` (differenced
    from analytic gradients, the objective's `gradient` at `z` when known), capped;
    :data:`MAX_STEP` where it is not positive."""
    hessian = observed_curvature(objective, z, bounds, gradient)
    values, vectors = np.linalg.eigh(hessian)
    with np.errstate(divide="ignore"):
        sigma = np.where(values > 0, 1.0 / np.sqrt(np.maximum(values, 1e-300)), MAX_STEP)
    return vectors * np.clip(sigma, MIN_STEP, MAX_STEP)
