"""Dense diagonal tiles kept as their lower triangles, in half the memory.

A TLR matrix's diagonal tiles are symmetric and its Cholesky factor's are lower triangular:
either is determined by ``b (b + 1) / 2`` of its ``b^2`` entries. :class:`Triangles` stores
each tile's lower triangle in the rectangular full packed (RFP) format of [1]_, which keeps
level-3 BLAS speed for the triangular solve (LAPACK ``dtfsm``) where the classic packed
format has only level-2 routines. A tile is unpacked (``dtfttr``) only where a caller needs
it whole; packing and unpacking copy entries, so values are unchanged bit for bit.

References
----------
.. [1] Gustavson, F. G., Waśniewski, J., Dongarra, J. J., Langou, J. (2010). Rectangular full
   packed format for Cholesky's algorithm: factorization, solution, and inversion. ACM
   Transactions on Mathematical Software 37(2), 18.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from tlrcore._lapack import pack_lower, symm_packed, trmm_packed, trsm_packed, unpack_lower

__all__ = ["MIRROR_BLOCK", "GeneratedTiles", "Triangles", "symmetric_squared_norm"]

#: Columns per block when the lower triangle is mirrored into the upper one.
MIRROR_BLOCK = 256


class Triangles(Sequence):
    """A list of square float64 tiles, each stored as its lower triangle in RFP format.

    ``triangles[k]`` is tile ``k`` as a new Fortran-ordered array: symmetric (the lower
    triangle mirrored) when `symmetric`, else lower triangular with zeros above.

    Parameters
    ----------
    tiles : iterable of ndarray
        Square tiles; only their lower triangles are read.
    symmetric : bool, default False
        Whether the tiles are symmetric (a matrix's diagonal) or lower triangular (a factor's).
    """

    def __init__(self, tiles: Iterable[np.ndarray] = (), symmetric: bool = False) -> None:
        self.symmetric = symmetric
        self._shared = False  # whether a view reads the same arrays
        self._packed: list[np.ndarray | None] = []
        self._diagonals: list[np.ndarray | None] = []
        self._sizes: list[int] = []
        for tile in tiles:
            self.append(tile)

    @classmethod
    def empty(cls, sizes: Iterable[int], symmetric: bool = False) -> Triangles:
        """Room for tiles of `sizes` rows, each set later by :meth:`store` (threads may store
        different tiles at once)."""
        triangles = cls(symmetric=symmetric)
        triangles._sizes = [int(size) for size in sizes]
        triangles._packed = [None] * len(triangles._sizes)
        triangles._diagonals = [None] * len(triangles._sizes)
        return triangles

    def append(self, tile: np.ndarray) -> None:
        """Add `tile` (square) at the end."""
        self._packed.append(None)
        self._diagonals.append(None)
        self._sizes.append(0)
        self.store(len(self._sizes) - 1, tile)

    def store(self, k: int, tile: np.ndarray, out: np.ndarray | None = None) -> None:
        """Keep the lower triangle of the square `tile` as tile `k`, replacing what was there,
        packed into `out` (a contiguous float64 array of ``b (b + 1) / 2`` entries, e.g. from
        :meth:`take`) or a new array."""
        packed, diagonal = _packed(tile, self.symmetric, out, k)
        self._packed[k], self._diagonals[k], self._sizes[k] = packed, diagonal, diagonal.size

    def release(self, k: int) -> None:
        """Free tile `k` (its size stays known)."""
        self._packed[k] = self._diagonals[k] = None

    def spill(self, k: int, spill, group=None) -> None:
        """Move tile `k` into a file of `spill` (:class:`~tlrcore.concurrency.spill.Spill`),
        in its `group`, read back through its memory map; the values are unchanged."""
        self._packed[k], self._diagonals[k] = spill.move([self._stored(k), self.diagonal(k)], group)

    def take(self, k: int) -> np.ndarray | None:
        """Release tile `k` and hand over its packed array, writeable, to be packed into again
        (:meth:`store`); None where a :meth:`view` may still read it."""
        packed = self._packed[k]
        self.release(k)
        if self._shared or packed is None or packed.base is not None:
            return None
        packed.flags.writeable = True
        return packed

    def view(self) -> Triangles:
        """A second list on the same (read-only) triangles: releasing a tile in one leaves the
        other's."""
        other = Triangles(symmetric=self.symmetric)
        other._packed = list(self._packed)
        other._diagonals = list(self._diagonals)
        other._sizes = list(self._sizes)
        self._shared = other._shared = True
        return other

    def __len__(self) -> int:
        return len(self._sizes)

    def __getitem__(self, k):  # type: ignore[override]
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if self.symmetric:
            return _mirror_lower(self.lower(k))
        out = np.zeros((self._sizes[k],) * 2, order="F")
        return unpack_lower(self._stored(k), out)  # (LAPACK's leaves the zeros above)

    def lower(self, k: int, out: np.ndarray | None = None) -> np.ndarray:
        """Tile `k` in the lower triangle of a Fortran-ordered array, `out` or a new one (the
        strict upper triangle is not set): what a Cholesky factorization of it reads."""
        if out is None:
            out = np.empty((self._sizes[k],) * 2, order="F")
        return _unpack_blocks(self._stored(k), out)

    def size(self, k: int) -> int:
        """Rows of tile `k`."""
        return self._sizes[k]

    def diagonal(self, k: int) -> np.ndarray:
        """The diagonal entries of tile `k` (read-only)."""
        diagonal = self._diagonals[k]
        if diagonal is None:
            raise ValueError(f"tile {k} was released.")
        return diagonal

    def solve(self, k: int, B: np.ndarray, trans: bool = False) -> np.ndarray:
        """``B <- T_k^{-1} B`` (``T_k^{-T} B`` with `trans`) in place for the lower-triangular tile
        ``T_k`` (LAPACK ``dtfsm``); `B` as for :func:`tlrcore._lapack.trsm_packed`."""
        return trsm_packed(self._stored(k), B, trans)

    def symmetric_product(self, k: int, X: np.ndarray) -> np.ndarray:
        """``S_k X`` for the symmetric tile ``S_k`` and `X` ``(b,)`` or ``(b, m)``: a new array,
        read from the packed triangle in place (:func:`~tlrcore._lapack.symm_packed`)."""
        return symm_packed(self._stored(k), X)

    def triangular_product(self, k: int, X: np.ndarray) -> np.ndarray:
        """``T_k X`` for the lower-triangular tile ``T_k`` and `X` ``(b,)`` or ``(b, m)``: a new
        array, read from the packed triangle in place (:func:`~tlrcore._lapack.trmm_packed`)."""
        return trmm_packed(self._stored(k), X)

    def squared_norm(self, k: int) -> float:
        """``||T_k||_F^2`` of the tile (the symmetric tile's, counting both triangles)."""
        return _squared_norm(self._stored(k), self.diagonal(k), self.symmetric)

    def tile_nbytes(self, k: int) -> int:
        """Bytes held for tile `k` (0 once released)."""
        packed, diagonal = self._packed[k], self._diagonals[k]
        return 0 if packed is None or diagonal is None else packed.nbytes + diagonal.nbytes

    @property
    def nbytes(self) -> int:
        """Bytes held for all tiles."""
        return sum(self.tile_nbytes(k) for k in range(len(self)))

    def _stored(self, k):
        packed = self._packed[k]
        if packed is None:
            raise ValueError(f"tile {k} was released.")
        return packed


