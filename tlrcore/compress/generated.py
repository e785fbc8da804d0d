"""Tiles read from a user's block generator: the checks on what it returns, the
compression of one off-diagonal tile (shared by :meth:`tlrcore.TLRMatrix.from_generator`
and :mod:`tlrcore.distributed`) and of a whole tile column by ACA.

Each tile's tolerance is shared: the compressor meets ``(1 - SINGLE_SHARE) tolerance`` and
the trailing columns of its factors are then rounded to single precision within the rest
(:mod:`tlrcore.compress.single`), so that every path holds the same values."""

from __future__ import annotations

import numpy as np

from tlrcore.compress._recompress import check_block_output
from tlrcore.compress.aca import aca_compress
from tlrcore.compress.aca_column import aca_column
from tlrcore.compress.ara import ara_compress
from tlrcore.compress.single import SINGLE_SHARE, compact_rounded, round_trailing
from tlrcore.compress.svd import svd_compress
from tlrcore.errors import GeneratorError

__all__ = ["CheckedBlock", "compress_column", "compress_tile"]

#: Tiles of a tile column compressed together by ACA, their reads served by one generator
#: call per round (:func:`_compress_tiles`). More tiles mean fewer calls but a larger
#: working set (two ACA buffers of up to ~64 x tile_size each per tile), which leaves the
#: cache beyond a few tiles.
_TILES_TOGETHER = 8


class CheckedBlock:
    """The user's generator ``block(rows, cols)``, every block's shape and finiteness checked,
    errors (:class:`~tlrcore.GeneratorError`) naming the tile.

    ``entries`` is the checked form of the generator's optional ``entries(i, j)`` (``A[i, j]``
    elementwise for broadcasting integer arrays), or None. Picklable when the generator is."""

    def __init__(self, block):
        if not callable(block):
            raise TypeError("block must be a callable block(rows, cols) -> ndarray.")
        self.block = block
        self.entries = self._entries if callable(getattr(block, "entries", None)) else None

    def __call__(self, rows, cols, where):
        """``A[rows][:, cols]``; `where` names the tile, ``(i, j)``, or a group of tiles."""
        return self._checked(self.block(rows, cols), (rows.size, cols.size), where)

    def columns(self, rows, cols, where):
        """``A[rows][:, cols]`` as ACA reads columns: through ``entries`` when the generator
        has it."""
        if self.entries is None:
            return self(rows, cols, where)
        return self.entries(rows[:, None], cols[None, :], where)

    def _entries(self, i, j, where):
        return self._checked(self.block.entries(i, j), np.broadcast_shapes(i.shape, j.shape), where)

    @staticmethod
    def _checked(values, shape, where):
        where = f"tile {where}" if isinstance(where, tuple) else where
        try:
            return check_block_output(values, shape, f"block generator ({where})")
        except ValueError as exc:
            raise GeneratorError(str(exc)) from None


def compress_tile(checked, rows, cols, tile, tolerance, method, max_rank, seed):
    """``(U, V)`` of the off-diagonal tile `tile` = ``(i, j)`` on the index arrays `rows`, `cols`,
    by `method` (``"aca"``, ``"ara"``, ``"svd"``) to `tolerance`, trailing columns rounded
    (module docstring); `seed` seeds ARA."""
    return round_trailing(
        _compressed(
            checked, rows, cols, tile, (1.0 - SINGLE_SHARE) * tolerance, method, max_rank, seed
        ),
        SINGLE_SHARE * tolerance,
    )


def _compressed(checked, rows, cols, tile, tolerance, method, max_rank, seed):
    if method == "aca":
        return aca_compress(
            lambda idx: checked(rows[idx], cols, tile),
            lambda idx: checked.columns(rows, cols[idx], tile),
            (rows.size, cols.size),
            tolerance,
            max_rank=max_rank,
        )
    dense = checked(rows, cols, tile)
    if method == "svd":
        return svd_compress(dense, tolerance, max_rank=max_rank)
    return ara_compress(
        lambda X: dense @ X,
        lambda X: dense.T @ X,
        dense.shape,
        tolerance,
        max_rank=max_rank,
        rng=np.random.default_rng(seed),
    )


def compress_column(checked, tiles, j, tolerance, max_rank, rows=None):
    """ACA factors of the tiles ``(i, j)``, ``i > j``, of tile column `j` (index arrays `tiles`)
    to the absolute `tolerance`, trailing columns rounded (module docstring), as
    :class:`~tlrcore.compress.single.CompactPair` in order of ``i``, :data:`_TILES_TOGETHER` at
    a time; `rows` lists the ``i`` to compress (default all)."""
    rows = list(range(j + 1, len(tiles))) if rows is None else [int(i) for i in rows]
    share = (1.0 - SINGLE_SHARE) * tolerance
    return [
        compact_rounded(factors, SINGLE_SHARE * tolerance)
        for first in range(0, len(rows), _TILES_TOGETHER)
        for factors in _compress_tiles(
            checked, tiles, j, rows[first : first + _TILES_TOGETHER], share, max_rank
        )
    ]


def _compress_tiles(checked, tiles, j, rows, tolerance, max_rank):
    """ACA factors of the tiles ``(i, j)``, ``i`` in `rows`, compressed together.

    A round's rows are read by one generator call, its columns by one ``entries`` call if the
    generator has it (else one per tile). A failing read is repeated tile by tile, so that
    the error names the tile."""
    cols = tiles[j]
    below = [tiles[i] for i in rows]
    contiguous = rows == list(range(rows[0], rows[0] + len(rows)))
    named = f"{rows[0]}..{rows[-1]}" if contiguous else ", ".join(map(str, rows))
    where = f"tiles {named} of column {j}"

    def read_rows(parts):
        rows_read = np.concatenate([below[t][idx] for t, idx in parts])
        try:
            values = checked(rows_read, cols, where)
        except GeneratorError:
            for t, idx in parts:
                checked(below[t][idx], cols, (rows[t], j))
            raise
        return np.split(values, np.cumsum([idx.size for _, idx in parts[:-1]]))

    def read_columns(parts):
        if checked.entries is None:
            return [checked(below[t], cols[idx], (rows[t], j)) for t, idx in parts]
        # Requests of one shape are stacked: entries(i, k) broadcasts i (T, m, 1) against
        # k (T, 1, q) into the T blocks A_t[:, idx] of shape (m, q).
        values = [None] * len(parts)
        groups = {}
        for position, (t, idx) in enumerate(parts):
            groups.setdefault((below[t].size, idx.size), []).append(position)
        for positions in groups.values():
            i = np.stack([below[parts[pos][0]] for pos in positions])[:, :, None]
            k = np.stack([cols[parts[pos][1]] for pos in positions])[:, None, :]
            try:
                stacked = checked.entries(i, k, where)
            except GeneratorError:
                for pos in positions:
                    t, idx = parts[pos]
                    checked(below[t], cols[idx], (rows[t], j))
                raise
            for pos, value in zip(positions, stacked, strict=True):
                values[pos] = value
        return values

    return aca_column(
        read_rows, read_columns, [tile.size for tile in below], cols.size, tolerance, max_rank
    )
