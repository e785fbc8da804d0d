"""One tile column's low-rank tiles, stacked in rank segments (the packed layout's unit).

Tiles of one column can differ in rank tenfold, so padding them all to the largest rank
wastes memory. The column is cut into at most :data:`MAX_SEGMENTS` runs of consecutive
tiles, each padded only to its own largest rank (:func:`segment_bounds`); runs keep a
batch over the tiles ``i >= k`` a few slices, at one kernel launch per segment."""

from __future__ import annotations

import numpy as np

from tlrcore.backends import get_backend

__all__ = ["TileColumn", "MAX_SEGMENTS"]

#: Most segments per column.
MAX_SEGMENTS = 8
#: A further cut must save at least this fraction of the column's unpadded size.
_MIN_GAIN = 0.02


class TileColumn:
    """Low-rank tiles ``T_p = U_p V_p^T``, ``p = 0..count-1``, of one tile column: segments cut at
    `bounds` (``0 = bounds[0] < ... < bounds[-1] = count``), per segment `U`, `V` of shape
    ``(bounds[s + 1] - bounds[s], b, r_s)``, zero beyond each tile's host `ranks`; `classes`,
    if given, the same tiles as fewer stacks ``(rows, U, V)`` (:meth:`stacks`)."""

    def __init__(self, bounds, U, V, ranks, classes=None):
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self.U, self.V = list(U), list(V)
        self.ranks = np.asarray(ranks, dtype=np.int64)
        self.classes = classes

    @classmethod
    def empty(cls):
        """A column without tiles (the last one)."""
        return cls([0], [], [], np.zeros(0, dtype=np.int64))

    @classmethod
    def from_padded(cls, xp, U, V, ranks):
        """Cut padded factors ``(count, b, r)`` (zero beyond each rank) into segments, copied so the
        padded arrays can be freed."""
        if len(ranks) == 0:
            return cls.empty()
        bounds = segment_bounds(ranks)
        Us, Vs = [], []
        for a, c in zip(bounds[:-1], bounds[1:], strict=True):
            width = int(ranks[a:c].max())
            Us.append(U[a:c, :, :width].copy())
            Vs.append(V[a:c, :, :width].copy())
        return cls(bounds, Us, Vs, ranks)

    @property
    def count(self):
        return int(self.bounds[-1])

    @property
    def nbytes(self):
        return int(sum(U.nbytes + V.nbytes for U, V in zip(self.U, self.V, strict=True)))

    def tile(self, p):
        """``(U_p, V_p)`` of tile `p`, trimmed to its rank (views)."""
        s = int(np.searchsorted(self.bounds, p, side="right")) - 1
        q, r = p - int(self.bounds[s]), int(self.ranks[p])
        return self.U[s][q, :, :r], self.V[s][q, :, :r]

    def blocks(self, positions):
        """Yield ``(lo, hi, U, V)`` for the tiles at sorted `positions`, segment by segment:
        ``positions[lo:hi]`` lie in one segment, ``U``, ``V`` a slice of it when consecutive,
        else gathered."""
        positions = np.asarray(positions)
        cuts = np.searchsorted(positions, self.bounds)
        for s in range(len(self.U)):
            lo, hi = int(cuts[s]), int(cuts[s + 1])
            if lo == hi:
                continue
            local = positions[lo:hi] - int(self.bounds[s])
            if local[-1] - local[0] + 1 == hi - lo:
                yield (
                    lo,
                    hi,
                    self.U[s][local[0] : local[-1] + 1],
                    self.V[s][local[0] : local[-1] + 1],
                )
            else:
                # an index array of the segment's module (CuPy indexes with device arrays)
                index = get_backend(self.U[s]).xp.asarray(local)
                yield lo, hi, self.U[s][index], self.V[s][index]

    def stacks(self):
        """Yield ``(rows, U, V)`` covering every tile once, in as few stacks as the column was
        stored in: ``rows`` a slice of tile positions, or a device index array (the tiles of
        one width class of :func:`~tlrcore.packed.pool.store_column`)."""
        if self.classes is not None:
            yield from self.classes
            return
        for s in range(len(self.U)):
            yield slice(int(self.bounds[s]), int(self.bounds[s + 1])), self.U[s], self.V[s]

    def suffix(self, start):
        """:meth:`blocks` of the tiles ``start..count-1``."""
        return self.blocks(np.arange(start, self.count))


def segment_bounds(ranks, max_segments=MAX_SEGMENTS):
    """Cut points of consecutive runs of `ranks` lowering the padded size ``sum_s length_s max
    rank_s``, by greedy best splits while each saves at least ``_MIN_GAIN``."""
    ranks = np.asarray(ranks, dtype=np.int64)
    count = ranks.size
    bounds = [0, count]
    if count < 2:
        return np.array(bounds)
    floor = _MIN_GAIN * max(int(ranks.sum()), 1)
    while len(bounds) - 1 < max_segments:
        best = (floor, None)
        for a, c in zip(bounds[:-1], bounds[1:], strict=True):
            if c - a < 2:
                continue
            r = ranks[a:c]
            whole = (c - a) * int(r.max())
            head = np.maximum.accumulate(r)[:-1] * np.arange(1, c - a)
            tail = np.maximum.accumulate(r[::-1])[::-1][1:] * np.arange(c - a - 1, 0, -1)
            gain = whole - (head + tail)
            at = int(np.argmax(gain))
            if gain[at] > best[0]:
                best = (int(gain[at]), a + at + 1)
        if best[1] is None:
            break
        bounds = sorted(bounds + [best[1]])
    return np.array(bounds)
