r"""Cross-validation residuals from the fitted covariance factors, without refitting.

For one group of replicates sharing a factor of :math:`K = C / \sigma^2`, with
:math:`M = F_c^T C^{-1} F_c = L_M L_M^T` (:math:`F_c` the centred design) and
:math:`G = L_M^{-1} F_c^T C^{-1}`,

.. math::

    P = C^{-1} - C^{-1} F (F^T C^{-1} F)^{-1} F^T C^{-1} = K^{-1} / \sigma^2 - G^T G,

and the held-out residuals are :math:`e_V = P_{VV}^{-1} (P y)_V` with covariance
:math:`P_{VV}^{-1}` [1]_. :math:`P y = \alpha - C^{-1} F_c M^{-1} F_c^T \alpha`, with
:math:`\alpha` the kriging weights, enforces :math:`F_c^T P y = 0` even when the
coefficients came from another TLR accuracy. The entries of :math:`K^{-1}` come from
the dense inverse of a dense factor; through a TLR factor, from its TLR inverse
factor :math:`X = L^{-1}` (``K^{-1} = P^T X^T X P``, :func:`tlrcore.inverse_factor`)
where it fits in memory, else from forward solves with columns of the identity:
:math:`(K^{-1})_{ii} = \|L^{-1} P e_i\|^2` and :math:`(K^{-1})_{VV} = W^T W` with
:math:`W = L^{-1} P E_V`. A large fold's block :math:`P_{VV}` (its sites in the
factor's order, so that its tiles compress) is factored as a TLR matrix at the fit's
accuracy, with its inverse factor for the variances :math:`\mathrm{diag}(P_{VV}^{-1})`.

References
----------
.. [1] Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
   Mathematical Geology, 15(6), 687-699.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
from scipy.linalg import cho_solve, lapack, solve_triangular

from geostat.checks import check_memory
from geostat.errors import NotPositiveDefiniteError
from geostat.likelihood.gls import remove_means
from geostat.solvers import DenseCholesky, compressed_solve_and_inverse_diagonal

__all__ = ["SOLVE_BLOCK_BYTES", "GroupResiduals", "closed_form_residuals"]

logger = logging.getLogger(__name__)

#: The TLR inverse factor and the tiles of the inverse covariance take up to about this
#: multiple of the factor's bytes; where they would not fit, the entries come from solves.
INVERSE_FACTOR_BYTES = 4

#: Folds of at least this many sites of a TLR fit are factored as TLR matrices.
TLR_FOLD_SITES = 4096

#: Bytes of the right-hand sides (and as many of solutions) solved at once through a TLR
#: factor for the entries of the inverse covariance.
SOLVE_BLOCK_BYTES = 2**27


@dataclasses.dataclass(frozen=True)
class GroupResiduals:
    """Held-out residuals of one group of replicates, in fitting units.

    ``sites`` ``(n_g,)`` among the training sites, ``columns`` ``(r_g,)`` of ``y``,
    ``residual`` ``(n_g, r_g)`` (``y - prediction``) and the predictive ``variance``
    ``(n_g,)``, shared by the group's replicates.
    """

    sites: np.ndarray
    columns: np.ndarray
    residual: np.ndarray
    variance: np.ndarray


def closed_form_residuals(kriging, folds=None):
    """Leave-one-out (`folds` None) or K-fold residuals of every group of replicates.

    From the factors and GLS quantities of the fitted `kriging`; `folds` labels each
    training site. Returns a list of :class:`GroupResiduals`; ValueError if a fold leaves
    too few sites to estimate the trend, MemoryError if a dense inverse or a fold's block
    would not fit.
    """
    out = []
    solved = blocks = 0
    for group, fit in zip(kriging.lik.groups, kriging.groups, strict=True):
        n_g = group.y.shape[0]
        sites = np.arange(n_g) if group.sites is None else np.asarray(group.sites)
        inverse = _InverseEntries(fit.chol, n_g, getattr(kriging.lik, "accuracy", None))
        projected = _projected_observations(group, fit)
        trend_root = _trend_root(fit)
        if folds is None:
            precision = inverse.diagonal() / fit.variance - np.einsum(
                "ij,ij->j", trend_root, trend_root
            )
            residual, variance = projected / precision[:, None], 1.0 / precision
        else:
            residual, variance = _fold_residuals(
                inverse, fit, group, projected, trend_root, folds[sites]
            )
        solved, blocks = solved + inverse.columns_solved, blocks + inverse.blocks_solved
        out.append(GroupResiduals(sites, np.asarray(group.columns), residual, variance))
    if solved:
        logger.info(
            "cross-validation: %d columns of the identity solved through the TLR factors in "
            "%d blocks (forward solves)",
            solved,
            blocks,
        )
    return out


def _projected_observations(group, fit):
    """``P y`` of a group, (n_g, r_g): ``alpha`` with ``F_c^T P y = 0`` enforced."""
    if fit.ftcf_chol is None:
        return fit.alpha
    centered = remove_means(group.design, fit.shift)
    return fit.alpha - fit.cinv_f @ cho_solve(
        (fit.ftcf_chol, True), centered.T @ fit.alpha, check_finite=False
    )


def _trend_root(fit):
    """``G = L_M^{-1} (C^{-1} F_c)^T``, (p, n_g), with ``P = K^{-1} / variance - G^T G``."""
    if fit.ftcf_chol is None:
        return np.zeros((0, fit.alpha.shape[0]))
    return solve_triangular(fit.ftcf_chol, fit.cinv_f.T, lower=True, check_finite=False)


def _fold_residuals(inverse, fit, group, projected, trend_root, labels):
    """Residuals and variances of a group with its sites held out fold by fold (`labels`)."""
    residual = np.empty_like(projected)
    variance = np.empty(projected.shape[0])
    centered = remove_means(group.design, fit.shift)
    for label in np.unique(labels):
        held = np.flatnonzero(labels == label)
        held = held[np.argsort(inverse.position[held], kind="stable")]  # in the factor's order
        _check_trend_identified(centered, held, label, group)
        check_memory(
            3 * 8.0 * held.size**2,
            f"a fold of {held.size:,} sites",
            "use more folds (a larger cv), so that each holds fewer sites.",
        )
        root = trend_root[:, held]
        block = inverse.block(held)  # symmetric: its transpose is the Fortran-ordered view
        block /= fit.variance
        if root.size:
            block -= root.T @ root
        residual[held], variance[held] = _fold_solve(block, projected[held], inverse, label, group)
    return residual, variance


def _fold_solve(block, rhs, inverse, label, group):
    """``(block^{-1} rhs, diag(block^{-1}))`` for a fold's precision `block` (overwritten):
    through a TLR factor at the fit's accuracy for a fold of at least
    :data:`TLR_FOLD_SITES` sites of a TLR fit (its sites are in the factor's order, so its
    tiles compress), else (or where that factor fails) dense."""
    if inverse.accuracy is not None and block.shape[0] >= TLR_FOLD_SITES:
        try:
            return compressed_solve_and_inverse_diagonal(block, rhs, inverse.accuracy)
        except NotPositiveDefiniteError:
            pass  # the compressed fold is not positive definite: the dense factor decides
    factor, info = lapack.dpotrf(block.T, lower=1, clean=1, overwrite_a=1)
    if info:
        raise ValueError(
            f"fold {label} cannot be predicted from the other sites of "
            f"{_replicates(group)}: its conditional covariance is numerically singular; "
            "use more folds (a larger cv) or folds that leave sites spread over the domain."
        )
    solution = cho_solve((factor, True), rhs, check_finite=False)
    root_inverse, _ = lapack.dtrtri(factor, lower=1, overwrite_c=1)
    return solution, np.einsum("ij,ij->j", root_inverse, root_inverse)


def _check_trend_identified(centered, held, label, group):
    """Refuse a fold whose other sites cannot estimate the group's trend coefficients."""
    p = centered.shape[1]
    if not p:
        return
    rest = np.delete(centered, held, axis=0)
    norms = np.linalg.norm(rest, axis=0)
    if rest.shape[0] < p or np.linalg.matrix_rank(rest / np.where(norms > 0.0, norms, 1.0)) < p:
        raise ValueError(
            f"fold {label} leaves {rest.shape[0]} observed site(s) of {_replicates(group)}, "
            f"which cannot estimate the {p} trend coefficient(s); use more folds (a larger "
            "cv), or folds that keep sites of every replicate and spread over the covariates' "
            "values."
        )


