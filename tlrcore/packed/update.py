r"""Products with the updated tiles of one tile column, a fixed number of batched GEMMs.

Tile column ``k`` is compressed from

.. math:: T_i = A(i, k) - \sum_{j<k} U_{ij} V_{ij}^T V_{kj} U_{kj}^T, \qquad i > k,

seen through ``T_i \Omega`` and ``T_i^T Q_i``. The tiles ``A(i, k) = U_{Ai} V_{Ai}^T`` and
the factor's ``(i, j)``, ``i > k > j``, are gathered once per column (the factor's from the
:class:`~tlrcore.packed.pool.TilePool`: the marshaling of H2OPUS-TLR's Algorithm 4) into
concatenations: row ``i``'s tiles side by side, ``[U_{Ai} U_{i0} \dots U_{i,k-1}]``
(``b x R``, zero columns up to the widest row), column ``j``'s ``V_{ij}`` stacked over the
rows, and the rows' ``V_{Ai}``. With ``Z_j = L(k, j)^T \Omega``, a sample is then one
product per row,

.. math:: T_i \Omega = [U_{Ai} U_{i0} \dots U_{i,k-1}]
   \begin{bmatrix} V_{Ai}^T \Omega \\ -V_{i0}^T Z_0 \\ \vdots \\
   -V_{i,k-1}^T Z_{k-1} \end{bmatrix},

whose right side is a gather of the rows of ``[V_{\cdot j}]^T Z_j`` (one batched GEMM over
``j``) and ``[V_{A\cdot}]^T \Omega``: a sampling round is at most eleven array operations
whatever the number of tiles, and the sum's order is fixed (bit for bit reproducible).
Rows go in blocks whose arrays fit a budget.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. E. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
"""

from __future__ import annotations

import copy

import numpy as np

__all__ = ["ColumnUpdate"]


class _Layout:
    """Where the tiles of some rows below column ``k`` (host positions `rows`) go in a
    :class:`_Rectangle`, computed on the host: per row ``t`` its tile of ``A`` (width
    ``a[t]``, its segment's stored width, so that a segment's tiles are copied at once)
    and the factor's tiles
    ``(t, j)``, ``j < k`` (widths ``pairs[t, j]``, :meth:`~tlrcore.packed.pool.TilePool.
    trimmed_widths`). Every row is `R` wide, by default the widest of them: a block of
    rows laid out as wide as the whole column's gives each row the same products (the
    result does not depend on the blocks, hence not on the memory free)."""

    def __init__(self, pool, index, k, rows, A_column, R=None):
        self.k, self.rows = k, rows
        self.tiles = np.repeat(k + 1 + rows, k), np.tile(np.arange(k), rows.size)
        self.own = pool.trimmed_widths(index, *self.tiles)
        self.pairs = self.own.reshape(rows.size, k)
        self.segment = np.searchsorted(A_column.bounds, rows, side="right") - 1
        stored = np.array([U.shape[2] for U in A_column.U], dtype=np.int64)
        ranks = A_column.ranks[rows]
        self.a = np.where(ranks > 0, stored[self.segment], 0)
        self.R = max(int((self.a + self.pairs.sum(axis=1)).max()), 1) if R is None else R
        self.R_v = int(self.pairs.sum(axis=0).max()) if k else 0
        self.R_a = int(self.a.sum())

    def nbytes(self, b):
        """Bytes of the rectangle's arrays, tiles `b` wide."""
        return 8 * b * (self.rows.size * self.R + self.k * self.R_v + self.R_a + 1)


