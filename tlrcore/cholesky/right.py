"""Right-looking TLR Cholesky factorization: a deterministic reference for the left-looking one.

Reached through ``tlrcore.cholesky(A, variant="right")``. For each tile column ``k``:
``L(k, k) = chol(D_k)``; ``L(i, k) = U(i, k) (L(k, k)^{-1} V(i, k))^T`` in one wide solve;
then every trailing diagonal tile gets ``D_j -= L(j, k) L(j, k)^T`` (one ``dsyrk``) and
every trailing tile ``A(i, j) -= L(i, k) L(j, k)^T``, the stacked low-rank sum
recompressed by QR and SVD to ``tau / sqrt(j)``: over its ``j`` updates, errors adding up
like independent ones total about ``tau`` (aligned ones up to ``sqrt(j) tau``). Without
random sampling the factor depends on no seed. It costs ``O(n_t^3)`` recompressions
against the left-looking ``O(n_t^2)`` ARA compressions [1]_. Trailing tiles run on the
tile pool, stored by tile: bit-identical for any number of threads.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
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
    """Right-looking TLR Cholesky factorization ``A ~ L L^T``, a :class:`TLRCholesky`.

    `tolerance` is the absolute Frobenius tolerance of each tile of ``L``, split over its
    updates; with `overwrite_a` each tile of `A` is freed once replaced (`A` is then
    unusable).

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
            for i, Vt in zip(below, solve_column(Lkk, [V[i, k] for i in below], run), strict=True):
                V[i, k] = Vt
            _update_trailing(k, diagonal, U, V, tolerance, run)
            counter.update()
    return TLRCholesky(factors, U, V, A.offsets, tolerance)


def _working_tiles(A, overwrite_a):
    """Tiles of `A` to update: Fortran-ordered copies of the diagonal, the off-diagonal factors
    themselves (replaced by updates, never written into)."""
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
    for (i, j), result in zip(tiles, map_by_work(run, update, tiles, work), strict=True):
        if i == j:
            diagonal[j] = result
        else:
            U[i, j], V[i, j] = result


def _downdate(Ua, Va, Li, Lj, tol):
    """``Ua Va^T - (Ui Vi^T)(Uj Vj^T)^T`` recompressed to `tol`; the update enters with rank
    ``min(rank Li, rank Lj)``."""
    (Ui, Vi), (Uj, Vj) = Li, Lj
    core = Vi.T @ Vj
    if Ui.shape[1] <= Uj.shape[1]:
        left, right = -Ui, Uj @ core.T
    else:
        left, right = -Ui @ core, Uj
    return recompress(np.hstack([Ua, left]), np.hstack([Va, right]), tol)


def _update_work(size, U, i, j, k):
    """Estimated flops of the update of tile ``(i, j)`` by column `k`."""
    rank_j = U[j, k].shape[1]
    if i == j:
        return size * size * rank_j + size * rank_j * rank_j
    stacked = U[i, j].shape[1] + min(U[i, k].shape[1], rank_j)
    return 2 * size * stacked * stacked
