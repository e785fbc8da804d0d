"""What the dense and the TLR likelihoods share: the data, its replicate groups, the
failure policy and the generalized least-squares trend."""

from __future__ import annotations

import numpy as np

from geostat.distance import SiteDistanceExtremes
from geostat.likelihood.failure import check_on_failure
from geostat.likelihood.gls import check_groups, gls, group_by_pattern, trend_estimates
from geostat.likelihood.terms import split_params
from geostat.solvers import one_blas_thread_block

__all__ = ["Likelihood"]


class Likelihood(SiteDistanceExtremes):
    """The data of a likelihood and its bookkeeping; subclasses provide ``factors``.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    y : ndarray of shape (n, r)
        NaN marks a site missing on a replicate.
    design : ndarray of shape (n, p)
        Trend design matrix; each replicate has its own coefficients.
    kernel, distance, reml, on_failure
    backend : tlrcore.backends.Backend
        Where the matrices live.
    noise : ndarray of shape (n,), optional
        Known measurement-error variances (units of `y` squared):
        ``C = variance R + nugget I + diag(noise)``. Copied; the caller checks it.

    Raises
    ------
    ValueError
        If some replicate has no more observed sites than trend coefficients.
    TrendNotIdentifiableError
        If the design matrix is rank deficient on the observed sites.
    """

    def __init__(self, coords, y, design, kernel, distance, reml, on_failure, backend, noise=None):
        self.backend = backend
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
        self.noise = None if noise is None else np.array(noise, dtype=np.float64)
        self.group_noise = [
            None if self.noise is None else self.noise if g.sites is None else self.noise[g.sites]
            for g in self.groups
        ]

    def split(self, params):
        """``(theta, eta, noise_ratio)`` of natural parameters: the correlation parameters,
        the nugget ratio and ``1 / variance`` (None without known noise)."""
        theta, eta = split_params(params, self.kernel)
        return theta, eta, None if self.noise is None else 1.0 / float(params["variance"])

    def factors_at(self, params):
        """The factors of ``K = C / variance`` at natural parameters (``factors``)."""
        theta, eta, noise_ratio = self.split(params)
        return self.factors(theta, eta, noise_ratio=noise_ratio)

    def fitting(self):
        """A context for the evaluations of one fit: BLAS on one thread in the whole
        process while it is open.

        Every costly step of a fit brings its own parallelism (tile pools, worker
        processes); a multithreaded BLAS call between them would leave its threads
        spinning on the cores the next step needs.
        """
        return one_blas_thread_block()

    def residual_form(self, y, params):
        """``sum_k (y_k - F beta_k)^T K^{-1} (y_k - F beta_k)`` over the replicates ``y_k`` of
        other observations `y` (shape and missing values as the likelihood's own), the
        trends fitted by GLS, at natural `params`: with the factors the fit kept, so that
        the profile over the variance, ``-n_eff / 2 log`` of it plus a constant, costs
        solves only."""
        groups = group_by_pattern(np.asarray(y, dtype=np.float64), self.design)
        if [_pattern(g) for g in groups] != [_pattern(g) for g in self.groups]:
            raise ValueError("y must have the likelihood's shape and missing values.")
        host = self.backend.to_host
        return float(
            sum(
                np.sum(np.asarray(host(fit.residual)) * np.asarray(host(fit.alpha)))
                for fit in (
                    gls(chol, g.y, g.design)
                    for g, chol in zip(groups, self.factors_at(params), strict=True)
                )
            )
        )

    def gls(self, params):
        """``(coef, coef_cov)``: the GLS trend coefficients ``(r, p)`` at natural
        parameters and the covariance ``(r, p, p)`` of each replicate's estimate."""
        return trend_estimates(
            self.groups, self.factors_at(params), params["variance"], self.n_replicates, self.n_coef
        )


def _pattern(group):
    """A replicate group's columns and observed sites, as lists (None: every site)."""
    return group.columns.tolist(), None if group.sites is None else group.sites.tolist()
