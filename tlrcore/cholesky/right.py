r"""Right-looking TLR Cholesky factorization: a deterministic reference for the left-looking one.

Reached through ``tlrcore.cholesky(A, variant="right")``. For each tile column ``k``:

1. **Diagonal factorization.** ``L(k, k) = chol(D_k)``; the diagonal tile ``D_k`` already
   carries the updates of all columns to its left.
2. **Triangular solve on V only.** ``L(i, k) = U(i, k) (L(k, k)^{-1} V(i, k))^T`` for all
   ``i > k``, as one wide solve (as in :mod:`tlrcore.cholesky.left`).
3. **Trailing update.** Every diagonal tile ``j > k`` gets ``D_j -= L(j, k) L(j, k)^T``
   (dense, one ``dsyrk`` with ``W = U(j, k) R^T`` where ``V(j, k) = Q R``), and every
   off-diagonal tile ``(i, j)``, ``i > j > k``, gets ``A(i, j) -= L(i, k) L(j, k)^T``: the
   low-rank sum ``[U_A | -U(i, k) C] [V_A | U(j, k)]^T`` with ``C = V(i, k)^T V(j, k)``
   (or the transposed stacking, whichever adds the smaller rank) is recompressed by QR
   of both factors and an SVD of the small core.

Accuracy
--------
Tile ``(i, j)`` is recompressed once for each of its ``j`` updates. Each truncation
discards at most ``tau / sqrt(j)``, so errors that add up like independent ones total
about ``tau``, the budget of the single ARA compression of the left-looking variant
(aligned errors could reach ``sqrt(j) tau``). The recompression is deterministic: the
factor does not depend on a seed.

Cost
----
``O(n_tiles^3)`` recompressions of a stacked tile instead of ``O(n_tiles^2)`` ARA
compressions, mostly small QR and SVD calls: this is why H2Opus (paper sec. 4) prefers
the left-looking variant. The tiles of a trailing update are independent; a thread pool
updates them with BLAS on one thread each, started in descending order of estimated work,
and stores the results by tile, so the factor is bit-identical for any number of threads.
"""

from __future__ import annotations

import math

import numpy as np

from tlrcore.cholesky._steps import (
    factor_diagonal,
    fortran_copy,
    gram_root,
    solve_column,
    subtract_gram,
)
from tlrcore.cholesky.factor import TLRCholesky
from tlrcore.compress._recompress import recompress
from tlrcore.concurrency.threads import column_progress, map_by_work, runner, tile_pool, workers

__all__ = ["right_looking"]


def right_looking(A, tolerance, overwrite_a=False):
    """Right-looking TLR Cholesky factorization ``A ~ L L^T``.

    Parameters
    ----------
    A : TLRMatrix
        Symmetric positive definite (checked by :func:`tlrcore.cholesky`).
    tolerance : float
        Absolute Frobenius tolerance of each tile of ``L`` (split over its updates, see
        the module docstring).
    overwrite_a : bool, default False
        Hand the tiles of `A` to the factorization, which frees each one as soon as it is
        replaced by its update; `A` is unusable afterwards.

    Returns
    -------
    TLRCholesky

    Raises
    ------
    NotPositiveDefiniteError
        If an updated diagonal tile is not positive definite; ``.tile`` is its index.
    """
    n_t = A.n_tiles
    diagonal, U, V = _working_tiles(A, overwrite_a)
    factors = []
    with (
        tile_pool(workers()) as pool,
        column_progress(n_t, "TLR Cholesky (right-looking)") as counter,
    ):
        run = runner(pool)
        for k in range(n_t):
            Lkk = factor_diagonal(diagonal[k], k)
            factors.append(Lkk)
            below = range(k + 1, n_t)
            for i, Vt in zip(below, solve_column(Lkk, [V[i, k] for i in below], run)):
                V[i, k] = Vt
            _update_trailing(k, diagonal, U, V, tolerance, run)
            counter.update()
    return TLRCholesky(factors, U, V, A.offsets, tolerance)


def _working_tiles(A, overwrite_a):
    """Tiles of `A` to update: Fortran-ordered copies of the diagonal, the off-diagonal
    factors themselves (the updates replace them, never write into them)."""
    diagonal, U, V = [], {}, {}
    for k in range(A.n_tiles):
        diagonal.append(fortran_copy(A.diagonal[k]))
        for i in range(k + 1, A.n_tiles):
            U[i, k], V[i, k] = A.U[i, k], A.V[i, k]
        if overwrite_a:
            A._release_column(k)
    return diagonal, U, V


def _update_trailing(k, diagonal, U, V, tolerance, run):
    """Subtract ``L(:, k) L(:, k)^T`` from the trailing tiles, in place of the old ones."""
    n_t = len(diagonal)
    tiles = [(i, j) for j in range(k + 1, n_t) for i in range(j, n_t)]

    def update(tile):
        i, j = tile
        if i == j:
            return subtract_gram(diagonal[j], gram_root(U[j, k], V[j, k]))
        return _downdate(
            U[i, j], V[i, j], (U[i, k], V[i, k]), (U[j, k], V[j, k]), tolerance / math.sqrt(j)
        )

    work = [_update_work(diagonal[j].shape[0], U, i, j, k) for i, j in tiles]
    for (i, j), result in zip(tiles, map_by_work(run, update, tiles, work)):
        if i == j:
            diagonal[j] = result
        else:
            U[i, j], V[i, j] = result


def _downdate(Ua, Va, Li, Lj, tol):
    """``Ua Va^T - (Ui Vi^T)(Uj Vj^T)^T`` recompressed to `tol`, for ``Li = (Ui, Vi)``,
    ``Lj = (Uj, Vj)``; the update enters with rank ``min(rank Li, rank Lj)``."""
    (Ui, Vi), (Uj, Vj) = Li, Lj
    core = Vi.T @ Vj
    if Ui.shape[1] <= Uj.shape[1]:
        left, right = -Ui, Uj @ core.T
    else:
        left, right = -Ui @ core, Uj
    return recompress(np.hstack([Ua, left]), np.hstack([Va, right]), tol)


def _update_work(size, U, i, j, k):
    """Estimated flops of the update of tile ``(i, j)`` by column `k` (tile order `size`):
    a ``dsyrk`` for a diagonal tile, QR of the two stacked factors for an off-diagonal one."""
    rank_j = U[j, k].shape[1]
    if i == j:
        return size * size * rank_j + size * rank_j * rank_j
    stacked = U[i, j].shape[1] + min(U[i, k].shape[1], rank_j)
    return 2 * size * stacked * stacked
