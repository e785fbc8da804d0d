"""The packed tile layout and what works on it a tile column at a time (the GPU path).

Every tile is ``b x b`` (the matrix padded with an identity block), the diagonal tiles
form one ``(n_tiles, b, b)`` array and each tile column's low-rank tiles are stacked in a
few rank segments, so batched kernels see whole columns as views.

Modules
-------
tiles
    :class:`PackedTiles`: the layout of a matrix or a factor.
column
    :class:`TileColumn`: one tile column's low-rank tiles in rank segments.
pool
    :class:`TilePool`: the factor's tiles by width class.
build
    :func:`build_packed`: a matrix from a block generator, and the generator checks.
update
    :class:`ColumnUpdate`: products with a tile column's updated tiles.

The factorization is :mod:`tlrcore.cholesky.packed` (``variant="packed"``).
"""

from tlrcore.packed.build import build_packed
from tlrcore.packed.column import TileColumn
from tlrcore.packed.pool import PoolIndex, TilePool
from tlrcore.packed.tiles import PackedTiles
from tlrcore.packed.update import ColumnUpdate

__all__ = ["ColumnUpdate", "PackedTiles", "PoolIndex", "TileColumn", "TilePool", "build_packed"]
