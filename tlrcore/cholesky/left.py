r"""Left-looking TLR Cholesky factorization (H2Opus, Algorithms 3-6).

For each tile column ``k``:

1. **Diagonal update.** ``D = A(k, k) - sum_{j<k} L(k, j) L(k, j)^T``. With the Cholesky
   factor ``C_j C_j^T = V(k, j)^T V(k, j)`` of the small Gram matrix
   (:func:`~tlrcore.cholesky._steps.gram_root`), ``L(k, j) L(k, j)^T = (U(k, j) C_j)(U(k, j) C_j)^T``,
   so ``D = A(k, k) - W W^T`` with ``W = [U(k, 0) C_0 | ... ]``: one symmetric rank-k update
   (``dsyrk``, lower triangle only); then ``L(k, k) = chol(D)``. With ``overwrite_a``,
   ``D`` is ``A(k, k)``'s own array (a C-ordered tile through its transpose, the same
   symmetric matrix), updated and factored in place: the 64 diagonal tiles of 131,072
   sites are 2.1 GB that the factor then does not allocate and fault in again.
2. **Off-diagonal update, sampled once.** Each tile below the diagonal,
   ``A(i, k) - sum_{j<k} U(i, j) V(i, j)^T V(k, j) U(k, j)^T
   = U_A V_A^T - U_i M_ik U_k^T`` with ``M_ik = blockdiag(V(i, j)^T V(k, j))``, is never
   formed: adaptive randomized approximation samples it through products with these
   stacked factors and compresses it to the tile tolerance in a single step. The
   stacked ``U_i = [U(i, 0) | ... | U(i, k-1)]`` is read in place: each tile row of ``L``
   keeps its ``U`` factors side by side in one buffer
   (:class:`~tlrcore.cholesky._steps.RowPanels`); ``M_ik`` is kept as its blocks
   (:class:`~tlrcore.cholesky._steps.BlockDiagonal`). At 131,072 sites (64 tile
   columns) the per-tile copy of ``U_i`` and the dense, mostly zero ``M_ik`` had cost
   an eighth of the factorization. The blocks ``V(i, j)^T V(k, j)`` come from one Gram
   matrix per finished column ``j`` (:class:`~tlrcore.cholesky._steps.ColumnGrams`),
   computed by a pool thread while the next column is updated: a 131,072-site
   factorization 5-7 % faster than with each tile's own small products.
3. **Triangular solve on V only.** ``L(i, k) = U V^T L(k, k)^{-T} = U (L(k, k)^{-1} V)^T``,
   for all tiles of the column at once (their ``V`` side by side: one BLAS-3 solve that
   reads ``L(k, k)`` once, split across the worker threads).

All tiles of a column sample with the same Gaussian blocks (one seed per column), so
the products of the shared stacked factor ``U(k, :k)^T`` with them are computed once
per column (:class:`~tlrcore.cholesky._steps.ColumnSamples`) rather than once per tile;
each tile's samples stay independent of its data, which is all ARA's error estimate
needs.

Tiles of one column are independent and are compressed by a thread pool (BLAS on one
thread each). They are handed to the pool in descending order of estimated work (a cost
model of the ARA products, from the rank of ``A(i, k)`` and the stacked ranks of
``L(i, :k)`` and ``L(k, :k)``), so the largest tiles start first and the threads refill
from the queue as tiles finish: the CPU analogue of the paper's dynamic batching, which
keeps a few large tiles from finishing alone at the end of a column. Results are stored
by tile index and every column has its own seed, so the factor is bit-identical from run
to run and for any number of threads.

Lookahead: diagonal tile ``k + 1`` needs only ``L(k + 1, :k + 1)``, so tile
``(k + 1, k)`` is compressed first, and a thread of its own (the chain) solves it and
updates and factors diagonal tile ``k + 1`` while the pool compresses the rest of column
``k`` and, once that is solved with ``L(k, k)``, the tiles of column ``k + 1``: only
column ``k + 1``'s triangular solve waits for ``L(k + 1, k + 1)``. The dense diagonal work
(a quarter to a third of the total) thus runs beside the tile work instead of holding
it up.

The dense routines run on these threads (``dpotrf``, ``dsyrk``, ``dtrsm``, the SVDs of
recompression) release the GIL (:mod:`tlrcore._lapack`); through SciPy's wrappers,
which hold it, two threads on two cores factored 65,536 sites only 1.2 times faster than
one thread.

Reached through ``tlrcore.cholesky(A)`` (``variant="left"``, the default for a matrix in
the tile layout).
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

#: With ``overwrite_a``, the C heap is trimmed (:func:`~tlrcore.concurrency.heap.trim_heap`) once
#: the released low-rank factors of ``A`` in the heap add up to this many bytes: a trim
#: also hands back the free pages of the factorization's own short-lived arrays, which
#: the next column then faults in again (at 131,072 sites a trim after every column
#: doubled the system time of the factorization). Factors read from a worker's memory file
#: are not counted: their memory goes back to the system when they are released (at
#: 131,072 sites, 0.8-0.9 instead of 1.2-1.4 s of system time, the same peak).
TRIM_BYTES = 64 << 20


def left_looking(A, tolerance, factorizer, block_size, random_state, overwrite_a):
    """Left-looking factorization of `A`, each updated tile compressed to `tolerance` and
    each diagonal tile factored by the :class:`~tlrcore.cholesky.safeguards.DiagonalFactorizer`."""
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
                """``V`` of the updated tile ``(i, k)``, its ``U`` appended to row `i` (the
                only row the tile writes to, and no other tile of the column reads)."""
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
            for i, Vt in zip(rest, np.hsplit(solved, np.cumsum(ranks)[:-1])):
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
