"""Tiles read from a user's block generator: the checks on what it returns, and the
compression of one off-diagonal tile (shared by :meth:`tlrcore.TLRMatrix.from_generator`
and :mod:`tlrcore.distributed`)."""

from __future__ import annotations

import numpy as np

from tlrcore.compress._recompress import check_block_output
from tlrcore.compress.aca import aca_compress
from tlrcore.compress.ara import ara_compress
from tlrcore.compress.svd import svd_compress
from tlrcore.errors import GeneratorError

__all__ = ["CheckedBlock", "compress_tile"]


class CheckedBlock:
    """The user's generator ``block(rows, cols)``, with the shape and finiteness of every
    block checked and errors naming the tile (:class:`~tlrcore.GeneratorError`).

    ``entries`` is the checked form of the generator's optional ``entries(i, j)``
    (``A[i, j]`` elementwise for integer arrays that broadcast together), or None when it
    has none. Picklable when the generator is.
    """

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
        has it (the values :func:`tlrcore.compress.aca_column.aca_column` reads), else as a
        block."""
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
    """``(U, V)`` of the off-diagonal tile `tile` = ``(i, j)`` on the index arrays `rows`
    and `cols`, compressed by `method` (``"aca"``, ``"ara"`` or ``"svd"``) to `tolerance`;
    `seed` seeds ARA's samples."""
    if method == "aca":
        return aca_compress(lambda idx: checked(rows[idx], cols, tile),
                            lambda idx: checked.columns(rows, cols[idx], tile),
                            (rows.size, cols.size), tolerance, max_rank=max_rank)
    dense = checked(rows, cols, tile)
    if method == "svd":
        return svd_compress(dense, tolerance, max_rank=max_rank)
    return ara_compress(lambda X: dense @ X, lambda X: dense.T @ X, dense.shape, tolerance, max_rank=max_rank,
                        rng=np.random.default_rng(seed))
