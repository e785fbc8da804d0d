r"""Exact (dense) Gaussian log-likelihood on an array back end: the GPU's "native mode".

The same model, parameters and results as :class:`geostat.likelihood.ExactLikelihood`
(see its module for the formulas), with every ``n x n`` array on the back end
(``backend.xp``: CuPy on a GPU, NumPy standing in for tests):

* the correlation ``R`` and its parameter derivatives are formed on the device from the
  sites held there (:class:`geostat.device.DeviceSites`,
  :meth:`geostat.kernels.Kernel.device_correlation_and_gradient`);
* ``K = R + eta I`` is factored by ``backend.cholesky`` (cuSOLVER ``potrf`` on a GPU); a
  failed factorization (``info > 0``) is retried with the shifts of
  :func:`geostat.safeguard.dense_shifts` under ``on_failure="shift"``, as on the CPU;
* solves use ``backend.solve_triangular``; the log-determinant comes from the factor's
  diagonal;
* gradient traces ``tr(K^{-1} dR)`` use the inverse ``K^{-1} = L^{-T} L^{-1}`` (one
  triangular solve with ``n`` right-hand sides and one GEMM: about three times the
  flops of the factorization) and one dot product per parameter.

Only scalars and the small ``p x p`` and ``p x r`` trend matrices of the GLS cross to the
host during an evaluation. Memory: see :func:`device_exact_bytes`.

Factors returned by :meth:`DeviceExactLikelihood.factors` solve host right-hand sides
into host results, so kriging (:class:`geostat.predict.Kriging`) after a device fit
forms its cross-covariances on the CPU and solves with the device factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geostat.device import DeviceSites
from geostat.distance import SiteDistanceExtremes
from geostat.gls import check_groups, gls, group_by_pattern, trend_estimates
from geostat.likelihood import Terms, fitting_runs, split_params
from geostat.safeguard import check_on_failure, dense_shifts
from geostat.solvers import not_positive_definite
from tlrcore import batched
from tlrcore.backends import get_backend
from tlrcore.errors import NotPositiveDefiniteError

__all__ = ["DeviceCholesky", "DeviceExactLikelihood", "device_exact_bytes", "fits_on_device"]

#: Fraction of the back end's free memory the dense likelihood may plan to use.
MEMORY_FRACTION = 0.9


def device_exact_bytes(n, n_gradients):
    """Peak device memory (bytes) of the dense likelihood on `n` sites, about.

    Counted from the code (not measured on a GPU) in ``n x n`` float64 matrices, with
    ``q = n_gradients`` correlation derivatives: a value with its gradient holds ``R``, the
    ``q`` derivatives, the factor, its inverse and one transient (a group's ``K``, the
    Cholesky copy or the identity of the triangular solve): ``q + 4``; the Fisher
    information holds ``R``, the derivatives, the inverse, ``q + 1`` products and a
    transient: ``2 q + 4``, the larger. The kernel's chunk temporaries
    (:data:`geostat.kernels._base.DEVICE_CHUNK`) add about 1 GiB.

    Parameters
    ----------
    n : int
    n_gradients : int
        Correlation parameters with derivatives: the range and the free shape parameters.

    Returns
    -------
    float
    """
    return 8.0 * n * n * (2 * n_gradients + 4)


def fits_on_device(backend, n, n_gradients):
    """Whether :func:`device_exact_bytes` fits in the back end's free memory (with a margin)."""
    return device_exact_bytes(n, n_gradients) <= MEMORY_FRACTION * get_backend(backend).free_memory()


