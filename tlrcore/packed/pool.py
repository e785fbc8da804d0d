"""Low-rank tile factors stored by width class in a few large arrays.

The update of tile column ``k`` reads every factor tile ``(i, j)``, ``i > k > j``: taken
tile by tile, each a GEMM launch costing more than its arithmetic on a GPU. The factor's
segments are copied, as they are made, into arrays shared by all segments of one width
class (widths at most 50 % apart), so any set of tiles is gathered by one indexing
operation per class and chunk into the concatenations of :mod:`tlrcore.packed.update`,
and a factor column's products (solves, diagonal updates) are a few batched GEMMs per
class. The segments of :class:`~tlrcore.packed.column.TileColumn` are views of these
arrays."""

from __future__ import annotations

import numpy as np

from tlrcore.backends import upload_indices
from tlrcore.packed.column import TileColumn

__all__ = ["TilePool", "PoolIndex", "store_column", "width_class", "width_classes", "WIDTHS"]

#: Stored widths: a segment whose largest rank is ``r`` is padded to the smallest width
#: ``>= r``; consecutive widths are at most 50 % apart from 4 on. A width class costs
#: several kernel launches per tile column (gathers, the projection's pairs, stores,
#: solves), whose fixed cost on a GPU exceeds the arithmetic of the padding (at most a
#: third of a tile's stored columns).
WIDTHS = np.unique(
    np.concatenate([np.arange(1, 5)] + [2**e * np.array([3, 4]) for e in range(1, 13)])
)


def width_class(rank):
    """The stored width of a segment whose largest rank is `rank`."""
    return int(width_classes([rank])[0])


def width_classes(ranks):
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

    def gather_trimmed(self, index, rows, cols, extra=()):
        """The tiles ``(rows[t], cols[t])`` of `index` grouped by the width class of their own rank
        (stored zero columns beyond it not copied): ``(groups, extra_on_device)``, ``groups`` a
        list of ``(members, U, V)`` in increasing width, ``members`` host positions into
        `rows` (those of :meth:`trimmed_widths` equal to the width), ``U`` and ``V`` copies
        ``(len(members), b, width)``.

        The index arrays of all groups and the caller's host integer arrays `extra` go to the
        device in one transfer; then one indexing operation per group, stored width and
        chunk."""
        xp = self.xp
        stored, own = index.width[rows, cols], self.trimmed_widths(index, rows, cols)
        chunk, slot = index.chunk[rows, cols], index.slot[rows, cols]
        plan, host = [], []
        for c in np.unique(own):
            members = np.flatnonzero(own == c)
            parts = []
            for w in np.unique(stored[members]):
                for ch in np.unique(chunk[members][stored[members] == w]):
                    mine = np.flatnonzero((stored[members] == w) & (chunk[members] == ch))
                    parts.append((int(w), int(ch), len(host)))
                    host += [mine, slot[members[mine]]]
            plan.append((members, int(c), parts))
        device = upload_indices(xp, host + list(extra))
        groups = []
        for members, c, parts in plan:
            if len(parts) == 1:
                w, ch, at = parts[0]
                slots = device[at + 1]
                U, V = self._U[w][ch][slots, :, :c], self._V[w][ch][slots, :, :c]
            else:
                U = xp.empty((members.size, self.tile_size, c))
                V = xp.empty_like(U)
                for w, ch, at in parts:
                    into, slots = device[at], device[at + 1]
                    U[into] = self._U[w][ch][slots, :, :c]
                    V[into] = self._V[w][ch][slots, :, :c]
            groups.append((members, U, V))
        return groups, device[len(host) :]

    @staticmethod
    def trimmed_widths(index, rows, cols):
        """The widths :meth:`gather_trimmed` gives the tiles ``(rows[t], cols[t])``: each tile's
        own width class, at most its stored width."""
        return np.minimum(width_classes(index.rank[rows, cols]), index.width[rows, cols])

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
    widths = width_classes(ranks)
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(widths)) + 1, [len(ranks)]])
    run_width = widths[bounds[:-1]]
    Us, Vs = [None] * run_width.size, [None] * run_width.size
    classes = []
    scattered = [w for w in np.unique(run_width) if np.sum(run_width == w) > 1]
    places = dict(
        zip(
            scattered,
            upload_indices(pool.xp, [np.flatnonzero(widths == w) for w in scattered]),
            strict=True,
        )
    )
    for w in np.unique(run_width):
        runs = np.flatnonzero(run_width == w)
        top = int(ranks[widths == w].max())
        if runs.size == 1:
            a, c = int(bounds[runs[0]]), int(bounds[runs[0] + 1])
            Uc, Vc = U[a:c, :, :top], V[a:c, :, :top]
        else:
            at = places[w]
            Uc, Vc = U[at, :, :top], V[at, :, :top]
        width, chunk, start, Uv, Vv = pool.store(Uc, Vc)
        rows = slice(a, c) if runs.size == 1 else at
        classes.append((rows, Uv, Vv))
        offset = 0
        for s in runs:
            a, c = int(bounds[s]), int(bounds[s + 1])
            index.record(j, a, width, chunk, start + offset, ranks[a:c])
            Us[s], Vs[s] = Uv[offset : offset + c - a], Vv[offset : offset + c - a]
            offset += c - a
    return TileColumn(bounds, Us, Vs, ranks, classes)
