r"""Exact Gaussian log-likelihood through dense Cholesky factors, on any array back end.

The model and the scalars are those of :mod:`geostat.likelihood.terms`
(``K = R + eta I + nu V``). The ``n x n`` arrays live on the likelihood's back end
(NumPy, or CuPy on a GPU); only scalars and the small GLS trend matrices cross to the
host. Gradient traces use the lower triangle ``W`` of ``K^{-1}``:
``tr(K^{-1} dR) = 2 sum(W * dR)`` (``dR`` symmetric with a zero diagonal),
``tr(K^{-1}) = sum diag(W)`` and ``tr(K^{-1} V) = sum diag(W) * noise``, less the REML
trend part. Memory: :func:`dense_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geostat.covariance import Sites
from geostat.errors import NotPositiveDefiniteError
from geostat.likelihood.base import Likelihood
from geostat.likelihood.failure import dense_shifts
from geostat.likelihood.gls import gls
from geostat.likelihood.terms import Terms, resolve_noise_ratio
from geostat.solvers import NUMPY, DenseCholesky, dense_cholesky_batch, one_blas_thread

__all__ = ["ExactLikelihood", "dense_bytes", "fits_in_memory", "fitting_runs"]

#: Fraction of the back end's free memory the dense likelihood may plan to use.
MEMORY_FRACTION = 0.9


def dense_bytes(n, n_gradients):
    """Peak memory (bytes) of the dense likelihood on `n` sites, about.

    In ``n x n`` float64 matrices, with ``q = n_gradients``: a value with its gradient
    holds ``R``, ``q`` derivatives, the factor, its inverse and a transient (``q + 4``);
    the Fisher information ``R``, the derivatives, the inverse, ``q + 1`` products and a
    transient (``2 q + 4``, the larger). ``q`` counts the range and free shape parameters.
    """
    return 8.0 * n * n * (2 * n_gradients + 4)


def fits_in_memory(backend, n, n_gradients):
    """Whether :func:`dense_bytes` fits in the back end's free memory (with a margin)."""
    return dense_bytes(n, n_gradients) <= MEMORY_FRACTION * backend.free_memory()


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


@dataclass
class _GroupArrays:
    """A replicate group's arrays on the back end."""

    sites: object  # indices of the observed sites, or None for all
    y: object  # (n_g, r_g)
    design: object  # (n_g, p)
    noise: object  # (n_g,) known noise variances, or None
    largest_noise: float  # their largest (0.0 without)