class _Rectangle:
    """The tiles of some rows below column ``k`` concatenated for products, laid out by a
    :class:`_Layout`: ``UT`` ``(rows, R, b)`` holds row ``t``'s ``U^T`` of ``A(t, k)`` and then
    of every ``L(t, j)``, ``j < k``; ``VT`` ``(k, R_v, b)`` column ``j``'s ``V_{tj}^T`` stacked
    over the rows; ``VA_T`` ``(R_a + 1, b)`` the rows' ``V^T`` of ``A`` stacked, then a zero
    row; zero beyond each tile's width. ``gather`` ``(rows, R)`` (device) indexes the rows of
    ``[VT Z; VA_T Omega]`` (flattened) into ``UT``'s layout, padding at the zero row.
    ``pairs``: per width class ``c`` of the factor's tiles the device arrays ``(places, u,
    v)``: the pairs' ``(t, j)`` ``(2, N)`` and their rows of ``UT`` and ``VT`` flattened,
    ``(N, c)``. The index arrays go to the device in one transfer."""

    def __init__(self, xp, pool, index, A_column, layout):
        k, rows, b = layout.k, layout.rows, pool.tile_size
        self.rows, self.R, self.R_v = rows, layout.R, layout.R_v
        pairs, a = layout.pairs, layout.a
        offset_u = (a[:, None] + np.cumsum(pairs, axis=1) - pairs).ravel()
        offset_v = (np.cumsum(pairs, axis=0) - pairs).ravel()
        offset_a = np.cumsum(a) - a
        zero_row = k * self.R_v + layout.R_a
        gather = np.full((rows.size, self.R), zero_row)
        host = []
        t_all, j_all = np.divmod(np.arange(layout.own.size), max(k, 1))
        for c in np.unique(layout.own):
            m = np.flatnonzero(layout.own == c)
            t, j = t_all[m], j_all[m]
            u = t[:, None] * self.R + offset_u[m][:, None] + np.arange(c)
            v = j[:, None] * self.R_v + offset_v[m][:, None] + np.arange(c)
            gather.reshape(-1)[u] = v
            host += [np.stack([t, j]), u, v]
        own_tiles = np.unique(layout.segment[a > 0])  # each copied at its stored width
        for s in own_tiles:
            t = np.flatnonzero((layout.segment == s) & (a > 0))
            c = A_column.U[s].shape[2]
            u = t[:, None] * self.R + np.arange(c)
            gather.reshape(-1)[u] = k * self.R_v + offset_a[t][:, None] + np.arange(c)
            host += [rows[t] - A_column.bounds[s], u, offset_a[t][:, None] + np.arange(c)]
        groups, device = pool.gather_trimmed(index, *layout.tiles, host + [gather])
        self.UT = xp.zeros((rows.size, self.R, b))
        self.VT = xp.zeros((k, self.R_v, b))
        self.VA_T = xp.zeros((layout.R_a + 1, b))
        self.pairs = []
        for g, (_, U, V) in enumerate(groups):
            places, u, v = device[3 * g : 3 * g + 3]
            self.UT.reshape(-1, b)[u] = U.transpose(0, 2, 1)
            self.VT.reshape(-1, b)[v] = V.transpose(0, 2, 1)
            self.pairs.append((places, u, v))
        for g, s in enumerate(own_tiles, start=len(groups)):
            local, u, v = device[3 * g : 3 * g + 3]
            self.UT.reshape(-1, b)[u] = A_column.U[s][local].transpose(0, 2, 1)
            self.VA_T[v] = A_column.V[s][local].transpose(0, 2, 1)
        self.gather = device[-1]

    def subset(self, xp, keep):
        """The rectangle of the rows ``rows[keep]`` (`keep` sorted host positions): their
        concatenations copied; ``VT`` and ``VA_T`` shared (their other rows are products
        computed but not gathered); no ``pairs``."""
        rect = copy.copy(self)
        at = xp.asarray(keep)
        rect.rows, rect.UT, rect.gather, rect.pairs = (
            self.rows[keep],
            self.UT[at],
            self.gather[at],
            None,
        )
        return rect


