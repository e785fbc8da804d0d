"""Low-rank tile factors stored by width class in a few large arrays.

The update of tile column ``k`` reads every factor tile ``(i, j)``, ``i > k > j``: taken
tile by tile, each a GEMM launch costing more than its arithmetic on a GPU. The factor's
segments are copied, as they are made, into arrays shared by all segments of one width
class (widths at most 50 % apart), so any set of tiles is gathered by one indexing
operation per class and chunk, and a column's update is a few batched GEMMs per class
(:mod:`tlrcore.packed.update`). The segments of :class:`~tlrcore.packed.column.TileColumn`
are views of these arrays."""

from __future__ import annotations

import numpy as np

from tlrcore.packed.column import TileColumn

__all__ = ["TilePool", "PoolIndex", "store_column", "width_class", "WIDTHS"]

#: Stored widths: a segment whose largest rank is ``r`` is padded to the smallest width
#: ``>= r``; consecutive widths are at most 50 % apart from 4 on. A width class costs
#: several kernel launches per sampling round, whose fixed cost on a GPU exceeds the
#: arithmetic of the padding (at most a third of a tile's stored columns).
WIDTHS = np.unique(
    np.concatenate([np.arange(1, 5)] + [2**e * np.array([3, 4]) for e in range(1, 13)])
)


def width_class(rank):
    """The stored width of a segment whose largest rank is `rank`."""
    return int(_classes([rank])[0])


def _classes(ranks):
    """:func:`width_class` of each of `ranks`."""
    ranks = np.maximum(np.asarray(ranks), 1)
    at = np.searchsorted(WIDTHS, ranks)
    return np.where(at < WIDTHS.size, WIDTHS[np.minimum(at, WIDTHS.size - 1)], ranks)