class ExactLikelihood(Likelihood):
    """Log-likelihood of one dataset under one kernel, with dense Cholesky factors.

    The parameters and errors are those of :class:`~geostat.likelihood.base.Likelihood`,
    and MemoryError if the dense matrices (:func:`dense_bytes`) do not fit in the back
    end's free memory.
    """

    has_gradient = True
    method = "exact"
    accuracy = None
    adaptive = False

    def __init__(
        self,
        coords,
        y,
        design,
        kernel,
        distance,
        reml=False,
        on_failure="shift",
        backend=NUMPY,
        noise=None,
    ):
        super().__init__(coords, y, design, kernel, distance, reml, on_failure, backend, noise)
        self._check_memory()
        self.sites = Sites(coords, distance, backend)
        xp, put = backend.xp, backend.asarray
        self._arrays = [
            _GroupArrays(
                None if g.sites is None else xp.asarray(g.sites),
                put(g.y),
                put(g.design),
                None if noise is None else put(noise),
                0.0 if noise is None else float(noise.max(initial=0.0)),
            )
            for g, noise in zip(self.groups, self.group_noise, strict=True)
        ]

    def _check_memory(self):
        n_gradients = 1 + len(self.kernel.free_shape)
        if not fits_in_memory(self.backend, self.n, n_gradients):
            need, free = dense_bytes(self.n, n_gradients), self.backend.free_memory()
            raise MemoryError(
                f"the exact likelihood at n = {self.n:,} needs about {need / 2**30:.1f} GiB of "
                f"dense matrices but {free / 2**30:.1f} GiB is free ({self.backend.name} back "
                "end); fit a subset of the sites, or use the tile low-rank method "
                "(method='tlr')."
            )

    def describe(self):
        """The method in words, for the log."""
        need = dense_bytes(self.n, 1 + len(self.kernel.free_shape))
        groups = (
            f", {len(self.groups)} groups of replicates sharing sites"
            if len(self.groups) > 1
            else ""
        )
        return (
            f"dense Cholesky factors of {self.n:,} sites (about {need / 2**30:.2g} GiB at "
            f"most){groups}"
        )

    def describe_factors(self):
        """None: dense factors are not kept."""
        return None

    def subset(self, sites):
        """The likelihood of the same model on the sites `sites` only (same back end)."""
        return ExactLikelihood(
            self.coords[sites],
            self.y[sites],
            self.design[sites],
            self.kernel,
            self.distance,
            self.reml,
            self.on_failure,
            self.backend,
            None if self.noise is None else self.noise[sites],
        )

    def correlation(self, theta, gradient=False):
        """Correlation matrix ``R`` and, optionally, ``dR`` for each free kernel parameter
        (:meth:`geostat.covariance.Sites.correlation`)."""
        return self.sites.correlation(self.kernel, theta, gradient)

    def _block(self, matrix, sites, copy=False):
        """Rows and columns `sites` of `matrix` (all when None), copied if asked or needed."""
        if sites is None:
            return matrix.copy() if copy else matrix
        return matrix[sites[:, None], sites[None, :]]

    def _group_matrix(self, R, arrays, eta, nu, copy):
        """``K = R + eta I + nu V`` on a group's sites (in `R`'s memory unless copied or a
        subset)."""
        K = self._block(R, arrays.sites, copy)
        diagonal = self.backend.xp.arange(K.shape[0])
        K[diagonal, diagonal] += eta if arrays.noise is None else eta + nu * arrays.noise
        return K

    def _factor(self, K, arrays, eta, nu):
        """Factor of a group's ``K = R + eta I + nu V`` (overwritten), shifted on failure
        under ``on_failure="shift"`` (the shifts scaled by the largest diagonal entry)."""
        top = 1.0 + eta + nu * arrays.largest_noise
        shifts = dense_shifts(top) if self.on_failure in ("shift", "compensate") else ()
        chol = DenseCholesky(K, self.backend, overwrite=True, shifts=shifts)
        if chol.shift:
            self.n_safeguarded += 1
        return chol

    def _group_factors(self, R, eta, nu):
        """``((group, arrays), factor)`` for each group of replicates: the Cholesky factor
        of ``K = R + eta I + nu V`` on the group's sites.

        One group is factored in `R`'s memory (``R`` is overwritten when every site is
        observed). Several are factored in batches that fit in ``n x n`` entries; a
        failed batch is refactored group by group under the ``on_failure`` policy.
        """
        pairs = list(zip(self.groups, self._arrays, strict=True))
        if len(pairs) == 1:
            arrays = pairs[0][1]
            yield (
                pairs[0],
                self._factor(self._group_matrix(R, arrays, eta, nu, copy=False), arrays, eta, nu),
            )
            return
        for run in fitting_runs(pairs, self.n * self.n, order=lambda pair: pair[0].y.shape[0]):
            Ks = [self._group_matrix(R, arrays, eta, nu, copy=True) for _, arrays in run]
            try:
                factors = dense_cholesky_batch(Ks, self.backend)
            except NotPositiveDefiniteError:
                factors = [
                    self._factor(K, arrays, eta, nu) for K, (_, arrays) in zip(Ks, run, strict=True)
                ]
            del Ks
            yield from zip(run, factors, strict=True)

    def _trend_trace(self, fit, A):
        """``tr((F^T K^{-1} F)^{-1} (K^{-1} F)^T A (K^{-1} F))``: the REML part of ``tr(P A)``."""
        return float(np.trace(fit.ftkf_solve(self.backend.to_host(fit.kinv_f.T @ A))))

    @one_blas_thread
    def terms(self, theta, eta, gradient=False, correlation=None, noise_ratio=None):
        """Evaluate the likelihood scalars at correlation parameters `theta` and ratio `eta`.

        With `gradient`, also ``quad`` and ``trace`` of each ``dR``, of ``"eye"`` and
        (known noise) of ``"noise"``. `correlation`: ``(R, dR)`` at `theta` computed by
        the caller (``R`` is overwritten). `noise_ratio` (``nu = 1 / variance``) is
        required with known noise. Returns :class:`~geostat.likelihood.terms.Terms`;
        raises NotPositiveDefiniteError if some ``K`` is not numerically positive
        definite after the shifts of ``on_failure``.
        """
        xp = self.backend.xp
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        R, dR = self.correlation(theta, gradient) if correlation is None else correlation
        reml_trend = self.reml and self.n_coef
        logdet = logdet_trend = quadratic = 0.0
        names = ([*dR, "eye"] + ([] if self.noise is None else ["noise"])) if gradient else []
        quad = dict.fromkeys(names, 0.0)
        trace = dict.fromkeys(names, 0.0)
        for (g, arrays), chol in self._group_factors(R, eta, nu):
            fit = gls(chol, arrays.y, arrays.design)
            logdet += g.r * chol.logdet()
            quadratic += float(xp.sum(fit.residual * fit.alpha))
            if reml_trend:
                logdet_trend += g.r * fit.logdet_ftkf
            if not gradient:
                continue
            W = chol.inverse(lower=True)
            del chol  # the factor is not needed any more: free its memory for the traces
            for k, D in dR.items():
                Dg = self._block(D, arrays.sites)
                quad[k] += float(xp.sum((Dg @ fit.alpha) * fit.alpha))
                tr = 2.0 * float(xp.einsum("ij,ij->", W, Dg))
                if reml_trend:
                    tr -= self._trend_trace(fit, Dg @ fit.kinv_f)
                trace[k] += g.r * tr
            quad["eye"] += float(xp.sum(fit.alpha**2))
            tr = float(xp.trace(W))
            if reml_trend:
                tr -= self._trend_trace(fit, fit.kinv_f)
            trace["eye"] += g.r * tr
            if arrays.noise is not None:
                quad["noise"] += float(xp.sum(fit.alpha**2 * arrays.noise[:, None]))
                tr = float(xp.sum(xp.diagonal(W) * arrays.noise))
                if reml_trend:
                    tr -= self._trend_trace(fit, arrays.noise[:, None] * fit.kinv_f)
                trace["noise"] += g.r * tr
        return Terms(self.n_obs, self.n_eff, logdet, logdet_trend, quadratic, quad, trace, nu)

    @one_blas_thread
    def factors(self, theta, eta, noise_ratio=None):
        """Cholesky factors (:class:`geostat.solvers.DenseCholesky`) of
        ``K = R + eta I + nu V`` on each group's sites; `noise_ratio` as for
        :meth:`terms`."""
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        R, _ = self.correlation(theta)
        return [chol for _, chol in self._group_factors(R, eta, nu)]

    def log_likelihood(self, params):
        """Full log-likelihood at natural parameters with the trend profiled by GLS."""
        theta, eta, noise_ratio = self.split(params)
        return float(self.terms(theta, eta, noise_ratio=noise_ratio).full_value(params["variance"]))

    def loglik_error(self, params):
        """Error of the log-likelihood due to approximation: none (0.0) for dense factors."""
        return 0.0

    @one_blas_thread
    def fisher_information(self, params, names, return_error=False):
        """Expected Fisher information of the covariance parameters.

        ``I_ab = 1/2 sum_j tr(P_j dC_a P_j dC_b)``, with ``P`` the inverse covariance
        (ML) or the REML projection, at natural parameters.

        Returns ``info`` ``(len(names), len(names))`` for the parameters `names`, and
        with `return_error` also its relative error, 0.0 (computed exactly).
        """
        xp = self.backend.xp
        theta, eta, noise_ratio = self.split(params)
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        s = params["variance"]
        R, dR = self.correlation(theta, gradient=True)
        info = np.zeros((len(names), len(names)))
        for g, arrays in zip(self.groups, self._arrays, strict=True):
            chol = self._factor(self._group_matrix(R, arrays, eta, nu, copy=True), arrays, eta, nu)
            W = chol.inverse()
            W /= s
            if self.reml and self.n_coef:
                fit = gls(chol, arrays.y, arrays.design)
                inner = self.backend.asarray(fit.ftkf_solve(np.eye(self.n_coef)))
                W -= (fit.kinv_f @ inner) @ fit.kinv_f.T / s
            del chol
            products = []
            for name in names:
                if name == "variance":
                    products.append(self.backend.matmul(W, self._block(R, arrays.sites)))
                elif name == "nugget":
                    products.append(W)
                else:
                    products.append(s * self.backend.matmul(W, self._block(dR[name], arrays.sites)))
            for a, A in enumerate(products):
                for b in range(a + 1):
                    value = 0.5 * g.r * float(xp.einsum("ij,ji->", A, products[b]))
                    info[a, b] = info[b, a] = info[a, b] + value
        return (info, 0.0) if return_error else info
