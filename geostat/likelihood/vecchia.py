r"""Block Vecchia likelihood: blocks of neighbouring sites, each conditioned on nearby sites.

The sites are cut into blocks of at most ``block_size`` neighbours in the k-d tree order
of the TLR tiles, and each block ``b`` is conditioned on the ``conditioning`` sites
``c(b)`` nearest its centroid among those before it in that order (Vecchia, 1988, *J. R.
Statist. Soc. B* 50; blocks, or "grouping": Guinness, 2018, *Technometrics* 60):

.. math::

    \ell_V(\sigma^2, \theta, \eta) = \sum_b \log p\bigl(y_b \mid y_{c(b)}\bigr)
    = \sum_b \Bigl[\ell\bigl(y_{c(b) \cup b}\bigr) - \ell\bigl(y_{c(b)}\bigr)\Bigr],

each ``\ell`` an exact Gaussian log-density of the residuals ``y - F \tilde\beta`` under
``\sigma^2 K(\theta, \eta)``, ``K`` the correlation plus nugget ratio, and
``\tilde\beta`` the ordinary least-squares trend of each replicate on all its observed
sites (fixed: a shared GLS trend would couple the blocks). Every scalar of
:class:`~geostat.likelihood.terms.Terms` (log-determinant, quadratic form, their
derivatives) is a difference of the two exact ones, so the variance is profiled over all
blocks at once and the gradients are exact. A replicate missing on all of ``c(b)`` has no
second term. With more than ``max_sites`` sites, a random subset of the blocks is kept
(their conditioning sites still come from all the sites). An evaluation costs
``O(m (b + c)^3 / b)`` for ``m`` kept sites, whatever ``n``.

It starts Fisher scoring on the full data (:mod:`geostat.optimize.scoring`), so what
matters is how close its maximizer is to the full-data one. Full-data log-likelihood
below its maximum at the maximizer of each approximation (Matérn 1.5 + nugget + constant
mean, all sites kept):

==============================  ================  ===============================
data                            block Vecchia     independent blocks of 256
                                (128 | 64)        (the start before this one)
==============================  ================  ===============================
co2, 8,192 cells                0.07              3.5
simulated, 8,192 sites          0.24              1.2
==============================  ================  ===============================

On co2, conditioning on 128 sites instead of 64 (0.14 below) or blocks of 256 (0.35) did
not do better, and blocks taken in a random order instead of the k-d tree order did worse
(1.2). Keeping a random half of the blocks put the maximizer 0.04 to 1.7 below, depending
on the half; at the 26,633 co2 cells with the smoothness estimated, a third of the
blocks put it 6.6 below. Hence :data:`MAX_SITES`.

The kernel is evaluated once per evaluation for all the blocks' pairs
(:class:`~geostat.covariance.PairCorrelation`: a costly kernel, such as a Matérn whose
smoothness is estimated, through one table of the log-distances), and the conditioning
sites' correlation is the leading block of the joint one.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from geostat.covariance import PairCorrelation
from geostat.likelihood.dense import ExactLikelihood
from geostat.likelihood.gls import group_by_pattern
from geostat.likelihood.terms import Terms
from geostat.ordering import inverse_permutation, order_points
from geostat.solvers import NUMPY

__all__ = ["BLOCK_SIZE", "CONDITIONING", "MAX_SITES", "BlockVecchiaLikelihood"]

#: Sites per block.
BLOCK_SIZE = 128
#: Sites each block is conditioned on.
CONDITIONING = 64
#: Most sites in the kept blocks (256 blocks). One evaluation with gradients on 2 cores:
#: 0.13-0.25 s for 8,192 sites (Matérn 1.5); 0.35 s for the 26,633 co2 cells, 0.83 s with
#: the smoothness estimated.
MAX_SITES = 32768


class BlockVecchiaLikelihood:
    """Block Vecchia log-likelihood of the data of `likelihood` (see module docstring).

    Parameters
    ----------
    likelihood : geostat.likelihood.base.Likelihood
        Its sites, observations (NaN marks a missing value), trend design, kernel,
        distance and failure policy are used; REML is not (the trend is fixed).
    block_size : int, default BLOCK_SIZE
    conditioning : int, default CONDITIONING
        Sites each block is conditioned on (fewer for the first blocks; 0 makes the
        blocks independent).
    max_sites : int, default MAX_SITES
        With more sites than this, a random subset of ``max_sites // block_size``
        blocks is kept.
    rng : numpy.random.Generator, optional
        Draws that subset (default: seed 0).

    Attributes
    ----------
    blocks : list of (ExactLikelihood, ExactLikelihood or None)
        For each kept block, the likelihoods of its sites with their conditioning sites
        (the conditioning sites first) and of the conditioning sites alone.

    Notes
    -----
    The blocks are dense exact likelihoods on the host (NumPy), whatever the back end of
    `likelihood`: each is small. Evaluating them in stacks of one shape (one batched
    factorization and batched products) was tried and was about twice as slow (0.32-0.42 s
    against 0.14-0.24 s per evaluation with gradients at 8,192 sites): the work is the
    ``O((b + c)^3)`` factorizations and inverses, not the calls.
    """

    def __init__(self, likelihood, block_size=BLOCK_SIZE, conditioning=CONDITIONING, max_sites=MAX_SITES,
                 rng=None):
        coords, y = likelihood.coords, _ols_residuals(likelihood.y, likelihood.design)
        embedded = likelihood.distance.embed(coords)
        points = coords if embedded is None else embedded
        perm = order_points(points, "kdtree", block_size)
        position = inverse_permutation(perm)
        tree = cKDTree(points)
        starts = np.arange(0, perm.size, block_size)
        if perm.size > max_sites:
            rng = np.random.default_rng(0) if rng is None else rng
            starts = np.sort(rng.choice(starts, size=max(1, max_sites // block_size), replace=False))
        self.on_failure = likelihood.on_failure

        def exact(sites, columns):
            return ExactLikelihood(coords[sites], y[np.ix_(sites, columns)], np.zeros((sites.size, 0)),
                                   likelihood.kernel, likelihood.distance, reml=False,
                                   on_failure=likelihood.on_failure, backend=NUMPY)

        self.blocks = []
        for start in starts:
            sites = perm[start:start + block_size]
            before = _nearest_before(tree, points, position, sites, start, conditioning)
            observed = ~np.all(np.isnan(y[sites]), axis=0)
            observed_before = observed & ~np.all(np.isnan(y[before]), axis=0)
            given = exact(before, observed_before) if observed_before.any() else None
            self.blocks.append((exact(np.concatenate([before, sites]), observed), given))
        self.kernel = likelihood.kernel
        pairs = [likelihood.distance.pairwise(joint.coords) for joint, _ in self.blocks]
        self._offsets = np.cumsum([0] + [d.size for d in pairs])
        self._pairs = PairCorrelation(np.concatenate(pairs))
        self.n = sum(joint.n - (given.n if given else 0) for joint, given in self.blocks)
        self.n_obs = sum(joint.n_obs - (given.n_obs if given else 0) for joint, given in self.blocks)
        self.n_eff = self.n_obs

    def terms(self, theta, eta, gradient=False):
        """The likelihood scalars of :class:`geostat.likelihood.terms.Terms`: those of
        each block with its conditioning sites, less those of the conditioning sites.

        Raises
        ------
        NotPositiveDefiniteError
            If some ``R + eta I`` is not numerically positive definite (after the shifts
            of ``on_failure``).
        """
        values, grads = self._pairs.evaluate(self.kernel, theta, gradient)
        parts, signs = [], []
        for (joint, given), start, stop in zip(self.blocks, self._offsets, self._offsets[1:]):
            R = NUMPY.squareform(values[start:stop], joint.n, 1.0)
            dR = {name: NUMPY.squareform(g[start:stop], joint.n, 0.0) for name, g in grads.items()}
            if given is not None:  # first: the joint's factorization overwrites R
                c = given.n
                leading = (R[:c, :c].copy(), {k: D[:c, :c] for k, D in dR.items()})
                parts.append(given.terms(theta, eta, gradient, leading))
                signs.append(-1.0)
            parts.append(joint.terms(theta, eta, gradient, (R, dR)))
            signs.append(1.0)
        names = parts[0].quad.keys()
        return Terms(
            self.n_obs, self.n_eff,
            logdet=sum(s * t.logdet for s, t in zip(signs, parts)),
            logdet_trend=0.0,
            quadratic=sum(s * t.quadratic for s, t in zip(signs, parts)),
            quad={k: sum(s * t.quad[k] for s, t in zip(signs, parts)) for k in names},
            trace={k: sum(s * t.trace[k] for s, t in zip(signs, parts)) for k in names},
        )


def _nearest_before(tree, points, position, sites, start, count):
    """The at most `count` sites nearest the centroid of `sites` among those whose
    `position` in the order is before `start`, nearest first."""
    n = points.shape[0]
    k = min(n, 4 * count + sites.size)
    while True:
        _, nearest = tree.query(points[sites].mean(axis=0), k=k)
        before = np.atleast_1d(nearest)[position[np.atleast_1d(nearest)] < start]
        if before.size >= count or k == n:
            return before[:count]
        k = min(n, 2 * k)


def _ols_residuals(y, design):
    """``y - F beta`` with ``beta`` the least-squares trend of each replicate on its
    observed sites; NaN stays NaN."""
    residuals = np.full(y.shape, np.nan)
    for g in group_by_pattern(y, design):
        fitted = g.design @ np.linalg.lstsq(g.design, g.y, rcond=None)[0]
        rows = np.arange(y.shape[0]) if g.sites is None else g.sites
        residuals[np.ix_(rows, g.columns)] = g.y - fitted
    return residuals
