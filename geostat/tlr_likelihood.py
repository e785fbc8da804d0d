"""Gaussian log-likelihood through tile low-rank Cholesky factors.

For each group of replicates sharing observed sites, the sites are ordered once (KD-tree
or Morton); at every evaluation the correlation ``K = R + eta I`` of those sites is
compressed into a :class:`tlrcore.TLRMatrix` and factored by :func:`tlrcore.cholesky`.
The GLS trend, quadratic form and log-determinant then come from the factor exactly as
in the dense path (:mod:`geostat.likelihood`), so both likelihoods return the same
:class:`~geostat.likelihood.Terms`.

There are no analytic gradients here: their traces ``tr(K^{-1} dK)`` would need the
inverse. The optimizer polishes TLR estimates without derivatives
(:mod:`geostat.polish`), and the expected Fisher information is estimated with random
probes through TLR solves (:mod:`geostat.stochastic_fisher`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import tlrcore as tlr
from tlrcore.backends import NUMPY, get_backend
from geostat.device import DeviceSites
from geostat.distance import SiteDistanceExtremes
from geostat.gls import check_groups, gls, group_by_pattern, trend_estimates
from geostat.likelihood import ExactLikelihood, Terms, split_params
from geostat.safeguard import check_on_failure
from geostat.solvers import TLRFactor, covariance_block, gradient_block, site_order, tlr_matrix
from geostat.stochastic_fisher import stochastic_fisher_information

__all__ = ["TLRLikelihood"]

#: The likelihood error is estimated against an evaluation this many times more accurate.
ERROR_REFERENCE_FACTOR = 10.0


@dataclass(frozen=True)
class _Order:
    perm: np.ndarray
    tile_size: int


class TLRLikelihood(SiteDistanceExtremes):
    """Log-likelihood of one dataset under one kernel, with TLR Cholesky factors.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    y : ndarray of shape (n, r)
        NaN marks a site missing on a replicate.
    design : ndarray of shape (n, p)
    kernel : geostat.kernels.Kernel
    distance : geostat.distance.Distance
    reml : bool, default False
    accuracy : float, default 1e-8
        Relative Frobenius accuracy of the compression and of the factorization.
    tile_size : int, optional
        Default :func:`geostat.ordering.auto_tile_size` of each group's size.
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
    random_state : int, default 0
        Seeds compression and factorization: equal inputs give equal values.
    on_failure : {"shift", "step", "raise"}, default "shift"
        What a covariance that is not positive definite at this accuracy does; see
        :mod:`geostat.safeguard`. ``"shift"`` refactors with
        ``tlrcore.cholesky(..., safeguard="shift")``.
    backend : str or tlrcore.backends.Backend, default "numpy"
        Where the covariance tiles are generated, compressed and factored: ``"cupy"``
        builds and factors them on the GPU in the packed layout (batched algorithms). An
        evaluation keeps the observations and design on the device and moves only scalars
        and small arrays (per-tile estimates, ``p x p`` GLS products) to the host; the
        factors handed to kriging and standard errors (:meth:`factors`) solve host
        vectors.

    Raises
    ------
    ValueError
        If some replicate has no more observed sites than trend coefficients, or
        `accuracy` is not in (0, 1).
    TrendNotIdentifiableError
        If the design matrix is rank deficient on the observed sites.
    """

    has_gradient = False
    method = "tlr"

    def __init__(self, coords, y, design, kernel, distance, reml=False, accuracy=1e-8, tile_size=None,
                 ordering="kdtree", random_state=0, on_failure="shift", backend="numpy"):
        self.on_failure = check_on_failure(on_failure)
        self.backend = get_backend(backend)
        self.n_safeguarded = 0
        if not (isinstance(accuracy, (float, int, np.floating)) and 0 < accuracy < 1):
            raise ValueError(f"accuracy must be a number in (0, 1); got {accuracy!r}.")
        self.kernel = kernel
        self.distance = distance
        self.reml = bool(reml)
        self.accuracy = float(accuracy)
        self.tile_size, self.ordering, self.random_state = tile_size, ordering, random_state
        self.n = coords.shape[0]
        self.n_coef = design.shape[1]
        self.coords, self.y, self.design = coords, y, design
        self.groups = group_by_pattern(y, design)
        check_groups(self.groups, self.n_coef)
        self.n_replicates = y.shape[1]
        self.n_obs = int(sum(g.y.size for g in self.groups))
        self.n_eff = self.n_obs - (self.n_coef * self.n_replicates if self.reml else 0)
        self._orders = [_Order(*site_order(self._sites(g), distance, ordering, tile_size)) for g in self.groups]
        self._cache = None
        self._extremes = None
        self._device_sites = {}
        self._device_data = {}

    def _sites(self, group):
        return self.coords if group.sites is None else self.coords[group.sites]

    def subset(self, sites):
        """The dense likelihood of the same model on the sites `sites` only (for pilots)."""
        return ExactLikelihood(
            self.coords[sites], self.y[sites], self.design[sites], self.kernel, self.distance, self.reml,
            self.on_failure,
        )

    def factors(self, theta, eta, accuracy=None):
        """TLR Cholesky factors of ``K = R + eta I`` on each group's sites.

        The factors of the most recent parameters at the likelihood's own accuracy are
        kept, so the estimate, trend, standard errors and kriging share one
        factorization; a new evaluation first releases them, so at most one set is held.

        Parameters
        ----------
        theta : dict
        eta : float
        accuracy : float, optional
            Another accuracy (such factors are not kept).

        Returns
        -------
        list of geostat.solvers.TLRFactor
        """
        key = (tuple(sorted(theta.items())), float(eta))
        own = accuracy is None or accuracy == self.accuracy
        if own and self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        if own:
            self._cache = None
        params = {"variance": 1.0, **theta, "nugget": float(eta)}
        out = []
        for index, (g, order) in enumerate(zip(self.groups, self._orders)):
            coords = self._sites(g)[order.perm]
            block = self._block_generator(index, coords, params)

            def build(block=block, n=coords.shape[0], tile_size=order.tile_size):
                return tlr_matrix(block, n, tile_size, accuracy or self.accuracy, random_state=self.random_state,
                                  backend=self.backend)

            out.append(self._factor(build, order.perm))
        if own:
            self._cache = (key, out)
        return out

    def _block_generator(self, index, coords, params):
        """The covariance block generator of group `index` (sites `coords`, ordered) on
        the likelihood's back end; off the CPU path the sites are copied to the device
        once and the tiles are evaluated there."""
        if self.backend is NUMPY:
            return covariance_block(coords, self.kernel, params, self.distance)
        if index not in self._device_sites:
            self._device_sites[index] = DeviceSites(coords, self.distance, self.backend)
        return self._device_sites[index].covariance_block(self.kernel, params)

    def _factor(self, build, perm):
        """TLR factor of the matrix `build()` makes (sites in order `perm`); on failure,
        under ``on_failure="shift"``, of a rebuilt one with the smallest shift that works."""
        try:
            return TLRFactor(tlr.cholesky(build(), random_state=self.random_state, overwrite_a=True), perm)
        except tlr.NotPositiveDefiniteError:
            if self.on_failure != "shift":
                raise
        A = build()  # the failed attempt released the tiles it had used
        factor = tlr.cholesky(A, random_state=self.random_state, safeguard="shift")
        self.n_safeguarded += 1
        return TLRFactor(factor, perm, A.frobenius_norm())

    def release_factors(self):
        """Drop the kept factors (their memory is freed; the next use recomputes them)."""
        self._cache = None

    def terms(self, theta, eta, gradient=False, accuracy=None):
        """Likelihood scalars at correlation parameters `theta` and ratio `eta`.

        Raises
        ------
        ValueError
            If `gradient` is requested (TLR evaluation has no analytic gradient).
        tlrcore.NotPositiveDefiniteError
            If the compressed covariance is not positive definite at this accuracy.
        """
        if gradient:
            raise ValueError("the TLR likelihood has no analytic gradient; use gradient=False.")
        logdet = logdet_trend = quadratic = 0.0
        xp = self.backend.xp
        for index, (g, chol) in enumerate(zip(self.groups, self.factors(theta, eta, accuracy))):
            fit = self._gls(index, g, chol)
            logdet += g.r * chol.logdet()
            quadratic += float(xp.sum(fit.residual * fit.alpha))
            if self.reml and self.n_coef:
                logdet_trend += g.r * fit.logdet_ftkf
        return Terms(self.n_obs, self.n_eff, logdet, logdet_trend, quadratic)

    def _gls(self, index, group, chol):
        """GLS fit of group `index`. Off the CPU path its observations and design are held
        on the device in the factor's site order, once, so that an evaluation moves only
        scalars and ``p x p`` matrices to the host (the quadratic form and the
        coefficients do not depend on the order)."""
        if self.backend is NUMPY:
            return gls(chol, group.y, group.design)
        if index not in self._device_data:
            perm = self._orders[index].perm
            self._device_data[index] = (self.backend.asarray(group.y[perm]), self.backend.asarray(group.design[perm]))
        return gls(chol.factor, *self._device_data[index], backend=self.backend)

    def gls(self, params):
        """Generalized least-squares trend at natural parameters (see ExactLikelihood.gls)."""
        theta, eta = split_params(params, self.kernel)
        factors = self.factors(theta, eta)
        return trend_estimates(self.groups, factors, params["variance"], self.n_replicates, self.n_coef)

    def log_likelihood(self, params, accuracy=None):
        """Full log-likelihood at natural parameters with the trend profiled by GLS."""
        theta, eta = split_params(params, self.kernel)
        return float(self.terms(theta, eta, accuracy=accuracy).full_value(params["variance"]))

    def loglik_error(self, params):
        """Estimated error of the log-likelihood at `params` due to compression.

        The difference from an evaluation :data:`ERROR_REFERENCE_FACTOR` times more
        accurate; the TLR error shrinks about in proportion to the accuracy, so this
        estimates the error of the less accurate value.
        """
        value = self.log_likelihood(params)
        reference = self.log_likelihood(params, accuracy=self.accuracy / ERROR_REFERENCE_FACTOR)
        return abs(value - reference)

    def fisher_information(self, params, names, return_error=False, random_state=0):
        """Expected Fisher information, traces estimated with random probes.

        See :func:`geostat.stochastic_fisher.stochastic_fisher_information`.

        Returns
        -------
        info : ndarray of shape (len(names), len(names))
        relative_error : float, only when `return_error`
            Largest Monte Carlo standard error of a diagonal entry, relative to it.
        """
        theta, eta = split_params(params, self.kernel)
        info, error = stochastic_fisher_information(
            self, self.factors(theta, eta), params, names, random_state=random_state
        )
        return (info, error) if return_error else info

    def gradient_matrices(self, group_index, theta, names):
        """TLR matrices of ``dR / d name`` on a group's sites, in the factor's order."""
        g, order = self.groups[group_index], self._orders[group_index]
        coords = self._sites(g)[order.perm]
        return {
            name: tlr_matrix(gradient_block(coords, self.kernel, theta, name, self.distance), coords.shape[0],
                             order.tile_size, self.accuracy, random_state=self.random_state)
            for name in names
        }

    def ordered_design(self, group_index):
        """The design matrix of a group's sites in the factor's order."""
        return self.groups[group_index].design[self._orders[group_index].perm]