class GeneratedTiles(Sequence):
    """Symmetric tiles made again by `generate` whenever read, holding no memory: the
    interface of a symmetric :class:`Triangles` for a matrix too large to keep its diagonal.

    Each tile is read as :meth:`Triangles.store` keeps it (the lower triangle of a
    Fortran-ordered tile, of the transpose of a C-ordered one), so that a deterministic
    `generate` gives the values a stored tile would, bit for bit.

    Parameters
    ----------
    generate : callable
        ``generate(k)`` returns tile ``k``, a new square float64 array.
    sizes : sequence of int
        Rows of each tile.
    squares : sequence of float
        ``||tile k||_F^2``, measured when the tiles were first made.
    """

    symmetric = True

    def __init__(self, generate, sizes: Iterable[int], squares: Iterable[float]) -> None:
        self._generate = generate
        self._sizes = [int(size) for size in sizes]
        self._squares = [float(square) for square in squares]
        self._released: set[int] = set()

    def __len__(self) -> int:
        return len(self._sizes)

    def __getitem__(self, k):  # type: ignore[override]
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        return _mirror_lower(self.lower(k))

    def lower(self, k: int, out: np.ndarray | None = None) -> np.ndarray:
        """As :meth:`Triangles.lower`: tile `k`, made again."""
        if k in self._released:
            raise ValueError(f"tile {k} was released.")
        tile = np.asarray(self._generate(k), dtype=np.float64)
        if tile.shape != (self._sizes[k],) * 2:
            raise ValueError(f"tile {k} must have shape {(self._sizes[k],) * 2}; got {tile.shape}.")
        source = tile.T if tile.flags.c_contiguous and not tile.flags.f_contiguous else tile
        if out is None:
            return np.array(source, order="F")
        out[...] = source
        return out

    def size(self, k: int) -> int:
        """Rows of tile `k`."""
        return self._sizes[k]

    def symmetric_product(self, k: int, X: np.ndarray) -> np.ndarray:
        """As :meth:`Triangles.symmetric_product` (the tile made and packed again), bit for bit."""
        return symm_packed(pack_lower(self.lower(k)), X)

    def squared_norm(self, k: int) -> float:
        """``||S_k||_F^2``, as measured when the tile was first made."""
        return self._squares[k]

    def release(self, k: int) -> None:
        """Mark tile `k` as no longer to be read."""
        self._released.add(k)

    def take(self, k: int) -> None:
        """Release tile `k`; there is no storage to hand over."""
        self.release(k)

    def view(self) -> GeneratedTiles:
        """A second list making the same tiles."""
        return GeneratedTiles(self._generate, self._sizes, self._squares)

    def tile_nbytes(self, k: int) -> int:
        """0: nothing is held."""
        return 0

    nbytes = 0