class ColumnUpdate:
    """Sampling (:meth:`sample`) and projection (:meth:`project`) of the updated tiles of tile
    column `k`, from the matrix's column `A_column` and the factor's tiles in `pool` at the
    places of `index`; arrays within `budget` bytes; the products' flops added to
    ``flops[0]``."""

    #: A cached set of rows is cut down to the rows still sampling once they are fewer
    #: than this fraction of it (below, the converged rows' products are wasted work).
    RECOMPACT = 0.75

    def __init__(self, A_column, pool, index, k, n_tiles, tile_size, backend, budget, flops):
        self.A, self.pool, self.index = A_column, pool, index
        self.k, self.p, self.b = k, n_tiles - k - 1, tile_size
        self.xp = backend.xp
        self.budget, self.flops = budget, flops
        self._cache = self._everything = None
        if k:
            self._row()
        everything = _Layout(pool, index, k, np.arange(self.p), A_column)
        self.R = everything.R
        if everything.nbytes(tile_size) <= budget // 2:
            self._cache = self._everything = self._rectangle(everything)

    def _layout(self, positions):
        return _Layout(self.pool, self.index, self.k, positions, self.A, self.R)

    def _rectangle(self, layout):
        return _Rectangle(self.xp, self.pool, self.index, self.A, layout)

    def _row(self):
        """Row ``k`` of the factor padded to its widest tile: ``row_UT`` ``(k, w, b)`` holds
        ``U_{kj}^T``, ``row_V`` ``(k, b, w)`` holds ``V_{kj}``."""
        xp, b, k = self.xp, self.b, self.k
        tiles = np.full(k, k), np.arange(k)
        own = self.pool.trimmed_widths(self.index, *tiles)
        members = [np.flatnonzero(own == c) for c in np.unique(own)]
        groups, device = self.pool.gather_trimmed(self.index, *tiles, members)
        w = int(own.max())
        self.row_UT, self.row_V = xp.zeros((k, w, b)), xp.zeros((k, b, w))
        for (_, U, V), at in zip(groups, device, strict=True):
            c = U.shape[2]
            self.row_UT[at, :c] = U.transpose(0, 2, 1)
            self.row_V[at, :, :c] = V

    def _blocks(self, positions, columns):
        """``(start, rectangle, pick)`` for blocks of the sorted `positions` (``positions[start
        : start + len]``); ``pick``, device indices of the block's rows in the rectangle's
        rows, or None."""
        xp = self.xp
        if self._cache is not None:
            cache = self._cache
            if positions.size < self.RECOMPACT * cache.rows.size:
                cache = self._cache = cache.subset(xp, np.searchsorted(cache.rows, positions))
            work = 8 * cache.rows.size * (cache.R + self.b) * columns
            if work <= self.budget:
                keep = np.searchsorted(cache.rows, positions)
                yield 0, cache, None if keep.size == cache.rows.size else xp.asarray(keep)
                return
        layout = self._layout(positions)
        widest = int(layout.pairs.max()) if self.k else 0
        per_row = 8 * self.b * (layout.R + self.k * widest + int(layout.a.max()))
        per_row += 8 * columns * (layout.R + self.b)
        size = max(1, int(self.budget // per_row))
        for start in range(0, positions.size, size):
            block = positions[start : start + size]
            yield start, self._rectangle(self._layout(block)), None

    def sample(self, active, omega):
        """``T_i Omega`` for the sorted host positions `active`: ``(len(active), b, s)``.

        ``A(i, k) Omega - sum_j U_ij V_ij^T Z_j``, ``Z_j = L(k, j)^T Omega``, is one product
        of each row's concatenation ``[U_A U_i0 .. U_i,k-1]`` with the rows of
        ``[V_A^T Omega; -V_ij^T Z_j]`` gathered into its layout."""
        xp, b, k = self.xp, self.b, self.k
        s = omega.shape[1]
        if k:
            Z = self.row_V @ (self.row_UT @ -omega)
            self.flops[0] += 4.0 * k * b * self.row_V.shape[2] * s
        parts = []
        for _, rect, pick in self._blocks(active, s):
            W = rect.VA_T @ omega
            if k:
                W = xp.concatenate([(rect.VT @ Z).reshape(-1, s), W])
            Y = rect.UT.transpose(0, 2, 1) @ W[rect.gather]
            self.flops[0] += 2.0 * b * s * (W.shape[0] + Y.shape[0] * rect.R)
            parts.append(Y if pick is None else Y[pick])
        return parts[0] if len(parts) == 1 else xp.concatenate(parts)

    def project(self, Q):
        """``T_i^T Q_i`` for all the column's tiles, ``(p, b, q)``.

        With ``X_t = [U_{tj}]^T Q_t`` and ``P_j = [V_{tj}]^T V_{kj}`` (one batched GEMM each),
        tile ``t``'s update is ``sum_j U_{kj} P_{tj}^T X_{tj}``: the pairs' small products
        ``P_{tj}^T X_{tj}`` (one batched GEMM per width class) side by side, times row
        ``k``'s ``[U_{kj}]``."""
        xp, b, k = self.xp, self.b, self.k
        q = Q.shape[2]
        B = xp.empty((self.p, b, q))
        for lo, hi, U, V in self.A.suffix(0):
            B[lo:hi] = V @ (U.transpose(0, 2, 1) @ Q[lo:hi])
            self.flops[0] += 4.0 * (hi - lo) * b * U.shape[2] * q
        if not k:
            return B
        self._cache = self._everything  # the sampling is done; the projection needs every row
        w = self.row_V.shape[2]
        for start, rect, _ in self._blocks(np.arange(self.p), q):
            m = rect.rows.size
            X = (rect.UT @ Q[start : start + m]).reshape(-1, q)
            P = (rect.VT @ self.row_V).reshape(-1, w)
            S = xp.empty((m, k, w, q))
            for places, u, v in rect.pairs:
                S[places[0], places[1]] = P[v].transpose(0, 2, 1) @ X[u]
                self.flops[0] += 2.0 * u.size * w * q
            B[start : start + m] -= self.row_UT.reshape(k * w, b).T @ S.reshape(m, k * w, q)
            self.flops[0] += 2.0 * b * (m * rect.R * q + k * rect.R_v * w + m * k * w * q)
        return B