class DeviceCholesky:
    """Cholesky factorization ``K = L L^T`` of a dense matrix held on a back end.

    Parameters
    ----------
    matrix : array of shape (n, n) on `backend`
        Symmetric positive definite; only the lower triangle is read. Not modified.
    backend : tlrcore.backends.Backend
    shifts : sequence of float, default ()
        If the factorization fails, factor ``matrix + s I`` for the first ``s`` that
        works; ``.shift``, ``.perturbation`` (``s sqrt(n)``) and
        ``.relative_perturbation`` record it (0.0 when not needed), as
        :class:`geostat.solvers.DenseCholesky`.

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If a pivot is not positive (with every shift); the message gives the failing
        leading order.
    """

    def __init__(self, matrix, backend, shifts=()):
        self.backend = backend
        self.n = matrix.shape[0]
        self.shift = self.perturbation = self.relative_perturbation = 0.0
        L, info = backend.cholesky(matrix)
        if int(info) and shifts:
            L, info = self._shifted(matrix, shifts)
        if int(info):
            raise not_positive_definite(int(info), self.n)
        self.L = L

    @classmethod
    def from_factor(cls, L, backend):
        """Wrap the lower Cholesky factor `L` (on `backend`) of a positive definite matrix,
        computed elsewhere (:func:`tlrcore.batched.cholesky`) without a shift."""
        self = cls.__new__(cls)
        self.backend, self.L, self.n = backend, L, L.shape[0]
        self.shift = self.perturbation = self.relative_perturbation = 0.0
        return self

    def _shifted(self, matrix, shifts):
        xp = self.backend.xp
        diagonal = xp.arange(self.n)
        for shift in shifts:
            trial = matrix.copy()
            trial[diagonal, diagonal] += shift
            L, info = self.backend.cholesky(trial)
            if not int(info):
                self.shift = float(shift)
                self.perturbation = float(shift) * np.sqrt(self.n)
                self.relative_perturbation = self.perturbation / float(xp.linalg.norm(matrix))
                break
        return L, info

    @property
    def nbytes(self):
        """Bytes held by the factor."""
        return self.L.nbytes

    def logdet(self):
        """Return ``log det K``."""
        xp = self.backend.xp
        return 2.0 * float(xp.sum(xp.log(xp.diagonal(self.L))))

    def _on_device(self, b, func):
        """``func`` applied to `b` on the back end; a host (NumPy) `b` gives a host result."""
        x = func(self.backend.asarray(b))
        return self.backend.to_host(x) if isinstance(b, np.ndarray) else x

    def solve_lower(self, b):
        """Return ``L^{-1} b`` (host in, host out; device in, device out)."""
        return self._on_device(b, lambda v: self.backend.solve_triangular(self.L, v, lower=True))

    def solve(self, b):
        """Return ``K^{-1} b`` for a vector or a matrix of right-hand sides (host or device)."""

        def solve(v):
            z = self.backend.solve_triangular(self.L, v, lower=True)
            return self.backend.solve_triangular(self.L, z, lower=True, trans=True)

        return self._on_device(b, solve)

    def inverse(self):
        """Return ``K^{-1} = L^{-T} L^{-1}`` as a full array on the back end."""
        L_inv = self.backend.solve_triangular(self.L, self.backend.xp.eye(self.n), lower=True)
        return L_inv.T @ L_inv


@dataclass
class _DeviceGroup:
    """A replicate group's arrays on the back end."""

    sites: object  # device indices of the observed sites, or None for all
    y: object  # (n_g, r_g)
    design: object  # (n_g, p)


