"""Left-looking TLR Cholesky with symmetric tile pivoting.

Reached through ``tlrcore.cholesky(A, safeguard="pivot")`` ([1]_, Algorithm 9). At step
``k`` the pivot is the remaining diagonal tile whose updated value has the largest
Frobenius norm; as in pivoted Cholesky of a semidefinite matrix, nearly singular Schur
complements come last, where their errors feed few updates. The updated diagonal tiles are
kept in a workspace (a copy of ``A``'s diagonal) and updated eagerly, one ``dsyrk`` per
tile and column; off-diagonal tiles are sampled once by ARA as in
:mod:`tlrcore.cholesky.left`, a tile above the diagonal in pivot order read through its
transpose. No lookahead. The factor's ``perm`` gives ``A[perm][:, perm] ~ L L^T``.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
"""

from __future__ import annotations

import numpy as np

from tlrcore.cholesky._steps import (
    ara_work,
    cross_grams,
    fortran_copy,
    gram_root,
    sampled_update,
    solve_column,
    stack,
    subtract_gram,
)
from tlrcore.cholesky.factor import TLRCholesky
from tlrcore.concurrency.threads import (
    column_progress,
    runner,
    start_by_work,
    tile_pool,
    tile_seeds,
    workers,
)

__all__ = ["pivoted_left_looking"]


def pivoted_left_looking(A, tolerance, factorizer, block_size, random_state, overwrite_a=False):
    """Tile-pivoted left-looking factorization; parameters as
    :func:`tlrcore.cholesky.left.left_looking` (`overwrite_a` releases nothing here)."""
    n_t = A.n_tiles
    seeds = tile_seeds(random_state, n_t)
    updated = {i: fortran_copy(A.diagonal[i]) for i in range(n_t)}
    # dsyrk updates the lower triangles only; the strict upper ones keep A's values
    stale = {i: _strict_upper_squares(D) for i, D in updated.items()}
    order, diagonal = [], []
    U, V = {}, {}  # keyed by (original tile i, factor column k)
    with tile_pool(workers()) as pool, column_progress(n_t, "TLR Cholesky (pivoted)") as counter:
        run = runner(pool)
        for k in range(n_t):
            p = max(updated, key=lambda i: (_frobenius(updated[i], stale[i]), -i))
            order.append(p)
            D = updated.pop(p)
            W = None
            if factorizer.schur or factorizer.compensate:
                W = stack([gram_root(U[p, j], V[p, j]) for j in range(k)], D.shape[0])
            Lkk = factorizer.factor(D, W if W is not None else np.zeros((D.shape[0], 0)), k, tile=p)
            diagonal.append(Lkk)
            rest = sorted(updated)
            Up = stack([U[p, j] for j in range(k)], D.shape[0])

            def update(i, k=k, p=p, Up=Up):
                Ua, Va = (A.U[i, p], A.V[i, p]) if i > p else (A.V[p, i], A.U[p, i])
                cross = cross_grams([V[i, j] for j in range(k)], [V[p, j] for j in range(k)])
                return sampled_update(
                    Ua,
                    Va,
                    stack([U[i, j] for j in range(k)], Ua.shape[0]),
                    Up,
                    cross,
                    tolerance,
                    block_size,
                    seeds[max(i, p), min(i, p)],
                )

            work = [ara_work(A, U, i, p, block_size, columns=k) for i in rest]
            columns = start_by_work(pool, update, rest, work)()
            solved = solve_column(Lkk, [Vt for _, Vt in columns], run)
            for i, (Ut, _), Vt in zip(rest, columns, solved, strict=True):
                U[i, k], V[i, k] = Ut, Vt
            list(run(lambda i, k=k: subtract_gram(updated[i], gram_root(U[i, k], V[i, k])), rest))
            counter.update()
    position = {tile: k for k, tile in enumerate(order)}
    sizes = [int(A.offsets[tile + 1] - A.offsets[tile]) for tile in order]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    perm = np.concatenate([np.arange(A.offsets[tile], A.offsets[tile + 1]) for tile in order])
    U = {(position[i], k): Ut for (i, k), Ut in U.items()}
    V = {(position[i], k): Vt for (i, k), Vt in V.items()}
    return TLRCholesky(diagonal, U, V, offsets, tolerance, perm=perm)


def _strict_upper_squares(D):
    """Sum of squares of the strict upper triangle of the symmetric `D`."""
    flat = D.ravel(order="K")
    diagonal = np.diagonal(D)
    return 0.5 * (float(flat @ flat) - float(diagonal @ diagonal))


def _frobenius(D, stale):
    """Frobenius norm of the symmetric matrix of `D`'s lower triangle, `stale` the sum of squares
    of `D`'s stale strict upper triangle: no copy."""
    flat = D.ravel(order="K")
    diagonal = np.diagonal(D)
    lower = float(flat @ flat) - stale
    return float(np.sqrt(max(2.0 * lower - float(diagonal @ diagonal), 0.0)))
