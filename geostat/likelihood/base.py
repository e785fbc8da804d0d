"""What the dense and the TLR likelihoods share: the data, its replicate groups, the
failure policy and the generalized least-squares trend."""

from __future__ import annotations

from geostat.distance import SiteDistanceExtremes
from geostat.likelihood.failure import check_on_failure
from geostat.likelihood.gls import check_groups, group_by_pattern, trend_estimates
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
    kernel : geostat.kernels.Kernel
    distance : geostat.distance.Distance
    reml : bool
    on_failure : {"shift", "compensate", "step", "raise"}
        See :mod:`geostat.likelihood.failure`.
    backend : tlrcore.backends.Backend
        Where the matrices live (:func:`geostat.solvers.get_backend`).

    Raises
    ------
    ValueError
        If some replicate has no more observed sites than trend coefficients.
    TrendNotIdentifiableError
        If the design matrix is rank deficient on the observed sites.
    """

    def __init__(self, coords, y, design, kernel, distance, reml, on_failure, backend):
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

    def fitting(self):
        """A context for the evaluations of one fit: BLAS on one thread in this process
        (:func:`tlrcore._threads.one_blas_thread_block`; the TLR likelihood's also runs its
        builds' compression in worker processes).

        Every costly step of a fit brings its own parallelism (tile pools, worker processes)
        with BLAS on one thread. Between them, a multithreaded BLAS call (L-BFGS-B's own,
        say) left OpenBLAS's threads spinning, waiting for more work, on the cores that the
        next step's threads and processes needed: block Vecchia evaluations in worker
        processes took 60-80 ms instead of 42 ms at 8,192 co2 cells, and whole co2 fits
        5.8-6.2 s instead of 5.5-5.7 s (2 cores). The limit holds for the whole process
        while the context is open.
        """
        return one_blas_thread_block()

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
