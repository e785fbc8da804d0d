r"""Products with the updated tiles of one tile column, a few batched GEMMs per width class.

Tile column ``k`` is compressed from

.. math:: T_i = A(i, k) - \sum_{j<k} U_{ij} V_{ij}^T V_{kj} U_{kj}^T, \qquad i > k,

seen through ``T_i \Omega`` and ``T_i^T Q_i``. The factor tiles ``(i, j)``, ``i > k > j``,
and ``(k, j)`` are gathered from the :class:`~tlrcore.packed.pool.TilePool` by width class
(the marshaling of H2OPUS-TLR's Algorithm 4 with uniform batches), so each step is one
batched GEMM per class; the sum over ``j`` runs in a fixed order (bit for bit
reproducible). Rows go in blocks whose work arrays fit a budget."""

from __future__ import annotations

import numpy as np

__all__ = ["ColumnUpdate"]


class _Pairs:
    """The rectangle's tiles in some rows by width class: per class the host arrays ``local``
    (place in ``rows``) and ``js``, their device copies, and ``U``, ``V`` ``(N, b, c)``."""

    def __init__(self, xp, rows, groups):
        self.rows = rows
        self.groups = [
            (local, js, xp.asarray(local), xp.asarray(js), U, V) for local, js, U, V in groups
        ]

    def subset(self, xp, keep):
        """The pairs of the rows ``rows[keep]`` (`keep` sorted host positions)."""
        place = np.full(self.rows.size, -1)
        place[keep] = np.arange(keep.size)
        groups = []
        for local, js, _, _, U, V in self.groups:
            mine = np.flatnonzero(place[local] >= 0)
            if mine.size:
                at = xp.asarray(mine)
                groups.append((place[local[mine]], js[mine], U[at], V[at]))
        return _Pairs(xp, self.rows[keep], groups)


class ColumnUpdate:
    """Sampling (:meth:`sample`) and projection (:meth:`project`) of the updated tiles of tile
    column `k`, from the matrix's column `A_column` and the factor's tiles in `pool` at the
    places of `index`; work arrays within `budget` bytes; the products' flops added to
    ``flops[0]``."""

    #: A cached set of rows is cut down to the rows still sampling once they are fewer
    #: than this fraction of it (below, the converged rows' products are wasted work).
    RECOMPACT = 0.75

    def __init__(self, A_column, pool, index, k, n_tiles, tile_size, backend, budget, flops):
        self.A, self.pool, self.index = A_column, pool, index
        self.k, self.p, self.b = k, n_tiles - k - 1, tile_size
        self.xp = backend.xp
        self.budget, self.flops = budget, flops
        self.row, self._cache, self._everything = [], None, None
        if not k:
            return
        js = np.arange(k)
        for members, U, V in pool.gather_trimmed(index, np.full(k, k), js):
            self.row.append((js[members], self.xp.asarray(js[members]), U, V))
        self.row_U = self.xp.concatenate(
            [U.transpose(1, 0, 2).reshape(self.b, -1) for _, _, U, _ in self.row], axis=1
        )
        everything = np.arange(self.p)
        if self._pair_bytes(everything) <= budget // 2:
            self._cache = self._everything = self._gather(everything)

    def _pair_bytes(self, positions):
        """Bytes of the rectangle's factors in the rows at `positions` (stored widths)."""
        return 16 * self.b * int(self.index.width[self.k + 1 + positions, : self.k].sum())

    def _gather(self, positions):
        """:class:`_Pairs` of the rows at `positions` (of column ``k``), from the pool."""
        local, js = np.nonzero(np.ones((positions.size, self.k), dtype=bool))
        groups = self.pool.gather_trimmed(self.index, self.k + 1 + positions[local], js)
        return _Pairs(self.xp, positions, [(local[m], js[m], U, V) for m, U, V in groups])

    def _blocks(self, positions, columns):
        """``(start, pairs, pick)`` for blocks of the sorted `positions` (``positions[start : start
        + len]``); ``pick``, device indices of the block's rows in ``pairs.rows``, or None."""
        xp = self.xp
        if self._cache is not None:
            cache = self._cache
            keep = np.searchsorted(cache.rows, positions)
            if positions.size < self.RECOMPACT * cache.rows.size:
                cache = self._cache = cache.subset(xp, keep)
                keep = np.arange(positions.size)
            rows_bytes = 8 * self.b * self.k * 3 * columns * cache.rows.size
            if rows_bytes <= self.budget:
                yield 0, cache, None if keep.size == cache.rows.size else xp.asarray(keep)
                return
        per_row = 8 * self.b * self.k * 3 * columns + self._pair_bytes(positions[:1])
        size = max(1, int(self.budget // per_row))
        for start in range(0, positions.size, size):
            yield start, self._gather(positions[start : start + size]), None

    def sample(self, active, omega):
        """``T_i Omega`` for the sorted host positions `active`: ``(len(active), b, s)``."""
        xp, b, k = self.xp, self.b, self.k
        s = omega.shape[1]
        Y = xp.empty((active.size, b, s))
        for lo, hi, U, V in self.A.blocks(active):
            Y[lo:hi] = U @ (V.transpose(0, 2, 1) @ omega)
            self.flops[0] += 4.0 * (hi - lo) * b * U.shape[2] * s
        if not k:
            return Y
        Z = xp.empty((k, b, s))
        for js, js_dev, Uk, Vk in self.row:
            Z[js_dev] = Vk @ (Uk.transpose(0, 2, 1) @ omega)
            self.flops[0] += 4.0 * js.size * b * Uk.shape[2] * s
        for start, pairs, pick in self._blocks(active, s):
            T = xp.empty((pairs.rows.size, k, b, s))
            for _, js, local_dev, js_dev, U, V in pairs.groups:
                T[local_dev, js_dev] = U @ (V.transpose(0, 2, 1) @ Z[js_dev])
                self.flops[0] += 4.0 * js.size * b * U.shape[2] * s
            update = T.sum(axis=1)
            if pick is not None:
                update = update[pick]
            Y[start : start + update.shape[0]] -= update
        return Y

    def project(self, Q):
        """``T_i^T Q_i`` for all the column's tiles, ``(p, b, q)``."""
        xp, b, k = self.xp, self.b, self.k
        q = Q.shape[2]
        B = xp.empty((self.p, b, q))
        for lo, hi, U, V in self.A.suffix(0):
            B[lo:hi] = V @ (U.transpose(0, 2, 1) @ Q[lo:hi])
            self.flops[0] += 4.0 * (hi - lo) * b * U.shape[2] * q
        if not k:
            return B
        self._cache = self._everything  # the sampling is done; the projection needs every row
        for start, pairs, _ in self._blocks(np.arange(self.p), q):
            m = pairs.rows.size
            Qb = Q[start : start + m]
            # E[j, :, t] = L(i_t, j)^T Q_t, laid out so that a row group's slice is a stack.
            E = xp.empty((k, b, m, q))
            for _, js, local_dev, js_dev, U, V in pairs.groups:
                E[js_dev, :, local_dev] = V @ (U.transpose(0, 2, 1) @ Qb[local_dev])
                self.flops[0] += 4.0 * js.size * b * U.shape[2] * q
            S = xp.concatenate(
                [
                    (Vk.transpose(0, 2, 1) @ E[js_dev].reshape(js.size, b, -1)).reshape(-1, m * q)
                    for js, js_dev, _, Vk in self.row
                ]
            )
            update = (self.row_U @ S).reshape(b, m, q)
            B[start : start + m] -= update.transpose(1, 0, 2)
            self.flops[0] += 4.0 * m * b * self.row_U.shape[1] * q
        return B
