r"""Expected Fisher information with traces estimated by random probes.

With ``C = s K``, ``K = L L^T`` and ``P`` the inverse covariance (ML) or the REML
projection, ``I_ab = 1/2 tr(P D_a P D_b)`` for the covariance derivatives
``D_variance = R``, ``D_nugget = I`` and ``D_theta = s dR/dtheta``. Writing
``P = L^{-T} Pi L^{-1} / s`` with ``Pi = I - Q Q^T`` (``Q`` an orthonormal basis of
``L^{-1} F`` under REML, ``Pi = I`` otherwise), ``I_ab = 1/2 tr(G_a G_b)`` with the
symmetric

.. math::

    G_a = \Pi L^{-1} D_a L^{-T} \Pi / s, \qquad
    G_\mathrm{variance} = \Pi (I - \eta L^{-1} L^{-T}) \Pi / s, \qquad
    G_\mathrm{nugget} = \Pi L^{-1} L^{-T} \Pi / s,

and ``G_theta = Pi L^{-1} dR L^{-T} Pi``. For Rademacher probes ``z``,
``(G_a z)^T (G_b z)`` is an unbiased estimate of ``tr(G_a G_b)`` (Hutchinson); each
block of probes costs one backward and ``1 + #theta`` forward TLR solves and one TLR
product with each compressed ``dR``. Probes are added until the Monte Carlo standard
error of every diagonal entry is below a relative tolerance.

With a factor of reordered sites, ``K = P^T L L^T P``, the same holds with ``L^{-1} P``
(``solve_lower``) and ``P^T L^{-T}`` (``solve_upper``) in place of ``L^{-1}`` and
``L^{-T}``; the compressed ``dR`` act in the caller's site order.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from geostat.likelihood.terms import split_params
from geostat.optimize.progress import current_progress

__all__ = ["stochastic_fisher_information"]

logger = logging.getLogger(__name__)


def stochastic_fisher_information(likelihood, factors, params, names, random_state=0, rtol=0.02, block_size=16,
                                  max_probes=256):
    """Expected Fisher information of covariance parameters through TLR factors.

    Parameters
    ----------
    likelihood : geostat.likelihood.tlr.TLRLikelihood
        Provides the groups, their designs and compressed ``dR`` matrices (in the
        factors' site order).
    factors : list of geostat.solvers.TLRFactor
        Factors of ``K = R + eta I`` at `params`, one per group.
    params : dict
        Natural parameters.
    names : sequence of str
        Parameters to include (``variance``, ``nugget``, ``range``, shape names).
    random_state : int, default 0
    rtol : float, default 0.02
        Target relative standard error of the diagonal entries (the standard errors
        derived from them are then accurate to about half of it).
    block_size : int, default 16
        Probes per block.
    max_probes : int, default 256

    Returns
    -------
    info : ndarray of shape (len(names), len(names))
    relative_error : float
        Largest relative Monte Carlo standard error of a diagonal entry.
    """
    names = list(names)
    theta, eta = split_params(params, likelihood.kernel)
    variance = params["variance"]
    derivative_names = [n for n in names if n not in ("variance", "nugget")]
    rng = np.random.default_rng(random_state)
    groups = []
    for index, (group, factor) in enumerate(zip(likelihood.groups, factors)):
        basis = None
        if likelihood.reml and likelihood.n_coef:
            basis = np.linalg.qr(factor.solve_lower(group.design))[0]
        derivatives = likelihood.gradient_matrices(index, theta, derivative_names)
        groups.append((group.r, factor, basis, derivatives))
    samples = np.zeros((0, len(names), len(names)))
    relative_error = np.inf
    while samples.shape[0] < max_probes:
        block = np.zeros((block_size, len(names), len(names)))
        for weight, chol, basis, derivatives in groups:
            Z = rng.choice(np.array([-1.0, 1.0]), size=(chol.n, block_size))
            G = _apply(chol, basis, derivatives, names, Z, variance, eta)
            block += 0.5 * weight * np.einsum("aik,bik->kab", G, G)
        samples = np.concatenate([samples, block])
        info = samples.mean(axis=0)
        spread = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
        # A parameter the likelihood does not depend on has information exactly 0, with
        # no Monte Carlo error: relative error 0 (its standard error is reported as inf).
        diagonal, error = np.abs(np.diag(info)), np.diag(spread)
        relative = np.divide(error, diagonal, out=np.zeros_like(error), where=diagonal > 0)
        relative_error = float(np.max(np.where((diagonal == 0) & (error > 0), np.inf, relative)))
        current_progress().probes(samples.shape[0], _probes_needed(samples.shape[0], relative_error, rtol, block_size,
                                                                    max_probes))
        if relative_error <= rtol:
            break
    logger.info("standard errors: Fisher information from %d random probes (relative error %.3g)", samples.shape[0],
                relative_error)
    return 0.5 * (info + info.T), relative_error


def _probes_needed(done, relative_error, rtol, block_size, max_probes):
    """Probes the loop will have drawn when it stops, estimated after `done`: the Monte
    Carlo error shrinks like ``1 / sqrt(probes)``, so ``done (relative_error / rtol)^2``,
    in whole blocks, at most `max_probes` (for the progress display)."""
    if relative_error <= rtol:
        return done
    if not np.isfinite(relative_error):
        return max_probes
    blocks = math.ceil(done * (relative_error / rtol) ** 2 / block_size)
    return int(min(max(blocks * block_size, done + block_size), max_probes))


def _apply(chol, basis, derivatives, names, Z, variance, eta):
    """``G_a Z`` for every name, stacked as ``(len(names), n, m)``."""

    def project(X):
        return X if basis is None else X - basis @ (basis.T @ X)

    Z = project(Z)
    X = chol.solve_upper(Z)
    inverse = chol.solve_lower(X)
    out = []
    for name in names:
        if name == "variance":
            G = (Z - eta * inverse) / variance
        elif name == "nugget":
            G = inverse / variance
        else:
            G = chol.solve_lower(derivatives[name] @ X)
        out.append(project(G))
    return np.stack(out)
