r"""Block Vecchia likelihood: blocks of neighbouring sites, each conditioned on nearby sites.

The sites are cut into blocks of at most ``block_size`` neighbours in k-d tree order,
and each block ``b`` is conditioned on the ``conditioning`` sites ``c(b)`` nearest its
centroid among those before it [1]_ [2]_:

.. math::

    \ell_V = \sum_b \log p\bigl(y_b \mid y_{c(b)}\bigr)
    = \sum_b \Bigl[\ell\bigl(y_{c(b) \cup b}\bigr) - \ell\bigl(y_{c(b)}\bigr)\Bigr],

each ``\ell`` an exact Gaussian log-density of the residuals ``y - F beta``, with ``beta``
profiled over all blocks as the exact maximum likelihood profiles it (one fixed at least
squares biases a smooth field's variance and range): every term is a quadratic form in
``beta`` (:class:`QuadraticForms`) summed over the blocks, ``beta`` their GLS solution,
and the gradients those at fixed ``beta`` (the envelope theorem).
With the conditioning sites first, the Cholesky factor ``L`` of the joint ``K`` has that
of ``K_cc`` as its leading block, so one factorization gives, with ``w = L^{-1} r`` and
``X = L^{-1}``,

.. math::

    \log\det K - \log\det K_{cc} = 2 \sum_{i > c} \log L_{ii}, \qquad
    r^T K^{-1} r - r_c^T K_{cc}^{-1} r_c = \lVert w_{c+1:} \rVert^2,

    \operatorname{tr}(K^{-1} D) - \operatorname{tr}(K_{cc}^{-1} D_{cc})
    = \langle X^T X, D \rangle - \langle X_{11}^T X_{11}, D_{cc} \rangle.

With more than ``max_sites`` sites a random subset of the blocks is kept; an evaluation
costs ``O(m (b + c)^3 / b)`` for ``m`` kept sites. It starts Fisher scoring on the full
data (:mod:`geostat.optimize.scoring`). The blocks are evaluated in sets, in worker
processes during a fit (the Python between small LAPACK calls holds the GIL).

References
----------
.. [1] Vecchia, A. V. (1988). Estimation and model identification for continuous spatial
   processes. Journal of the Royal Statistical Society, Series B, 50(2).
.. [2] Guinness, J. (2018). Permutation and grouping methods for sharpening Gaussian
   process approximations. Technometrics, 60(4).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack, solve_triangular
from scipy.spatial import cKDTree

from geostat.covariance import PairCorrelation, condensed_pairs
from geostat.distance import ordering_points
from geostat.likelihood.failure import dense_shifts
from geostat.likelihood.gls import centered_design, group_by_pattern, unit_columns
from geostat.likelihood.terms import Terms, resolve_noise_ratio
from geostat.ordering import inverse_permutation, order_points
from geostat.solvers import NUMPY, DenseCholesky, InWorkerProcesses, one_blas_thread, tile_threads

__all__ = [
    "BLOCK_SIZE",
    "CONDITIONING",
    "MAX_SITES",
    "BlockVecchiaLikelihood",
    "QuadraticForms",
    "VecchiaBlock",
]

#: Sites per block.
BLOCK_SIZE = 128
#: Sites each block is conditioned on.
CONDITIONING = 64
#: Most sites in the kept blocks (256 blocks): fewer blocks move the maximizer too far
#: from the full-data one.
MAX_SITES = 32768


class BlockVecchiaLikelihood:
    """Block Vecchia log-likelihood of the data of `likelihood` (module docstring).

    Parameters
    ----------
    likelihood : geostat.likelihood.base.Likelihood
        Its data, kernel, distance and failure policy are used; REML is not.
    block_size : int, default BLOCK_SIZE
    conditioning : int, default CONDITIONING
        Sites each block is conditioned on (0: independent blocks).
    max_sites : int, default MAX_SITES
        With more sites, a random subset of ``max_sites // block_size`` blocks (drawn by
        `rng`, default seed 0) is kept.
    rng : numpy.random.Generator, optional

    Attributes
    ----------
    blocks : list of VecchiaBlock
    n, n_obs : int
        Sites in the kept blocks, and observed values on them.
    """

    def __init__(
        self,
        likelihood,
        block_size=BLOCK_SIZE,
        conditioning=CONDITIONING,
        max_sites=MAX_SITES,
        rng=None,
    ):
        coords, y = likelihood.coords, _ols_residuals(likelihood.y, likelihood.design)
        # The trend's column space in a well-scaled basis: the profiled terms depend on
        # nothing else.
        design = unit_columns(centered_design(likelihood.design)[0])
        points = ordering_points(coords, likelihood.distance)
        perm = order_points(points, "kdtree", block_size)
        position = inverse_permutation(perm)
        tree = cKDTree(points)
        starts = np.arange(0, perm.size, block_size)
        if perm.size > max_sites:
            rng = np.random.default_rng(0) if rng is None else rng
            starts = np.sort(
                rng.choice(starts, size=max(1, max_sites // block_size), replace=False)
            )
        self.kernel, self.on_failure, self.noise = (
            likelihood.kernel,
            likelihood.on_failure,
            likelihood.noise,
        )
        self.blocks = []
        for start in starts:
            sites = perm[start : start + block_size]
            before = _nearest_before(tree, points, position, sites, start, conditioning)
            joint = np.concatenate([before, sites])
            self.blocks.append(
                VecchiaBlock(
                    joint,
                    before.size,
                    coords[joint],
                    y[joint],
                    None if self.noise is None else self.noise[joint],
                    design[joint],
                )
            )
        self.n = sum(block.sites.size - block.conditioning for block in self.blocks)
        self.n_obs = sum(block.n_obs for block in self.blocks)
        self.n_eff = self.n_obs
        sets = _BlockSets(
            self.blocks,
            min(tile_threads(), len(self.blocks)),
            likelihood.kernel,
            likelihood.distance,
            likelihood.on_failure,
        )
        self._sets = InWorkerProcesses(sets)

    def terms(self, theta, eta, gradient=False, noise_ratio=None):
        """The likelihood scalars (:class:`geostat.likelihood.terms.Terms`), summed over
        the blocks.

        With known noise, `noise_ratio` (``nu = 1 / variance``) is required and the
        gradient has ``"noise"`` terms too.

        Raises NotPositiveDefiniteError if some ``K`` is not numerically positive
        definite after the shifts of ``on_failure``.
        """
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        parts = self._map(theta, eta, gradient, nu)
        forms = sum((p[1] for p in parts[1:]), parts[0][1])
        beta = forms.coefficients()
        names = [*parts[0][2]] if gradient else []
        return Terms(
            self.n_obs,
            self.n_eff,
            logdet=sum(p[0] for p in parts),
            logdet_trend=0.0,
            quadratic=forms.at(beta),
            quad={k: sum((p[2][k] for p in parts[1:]), parts[0][2][k]).at(beta) for k in names},
            trace={k: sum(p[3][k] for p in parts) for k in names},
            noise_ratio=nu,
        )

    def precision_forms(self, theta, eta, left, rights, noise_ratio=None, traces=True):
        r"""The traces ``tr(P_V D)`` and the bilinear forms ``left[:, i]^T P_V
        rights[name][:, i]`` of the block Vecchia precision
        ``P_V = sum_b (E_b^T K_b^{-1} E_b - E_c^T K_c^{-1} E_c)`` (``E`` selecting a block's
        joint and conditioning sites), for ``D`` each ``name`` of `rights` (``dR / d
        name``, ``"eye"``, ``"noise"``).

        Each block's terms are local: with its factor ``L_b`` (conditioning sites first,
        so that of ``K_c`` leads it), ``u^T P_b v = (L_b^{-1} u)_{c+1:}^T (L_b^{-1}
        v)_{c+1:} = (P_b u)^T v`` with ``P_b u = L_b^{-T} [0; (L_b^{-1} u)_{c+1:}]``, two
        triangular solves with `left` whatever the number of `rights`. For a likelihood
        whose observations are complete on every block; `left` and each of `rights` have a
        row per site.

        Returns
        -------
        trace : dict of float, or None without `traces`
        forms : dict of ndarray of shape (left.shape[1],)
        """
        if not all(block.complete for block in self.blocks):
            raise ValueError("precision_forms needs observations on every site of every block.")
        nu = resolve_noise_ratio(self.noise, noise_ratio)
        parts = self._map(theta, eta, traces, nu, (left, rights))
        return (
            {k: sum(p[3][k] for p in parts) for k in rights} if traces else None,
            {k: sum(p[4][k] for p in parts) for k in rights},
        )

    def _map(self, theta, eta, gradient, nu, probes=None):
        """:meth:`_BlockSets.terms` of every set, in the worker processes during a fit."""
        calls = [
            (index, theta, eta, gradient, nu, probes) for index in range(len(self._sets.obj.sets))
        ]
        return self._sets.map("terms", calls)


class QuadraticForms:
    r"""The quadratic forms ``q_k(beta) = (y_k - F beta)^T M (y_k - F beta)`` of the
    replicates ``k`` for one symmetric ``M``, held as their coefficients
    ``yy[k] = y_k^T M y_k``, ``fy[k] = F^T M y_k`` and ``ff[k] = F^T M F``; sums of them
    are sums of the coefficients.

    Parameters
    ----------
    n_replicates, n_coef : int
    """

    def __init__(self, n_replicates, n_coef):
        self.yy = np.zeros(n_replicates)
        self.fy = np.zeros((n_replicates, n_coef))
        self.ff = np.zeros((n_replicates, n_coef, n_coef))

    def add(self, columns, left, right, r, sign=1.0):
        """Add ``sign`` times the forms ``left^T right`` of replicates `columns`: the first
        `r` columns of `left` and `right` are those of ``y``, the others those of ``F``
        (``M`` applied on the right)."""
        self.yy[columns] += sign * np.einsum("ij,ij->j", left[:, :r], right[:, :r])
        design = left[:, r:].T @ right  # F^T M [y, F]
        self.fy[columns] += sign * design[:, :r].T
        self.ff[columns] += sign * design[:, r:]

    def __add__(self, other):
        total = QuadraticForms(*self.fy.shape)
        for name in ("yy", "fy", "ff"):
            setattr(total, name, getattr(self, name) + getattr(other, name))
        return total

    def coefficients(self):
        """``beta_k`` minimizing each ``q_k`` (the GLS trend where ``M`` is the precision):
        ``ff[k]^+ fy[k]``; zero for a replicate observed nowhere."""
        if not self.ff.shape[1]:
            return np.zeros(self.fy.shape)
        return np.einsum("kij,kj->ki", np.linalg.pinv(self.ff, hermitian=True), self.fy)

    def at(self, beta):
        """``sum_k q_k(beta_k)`` for `beta` of shape ``(n_replicates, n_coef)``."""
        return float(
            np.sum(self.yy)
            - 2.0 * np.sum(beta * self.fy)
            + np.einsum("ki,kij,kj->", beta, self.ff, beta)
        )


class _BlockSets:
    """The blocks in `count` sets (every `count`-th block), each evaluated apart, with one
    kernel evaluation for all the pairs of its blocks (made at its first use)."""

    def __init__(self, blocks, count, kernel, distance, on_failure):
        self.sets = [blocks[i::count] for i in range(count)]
        self.kernel, self.distance, self.on_failure = kernel, distance, on_failure
        self._pairs = [None] * count

    def __getstate__(self):
        # The distances are made again where the set is evaluated.
        return {**self.__dict__, "_pairs": [None] * len(self.sets)}

    def _pair_correlation(self, index):
        if self._pairs[index] is None:
            pairs = [
                PairCorrelation(condensed_pairs(block.coords, self.distance, self.kernel))
                for block in self.sets[index]
            ]
            joined = [p.distances for p in pairs]
            joined = (
                [np.concatenate(axis) for axis in zip(*joined, strict=True)]
                if self.kernel.structured
                else np.concatenate(joined)
            )
            self._pairs[index] = (PairCorrelation(joined), np.cumsum([0] + [p.size for p in pairs]))
        return self._pairs[index]

    @one_blas_thread
    def terms(self, index, theta, eta, gradient, nu=0.0, probes=None):
        """``(log det, quadratic forms, quad forms, trace, probe forms)`` summed over the
        blocks of set `index` (:meth:`VecchiaBlock.terms`; the probe forms only with
        `probes`, ``(left, rights)``, else None)."""
        pairs, offsets = self._pair_correlation(index)
        values, grads = pairs.evaluate(self.kernel, theta, gradient)
        blocks = self.sets[index]
        noisy = blocks[0].noise is not None
        top = (
            1.0
            + eta
            + (
                nu * max(float(np.max(block.noise, initial=0.0)) for block in blocks)
                if noisy
                else 0.0
            )
        )
        shifts = dense_shifts(top) if self.on_failure in ("shift", "compensate") else ()
        names = ([*grads, "eye"] + (["noise"] if noisy else [])) if gradient else []
        shape = blocks[0].n_replicates, blocks[0].n_coef
        logdet, forms = 0.0, QuadraticForms(*shape)
        quad = {name: QuadraticForms(*shape) for name in names}
        trace = dict.fromkeys(names, 0.0)
        sums = None if probes is None else {k: 0.0 for k in probes[1]}
        for block, start, stop in zip(blocks, offsets[:-1], offsets[1:], strict=True):
            n = block.sites.size
            R = NUMPY.squareform(values[start:stop], n, 1.0)
            dR = (
                {name: NUMPY.squareform(g[start:stop], n, 0.0) for name, g in grads.items()}
                if gradient
                else None
            )
            rows = None if probes is None else (*_rows(probes, block.sites), sums)
            logdet += block.terms(R, dR, eta, shifts, nu, forms, quad, trace, rows)
        return logdet, forms, quad, trace, sums


class VecchiaBlock:
    """A block's sites with its conditioning sites first, its observations and trend.

    `sites` indexes the `conditioning` conditioning sites, then the block's own;
    `coords`, `y` (residuals, NaN where not observed, one column per replicate), `noise`
    and `design` (the trend's ``F``) are on `sites`. ``n_obs`` counts the observed values
    on the block's own sites.
    """

    def __init__(self, sites, conditioning, coords, y, noise=None, design=None):
        self.sites, self.conditioning, self.coords, self.noise = sites, conditioning, coords, noise
        design = np.zeros((sites.size, 0)) if design is None else design
        self.n_replicates, self.n_coef = y.shape[1], design.shape[1]
        self._columns = np.flatnonzero(~np.all(np.isnan(y), axis=0))
        self._groups = group_by_pattern(y[:, self._columns], design)
        # How many of each group's observed sites condition it: they come first.
        self._leading = [
            conditioning if g.sites is None else int(np.searchsorted(g.sites, conditioning))
            for g in self._groups
        ]
        self.n_obs = sum(
            g.r * (g.y.shape[0] - m) for g, m in zip(self._groups, self._leading, strict=True)
        )

    @property
    def complete(self):
        """Whether every replicate is observed on every site of the block."""
        return len(self._groups) == 1 and self._groups[0].sites is None

    def terms(self, R, dR, eta, shifts, nu, forms, quad, trace, probes=None):
        """Add the block's terms given its conditioning sites, for ``K = R + eta I + nu V``,
        and return its log-determinant.

        Adds to `forms` those of ``K^{-1}`` (the quadratic), and when `dR` is not None, to
        ``quad[name]`` those of ``K^{-1} D K^{-1}`` and to ``trace[name]``
        ``tr(K^{-1} D)``, for ``D`` each ``dR``, ``"eye"`` and (known noise) ``"noise"``.
        `R` is overwritten; `dR` must have a zero diagonal and is only read. `probes`,
        ``(left, rights, sums)`` on the block's sites, adds to ``sums[name]`` the forms
        ``left^T P_b rights[name]`` of the block's precision (for a block observed
        everywhere; :meth:`BlockVecchiaLikelihood.precision_forms`).
        """
        logdet = 0.0
        for g, m in zip(self._groups, self._leading, strict=True):
            if g.sites is None:  # the last group (masks are sorted): R not needed after it
                K = R
            else:
                K = R[np.ix_(g.sites, g.sites)]
            noise = (
                None
                if self.noise is None
                else self.noise
                if g.sites is None
                else self.noise[g.sites]
            )
            K[np.diag_indices_from(K)] += eta if noise is None else eta + nu * noise
            L = DenseCholesky(K, NUMPY, overwrite=True, shifts=shifts).L
            columns, r = self._columns[g.columns], g.r
            w = solve_triangular(L, np.hstack([g.y, g.design]), lower=True, check_finite=False)
            logdet += 2.0 * r * float(np.sum(np.log(np.diagonal(L)[m:])))
            forms.add(columns, w[m:], w[m:], r)
            if probes is not None:
                # u^T P_b v = (L^{-1} u)_{m:}^T (L^{-1} v)_{m:} = (P_b u)^T v, with
                # P_b u = L^{-T} [0; (L^{-1} u)_{m:}]: two solves for all the forms
                left, rights, sums = probes
                applied = solve_triangular(L, left, lower=True, check_finite=False)
                applied[:m] = 0.0
                applied = solve_triangular(L, applied, lower=True, trans="T", check_finite=False)
                for name, right in rights.items():
                    sums[name] = sums[name] + np.einsum("ij,ij->j", applied, right)
            if dR is None:
                continue
            alpha = solve_triangular(L, w, lower=True, trans="T", check_finite=False)
            X = _lapack(lapack.dtrtri, L, lower=1)
            W = _lapack(lapack.dlauum, X, lower=1)  # lower triangle of K^{-1}
            # the conditioning sites' alone (m may be 0: empty arrays)
            alpha_c = X[:m, :m].T @ w[:m]
            W_c = _lapack(lapack.dlauum, X[:m, :m], lower=1) if m else np.zeros((0, 0))
            for name, D in dR.items():
                Dg = D if g.sites is None else D[np.ix_(g.sites, g.sites)]
                D_c = Dg[:m, :m]
                quad[name].add(columns, alpha, Dg @ alpha, r)
                quad[name].add(columns, alpha_c, D_c @ alpha_c, r, sign=-1.0)
                # <W, D> with W's lower triangle only: the diagonal of D is zero
                trace[name] += (
                    2.0 * r * float(np.einsum("ij,ij->", W, Dg) - np.einsum("ij,ij->", W_c, D_c))
                )
            quad["eye"].add(columns, alpha, alpha, r)
            quad["eye"].add(columns, alpha_c, alpha_c, r, sign=-1.0)
            trace["eye"] += r * float(np.sum(X * X) - np.sum(X[:m, :m] ** 2))
            if noise is not None:
                # diag(K^{-1}) = column sums of X * X (K^{-1} = X^T X); leading block: K_cc
                quad["noise"].add(columns, alpha, noise[:, None] * alpha, r)
                quad["noise"].add(columns, alpha_c, noise[:m, None] * alpha_c, r, sign=-1.0)
                trace["noise"] += r * float(
                    np.sum(noise * np.sum(X * X, axis=0))
                    - np.sum(noise[:m] * np.sum(X[:m, :m] ** 2, axis=0))
                )
        return logdet


def _rows(probes, sites):
    """`probes`, ``(left, rights)``, on the rows `sites`."""
    left, rights = probes
    return left[sites], {name: right[sites] for name, right in rights.items()}


def _lapack(routine, a, **options):
    """`routine`'s result on a copy of `a`; LAPACK's ``info`` must be 0 (it cannot be
    otherwise on a Cholesky factor with a positive diagonal)."""
    out, info = routine(a, **options)
    if info != 0:
        raise ValueError(f"LAPACK {routine.__name__} failed with info={info}.")
    return out


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
