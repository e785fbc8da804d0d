r"""Left-looking TLR Cholesky with symmetric tile pivoting (H2Opus, Algorithm 9).

Reached through ``tlrcore.cholesky(A, safeguard="pivot")``. At step ``k`` the pivot is the
remaining diagonal tile whose updated value ``A(i, i) - sum_{j<k} L(i, j) L(i, j)^T`` has
the largest Frobenius norm; it becomes tile ``k`` of the factor. As in scalar pivoted
Cholesky of a semidefinite matrix, the small (nearly singular) Schur complements are left
for last, where their errors no longer feed many later updates.

The pivot choice needs every remaining diagonal tile updated with every finished column,
so the updated diagonal tiles are kept in a workspace (``n * tile_size`` doubles, a copy
of the diagonal of ``A``) and updated eagerly by one ``dsyrk`` per tile and column, in
parallel: the same work as the unpivoted diagonal updates, done earlier. The
off-diagonal tiles are sampled once by ARA, as in :mod:`tlrcore.cholesky.left`; a tile of `A`
above the diagonal in the pivoted order is read through its transpose. There is no
lookahead: the next diagonal tile is not known before the column is finished.

The factor stores ``perm``, the site order, with ``A[perm][:, perm] ~ L L^T``.
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
    """Tile-pivoted left-looking factorization (see the module docstring).

    Parameters are those of the unpivoted :func:`tlrcore.cholesky.left.left_looking`;
    `overwrite_a` releases nothing here (tiles are read in pivot order).
    """
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
            for i, (Ut, _), Vt in zip(rest, columns, solved):
                U[i, k], V[i, k] = Ut, Vt
            list(run(lambda i, k=k: subtract_gram(updated[i], gram_root(U[i, k], V[i, k])), rest))
            counter.update()
    position = {tile: k for k, tile in enumerate(order)}
    sizes = [A.diagonal[tile].shape[0] for tile in order]
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
    """Frobenius norm of the symmetric matrix whose lower triangle is `D`'s, given the
    sum of squares `stale` of `D`'s (not updated) strict upper triangle: no copy."""
    flat = D.ravel(order="K")
    diagonal = np.diagonal(D)
    lower = float(flat @ flat) - stale
    return float(np.sqrt(max(2.0 * lower - float(diagonal @ diagonal), 0.0)))
