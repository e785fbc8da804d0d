"""Left-looking TLR Cholesky on whole tile columns with batched kernels, in the packed layout
([1]_, Algorithms 4-6).

Written with the back end's array module only (on CuPy the factor stays on the GPU). For
column ``k``: ``L(k, k) = chol(D_k)``, the diagonal tiles below updated eagerly; the tiles
``A(i, k) - sum_{j<k} L(i, j) L(k, j)^T`` compressed by batched ARA through
:class:`~tlrcore.packed.update.ColumnUpdate` (a sampling round is a fixed number of
batched GEMMs over the tiles of the :class:`~tlrcore.packed.pool.TilePool`, concatenated
once per column); ``V(i, k) <- L(k, k)^{-1} V(i, k)`` in one solve. Kernel launches per
column grow with the width classes in use, not with ``k``.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
"""

from __future__ import annotations

import logging

import numpy as np

from tlrcore.cholesky.factor import PackedCholesky
from tlrcore.cholesky.safeguards import tail_compensation, tail_count
from tlrcore.compress.ara_batched import batched_ara
from tlrcore.concurrency.threads import column_progress, column_seeds
from tlrcore.packed.column import TileColumn, segment_bounds
from tlrcore.packed.pool import PoolIndex, TilePool, store_column
from tlrcore.packed.tiles import PackedTiles
from tlrcore.packed.update import ColumnUpdate

__all__ = ["PackedTile", "packed_left_looking", "packed_compensation"]

logger = logging.getLogger(__name__)

#: The factor's tiles go to chunks of about 1/_CHUNKS of the matrix's low-rank storage,
#: within these bounds in bytes (tlrcore.packed.pool).
_CHUNKS = 32
_MIN_CHUNK_BYTES = 8 * 2**20
_MAX_CHUNK_BYTES = 2**30
#: Work arrays of a column update take at most 1/_WORK_FRACTION of the free memory.
_WORK_FRACTION = 8
_MIN_WORK_BYTES = 64 * 2**20


