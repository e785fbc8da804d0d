"""Left-looking TLR Cholesky factorization ([1]_, Algorithms 3-6; the tile algorithm of [2]_).

For tile column ``k``: ``L(k, k) = chol(A(k, k) - W W^T)``, ``W = [U(k, 0) C_0 | ...]``
with ``C_j C_j^T = V(k, j)^T V(k, j)`` (one ``dsyrk`` on the unpacked lower triangle of
``A(k, k)``; ``L(k, k)`` is kept as a triangle once its column is solved); each
``A(i, k) - U_i M_ik U_k^T``, ``M_ik = blockdiag(V(i, j)^T V(k, j))``, sampled through the
stacked factors and compressed to the tile tolerance by ARA, never formed; then ``L(i, k) =
U (L(k, k)^{-1} V)^T`` for the column in one solve, whose trailing columns are then
rounded to single precision within :func:`~tlrcore.compress.single.factor_budget` before
anything reads them (a finished tile row is stored compact, float32 where rounded). A
column's tiles share their Gaussian blocks (one seed per column) and run on the tile pool,
most work first (dynamic batching on the CPU), stored by tile index: the factor is
bit-identical for any number of threads. Lookahead: a chain thread factors diagonal tile
``k + 1`` while the pool works on column ``k``. A matrix whose tile columns are compressed
when read (``deferred=True``) has column ``k + COMPRESS_AHEAD`` compressed on the pool
while column ``k`` is factored, so with ``overwrite_a`` it never holds more than a few
columns of low-rank tiles. Above :data:`SPILL_BYTES`, each finished tile row of ``L``
moves to a file (:mod:`~tlrcore.concurrency.spill`): no later column reads it.

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

import logging
import os

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
from tlrcore.compress.single import CompactFactors, factor_budget, round_in_place
from tlrcore.concurrency.heap import trim_heap
from tlrcore.concurrency.spill import Spill
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
from tlrcore.dense.triangles import Triangles

__all__ = ["COMPRESS_AHEAD", "SPILL_BYTES", "TRIM_BYTES", "left_looking"]

logger = logging.getLogger(__name__)

#: A matrix whose bytes (:attr:`~tlrcore.TLRMatrix.nbytes`) and its factor's diagonal
#: triangles add up to more than this has its factor's finished tile rows moved to files
#: in ``TLRCORE_SPILL_DIR`` (the system's temporary directory when unset), read back
#: through memory maps (:class:`Spill`): the factor's memory is then the operating
#: system's file cache, which it can reclaim.
SPILL_BYTES = 6 << 30

#: With ``overwrite_a``, the C heap is trimmed (:func:`~tlrcore.concurrency.heap.trim_heap`)
#: once the released low-rank factors of ``A`` in the heap add up to this many bytes, not
#: after every column: a trim also hands back the free pages of the factorization's own
#: short-lived arrays, which the next column then faults in again. Factors read from a
#: worker's memory file are not counted: their memory goes back when they are released.
TRIM_BYTES = 64 << 20

#: Tile columns of a matrix built with ``deferred=True`` compressed ahead of the column
#: being factored: enough to keep the pool busy where compression outweighs the updates
#: (the first columns), few against the columns of ``L``.
COMPRESS_AHEAD = 4


def left_looking(A, tolerance, factorizer, block_size, random_state, overwrite_a):
    """Left-looking factorization of `A` into a :class:`TLRCholesky`, each updated tile
    compressed to `tolerance`, each diagonal tile factored by `factorizer`."""
    n_t = A.n_tiles
    seeds = column_seeds(random_state, n_t)
    rows = [int(size) for size in np.diff(A.offsets)]
    # L(k, k) kept whole while column k and the next use it, then as a triangle
    diagonal, triangles, U, V = {}, Triangles.empty(rows), CompactFactors(), CompactFactors()
    budget = factor_budget(tolerance, A.tolerance * n_t / A.accuracy)
    single = {}  # (i, k): trailing columns of L(i, k) rounded to single precision
    released = 0  # bytes of A's low-rank factors released since the heap was last trimmed
    deferred = bool(A.deferred_columns)
    spill = _spill_for(A, rows)
    with (
        tile_pool(workers()) as pool,
        serial_thread(pool) as chain,
        column_progress(n_t, "TLR Cholesky") as counter,
    ):
        panels = RowPanels(U, rows, _row_capacities(A, rows, block_size))
        run = runner(pool)
        if deferred:
            for j in range(1, COMPRESS_AHEAD):
                submit(pool, A._compressed_column, j)

        def factor_diagonal(k, unpacked):
            """Factor diagonal tile `k`, its lower triangle unpacked by the future `unpacked`."""
            factors = [(U[k, j], V[k, j]) for j in range(k)]
            diagonal[k] = factorizer.factor(
                *diagonal_update(unpacked.result(), factors), k, updated=False
            )

        def release(k, released):
            """Free A's column `k`; trim the heap once the bytes freed since the last trim
            (`released`, returned updated) reach :data:`TRIM_BYTES`."""
            released += A._release_column(k)
            if released >= TRIM_BYTES:
                trim_heap()
                return 0
            return released

        # Buffers reused rather than new pages: whole tiles of L whose triangles are stored
        # (to unpack A's next tiles into) and, with overwrite_a, A's packed triangles (to
        # pack L's into).
        spare, recycled = [], {}

        def unpack(k):
            """A(k, k)'s lower triangle, in a spare buffer where one fits."""
            try:
                buffer = spare.pop()  # atomic: two unpacks may overlap
            except IndexError:
                buffer = None
            if buffer is not None and buffer.shape[0] != rows[k]:
                buffer = None
            lower = A._diagonal_lower(k, buffer)
            if overwrite_a:
                recycled[k] = A._take_diagonal(k)
            return lower

        def store(k, whole):
            triangles.store(k, whole, recycled.pop(k, None))
            spare.append(whole)
            if spill is not None:
                spill_row(k)

        def spill_row(k):
            """Move row `k` of L to a file, or keep it where that fails (and stop spilling)."""
            nonlocal spill
            keys = [(k, j) for j in range(k)]
            try:
                U.spill(keys, spill, group=k)
                V.spill(keys, spill, group=k)
                triangles.spill(k, spill, group=k)
            except OSError as exc:
                logger.warning("factor rows stay in memory: the spill file failed (%s)", exc)
                spill = None

        def rounded(i, k, Vt):
            """Round the trailing columns of ``L(i, k) = U(i, k) Vt^T`` in place (`Vt`, and
            ``U(i, k)`` in its row panel); their number."""
            single[i, k] = round_in_place(U[i, k], Vt, budget)
            return single[i, k]

        def solve_next(k, tile):
            Vt = trsm_lower(diagonal[k], np.asfortranarray(tile.result()))
            V.store_split((k + 1, k), Vt, rounded(k + 1, k, Vt))

        grams = ColumnGrams(n_t)
        stored = []
        factored = submit(chain, factor_diagonal, 0, submit(pool, unpack, 0))
        for k in range(n_t):
            if deferred:
                if k + COMPRESS_AHEAD < n_t:
                    submit(pool, A._compressed_column, k + COMPRESS_AHEAD)
                A._compressed_column(k)  # here, unless ahead; its failure raised here
            grams.wait(k)
            Uk = panels.stacked(k)
            samples = ColumnSamples(Uk, block_size)

            def update(i, k=k, Uk=Uk, samples=samples):
                """``V`` of the updated tile ``(i, k)``, its ``U`` appended to row `i`."""
                Ut, Vt = sampled_update(
                    A._U[i, k],
                    A._V[i, k],
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
                unpacked = submit(pool, unpack, k + 1)
                solved_next = submit(chain, solve_next, k, next_tile)
                next_factored = submit(chain, factor_diagonal, k + 1, unpacked)
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
            pieces = np.hsplit(solved, np.cumsum(ranks)[:-1]) if rest else []
            list(run(lambda i, Vt, k=k: rounded(i, k, Vt), rest, pieces))
            if k + 1 < n_t:
                solved_next.result()
                factored = next_factored
            if rest:
                grams.add(k, V[k + 1, k], solved, ranks, pool)
            for i, Vt in zip(rest, pieces, strict=True):
                V.store_split((i, k), Vt, single[i, k])
            grams.release(k)
            # row k is read no more: its tiles leave the row panel, trailing columns as float32
            for j in range(k):
                U.store_split((k, j), U[k, j], single.pop((k, j)))
            panels.release(k)
            # packed on the pool, off the path from column to column
            stored.append(submit(pool, store, k, diagonal.pop(k)))
            counter.update()
        for future in stored:
            future.result()
        if overwrite_a:
            A._release_column(n_t - 1)
            trim_heap()  # A's freed heap tiles would stay resident beside L's (concurrency.heap)
    return TLRCholesky(triangles, U, V, A.offsets, tolerance, spill=spill)


def _row_capacities(A, rows, block_size):
    """Columns to reserve for each tile row of ``L`` (`rows` its tile sizes): ``L``'s ranks are
    about ``A``'s (a little below), so a quarter more than the row's ranks in `A`; one tile's
    width for a row with columns of `A` still to compress (the row grows when needed)."""
    if A.deferred_columns:
        return [b + block_size for b in rows]
    return [
        sum(A.tile_rank(i, j) for j in range(i)) * 5 // 4 + block_size for i in range(len(rows))
    ]


def _spill_for(A, rows):
    """A :class:`Spill` for the factor of `A` (tile `rows`) when `A`'s bytes (estimated where
    columns are pending, :meth:`~tlrcore.TLRMatrix.estimated_nbytes`) and its factor's
    diagonal triangles add up to more than :data:`SPILL_BYTES`, else None."""
    triangles = sum(8 * b * (b + 1) // 2 for b in rows)
    if A.estimated_nbytes() + triangles <= SPILL_BYTES:
        return None
    return Spill(os.environ.get("TLRCORE_SPILL_DIR") or None)