class TilePool:
    """Stacks of ``b x w`` factor pairs ``(U, V)`` (``b`` = `tile_size`, on the array module
    `xp`), one list of chunks per width ``w``; a new chunk has `chunk_bytes` of ``U`` (at
    least the segment that opens it) and at most `max_tiles` slots."""

    def __init__(self, xp, tile_size, chunk_bytes, max_tiles):
        self.xp = xp
        self.tile_size = int(tile_size)
        self.chunk_bytes = int(chunk_bytes)
        self.max_tiles = int(max_tiles)
        self._U, self._V, self._fill = {}, {}, {}

    def store(self, U, V):
        """Copy a segment (`U`, `V` of shape ``(t, b, r)``, zero beyond each tile's rank) into the
        pool: ``(width, chunk, start, U_view, V_view)``, the views ``(t, b, width)`` at slots
        ``start ..`` of chunk `chunk` of width `width`."""
        t, b, r = U.shape
        width = width_class(r)
        Us, Vs = self._U.setdefault(width, []), self._V.setdefault(width, [])
        if not Us or self._fill[width] + t > Us[-1].shape[0]:
            slots = max(t, min(self.chunk_bytes // (8 * b * width), self.max_tiles))
            Us.append(self.xp.zeros((slots, b, width)))
            Vs.append(self.xp.zeros((slots, b, width)))
            self._fill[width] = 0
        chunk, start = len(Us) - 1, self._fill[width]
        Us[chunk][start : start + t, :, :r] = U
        Vs[chunk][start : start + t, :, :r] = V
        self._fill[width] = start + t
        return width, chunk, start, Us[chunk][start : start + t], Vs[chunk][start : start + t]

    def gather(self, width, chunks, slots, columns):
        """Copies ``(U, V)``, each ``(N, b, columns)``, of the first `columns` columns of the tiles
        at host arrays `chunks`, `slots` of one width: one indexing operation per chunk."""
        xp = self.xp
        chunks, slots = np.asarray(chunks), np.asarray(slots)
        Us, Vs = self._U[width], self._V[width]
        present = np.unique(chunks)
        if present.size == 1:
            index = xp.asarray(slots)
            c = int(present[0])
            return Us[c][index, :, :columns], Vs[c][index, :, :columns]
        U = xp.empty((slots.size, self.tile_size, columns))
        V = xp.empty_like(U)
        for c in present:
            where = chunks == c
            into, index = xp.asarray(np.flatnonzero(where)), xp.asarray(slots[where])
            U[into] = Us[int(c)][index, :, :columns]
            V[into] = Vs[int(c)][index, :, :columns]
        return U, V

    def gather_trimmed(self, index, rows, cols):
        """The tiles ``(rows[t], cols[t])`` of `index` grouped by the width class of their own rank
        (stored zero columns beyond it not copied): a list of ``(members, U, V)``, ``members``
        host positions into `rows`."""
        xp = self.xp
        stored = index.width[rows, cols]
        own = np.minimum(_classes(index.rank[rows, cols]), stored)
        groups = []
        for c in np.unique(own):
            members = np.flatnonzero(own == c)
            sources = stored[members]
            parts = np.unique(sources)
            if parts.size == 1:
                U, V = self.gather(
                    int(parts[0]),
                    index.chunk[rows[members], cols[members]],
                    index.slot[rows[members], cols[members]],
                    int(c),
                )
            else:
                U = xp.empty((members.size, self.tile_size, int(c)))
                V = xp.empty_like(U)
                for w in parts:
                    part = np.flatnonzero(sources == w)
                    at, mine = xp.asarray(part), members[part]
                    U[at], V[at] = self.gather(
                        int(w),
                        index.chunk[rows[mine], cols[mine]],
                        index.slot[rows[mine], cols[mine]],
                        int(c),
                    )
            groups.append((members, U, V))
        return groups

    @property
    def nbytes(self):
        """Bytes allocated (unused slots included)."""
        return int(
            sum(a.nbytes for arrays in (*self._U.values(), *self._V.values()) for a in arrays)
        )

    @property
    def n_chunks(self):
        return sum(len(arrays) for arrays in self._U.values())


class PoolIndex:
    """Where each tile ``(i, j)``, ``i > j``, lies in a :class:`TilePool`: host arrays ``width``,
    ``chunk``, ``slot`` and ``rank``, ``(n_tiles, n_tiles)``."""

    def __init__(self, n_tiles):
        self.width = np.zeros((n_tiles, n_tiles), dtype=np.int64)
        self.chunk = np.zeros((n_tiles, n_tiles), dtype=np.int64)
        self.slot = np.zeros((n_tiles, n_tiles), dtype=np.int64)
        self.rank = np.zeros((n_tiles, n_tiles), dtype=np.int64)

    def record(self, j, first, width, chunk, start, ranks):
        """Tiles ``(j + 1 + first + t, j)`` of `ranks` lie at ``start + t`` of `chunk`."""
        count = len(ranks)
        rows = slice(j + 1 + first, j + 1 + first + count)
        self.rank[rows, j] = ranks
        self.width[rows, j] = width
        self.chunk[rows, j] = chunk
        self.slot[rows, j] = start + np.arange(count)


def store_column(pool, index, j, U, V, ranks):
    """Tile column `j` of the factor (`U`, `V` ``(count, b, r)``, zero beyond each tile's
    `ranks`) as a :class:`~tlrcore.packed.column.TileColumn` of views of `pool`, in runs of
    one width class, each tile stored at its own class; `index` records the places.

    The runs of one class go to consecutive slots by one copy per class (gathered where the
    class has several runs), so the copies do not follow the number of runs, which grows
    with the number of tiles."""
    if len(ranks) == 0:
        return TileColumn.empty()
    widths = _classes(ranks)
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(widths)) + 1, [len(ranks)]])
    run_width = widths[bounds[:-1]]
    Us, Vs = [None] * run_width.size, [None] * run_width.size
    for w in np.unique(run_width):
        runs = np.flatnonzero(run_width == w)
        members = np.flatnonzero(widths == w)
        top = int(ranks[members].max())
        if runs.size == 1:
            a, c = int(bounds[runs[0]]), int(bounds[runs[0] + 1])
            Uc, Vc = U[a:c, :, :top], V[a:c, :, :top]
        else:
            at = pool.xp.asarray(members)
            Uc, Vc = U[at, :, :top], V[at, :, :top]
        width, chunk, start, Uv, Vv = pool.store(Uc, Vc)
        offset = 0
        for s in runs:
            a, c = int(bounds[s]), int(bounds[s + 1])
            index.record(j, a, width, chunk, start + offset, ranks[a:c])
            Us[s], Vs[s] = Uv[offset : offset + c - a], Vv[offset : offset + c - a]
            offset += c - a
    return TileColumn(bounds, Us, Vs, ranks)
