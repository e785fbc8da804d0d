r"""Kriging prediction and conditional simulation at fitted parameters.

Predictions are of the latent process (without the nugget, which is measurement error):
with ``c_0 = Cov(Z(x_0), y)`` and ``C = Cov(y)``,

.. math::

    \hat Z(x_0) = f_0^T\hat\beta + c_0^T C^{-1}(y - F\hat\beta), \qquad
    \operatorname{Var} = \sigma^2 - c_0^T C^{-1} c_0 + u^T (F^T C^{-1} F)^{-1} u,
    \quad u = f_0 - F^T C^{-1} c_0,

the universal-kriging variance, which includes the uncertainty of the GLS trend [1]_.
Replicates with different observed sites are conditioned on their own sites. The
covariance factors are the likelihood's (dense or TLR); the variance term
``c_0^T C^{-1} c_0 = ||L^{-1} c_0||^2`` needs only the forward solve.

References
----------
.. [1] Cressie, N. (1993). Statistics for Spatial Data, revised ed. Wiley.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.spatial import cKDTree

from geostat.checks import check_memory
from geostat.covariance import cross_correlation
from geostat.distance import EUCLIDEAN, ordering_points
from geostat.errors import NotPositiveDefiniteError
from geostat.likelihood.gls import centered_design, remove_means
from geostat.likelihood.terms import split_params
from geostat.ordering import order_points
from geostat.solvers import (
    compressed_cross_product,
    one_blas_thread,
    progress_counter,
    tile_threads,
)

__all__ = ["Kriging"]

#: Largest cross-covariance block (prediction sites x training sites) held at once.
_BLOCK_ENTRIES = 2**24
#: Cross-covariance entries (targets x training sites) from which the kriging mean goes
#: through a compressed product (:func:`geostat.solvers.compressed_cross_product`) and
#: the variance through local neighbourhoods; below, dense blocks are as fast.
COMPRESSED_FROM = 2**26
#: Accuracy of the compressed cross-covariance when the likelihood has none (exact).
CROSS_ACCURACY = 1e-8
#: Nearest training sites that the kriging variance of a target is conditioned on, at
#: least, for many targets (:meth:`Kriging._local_variance`); the relative excess over the
#: variance given all sites stayed below 2e-4 on exponential test fields.
LOCAL_NEIGHBOURS = 200
#: Neighbouring targets (in KD-tree order) that share one neighbourhood.
LOCAL_GROUP = 128
#: Targets whose neighbours are searched at once (a thread's unit of work).
LOCAL_CHUNK = 8192


@dataclass
class _GroupFit:
    sites: np.ndarray | None
    columns: np.ndarray
    chol: object  # factor of K = C / variance (dense or TLR), in training-site order
    variance: float
    alpha: np.ndarray  # C^{-1} (y - F beta), (n_g, r_g)
    cinv_f: np.ndarray  # C^{-1} F_c, (n_g, p), F_c the centred design (centered_design)
    ftcf_chol: np.ndarray | None  # Cholesky of F_c^T C^{-1} F_c
    shift: np.ndarray | None  # covariate means of F_c (None: F_c = F)
    noise: np.ndarray | None  # known noise variances of the group's sites (None: none)

    def cinv(self, b):
        """Return ``C^{-1} b``."""
        return self.chol.solve(b) / self.variance

    def quadratic(self, b):
        """Return ``diag(b^T C^{-1} b)`` for the columns of `b`."""
        w = self.chol.solve_lower(b)
        return np.einsum("ij,ij->j", w, w) / self.variance


class Kriging:
    """Kriging predictor conditioned on training data at fixed parameters.

    Parameters
    ----------
    likelihood : ExactLikelihood or TLRLikelihood
        Holds the training coordinates, observations, design and kernel, and factors
        the covariance (factors are computed on first use).
    params : dict
        Natural parameters (variance, range, shape, nugget).
    coef : ndarray of shape (r, p)
        Trend coefficients per replicate.
    """

    def __init__(self, likelihood, params, coef):
        self.lik = likelihood
        self.params = dict(params)
        self.coef = np.asarray(coef)
        self.theta, self.eta = split_params(params, likelihood.kernel)

    @cached_property
    def groups(self):
        """Per group of replicates: its factor and the GLS quantities of the predictor."""
        variance = self.params["variance"]
        out = []
        for g, noise, chol in zip(
            self.lik.groups, self.lik.group_noise, self.lik.factors_at(self.params), strict=True
        ):
            beta = self.coef[g.columns].T  # (p, r_g)
            alpha = chol.solve(g.y - g.design @ beta) / variance
            centered, shift = centered_design(g.design)
            cinv_f = chol.solve(centered) / variance if g.design.shape[1] else g.design
            ftcf_chol = np.linalg.cholesky(centered.T @ cinv_f) if g.design.shape[1] else None
            out.append(
                _GroupFit(
                    g.sites, g.columns, chol, variance, alpha, cinv_f, ftcf_chol, shift, noise
                )
            )
        return out

    def _cross(self, coords, sites):
        train = self.lik.coords if sites is None else self.lik.coords[sites]
        return self._covariance(coords, train)

    def _covariance(self, a, b):
        """The covariance of the latent process between the sites `a` and `b`."""
        return self.params["variance"] * cross_correlation(
            self.lik.kernel, self.lik.distance, self.theta, a, b
        )

    @one_blas_thread
    def predict(self, coords, design, return_var=False):
        """Kriging mean (and variance) at new sites.

        Parameters
        ----------
        coords : ndarray of shape (m, d)
        design : ndarray of shape (m, p)
        return_var : bool

        Returns
        -------
        mean : ndarray of shape (m, r)
        var : ndarray of shape (m, r), only when `return_var`
        """
        m, r = coords.shape[0], self.coef.shape[0]
        mean = design @ self.coef.T if self.coef.shape[1] else np.zeros((m, r))
        var = np.empty((m, r)) if return_var else None
        if self._compresses(m):
            for g in self.groups:
                self._at_scale(coords, design, g, mean, var)
            return (mean, var) if return_var else mean
        chunk = max(1, min(4096, _BLOCK_ENTRIES // max(1, self.lik.n)))
        for start in range(0, m, chunk):
            rows = slice(start, min(start + chunk, m))
            for g in self.groups:
                c0 = self._cross(coords[rows], g.sites)  # (m_c, n_g)
                mean[rows, g.columns] += c0 @ g.alpha
                if return_var:
                    var[rows, g.columns] = self._variance(c0, design[rows], g)[:, None]
        return (mean, var) if return_var else mean

    def _at_scale(self, coords, design, g, mean, var):
        """Add group `g`'s kriging mean at `coords` to `mean` (and write its variance to
        `var`) without forming the cross-covariance: compressed products
        (:func:`geostat.solvers.compressed_cross_product`), the simple-kriging variance
        from local neighbourhoods."""
        weights = g.alpha if var is None or g.ftcf_chol is None else np.hstack([g.alpha, g.cinv_f])
        products = self._compressed_products(coords, g, weights)
        r = g.alpha.shape[1]
        mean[:, g.columns] += products[:, :r]
        if var is None:
            return
        variance = self._local_variance(coords, g)
        if g.ftcf_chol is not None:
            u = (remove_means(design, g.shift) - products[:, r:]).T  # (p, m)
            variance += np.einsum(
                "ij,ij->j", u, cho_solve((g.ftcf_chol, True), u, check_finite=False)
            )
        var[:, g.columns] = np.maximum(variance, 0.0)[:, None]

    def _local_variance(self, coords, g):
        r"""``variance - c_0^T C_N^{-1} c_0`` at every target, ``C_N`` the covariance of a
        neighbourhood holding each target's :data:`LOCAL_NEIGHBOURS` nearest sites
        (shared by :data:`LOCAL_GROUP` neighbouring targets).

        An upper bound on the simple-kriging variance given all the data (conditioning on
        fewer data cannot lower a variance), close to it by the screening effect.
        """
        sites = self.lik.coords if g.sites is None else self.lik.coords[g.sites]
        distance = self.lik.distance
        tree = cKDTree(ordering_points(sites, distance))
        points = ordering_points(coords, distance)
        order = order_points(points, "kdtree", min(LOCAL_GROUP, coords.shape[0]))
        groups = [order[start : start + LOCAL_GROUP] for start in range(0, order.size, LOCAL_GROUP)]
        k = min(LOCAL_NEIGHBOURS, sites.shape[0])
        # the nugget, and the diagonal shift of the fitted factor where it needed one
        diagonal = self.params.get("nugget", 0.0) + self.params["variance"] * getattr(
            g.chol, "shift", 0.0
        )
        out = np.empty(coords.shape[0])

        def chunk(members):
            targets = np.concatenate(members)
            _, nearest = tree.query(points[targets], k)
            nearest = nearest.reshape(targets.size, k)
            start = 0
            for group in members:
                neighbours = np.unique(nearest[start : start + group.size])
                start += group.size
                cov = self._covariance(sites[neighbours], sites[neighbours])
                cov[np.diag_indices_from(cov)] += diagonal + (
                    0.0 if g.noise is None else g.noise[neighbours]
                )
                try:
                    root = np.linalg.cholesky(cov)
                except np.linalg.LinAlgError:
                    raise NotPositiveDefiniteError(
                        f"the covariance of the {neighbours.size} training sites nearest to "
                        f"targets {group[:3].tolist()}... is not positive definite (sites "
                        "duplicated without a nugget?); fit with a nugget, or predict with "
                        "return_std=False.",
                        tile=0,
                    ) from None
                w = solve_triangular(
                    root,
                    self._covariance(sites[neighbours], coords[group]),
                    lower=True,
                    check_finite=False,
                )
                out[group] = self.params["variance"] - np.einsum("ij,ij->j", w, w)

        per_chunk = max(1, LOCAL_CHUNK // LOCAL_GROUP)
        chunks = [groups[i : i + per_chunk] for i in range(0, len(groups), per_chunk)]
        with (
            ThreadPoolExecutor(max(1, min(tile_threads(), len(chunks)))) as pool,
            progress_counter(len(chunks), "kriging variance", unit="chunk") as counter,
        ):
            for _ in pool.map(chunk, chunks):
                counter.update()
        return out

    def _compresses(self, m):
        """Whether predictions at `m` targets go through compressed products and local
        variances: from :data:`COMPRESSED_FROM` target-site pairs."""
        n = max(self.lik.n if g.sites is None else g.sites.size for g in self.lik.groups)
        return m * n >= COMPRESSED_FROM

    def _compressed_products(self, coords, g, weights):
        """``c_0^T weights`` of group `g` at `coords` (``weights`` ``(n_g, q)``), the
        cross-covariance compressed to the likelihood's accuracy."""
        sites = self.lik.coords if g.sites is None else self.lik.coords[g.sites]
        kernel, distance = self.lik.kernel, self.lik.distance
        accuracy = getattr(self.lik, "accuracy", None) or CROSS_ACCURACY

        def block(i, j):
            return cross_correlation(kernel, distance, self.theta, coords[i], sites[j])

        def between(P, Q):
            return cross_correlation(kernel, EUCLIDEAN, self.theta, P, Q)

        return self.params["variance"] * compressed_cross_product(
            block, coords, sites, weights, accuracy, distance, kernel, between
        )

    def _variance(self, c0, design, g):
        var = self.params["variance"] - g.quadratic(c0.T)
        if g.ftcf_chol is not None:
            u = remove_means(design, g.shift).T - g.cinv_f.T @ c0.T  # (p, m_c)
            var += np.einsum("ij,ij->j", u, cho_solve((g.ftcf_chol, True), u, check_finite=False))
        return np.maximum(var, 0.0)

    def posterior_covariance(self, coords, design, group):
        """Joint covariance of the kriging errors at new sites for one group of replicates."""
        g = self.groups[group]
        c0 = self._cross(coords, g.sites)
        cov = self._covariance(coords, coords)
        cov -= c0 @ g.cinv(c0.T)
        if g.ftcf_chol is not None:
            u = remove_means(design, g.shift).T - g.cinv_f.T @ c0.T
            cov += u.T @ cho_solve((g.ftcf_chol, True), u, check_finite=False)
        return 0.5 * (cov + cov.T)

    @one_blas_thread
    def sample(self, coords, design, n_samples, rng):
        """Conditional simulations of the latent process at new sites.

        Returns
        -------
        ndarray of shape (m, r, n_samples)

        Raises
        ------
        MemoryError
            If the ``m x m`` joint conditional covariance would not fit in memory.
        """
        m = coords.shape[0]
        n_train = max(self.lik.n if g.sites is None else g.sites.size for g in self.lik.groups)
        # c0 and C^-1 c0 (m x n), the joint covariance, its eigenvectors, eigh's workspace
        check_memory(
            8.0 * (2 * m * n_train + 5 * m * m),
            f"conditional simulation at m = {m:,} sites",
            "draw at fewer sites at a time (each call conditions on the data, but draws made "
            "in separate calls are not jointly distributed), or use predict for means and "
            "standard deviations.",
        )
        mean = self.predict(coords, design)
        r = mean.shape[1]
        out = np.empty((m, r, n_samples))
        for k, g in enumerate(self.groups):
            root = _psd_root(self.posterior_covariance(coords, design, k), self.params["variance"])
            for j in g.columns:
                out[:, j, :] = mean[:, j, None] + root @ rng.standard_normal(
                    (root.shape[1], n_samples)
                )
        return out


def _psd_root(cov, scale):
    """A square root ``B`` with ``B B^T = cov`` for a positive semidefinite matrix.

    Eigenvalues below ``-1e-8 * scale`` mean the matrix is not a covariance and raise;
    smaller negative ones are rounding error and are set to zero.
    """
    values, vectors = np.linalg.eigh(cov)
    if values.size and values[0] < -1e-8 * scale * max(1, cov.shape[0]):
        raise NotPositiveDefiniteError(
            "the conditional covariance of the new sites has a negative eigenvalue "
            f"{values[0]:.3g}; the sites may be duplicated or the parameters ill-conditioned.",
            tile=0,
        )
    keep = values > 0
    return vectors[:, keep] * np.sqrt(values[keep])