def _replicates(group):
    """``"replicate(s) [0, 3]"`` (columns of ``y``) of a group, for messages."""
    more = " ..." if len(group.columns) > 5 else ""
    return f"replicate(s) {[int(j) for j in group.columns[:5]]}{more}"


class _InverseEntries:
    """Entries of ``K^{-1}`` of one factor: from its dense inverse, from the TLR inverse
    factor (:meth:`geostat.solvers.TLRFactor.inverse_entries`, where it fits in memory),
    or by solves with columns of the identity (counted in `columns_solved` and
    `blocks_solved`)."""

    def __init__(self, chol, n, accuracy=None):
        self.chol, self.n = chol, n
        self.dense = isinstance(chol, DenseCholesky)
        #: the TLR fit's accuracy (None for a dense factor)
        self.accuracy = None if self.dense else accuracy
        self.columns_solved = self.blocks_solved = 0
        self._inverse = None
        self._entries = None
        if not self.dense and accuracy is not None and _fits(INVERSE_FACTOR_BYTES * chol.nbytes):
            self._entries = chol.inverse_entries(accuracy)
            if self._entries is not None:
                logger.info(
                    "cross-validation: TLR inverse factor of %d sites, %.1f MB",
                    n,
                    self._entries.nbytes / 1e6,
                )
        # The position of each site in the factor: columns of the identity solved in that
        # order start at their first tile (the forward substitution skips the zero tiles).
        perm = getattr(chol, "perm", None)
        self.position = np.arange(n) if perm is None else np.argsort(np.asarray(perm))

    def _dense_inverse(self, lower):
        check_memory(
            2 * 8.0 * self.n**2,
            f"the inverse covariance of {self.n:,} sites",
            "fit with method='tlr' (its cross-validation solves in blocks).",
        )
        return self.chol.inverse(lower=lower)

    def diagonal(self):
        """``diag(K^{-1})``."""
        if self.dense:
            backend = self.chol.backend
            return np.array(
                backend.to_host(backend.xp.diagonal(self._dense_inverse(lower=True))),
                dtype=np.float64,
            )
        if self._entries is not None:
            return self._entries.diagonal()
        out = np.empty(self.n)
        for _, columns in self._column_blocks(np.argsort(self.position)):
            solution = self.chol.solve_lower(self._identity_columns(columns))
            out[columns] = np.einsum("ij,ij->j", solution, solution)
        return out

    def block(self, rows):
        """``(K^{-1})[rows][:, rows]``."""
        if self.dense:
            if self._inverse is None:
                self._inverse = self._dense_inverse(lower=False)
            backend = self.chol.backend
            index = backend.xp.asarray(rows)
            return np.asarray(
                backend.to_host(self._inverse[index[:, None], index[None, :]]), dtype=np.float64
            )
        if self._entries is not None:
            return self._entries.block(rows)
        # (K^{-1})_VV = W^T W with W = L^{-1} P E_V: forward solves only, W held whole
        check_memory(
            2 * 8.0 * self.n * rows.size,
            f"the forward solves of a fold of {rows.size:,} sites",
            "use more folds (a larger cv), so that each holds fewer sites.",
        )
        self.columns_solved += rows.size
        self.blocks_solved += 1
        order = np.argsort(self.position[rows], kind="stable")
        solution = self.chol.solve_lower(self._identity_columns(rows[order]))
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        return (solution.T @ solution)[np.ix_(back, back)]

    def _column_blocks(self, columns):
        """``(start, block)`` of `columns` in consecutive blocks whose right-hand sides
        (``n x block`` doubles) take at most :data:`SOLVE_BLOCK_BYTES`, counted as solved."""
        size = max(1, SOLVE_BLOCK_BYTES // (8 * self.n))
        for start in range(0, columns.size, size):
            block = columns[start : start + size]
            self.columns_solved += block.size
            self.blocks_solved += 1
            yield start, block

    def _identity_columns(self, columns):
        """The columns `columns` of the ``n x n`` identity."""
        out = np.zeros((self.n, columns.size))
        out[columns, np.arange(columns.size)] = 1.0
        return out


def _fits(need):
    """Whether `need` bytes fit in 90 % of the available host memory."""
    try:
        check_memory(need, "", "")
    except MemoryError:
        return False
    return True
