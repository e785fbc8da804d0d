"""Gaussian log-likelihood through tile low-rank Cholesky factors.

For each group of replicates sharing observed sites, the sites are ordered once; at
every evaluation the correlation ``K = R + eta I + nu V`` (``V`` the known noise
variances) is compressed into a :class:`tlrcore.TLRMatrix` and factored by
:func:`tlrcore.cholesky` [1]_ [2]_. The GLS trend, quadratic form and log-determinant
come from the factor as in :mod:`geostat.likelihood.dense`. The traces
``tr(K^{-1} dK)`` of the score would need the inverse; they are estimated with random
probes through TLR solves (:mod:`geostat.likelihood.stochastic_fisher`). With a Dask
``client`` each group's covariance is compressed, factored and solved on the workers.

References
----------
.. [1] Akbudak, K., Ltaief, H., Mikhalev, A., Keyes, D. (2017). Tile low rank Cholesky
   factorization for climate/weather modeling applications on manycore architectures.
   ISC High Performance, LNCS 10266.
.. [2] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from geostat.covariance import Sites
from geostat.likelihood.base import Likelihood
from geostat.likelihood.dense import ExactLikelihood
from geostat.likelihood.gls import gls
from geostat.likelihood.stochastic_fisher import probe_traces, stochastic_fisher_information
from geostat.likelihood.terms import Terms, resolve_noise_ratio
from geostat.likelihood.vecchia import BlockVecchiaLikelihood
from geostat.solvers import (
    NUMPY,
    PermutedTLR,
    check_tlr_entries,
    distributed_tlr_factor,
    resolve_client,
    site_order,
    small_pages,
    tlr_factor,
    tlr_matrix,
    worker_hold,
)

__all__ = ["TLRLikelihood"]

logger = logging.getLogger(__name__)

#: The likelihood error is estimated against an evaluation this many times more accurate.
ERROR_REFERENCE_FACTOR = 10.0
#: Accuracy of the first evaluations of a likelihood with ``accuracy="auto"``; the
#: optimizer then tightens it (:mod:`geostat.optimize.accuracy`).
AUTO_START_ACCURACY = 1e-8
#: Accuracy of the compressed derivatives ``dR`` of the probe traces (the likelihood's own
#: when that is coarser): see :meth:`TLRLikelihood.gradient_matrices`.
DERIVATIVE_ACCURACY = 1e-6
#: Largest factors (bytes, with the tiles kept for the check) that stay in memory while
#: those of other parameters are made: a step that does not increase the likelihood
#: leaves its start's factors in use (:meth:`TLRLikelihood.factors`).
PREVIOUS_FACTOR_BYTES = 2**29
#: Largest matrix (bytes) whose tiles :meth:`TLRLikelihood.keep_coarser` keeps in memory
#: beside the factor until the next evaluation.
CHECK_COPY_BYTES = 2**29
#: Sites per block and conditioning sites of the block Vecchia precision that is the
#: control variate of the probe traces (:meth:`TLRLikelihood.control_variate`), and the
#: most sites it serves (its blocks' distances take about 2 KB per site).
CONTROL_BLOCK, CONTROL_CONDITIONING, CONTROL_MAX_SITES = 128, 128, 2**17


@dataclass(frozen=True)
class _Order:
    perm: np.ndarray
    tile_size: int


class TLRLikelihood(Likelihood):
    """Log-likelihood of one dataset under one kernel, with TLR Cholesky factors.

    Parameters
    ----------
    coords, y, design, kernel, distance
        As for :class:`~geostat.likelihood.base.Likelihood`.
    reml : bool, default False
    accuracy : float or "auto", default 1e-8
        Relative Frobenius accuracy of the compression and of the factorization.
        ``"auto"`` starts at :data:`AUTO_START_ACCURACY` and lets the optimizer change it
        (:meth:`set_accuracy`).
    tile_size : int, optional
        Default :func:`geostat.ordering.auto_tile_size` of each group's size.
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
    random_state : int, default 0
        Seeds compression and factorization: equal inputs give equal values.
    on_failure : {"shift", "compensate", "step", "raise"}, default "shift"
        What a covariance that is not positive definite at this accuracy does
        (:mod:`geostat.likelihood.failure`).
    backend : tlrcore.backends.Backend, default NUMPY
        Where the tiles are generated, compressed and factored; only scalars and small
        arrays move to the host. The factors (:meth:`factors`) solve host vectors.
    client : None, "default" or distributed.Client, default None
        Build and factor the covariances on the workers of this Dask cluster
        (:func:`geostat.solvers.resolve_client`), with the same safeguards; the values
        equal the in-process ones to rounding.
    noise : ndarray of shape (n,), optional
        Known noise variances, added to the diagonal of every build.

    Raises
    ------
    ValueError, TrendNotIdentifiableError
        If `accuracy` is neither ``"auto"`` nor in (0, 1), for a `client` with a back end
        other than NumPy, and as :class:`~geostat.likelihood.base.Likelihood`.
    TypeError, ImportError
        For a bad `client`, or one without Dask installed.
    """

    has_gradient = False
    method = "tlr"

    def __init__(
        self,
        coords,
        y,
        design,
        kernel,
        distance,
        reml=False,
        accuracy=1e-8,
        tile_size=None,
        ordering="kdtree",
        random_state=0,
        on_failure="shift",
        backend=NUMPY,
        client=None,
        noise=None,
    ):
        #: Whether the optimizer chooses the accuracy of each evaluation (``accuracy="auto"``).
        self.adaptive = isinstance(accuracy, str) and accuracy == "auto"
        if self.adaptive:
            accuracy = AUTO_START_ACCURACY
        _check_accuracy(accuracy, "'auto' or ")
        self.client = resolve_client(client)
        if self.client is not None and backend.name != NUMPY.name:
            raise ValueError(
                "client= runs the TLR method on the cluster's CPUs; use device='cpu' with it "
                f"(got the {backend.name} back end)."
            )
        super().__init__(coords, y, design, kernel, distance, reml, on_failure, backend, noise)
        self.accuracy = float(accuracy)
        self.tile_size, self.ordering, self.random_state = tile_size, ordering, random_state
        self._orders = [
            _Order(*site_order(self._sites(g), distance, kernel, ordering, tile_size))
            for g in self.groups
        ]
        self._ordered_sites = {}
        self._arrays = {}
        self._cache = None
        #: ``(key, factors, kept tiles)`` of the parameters before :attr:`_cache`'s, if small.
        self._previous = None
        #: ``(key, accuracy, factors)`` kept by :meth:`set_accuracy` from the accuracy left.
        self._left = None
        #: See :meth:`keep_coarser`.
        self.coarser_accuracy = None
        #: ``{group: ((key, accuracy), TLRMatrix)}``: the tiles of each group's last build at
        #: the own accuracy, to be truncated to :attr:`coarser_accuracy` (the ``accuracy``).
        self._coarser = {}
        #: Factorizations by evaluations (:meth:`terms`, :meth:`log_likelihood`,
        #: :meth:`probe_traces`) at any accuracy: the count of a fit's full-data evaluations.
        self.n_factorizations = 0
        self._controls = {}

    @contextlib.contextmanager
    def fitting(self):
        """A context for the evaluations of one fit: BLAS on one thread
        (:meth:`Likelihood.fitting`), new arrays on small pages, and on the CPU in this
        process worker processes held for the fit
        (:func:`tlrcore.concurrency.hold`), which compress tile columns and
        evaluate the block Vecchia likelihood. The probes' control variates
        (:meth:`control_variate`) are freed on leaving it."""
        with super().fitting(), small_pages(), self._freeing_controls():
            if self.client is not None or self.backend.batched_by_default:
                yield
                return
            with worker_hold(max(order.tile_size for order in self._orders)):
                yield

    @contextlib.contextmanager
    def _freeing_controls(self):
        try:
            yield
        finally:
            self._controls = {}

    def describe(self):
        """The settings in words, for the log: tile size, tiles, accuracy, ordering."""
        largest = max(self._orders, key=lambda order: order.perm.size)
        sizes = sorted({order.tile_size for order in self._orders})
        groups = (
            f", {len(self.groups)} groups of replicates sharing sites"
            if len(self.groups) > 1
            else ""
        )
        n_tiles = math.ceil(largest.perm.size / largest.tile_size)
        return (
            f"tile size {'/'.join(map(str, sizes))} ({n_tiles} tiles of "
            f"{largest.perm.size:,} sites), accuracy {self.accuracy:g}, "
            f"{self.ordering} ordering{groups}"
        )

    def describe_factors(self):
        """Ranks and memory of the most recent factors at this accuracy, in words (None
        when there are none)."""
        if self._cache is None:
            return None
        return "; ".join(_factor_summary(factor) for factor in self._cache[1])

    def _sites(self, group):
        return self.coords if group.sites is None else self.coords[group.sites]

    def subset(self, sites):
        """The dense likelihood of the same model on the sites `sites` only (for pilots)."""
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

    def factors(self, theta, eta, accuracy=None, noise_ratio=None):
        """TLR Cholesky factors of ``K = R + eta I + nu V`` on each group's sites.

        The factors of the most recent parameters at the likelihood's own accuracy are
        kept, so the estimate, trend, standard errors and kriging share one factorization;
        so are those of the parameters before, with the tiles kept for the check, while
        they take at most :data:`PREVIOUS_FACTOR_BYTES` (in this process, on NumPy): the
        start of a step that did not increase the likelihood is not factored again.

        At another `accuracy` the factors are not kept. `noise_ratio`
        (``nu = 1 / variance``) is required with known noise. Returns a list of
        :class:`geostat.solvers.TLRFactor`.
        """
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        key = (tuple(sorted(theta.items())), float(eta), nu)
        own = accuracy is None or accuracy == self.accuracy
        if own and self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        if not own and self._left is not None and self._left[:2] == (key, accuracy):
            return self._left[2]
        if own and self._previous is not None and self._previous[0] == key:
            previous, self._previous = self._previous, self._kept()
            self._cache, self._coarser = (key, previous[1]), previous[2]
            return previous[1]
        if own:
            self._previous = self._kept()
            self._cache = None
            self._coarser = {}
        self._check_entries(eta, nu)
        params = {"variance": 1.0, **theta, "nugget": float(eta)}
        blocks = [
            self._ordered(index).covariance_block(
                self.kernel, params, self._ordered_diagonal(index, nu)
            )
            for index in range(len(self._orders))
        ]
        out = []
        for factor, shifted in self._map_groups(
            lambda index: self._factor(index, blocks[index], accuracy, key)
        ):
            self.n_safeguarded += shifted
            out.append(factor)
        if own:
            self._cache = (key, out)
        return out

    def _kept(self):
        """The kept factors with their tiles for the check, as :attr:`_previous`, where they
        take at most :data:`PREVIOUS_FACTOR_BYTES` (None otherwise, or on a cluster or a
        device)."""
        if self._cache is None or self.client is not None or self.backend.name != NUMPY.name:
            return None
        key, factors = self._cache
        size = sum(factor.nbytes for factor in factors)
        size += sum(tiles.nbytes for _, tiles in self._coarser.values())
        return (key, factors, self._coarser) if size <= PREVIOUS_FACTOR_BYTES else None

    def _check_entries(self, eta, nu):
        """Refuse a nugget (or known noise) so large against the variance that the tiles of
        ``K = R + eta I + nu V`` cannot be factored (ValueError naming the parameters)."""
        largest = 1.0 + float(eta) + (nu * float(np.max(self.noise)) if nu else 0.0)
        n = max(order.perm.size for order in self._orders)
        check_tlr_entries(
            largest,
            n,
            f"params: the nugget (with any known noise) is {largest - 1.0:.3g} times the "
            "variance, white noise at any accuracy; use method='exact' or a larger variance",
        )

    def _factor(self, index, block, accuracy, key):
        """``(factor, shifted)`` of group `index`'s covariance `block` (parameters `key`),
        in this process or on the cluster; reuses the tiles kept by :meth:`keep_coarser`
        when they serve."""
        order, accuracy = self._orders[index], accuracy or self.accuracy
        start = time.perf_counter()
        if self.client is None:
            kept = self._coarser.pop(index, None)
            copy = (
                self._truncated(kept[1], accuracy)
                if kept is not None and kept[0] == (key, accuracy)
                else None
            )
            reuse = [copy] if copy is not None else []
            coarser = (
                self.coarser_accuracy
                if accuracy == self.accuracy and self.backend.name == NUMPY.name
                else None
            )

            def build():
                if reuse:
                    return reuse.pop()
                A = tlr_matrix(
                    block,
                    order.perm.size,
                    order.tile_size,
                    accuracy,
                    random_state=self.random_state,
                    backend=self.backend,
                    deferred=True,
                )
                # A's columns are compressed as the factorization reads them, unless the
                # tiles are kept for the check: then all now.
                if coarser is not None and A.estimated_nbytes() <= CHECK_COPY_BYTES:
                    view = A.shared()  # the tiles themselves, truncated only if asked for
                    if A.nbytes <= CHECK_COPY_BYTES:
                        self._coarser[index] = ((key, coarser), view)
                return A

            factor, shifted = tlr_factor(build, order.perm, self.random_state, self.on_failure)
        else:
            factor, shifted = distributed_tlr_factor(
                self.client,
                block,
                order.perm.size,
                order.tile_size,
                order.perm,
                accuracy,
                self.random_state,
                self.on_failure,
            )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "TLR factor of group %d in %.2f s: %s%s",
                index,
                time.perf_counter() - start,
                _factor_summary(factor),
                f", diagonal shift {factor.shift:.3g}" if shifted else "",
            )
        return factor, shifted

    @staticmethod
    def _truncated(A, accuracy):
        """`A` truncated to `accuracy`, or None when the copy moved less than the bound
        ``sqrt(n_t (n_t - 1)) tau`` on A's own compression error: the check needs the
        change of the log-likelihood to overstate A's error."""
        copy = A.truncated(accuracy)
        own_bound = math.sqrt(A.n_tiles * (A.n_tiles - 1)) * A.tolerance
        serves = copy.truncation_error >= own_bound
        logger.debug(
            "truncated copy at %.0e: ||copy - A||_F = %.3g, %s A's error bound %.3g",
            accuracy,
            copy.truncation_error,
            "above" if serves else "below",
            own_bound,
        )
        return copy if serves else None

    def _map_groups(self, function):
        """``[function(index) for each group]``; on a cluster, groups run concurrently (one
        client thread each, in this thread's context)."""
        indices = range(len(self.groups))
        if self.client is None or len(indices) == 1:
            return [function(index) for index in indices]
        with ThreadPoolExecutor(max_workers=len(indices)) as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, function, index) for index in indices
            ]
            return [future.result() for future in futures]

    def _ordered(self, index):
        """The sites of group `index` in the factor's order, on the back end."""
        if index not in self._ordered_sites:
            coords = self._sites(self.groups[index])[self._orders[index].perm]
            self._ordered_sites[index] = Sites(coords, self.distance, self.backend)
        return self._ordered_sites[index]

    def _ordered_diagonal(self, index, nu):
        """``nu`` times the known noise of group `index` in the factor's order, or None."""
        noise = self.group_noise[index]
        return None if noise is None else nu * noise[self._orders[index].perm]

    def keep_coarser(self, accuracy):
        """Keep the tiles of each build at the own accuracy until the next evaluation, so
        that an evaluation at the same parameters and the coarser `accuracy` (the check of
        :func:`geostat.optimize.search.reported_loglik`) factors them truncated instead of
        building anew. Only on NumPy, in this process, for matrices of at most
        :data:`CHECK_COPY_BYTES`. `accuracy` is in ``(self.accuracy, 1)``; None stops it.
        """
        if accuracy is not None and not self.accuracy < accuracy < 1:
            raise ValueError(
                f"accuracy must be in ({self.accuracy:g}, 1), coarser than the likelihood's; "
                f"got {accuracy!r}."
            )
        self.coarser_accuracy = accuracy
        self._coarser = {}

    def set_accuracy(self, accuracy):
        """Evaluate at `accuracy` (in (0, 1)) from now on, releasing the kept factors but
        those of the last parameters at the accuracy left, where small (the check of the
        value's accuracy at the end of a fit compares the two); the coarser accuracy of
        :meth:`keep_coarser` keeps its ratio to it. Values depend only on the parameters
        and the accuracy."""
        _check_accuracy(accuracy)
        ratio = (
            None
            if self.coarser_accuracy is None
            else round(self.coarser_accuracy / self.accuracy, 6)
        )
        left, left_accuracy, controls = self._kept(), self.accuracy, self._controls
        self.accuracy = float(accuracy)
        self.release_factors()
        # the control variates do not depend on the accuracy
        self._left, self._controls = (
            None if left is None else (left[0], left_accuracy, left[1]),
            controls,
        )
        self.coarser_accuracy = (
            None if ratio is None or self.accuracy * ratio >= 1 else self.accuracy * ratio
        )

    def release_factors(self):
        """Drop the kept factors and control variates (their memory is freed; the next use
        recomputes them)."""
        self._cache = self._previous = self._left = None
        self._coarser, self._controls = {}, {}

    def control_variate(self, index):
        """The block Vecchia likelihood of group `index`'s sites (blocks of
        :data:`CONTROL_BLOCK` sites, each conditioned on :data:`CONTROL_CONDITIONING`),
        whose precision is the control variate of the probe traces
        (:func:`~geostat.likelihood.stochastic_fisher.probe_traces`); made at first use
        and kept until :meth:`fitting` ends. None beyond :data:`CONTROL_MAX_SITES` sites."""
        group, n = self.groups[index], self._orders[index].perm.size
        if n > CONTROL_MAX_SITES:
            return None
        if index not in self._controls:
            # only the sites, kernel and noise matter: no observations, a constant trend
            data = SimpleNamespace(
                coords=self._sites(group),
                y=np.zeros((n, 1)),
                design=np.ones((n, 1)),
                kernel=self.kernel,
                distance=self.distance,
                on_failure=self.on_failure,
                noise=None if self.noise is None else self.group_noise[index],
            )
            self._controls[index] = BlockVecchiaLikelihood(
                data, CONTROL_BLOCK, CONTROL_CONDITIONING, max_sites=n
            )
        return self._controls[index]

    def terms(self, theta, eta, gradient=False, accuracy=None, noise_ratio=None):
        """Likelihood scalars at correlation parameters `theta`, ratio `eta` and, with known
        noise, `noise_ratio` (``nu = 1 / variance``).

        Raises
        ------
        ValueError
            If `gradient` is requested (TLR evaluation has no analytic gradient), or with
            known noise and no `noise_ratio`.
        tlrcore.NotPositiveDefiniteError
            If the compressed covariance is not positive definite at this accuracy.
        """
        if gradient:
            raise ValueError("the TLR likelihood has no analytic gradient; use gradient=False.")
        return self._evaluate(theta, eta, accuracy, noise_ratio)[0]

    def _evaluate(self, theta, eta, accuracy=None, noise_ratio=None):
        """:class:`Terms`, factors and GLS fits of every group at `theta`, `eta` and
        `noise_ratio`."""
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        logdet = logdet_trend = quadratic = 0.0
        xp = self.backend.xp
        kept = [entry[1] for entry in (self._cache, self._previous) if entry is not None]
        kept += [self._left[2]] if self._left is not None else []
        factors = self.factors(theta, eta, accuracy, noise_ratio=nu)
        self.n_factorizations += not any(factors is k for k in kept)
        fits = self._map_groups(lambda index: self._gls(index, self.groups[index], factors[index]))
        for g, chol, fit in zip(self.groups, factors, fits, strict=True):
            logdet += g.r * chol.logdet()
            quadratic += float(xp.sum(fit.residual * fit.alpha))
            if self.reml and self.n_coef:
                logdet_trend += g.r * fit.logdet_ftkf
        return (
            Terms(self.n_obs, self.n_eff, logdet, logdet_trend, quadratic, noise_ratio=nu),
            factors,
            fits,
        )

    def probe_traces(self, theta, eta, random_state=0, noise_ratio=None, control=None):
        """One evaluation with stochastic derivative traces, for Fisher scoring.

        Returns ``(terms, blocks)``: the :class:`~geostat.likelihood.terms.Terms` and the
        generator of :func:`~geostat.likelihood.stochastic_fisher.probe_traces`, whose
        probes `random_state` seeds (the same probes at any parameters) and whose control
        variates `control` chooses (None: decided by the first block). Raises as
        :meth:`terms`.
        """
        terms, factors, fits = self._evaluate(theta, eta, noise_ratio=noise_ratio)
        return terms, probe_traces(
            self,
            factors,
            fits,
            theta,
            eta,
            random_state,
            noise_ratio=terms.noise_ratio,
            control=control,
        )

    def _gls(self, index, group, chol):
        """GLS fit of group `index`, its observations and design held on the back end."""
        if index not in self._arrays:
            self._arrays[index] = (
                self.backend.asarray(group.y),
                self.backend.asarray(group.design),
            )
        return gls(chol, *self._arrays[index])

    def log_likelihood(self, params, accuracy=None):
        """Full log-likelihood at natural parameters with the trend profiled by GLS."""
        theta, eta, noise_ratio = self.split(params)
        return float(
            self.terms(theta, eta, accuracy=accuracy, noise_ratio=noise_ratio).full_value(
                params["variance"]
            )
        )

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

        See :func:`geostat.likelihood.stochastic_fisher.stochastic_fisher_information`.

        Returns
        -------
        info : ndarray of shape (len(names), len(names))
        relative_error : float, only when `return_error`
            Largest Monte Carlo standard error of a diagonal entry, relative to it.
        """
        info, error = stochastic_fisher_information(
            self, self.factors_at(params), params, names, random_state=random_state
        )
        return (info, error) if return_error else info

    def gradient_matrices(self, group_index, theta, names):
        r"""``dR / d name`` on a group's sites as TLR operators (``@``) in the caller's site
        order (:class:`geostat.solvers.PermutedTLR`).

        Compressed at ``max(accuracy, DERIVATIVE_ACCURACY)``: they enter only the score
        and the information. A compression error ``E`` of ``dR`` changes the score from
        plain probes by ``delta = 1/2 (alpha^T E alpha / s - tr(K^{-1} E))``, of mean zero
        and variance ``1/2 tr(K^{-1} E K^{-1} E) <= 1/2 ||E||_F^2 / eta^2``. With a control
        variate (:meth:`control_variate`) the trace is that of the exact ``dR`` up to
        ``tr((P_V - K^{-1}) E)``, and ``delta`` keeps its first term, of mean ``1/2
        tr(K^{-1} E)``: on 8,192 cells of a smooth real field (nugget 2e-5 of the variance)
        it moved the score by a sixth of the Monte Carlo error of 64 probes, a
        log-likelihood loss ``delta^2 / (2 I)`` of about 1e-6.
        """
        sites, order = self._ordered(group_index), self._orders[group_index]
        accuracy = max(self.accuracy, DERIVATIVE_ACCURACY)
        return {
            name: PermutedTLR(
                tlr_matrix(
                    sites.gradient_block(self.kernel, theta, name),
                    sites.n,
                    order.tile_size,
                    accuracy,
                    random_state=self.random_state,
                    backend=self.backend,
                ),
                order.perm,
            )
            for name in names
        }


def _check_accuracy(accuracy, alternatives=""):
    """ValueError unless `accuracy` is a number in (0, 1); the message offers
    `alternatives` before that."""
    if isinstance(accuracy, bool) or not (
        isinstance(accuracy, (float, int, np.floating)) and 0 < accuracy < 1
    ):
        raise ValueError(f"accuracy must be {alternatives}a number in (0, 1); got {accuracy!r}.")


def _factor_summary(factor):
    """Ranks and memory of a TLR factor, in words."""
    ranks = np.asarray(factor.ranks)
    off = ranks[np.tril_indices(ranks.shape[0], -1)]
    dense = 8.0 * factor.n * (factor.n + 1) / 2
    rank = f"mean rank {off.mean():.1f}, max rank {off.max()}" if off.size else "one dense tile"
    return (
        f"n = {factor.n:,}, {rank}, {factor.nbytes / 2**20:.1f} MiB "
        f"({factor.nbytes / dense:.1%} of a dense factor)"
    )