class DeviceExactLikelihood(SiteDistanceExtremes):
    """Log-likelihood of one dataset under one kernel, with dense factors on an array back end.

    Used by the optimizer exactly like :class:`geostat.likelihood.ExactLikelihood`
    (same parameters and methods), with one more argument.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    y : ndarray of shape (n, r)
        NaN marks a site missing on a replicate.
    design : ndarray of shape (n, p)
    kernel : geostat.kernels.Kernel
    distance : geostat.distance.Distance
    reml : bool, default False
    on_failure : {"shift", "step", "raise"}, default "shift"
        See :mod:`geostat.safeguard`.
    backend : str or tlrcore.backends.Backend, default "cupy"
        Where the matrices live; ``"numpy"`` runs the same code on the CPU (for tests).

    Raises
    ------
    ValueError
        If some replicate has no more observed sites than trend coefficients, or the
        back end is not available.
    TrendNotIdentifiableError
        If the design matrix is rank deficient on the observed sites.
    MemoryError
        If the dense matrices (:func:`device_exact_bytes`) do not fit in the back end's
        free memory.
    """

    has_gradient = True
    method = "exact"
    accuracy = None

    def __init__(self, coords, y, design, kernel, distance, reml=False, on_failure="shift", backend="cupy"):
        self.backend = get_backend(backend)
        self.on_failure = check_on_failure(on_failure)
        self.n_safeguarded = 0
        self.kernel = kernel
        self.distance = distance
        self.reml = bool(reml)
        self.n = coords.shape[0]
        self.n_coef = design.shape[1]
        self.coords, self.y, self.design = coords, y, design
        self.groups = group_by_pattern(y, design)
        check_groups(self.groups, self.n_coef)
        self.n_replicates = y.shape[1]
        self.n_obs = int(sum(g.y.size for g in self.groups))
        self.n_eff = self.n_obs - (self.n_coef * self.n_replicates if self.reml else 0)
        self._check_memory()
        self.sites = DeviceSites(coords, distance, self.backend)
        put = self.backend.asarray
        self._device_groups = [
            _DeviceGroup(None if g.sites is None else self.backend.xp.asarray(g.sites), put(g.y), put(g.design))
            for g in self.groups
        ]
        self._extremes = None

    def _check_memory(self):
        n_gradients = 1 + len(self.kernel.free_shape)
        if not fits_on_device(self.backend, self.n, n_gradients):
            need, free = device_exact_bytes(self.n, n_gradients), self.backend.free_memory()
            raise MemoryError(
                f"the exact likelihood at n = {self.n} needs about {need / 2**30:.1f} GiB of dense matrices on "
                f"the {self.backend.name} back end but {free / 2**30:.1f} GiB is free; use method='tlr', fit a "
                "subset of the sites, or free device memory."
            )

    def subset(self, sites):
        """The likelihood of the same model on the sites `sites` only (same back end)."""
        return DeviceExactLikelihood(
            self.coords[sites], self.y[sites], self.design[sites], self.kernel, self.distance, self.reml,
            self.on_failure, self.backend,
        )

    def correlation(self, theta, gradient=False):
        """Correlation matrix ``R`` and, optionally, ``dR`` for each correlation parameter.

        Parameters
        ----------
        theta : dict
            ``range`` and the kernel's shape parameters.
        gradient : bool

        Returns
        -------
        R : array of shape (n, n) on the back end
        dR : dict of str to arrays of shape (n, n)
        """
        xp = self.backend.xp
        shape = {k: v for k, v in theta.items() if k != "range"}
        if gradient:
            return self.kernel.device_correlation_and_gradient(self.sites.distances(), theta["range"], xp, **shape)
        return self.kernel.device_correlation(self.sites.distances(), theta["range"], xp, **shape), {}

    def _block(self, matrix, sites, copy=False):
        """Rows and columns `sites` of `matrix` (all when None), copied if asked or needed."""
        if sites is None:
            return matrix.copy() if copy else matrix
        return matrix[sites[:, None], sites[None, :]]

    def _group_matrix(self, R, sites, eta, copy):
        """``K = R + eta I`` on a group's sites (in `R`'s memory unless copied or a subset)."""
        K = self._block(R, sites, copy)
        diagonal = self.backend.xp.arange(K.shape[0])
        K[diagonal, diagonal] += eta
        return K

    def _factor(self, K, eta):
        """Factor of ``K = R + eta I``, shifted on failure under ``on_failure="shift"``."""
        shifts = dense_shifts(1.0 + eta) if self.on_failure == "shift" else ()
        chol = DeviceCholesky(K, self.backend, shifts)
        if chol.shift:
            self.n_safeguarded += 1
        return chol

    def _group_factors(self, R, eta):
        """``((group, device group), factor)`` for each group of replicates: the Cholesky
        factor of ``K = R + eta I`` on the group's sites.

        One group is factored in `R`'s memory. Several go through
        :func:`tlrcore.batched.cholesky` (the groups of one size in one batched cuSOLVER
        call), as many at a time as fit in the ``n x n`` entries of one covariance; if one
        fails, that run is factored group by group through :meth:`_factor`, which applies
        the ``on_failure`` policy.
        """
        pairs = list(zip(self.groups, self._device_groups))
        if len(pairs) == 1:
            yield pairs[0], self._factor(self._group_matrix(R, pairs[0][1].sites, eta, copy=False), eta)
            return
        for run in fitting_runs(pairs, self.n * self.n, order=lambda pair: pair[0].y.shape[0]):
            Ks = [self._group_matrix(R, dg.sites, eta, copy=True) for _, dg in run]
            try:
                Ls = batched.cholesky(Ks, strategy="group", check_finite=False, backend=self.backend)
            except NotPositiveDefiniteError:
                factors = [self._factor(K, eta) for K in Ks]
            else:
                factors = [DeviceCholesky.from_factor(L, self.backend) for L in Ls]
            del Ks
            yield from zip(run, factors)

    def _trend_trace(self, fit, A):
        """``tr((F^T K^{-1} F)^{-1} (K^{-1} F)^T A (K^{-1} F))``: the REML part of ``tr(P A)``."""
        return float(np.trace(fit.ftkf_solve(self.backend.to_host(fit.kinv_f.T @ A))))

    def terms(self, theta, eta, gradient=False):
        """Evaluate the likelihood scalars at correlation parameters `theta` and ratio `eta`.

        Returns
        -------
        geostat.likelihood.Terms

        Raises
        ------
        tlrcore.NotPositiveDefiniteError
            If ``R + eta I`` is not numerically positive definite on some group of sites
            (after the shifts, under ``on_failure="shift"``).
        """
        xp = self.backend.xp
        R, dR = self.correlation(theta, gradient)
        p = self.n_coef
        reml_trend = self.reml and p
        logdet = logdet_trend = quadratic = 0.0
        names = [*dR, "eye"] if gradient else []
        quad = dict.fromkeys(names, 0.0)
        trace = dict.fromkeys(names, 0.0)
        for (g, dg), chol in self._group_factors(R, eta):
            fit = gls(chol, dg.y, dg.design, self.backend)
            logdet += g.r * chol.logdet()
            quadratic += float(xp.sum(fit.residual * fit.alpha))
            if reml_trend:
                logdet_trend += g.r * fit.logdet_ftkf
            if not gradient:
                continue
            W = chol.inverse()
            del chol  # the factor is not needed any more: free its memory for the traces
            for k, D in dR.items():
                Dg = self._block(D, dg.sites)
                quad[k] += float(xp.sum((Dg @ fit.alpha) * fit.alpha))
                tr = float(xp.vdot(W.ravel(), Dg.ravel()))  # tr(W Dg) for symmetric W
                if reml_trend:
                    tr -= self._trend_trace(fit, Dg @ fit.kinv_f)
                trace[k] += g.r * tr
            quad["eye"] += float(xp.sum(fit.alpha**2))
            tr = float(xp.trace(W))
            if reml_trend:
                tr -= self._trend_trace(fit, fit.kinv_f)
            trace["eye"] += g.r * tr
        return Terms(self.n_obs, self.n_eff, logdet, logdet_trend, quadratic, quad, trace)

    def factors(self, theta, eta):
        """Cholesky factors of ``K = R + eta I`` on each group's sites.

        Returns
        -------
        list of DeviceCholesky
            Their ``solve`` and ``solve_lower`` take and return host arrays for host
            right-hand sides.
        """
        R, _ = self.correlation(theta)
        return [chol for _, chol in self._group_factors(R, eta)]

    def gls(self, params):
        """Generalized least-squares trend at natural parameters.

        Returns
        -------
        coef : ndarray of shape (r, p)
        coef_cov : ndarray of shape (r, p, p)
        """
        theta, eta = split_params(params, self.kernel)
        factors = self.factors(theta, eta)
        return trend_estimates(self.groups, factors, params["variance"], self.n_replicates, self.n_coef)

    def log_likelihood(self, params):
        """Full log-likelihood at natural parameters with the trend profiled by GLS."""
        theta, eta = split_params(params, self.kernel)
        return float(self.terms(theta, eta).full_value(params["variance"]))

    def loglik_error(self, params):
        """Error of the log-likelihood due to approximation: none (0.0) for dense factors."""
        return 0.0

    def fisher_information(self, params, names, return_error=False):
        """Expected Fisher information of the covariance parameters (see ExactLikelihood).

        Parameters
        ----------
        params : dict
        names : sequence of str
        return_error : bool, default False
            Also return the relative error of the entries (0.0: computed exactly).

        Returns
        -------
        info : ndarray of shape (len(names), len(names))
        relative_error : float, only when `return_error`
        """
        xp = self.backend.xp
        theta, eta = split_params(params, self.kernel)
        s = params["variance"]
        R, dR = self.correlation(theta, gradient=True)
        info = np.zeros((len(names), len(names)))
        for g, dg in zip(self.groups, self._device_groups):
            chol = self._factor(self._group_matrix(R, dg.sites, eta, copy=True), eta)
            W = chol.inverse()
            W /= s
            if self.reml and self.n_coef:
                fit = gls(chol, dg.y, dg.design, self.backend)
                inner = self.backend.asarray(fit.ftkf_solve(np.eye(self.n_coef)))
                W -= (fit.kinv_f @ inner) @ fit.kinv_f.T / s
            del chol
            products = []
            for name in names:
                if name == "variance":
                    products.append(W @ self._block(R, dg.sites))
                elif name == "nugget":
                    products.append(W)
                else:
                    products.append(s * (W @ self._block(dR[name], dg.sites)))
            for a, A in enumerate(products):
                for b in range(a + 1):
                    value = 0.5 * g.r * float(xp.sum(A * products[b].T))
                    info[a, b] = info[b, a] = info[a, b] + value
        return (info, 0.0) if return_error else info
