"""Left-looking TLR Cholesky factorization ([1]_, Algorithms 3-6; the tile algorithm of [2]_).

For tile column ``k``: ``L(k, k) = chol(A(k, k) - W W^T)``, ``W = [U(k, 0) C_0 | ...]``
with ``C_j C_j^T = V(k, j)^T V(k, j)`` (one ``dsyrk``; in place with ``overwrite_a``); each
``A(i, k) - U_i M_ik U_k^T``, ``M_ik = blockdiag(V(i, j)^T V(k, j))``, sampled through the
stacked factors and compressed to the tile tolerance by ARA, never formed; then ``L(i, k) =
U (L(k, k)^{-1} V)^T`` for the column in one solve. A column's tiles share their Gaussian
blocks (one seed per column) and run on the tile pool, most work first (dynamic batching
on the CPU), stored by tile index: the factor is bit-identical for any number of threads.
Lookahead: a chain thread factors diagonal tile ``k + 1`` while the pool works on column
``k``.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
.. [2] Akbudak, K., Ltaief, H., Mikhalev, A., Keyes, D. E. (2017). Tile low rank Cholesky
   factorization for climate/weather modeling applications on manycore architectures.
   ISC High Performance, LNCS 10266, 22-40.
"""

from __future__ import annotations

import numpy as np

from tlrcore._lapack import trsm_lower
from tlrcore.cholesky._steps import (
    ColumnGrams,
    ColumnSamples,
    RowPanels,
    ara_work,
    diagonal_update,
    sampled_update,
    solve_stacked,
)
from tlrcore.cholesky.factor import TLRCholesky
from tlrcore.concurrency.heap import trim_heap
from tlrcore.concurrency.threads import (
    column_progress,
    column_seeds,
    runner,
    serial_thread,
    start_by_work,
    submit,
    tile_pool,
    workers,
)

__all__ = ["TRIM_BYTES", "left_looking"]

#: With ``overwrite_a``, the C heap is trimmed (:func:`~tlrcore.concurrency.heap.trim_heap`)
#: once the released low-rank factors of ``A`` in the heap add up to this many bytes, not
#: after every column: a trim also hands back the free pages of the factorization's own
#: short-lived arrays, which the next column then faults in again. Factors read from a
#: worker's memory file are not counted: their memory goes back when they are released.
TRIM_BYTES = 64 << 20


def left_looking(A, tolerance, factorizer, block_size, random_state, overwrite_a):
    """Left-looking factorization of `A` into a :class:`TLRCholesky`, each updated tile
    compressed to `tolerance`, each diagonal tile factored by `factorizer`."""
    n_t = A.n_tiles
    seeds = column_seeds(random_state, n_t)
    diagonal, U, V = [None] * n_t, {}, {}
    released = 0  # bytes of A's low-rank factors released since the heap was last trimmed
    rows = [D.shape[0] for D in A.diagonal]
    with (
        tile_pool(workers()) as pool,
        serial_thread(pool) as chain,
        column_progress(n_t, "TLR Cholesky") as counter,
    ):
        # L's ranks are about A's (a little below): room for a quarter more before a row grows
        panels = RowPanels(
            U,
            rows,
            [sum(A.U[i, j].shape[1] for j in range(i)) * 5 // 4 + block_size for i in range(n_t)],
        )
        run = runner(pool)

        def factor_diagonal(k):
            factors = [(U[k, j], V[k, j]) for j in range(k)]
            in_place = A._diagonal_in_place(k) if overwrite_a else None
            diagonal[k] = factorizer.factor(
                *diagonal_update(A.diagonal[k], factors, in_place), k, updated=False
            )

        def release(k, released):
            """Free A's column `k`; trim the heap once the bytes freed since the last trim
            (`released`, returned updated) reach :data:`TRIM_BYTES`."""
            released += A._release_column(k)
            if released >= TRIM_BYTES:
                trim_heap()
                return 0
            return released

        def solve_next(k, tile):
            V[k + 1, k] = trsm_lower(diagonal[k], np.asfortranarray(tile.result()))

        grams = ColumnGrams(n_t)
        factored = submit(chain, factor_diagonal, 0)
        for k in range(n_t):
            grams.wait(k)
            Uk = panels.stacked(k)
            samples = ColumnSamples(Uk, block_size)

            def update(i, k=k, Uk=Uk, samples=samples):
                """``V`` of the updated tile ``(i, k)``, its ``U`` appended to row `i`."""
                Ut, Vt = sampled_update(
                    A.U[i, k],
                    A.V[i, k],
                    panels.stacked(i),
                    Uk,
                    grams.blocks(i, k),
                    tolerance,
                    block_size,
                    seeds[k],
                    samples,
                )
                panels.add(i, k, Ut)
                return Vt

            if k + 1 < n_t:
                # The next diagonal tile needs only L(k + 1, :k + 1): its tile of this column
                # goes first, and the chain thread solves it and factors the tile while the
                # pool compresses the rest of the column and, once it is solved, the next.
                next_tile = submit(pool, update, k + 1)
                solved_next = submit(chain, solve_next, k, next_tile)
                next_factored = submit(chain, factor_diagonal, k + 1)
            rest = list(range(k + 2, n_t))
            collect = start_by_work(
                pool, update, rest, [ara_work(A, U, i, k, block_size) for i in rest]
            )
            if overwrite_a and k:
                released = release(
                    k - 1, released
                )  # while the pool works: column k - 1 is read no more
            factored.result()  # L(k, k), or its failure raised before the column is waited for
            updated = collect()
            ranks = [Vt.shape[1] for Vt in updated]
            solved = solve_stacked(diagonal[k], updated, run)
            for i, Vt in zip(rest, np.hsplit(solved, np.cumsum(ranks)[:-1]), strict=False):
                V[i, k] = Vt
            if k + 1 < n_t:
                solved_next.result()
                factored = next_factored
            if rest:
                grams.add(k, V[k + 1, k], solved, ranks, pool)
            grams.release(k)
            counter.update()
        if overwrite_a:
            A._release_column(n_t - 1)
            trim_heap()  # A's freed heap tiles would stay resident beside L's (concurrency.heap)
    return TLRCholesky(diagonal, U, V, A.offsets, tolerance)
