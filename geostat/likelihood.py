r"""Gaussian log-likelihood of a spatial process, exact (dense) evaluation.

Model: each replicate ``y_j`` observed on sites ``S_j`` is Gaussian with mean
``F_j beta_j`` and covariance ``C = variance * R(theta) + nugget * I`` restricted to
``S_j``, where ``R`` is the kernel correlation. With ``eta = nugget / variance`` and
``K = R + eta I`` (so ``C = variance * K``) the full log-likelihood is

.. math::

    \ell = -\tfrac12 \bigl[Q / \sigma^2 + N \log(2\pi\sigma^2) + \log\det K\bigr],
    \qquad Q = \sum_j (y_j - F_j\hat\beta_j)^T K_j^{-1} (y_j - F_j\hat\beta_j),

with ``beta`` profiled by generalized least squares and ``N`` the number of observed
values. REML replaces ``N`` by ``N - r p`` and adds ``log det(F^T K^{-1} F)`` for each
replicate (the constant ``log det(F^T F)`` is omitted, as in most software). Profiling
the variance gives ``sigma^2 = Q / N`` (REML: ``Q / (N - r p)``).

Every gradient is assembled from two kinds of scalars, computed once per evaluation:
``quad(A) = sum_j alpha_j^T A alpha_j`` with ``alpha_j = P_j y_j`` and
``trace(A) = sum_j tr(P_j A)``, where ``P = K^{-1}`` (ML) or the REML projection
``K^{-1} - K^{-1} F (F^T K^{-1} F)^{-1} F^T K^{-1}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import squareform

from tlrcore import NotPositiveDefiniteError, batched

from geostat.checks import check_memory
from geostat.gls import LOG_2PI, block, check_groups, gls, group_by_pattern, trend_estimates
from geostat.safeguard import check_on_failure, dense_shifts
from geostat.solvers import DenseCholesky, one_blas_thread
from geostat.tabulation import LogDistanceTable

__all__ = ["ExactLikelihood", "Terms", "split_params"]

#: Pair counts between which costly kernels (Bessel functions) are evaluated through a
#: :class:`~geostat.tabulation.LogDistanceTable`; above the upper one its weights would
#: need more memory than the covariance matrix itself.
TABULATE_PAIRS = (100_000, 50_000_000)


@dataclass
class Terms:
    """Scalars of one likelihood evaluation at ``K = R + eta I`` (see module docstring)."""

    n_obs: int
    n_eff: int
    logdet: float
    logdet_trend: float
    quadratic: float
    quad: dict = field(default_factory=dict)
    trace: dict = field(default_factory=dict)

    def profiled_value(self):
        """Log-likelihood with the variance profiled out."""
        scale = self.quadratic / self.n_eff
        return -0.5 * (self.n_eff * (LOG_2PI + np.log(scale) + 1.0) + self.logdet + self.logdet_trend)

    def profiled_gradient(self, names):
        """Derivatives of :meth:`profiled_value` along ``dK`` for each name.

        ``"eye"`` stands for the nugget ratio ``eta`` (``dK/deta = I``).
        """
        scale = self.quadratic / self.n_eff
        return {k: 0.5 * self.quad[k] / scale - 0.5 * self.trace[k] for k in names}

    def full_value(self, variance):
        """Log-likelihood at a given variance (``K`` already holds ``eta``)."""
        return -0.5 * (
            self.quadratic / variance
            + self.n_eff * (LOG_2PI + np.log(variance))
            + self.logdet
            + self.logdet_trend
        )

    def full_gradient(self, variance, eta, names):
        """Derivatives of :meth:`full_value` with respect to natural parameters.

        ``"variance"`` and ``"nugget"`` are handled here; every other name is a
        correlation parameter with ``dC = variance * dR``.
        """
        s = variance
        out = {}
        for k in names:
            if k == "variance":
                quad_r = self.quadratic - eta * self.quad["eye"]
                trace_r = self.n_eff - eta * self.trace["eye"]
                out[k] = 0.5 * quad_r / s**2 - 0.5 * trace_r / s
            elif k == "nugget":
                out[k] = 0.5 * self.quad["eye"] / s**2 - 0.5 * self.trace["eye"] / s
            else:
                out[k] = 0.5 * self.quad[k] / s - 0.5 * self.trace[k]
        return out


class ExactLikelihood:
    """Log-likelihood of one dataset under one kernel, with dense Cholesky factors.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    y : ndarray of shape (n, r)
        NaN marks a site missing on a replicate.
    design : ndarray of shape (n, p)
        Trend design matrix; each replicate has its own coefficients.
    kernel : geostat.kernels.Kernel
    distance : geostat.distance.Distance
    reml : bool, default False
    on_failure : {"shift", "step", "raise"}, default "shift"
        What a covariance that is not numerically positive definite does; see
        :mod:`geostat.safeguard`.

    Raises
    ------
    ValueError
        If some replicate has no more observed sites than trend coefficients.
    TrendNotIdentifiableError
        If the design matrix is rank deficient on the observed sites.
    """

    has_gradient = True
    method = "exact"
    accuracy = None

    def __init__(self, coords, y, design, kernel, distance, reml=False, on_failure="shift"):
        self.on_failure = check_on_failure(on_failure)
        self.n_safeguarded = 0
        self.kernel = kernel
        self.distance = distance
        self.reml = bool(reml)
        self.n = coords.shape[0]
        self.n_coef = design.shape[1]
        self.coords, self.y, self.design = coords, y, design
        _check_memory(self.n, 4 + len(kernel.free_shape))
        self.pair_distances = distance.pairwise(coords)
        pairs = self.pair_distances.size
        costly = getattr(kernel, "costly", False)
        self._table = LogDistanceTable(self.pair_distances) if costly and TABULATE_PAIRS[0] <= pairs <= TABULATE_PAIRS[1] else None
        self.groups = group_by_pattern(y, design)
        self.n_replicates = y.shape[1]
        self.n_obs = int(sum(g.y.size for g in self.groups))
        self.n_eff = self.n_obs - (self.n_coef * self.n_replicates if self.reml else 0)
        check_groups(self.groups, self.n_coef)

    def subset(self, sites):
        """The likelihood of the same model on the sites `sites` only."""
        return ExactLikelihood(
            self.coords[sites], self.y[sites], self.design[sites], self.kernel, self.distance, self.reml,
            self.on_failure,
        )

    def _factor(self, K, eta):
        """Dense Cholesky factor of ``K = R + eta I`` (overwritten), shifted on failure
        under ``on_failure="shift"``."""
        shifts = dense_shifts(1.0 + eta) if self.on_failure == "shift" else ()
        chol = DenseCholesky(K, overwrite=True, shifts=shifts)
        if chol.shift:
            self.n_safeguarded += 1
        return chol

    def _group_factors(self, R, eta):
        """``(group, factor)`` for each group of replicates: the dense Cholesky factor of
        ``K = R + eta I`` on the group's sites.

        One group is factored in place, as ``R`` itself when every site is observed (``R``
        is then overwritten). Several groups go through :func:`tlrcore.batched.cholesky`,
        as many at a time as fit in the ``n x n`` entries of one full covariance (their
        factors need as much again; :func:`_check_memory` allows for both). If one fails,
        that batch is factored group by group through :meth:`_factor`, which applies the
        ``on_failure`` policy (a shift, or the error). This is the path a GPU back end will
        batch; on the 2-core CPU, :meth:`terms` takes as long as with every group factored in
        place (n = 2,000, 6 groups; it was 1-26% slower while the NumPy back end used
        NumPy's stacked Cholesky, which copies each matrix in and out).
        """
        if len(self.groups) == 1:
            g = self.groups[0]
            K = block(R, g.sites, copy=False)
            K.flat[:: K.shape[0] + 1] += eta
            yield g, self._factor(K, eta)
            return
        for chunk in fitting_runs(self.groups, self.n * self.n):
            Ks = []
            for g in chunk:
                K = block(R, g.sites, copy=True)
                K.flat[:: K.shape[0] + 1] += eta
                Ks.append(K)
            try:
                # "group": no padded copies, so the memory bound above holds. K is symmetric,
                # so K.T is the same matrix, in the column order LAPACK reads without a
                # transposing copy (measured: 5-10% of the factorization at n = 1,400).
                Ls = batched.cholesky([K.T for K in Ks], strategy="group", check_finite=False)
            except NotPositiveDefiniteError:
                factors = [self._factor(K, eta) for K in Ks]
            else:
                del Ks
                factors = [DenseCholesky.from_factor(L) for L in Ls]
                del Ls
            yield from zip(chunk, factors)

    @property
    def min_distance(self):
        """Smallest distance between two sites (0.0 for duplicate sites)."""
        return float(self.pair_distances.min()) if self.pair_distances.size else np.inf

    @property
    def max_distance(self):
        """Largest distance between two sites."""
        return float(self.pair_distances.max()) if self.pair_distances.size else 0.0

    def correlation(self, theta, gradient=False):
        """Correlation matrix ``R`` and, optionally, ``dR`` for each free kernel parameter.

        Parameters
        ----------
        theta : dict
            ``range`` and the kernel's shape parameters.
        gradient : bool

        Returns
        -------
        R : ndarray of shape (n, n)
        dR : dict of str to ndarray of shape (n, n)
        """
        shape = {k: v for k, v in theta.items() if k != "range"}
        if self._table is not None:
            values, grads = self._table.evaluate(self.kernel, theta["range"], shape, gradient)
        elif gradient:
            values, grads = self.kernel.correlation_and_gradient(self.pair_distances, theta["range"], **shape)
        else:
            values, grads = self.kernel.correlation(self.pair_distances, theta["range"], **shape), {}
        dR = {k: squareform(v, checks=False) for k, v in grads.items()}
        R = squareform(values, checks=False)
        np.fill_diagonal(R, 1.0)
        return R, dR

    @one_blas_thread
    def terms(self, theta, eta, gradient=False):
        """Evaluate the likelihood scalars at correlation parameters `theta` and ratio `eta`.

        Raises
        ------
        tlrcore.NotPositiveDefiniteError
            If ``R + eta I`` is not numerically positive definite on some group of sites.
        """
        R, dR = self.correlation(theta, gradient)
        n_obs, p = self.n_obs, self.n_coef
        logdet = logdet_trend = quadratic = 0.0
        names = [*dR, "eye"] if gradient else []
        quad = dict.fromkeys(names, 0.0)
        trace = dict.fromkeys(names, 0.0)
        for g, chol in self._group_factors(R, eta):
            fit = gls(chol, g.y, g.design)
            logdet += g.r * chol.logdet()
            quadratic += float(np.sum(fit.residual * fit.alpha))
            if self.reml and p:
                logdet_trend += g.r * fit.logdet_ftkf
            if not gradient:
                continue
            # tr(K^-1 D) = 2 sum(tril(K^-1) * D) for symmetric D with zero diagonal.
            W = chol.inverse_lower()
            reml_trend = self.reml and p
            for k, D in dR.items():
                Dg = block(D, g.sites, copy=False)
                quad[k] += float(np.sum((Dg @ fit.alpha) * fit.alpha))
                tr = 2.0 * float(np.einsum("ij,ij->", W, Dg))
                if reml_trend:
                    tr -= float(np.trace(fit.ftkf_solve(fit.kinv_f.T @ (Dg @ fit.kinv_f))))
                trace[k] += g.r * tr
            quad["eye"] += float(np.sum(fit.alpha**2))
            tr = float(np.trace(W))
            if reml_trend:
                tr -= float(np.trace(fit.ftkf_solve(fit.kinv_f.T @ fit.kinv_f)))
            trace["eye"] += g.r * tr
        n_eff = n_obs - (p * self.n_replicates if self.reml else 0)
        return Terms(n_obs, n_eff, logdet, logdet_trend, quadratic, quad, trace)

    @one_blas_thread
    def gls(self, params):
        """Generalized least-squares trend at natural parameters.

        Parameters
        ----------
        params : dict
            ``variance``, ``range``, ``nugget`` and shape parameters.

        Returns
        -------
        coef : ndarray of shape (r, p)
        coef_cov : ndarray of shape (r, p, p)
            Covariance of each replicate's coefficient estimate.
        """
        theta, eta = split_params(params, self.kernel)
        factors = self.factors(theta, eta)
        return trend_estimates(self.groups, factors, params["variance"], self.n_replicates, self.n_coef)

    @one_blas_thread
    def factors(self, theta, eta):
        """Cholesky factors of ``K = R + eta I`` on each group's sites.

        Returns
        -------
        list of DenseCholesky
        """
        R, _ = self.correlation(theta)
        return [chol for _, chol in self._group_factors(R, eta)]

    def log_likelihood(self, params):
        """Full log-likelihood at natural parameters with the trend profiled by GLS."""
        theta, eta = split_params(params, self.kernel)
        return float(self.terms(theta, eta).full_value(params["variance"]))

    def loglik_error(self, params):
        """Error of the log-likelihood due to approximation: none (0.0) for dense factors."""
        return 0.0

    @one_blas_thread
    def fisher_information(self, params, names, return_error=False):
        """Expected Fisher information of the covariance parameters.

        ``I_ab = 1/2 sum_j tr(P_j dC_a P_j dC_b)``, with ``P`` the inverse covariance
        (ML) or the REML projection, at natural parameters.

        Parameters
        ----------
        params : dict
        names : sequence of str
            Parameters to include, e.g. ``["variance", "range", "nugget"]``.

        return_error : bool, default False
            Also return the relative error of the entries (0.0: computed exactly).

        Returns
        -------
        info : ndarray of shape (len(names), len(names))
        relative_error : float, only when `return_error`
        """
        theta, eta = split_params(params, self.kernel)
        s = params["variance"]
        R, dR = self.correlation(theta, gradient=True)
        info = np.zeros((len(names), len(names)))
        for g in self.groups:
            Rg = block(R, g.sites, copy=False)
            K = Rg + eta * np.eye(Rg.shape[0])
            chol = self._factor(K, eta)
            W = chol.inverse() / s
            if self.reml and self.n_coef:
                fit = gls(chol, g.y, g.design)
                W -= fit.kinv_f @ fit.ftkf_solve(fit.kinv_f.T) / s
            products = []
            for name in names:
                if name == "variance":
                    products.append(W @ Rg)
                elif name == "nugget":
                    products.append(W)
                else:
                    products.append(s * (W @ block(dR[name], g.sites, copy=False)))
            for a, A in enumerate(products):
                for b in range(a + 1):
                    value = 0.5 * g.r * float(np.einsum("ij,ji->", A, products[b]))
                    info[a, b] = info[b, a] = info[a, b] + value
        return (info, 0.0) if return_error else info


def _check_memory(n, matrices):
    """Refuse an exact likelihood whose dense n x n work arrays cannot fit in memory."""
    check_memory(matrices * 8.0 * n * n, f"the exact likelihood at n = {n:,}",
                 "fit a subset of the sites, or use the tile low-rank method (method='tlr').")


def fitting_runs(groups, entries, order=lambda g: g.y.shape[0]):
    """Consecutive runs of `groups` whose matrices (of order ``order(group)``) hold at most
    `entries` entries in all (a group larger than that alone)."""
    run, used = [], 0
    for g in groups:
        size = order(g) ** 2
        if run and used + size > entries:
            yield run
            run, used = [], 0
        run.append(g)
        used += size
    if run:
        yield run


def split_params(params, kernel):
    """Split natural parameters into correlation parameters and the nugget ratio."""
    theta = {"range": float(params["range"])}
    for name in kernel.shape_names:
        if name in params:
            theta[name] = float(params[name])
    variance = float(params["variance"])
    return theta, float(params.get("nugget", 0.0)) / variance