def symmetric_squared_norm(tile: np.ndarray) -> float:
    """``||S||_F^2`` of the symmetric tile `S` kept as :meth:`Triangles.store` keeps `tile`,
    bit for bit :meth:`Triangles.squared_norm` of it."""
    packed, diagonal = _packed(tile, True, None, 0)
    return _squared_norm(packed, diagonal, True)


def _packed(tile, symmetric, out, k):
    """``(packed lower triangle, diagonal)`` of the square `tile`, both read-only; a C-ordered
    symmetric tile is read through its transpose (the same matrix, no copy)."""
    tile = np.asarray(tile, dtype=np.float64)
    if tile.ndim != 2 or tile.shape[0] != tile.shape[1]:
        raise ValueError(f"tile {k} must be square; got shape {tile.shape}.")
    if not tile.flags.f_contiguous:
        tile = tile.T if symmetric and tile.flags.c_contiguous else np.asfortranarray(tile)
    packed = pack_lower(tile, out)
    packed.flags.writeable = False
    diagonal = np.diagonal(tile).copy()
    diagonal.flags.writeable = False
    return packed, diagonal


def _squared_norm(packed, diagonal, symmetric):
    total = float(packed @ packed)
    if symmetric:
        total = 2.0 * total - float(diagonal @ diagonal)
    return total


def _unpack_blocks(packed, out):
    """:func:`~tlrcore._lapack.unpack_lower` by three block copies (the rectangular full packed
    layout of [1]_, ``TRANSR = 'N'``, ``UPLO = 'L'``), which NumPy runs faster than LAPACK's
    entry-by-entry loops; the strict upper triangle of `out` gets other entries.

    For even ``n = 2h`` the packed array is an ``(n + 1) x h`` column-major ``R``: ``R[1:h+1]``
    holds ``A[:h, :h]`` in its lower triangle, ``R[h+1:]`` is ``A[h:, :h]``, and ``R[:h]``
    holds ``A[h:, h:]`` transposed in its upper triangle. For odd ``n`` (``h = (n + 1) / 2``)
    ``R`` is ``n x h``: ``R[:h]`` holds ``A[:h, :h]``, ``R[h:]`` is ``A[h:, :h]`` and
    ``R[:n-h, 1:]`` holds ``A[h:, h:]`` transposed."""
    n = out.shape[0]
    if out.ndim != 2 or out.shape[1] != n or packed.size != n * (n + 1) // 2:
        raise ValueError(f"out must be square, of the packed tile's order; got {out.shape}.")
    if n % 2 == 0:
        h = n // 2
        R = packed.reshape(h, n + 1).T
        out[:h, :h] = R[1 : h + 1]
        out[h:, :h] = R[h + 1 :]
        out[h:, h:] = R[:h].T
    else:
        h = (n + 1) // 2
        R = packed.reshape(h, n).T
        out[:h, :h] = R[:h]
        out[h:, :h] = R[h:]
        out[h:, h:] = R[: n - h, 1:].T
    return out


def _mirror_lower(F):
    """Copy the lower triangle of the Fortran-ordered square `F` into its upper triangle, in
    place, by column blocks of :data:`MIRROR_BLOCK`; returns `F`."""
    n = F.shape[0]
    for first in range(0, n, MIRROR_BLOCK):
        last = min(first + MIRROR_BLOCK, n)
        block = F[first:last, first:last]
        block[...] = np.tril(block) + np.tril(block, -1).T
        F[first:last, last:] = F[last:, first:last].T
    return F