def packed_left_looking(P, tolerance, factorizer, block_size, random_state, release=None):
    """Factor the packed matrix `P` into a :class:`PackedCholesky`, the shift and safeguards of
    `factorizer` applied by :meth:`~tlrcore.cholesky.safeguards.DiagonalFactorizer.safeguarded`
    on a :class:`PackedTile`; NotPositiveDefiniteError names the first tile that fails.

    ``release(k)`` (``overwrite_a``) is called once tile column `k` of the matrix is no longer
    needed (its packed column is dropped, the diagonal tiles overwritten); not with
    compensation or ``"schur"``, which read ``A``'s diagonal tiles."""
    backend = P.backend
    xp = backend.xp
    n_t, b = P.n_tiles, P.tile_size
    # With overwrite_a the diagonal tiles are factored in place (8 n b bytes).
    D = P.diagonal if release is not None else P.diagonal.copy()
    real = xp.asarray(np.arange(P.n_padded) < P.n, dtype=xp.float64).reshape(n_t, b)
    if factorizer.shift:
        D += factorizer.shift * (real[:, :, None] * xp.eye(b))
        factorizer.record_shift(P.n)
    seeds = column_seeds(random_state, n_t)
    low_rank_bytes = sum(column.nbytes for column in P.columns)
    pool = TilePool(
        xp,
        b,
        min(max(low_rank_bytes // _CHUNKS, _MIN_CHUNK_BYTES), _MAX_CHUNK_BYTES),
        n_t * (n_t - 1) // 2,
    )
    index = PoolIndex(n_t)
    budget = max(backend.free_memory() // _WORK_FRACTION, _MIN_WORK_BYTES)
    columns = []
    flops = [0.0]
    with backend.small_kernels(), column_progress(n_t, "TLR Cholesky (packed)") as counter:
        for k in range(n_t):
            Lkk = factorizer.safeguarded(PackedTile(factorizer, P, D, real, k), k)
            D[k] = Lkk
            p = n_t - k - 1
            if p == 0:
                break
            update = ColumnUpdate(P.columns[k], pool, index, k, n_t, b, backend, budget, flops)
            U, V, r, _ = batched_ara(
                update.sample,
                update.project,
                p,
                (b, b),
                tolerance,
                backend,
                int(seeds[k]),
                block_size,
                tiles=(k + 1, k),
            )
            width = V.shape[2]
            V = backend.solve_triangular(
                Lkk, V.transpose(1, 0, 2).reshape(b, p * width), lower=True
            )
            V = V.reshape(b, p, width).transpose(1, 0, 2)
            column = store_column(pool, index, k, U, V, r)
            _update_diagonal(D, k, U, V, r, flops)
            columns.append(column)
            if release is not None:
                P.columns[k] = TileColumn.empty()
                release(k)
            counter.update()
    columns += [TileColumn.empty()] * (n_t - len(columns))
    factor = PackedCholesky(PackedTiles(backend, P.n, b, D, columns), tolerance)
    factor.gemm_flops = flops[0]
    factor.allocated_bytes = int(D.nbytes) + pool.nbytes
    return factor


def _update_diagonal(D, k, U, V, ranks, flops):
    """``D[k + 1 + i] -= L(i) L(i)^T`` for column `k`'s tiles ``L(i) = U_i V_i^T`` (padded
    ``(p, b, r)``, zero beyond the host `ranks`), by segments of
    :func:`~tlrcore.packed.column.segment_bounds` trimmed to their largest rank: at most
    :data:`~tlrcore.packed.column.MAX_SEGMENTS` products, whatever the number of tiles."""
    b = D.shape[1]
    bounds = segment_bounds(ranks)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        w = int(ranks[lo:hi].max())
        if w == 0:
            continue
        Us, Vs = U[lo:hi, :, :w], V[lo:hi, :, :w]
        D[k + 1 + lo : k + 1 + hi] -= (Us @ (Vs.transpose(0, 2, 1) @ Vs)) @ Us.transpose(0, 2, 1)
        flops[0] += 2.0 * (hi - lo) * w * (2 * b * w + b * b)


class PackedTile:
    """Diagonal tile `k` of the packed factorization, ``D[k] = A(k, k) + shift - W W^T`` (padded
    with the identity), for :meth:`~tlrcore.cholesky.safeguards.DiagonalFactorizer.safeguarded`.

    The update ``W W^T`` is read off ``A``'s tile and its tail taken from one ``eigh``
    (:func:`packed_compensation`). Changes go to the real entries only. Modified Cholesky (a
    sequential pivoted loop no back end batches) takes the tile to the host and back."""

    def __init__(self, factorizer, P, D, real, k):
        self.factorizer, self.P, self.D, self.k = factorizer, P, D, k
        self.backend = P.backend
        self.real = real[k]
        self.size = int(min(P.n - k * P.tile_size, P.tile_size))
        self.has_update = k > 0
        self.change = None  # until the first change: no work for a tile that factors as is
        self._update = None

    def update(self):
        """The accumulated update ``W W^T`` (zero on the padding)."""
        if self._update is None:
            xp, shift = self.backend.xp, self.factorizer.shift
            self._update = self.P.diagonal[self.k] + shift * xp.diag(self.real) - self.D[self.k]
        return self._update

    def add_diagonal(self, part, values):
        """Add `values` (a vector, or one number for every entry) to the real diagonal."""
        self._add(part, self.backend.xp.diag(values * self.real))

    def add_tail(self, form):
        """Add the compensation of the update's tail in `form` (``"rowsum"`` or ``"block"``)."""
        self._add(
            "compensation",
            packed_compensation(self.backend, self.update(), self.factorizer.tolerance, form),
        )

    def schur_compensation(self):
        """``rowsum |T|`` of the update's tail ``T``."""
        rowsum = packed_compensation(
            self.backend, self.update(), self.factorizer.tolerance, "rowsum"
        )
        return self.backend.xp.diagonal(rowsum)

    def cholesky(self):
        """``(L, info)`` of the tile as changed so far."""
        L, info = self.backend.cholesky(self.D[self.k])
        return L, int(info)

    def symmetric(self):
        """The real part of the tile on the host, symmetric from its lower triangle."""
        M = self.backend.to_host(self.D[self.k][: self.size, : self.size])
        return np.tril(M) + np.tril(M, -1).T

    def tally_block(self, part, lower):
        """Tally a change of the real part by the symmetric host matrix of lower triangle
        `lower`."""
        xp = self.backend.xp
        block = xp.zeros(self.D.shape[1:])
        block[: self.size, : self.size] = xp.asarray(lower + np.tril(lower, -1).T)
        self._tally(part, block)

    def from_host(self, L):
        """The padded factor on the back end whose real part is the host factor `L`."""
        xp = self.backend.xp
        full = xp.eye(self.D.shape[1])
        full[: self.size, : self.size] = xp.asarray(L)
        return full

    def change_norm2(self):
        """``||E_k||_F^2`` of the change made to the tile, the shift apart."""
        if self.change is None:
            return 0.0
        return float(self.backend.xp.sum(self.change * self.change))

    def _add(self, part, change):
        self.D[self.k] += change
        self._tally(part, change)

    def _tally(self, part, change):
        self.change = change if self.change is None else self.change + change
        self.factorizer.record(self.k, part, float(self.backend.xp.sum(change * change)))


def packed_compensation(backend, update, tolerance, form):
    """The update-tail compensation (:func:`~tlrcore.cholesky.safeguards.tail_compensation` of
    the tail below `tolerance`) of a padded diagonal tile with update `update`, by one ``eigh``
    on the back end."""
    xp = backend.xp
    lam, Q = backend.eigh(update)
    lam = xp.maximum(lam, 0.0)
    tail = tail_count(xp, lam, tolerance)
    T = (Q[:, :tail] * lam[:tail]) @ Q[:, :tail].T
    return tail_compensation(xp, T, form)
