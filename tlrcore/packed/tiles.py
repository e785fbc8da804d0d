"""Packed tile layout: tiles of one size, stacked so that batched kernels see views.

Every tile is ``b x b``: ``n`` is padded to ``n_tiles b`` with an identity block on the
diagonal and zero off-diagonal rows, which changes neither the Cholesky factor of the real
rows nor the log-determinant. The diagonal tiles form one ``(n_tiles, b, b)`` array; tile
column ``j``'s tiles ``(i, j)``, ``i > j``, are a :class:`~tlrcore.packed.column.TileColumn`
(tile ``p = i - j - 1``), so the tiles ``i >= k`` are a few slices and forming a batch
moves no data. A factor's segments are views of a :class:`~tlrcore.packed.pool.TilePool`."""

from __future__ import annotations

import math

import numpy as np

from tlrcore.packed.column import TileColumn

__all__ = ["PackedTiles"]


class PackedTiles:
    """Dense diagonal tiles (``(n_tiles, b, b)`` array `diagonal`) and column-stacked low-rank
    tiles (`columns`, ``columns[j]`` holding the tiles ``(j + 1 .. n_tiles - 1, j)``) of one
    size `tile_size`, for a matrix of order `n` (without the padding) on `backend`."""

    def __init__(self, backend, n, tile_size, diagonal, columns):
        self.backend = backend
        self.n = int(n)
        self.tile_size = int(tile_size)
        self.n_tiles = int(diagonal.shape[0])
        self.diagonal = diagonal
        self.columns = list(columns)

    @property
    def offsets(self):
        """Tile boundaries of the unpadded matrix."""
        return np.minimum(np.arange(self.n_tiles + 1) * self.tile_size, self.n)

    @property
    def n_padded(self):
        return self.n_tiles * self.tile_size

    @classmethod
    def from_tiles(cls, backend, diagonal, U, V, offsets):
        """Pack dict-of-tiles storage (as in :class:`~tlrcore.TLRMatrix`; all tiles but the last of
        one size) into this layout."""
        xp = backend.xp
        offsets = np.asarray(offsets)
        n, n_t = int(offsets[-1]), len(diagonal)
        b = int(offsets[1] - offsets[0])
        D = xp.zeros((n_t, b, b))
        for k, Dk in enumerate(diagonal):
            size = Dk.shape[0]
            D[k, :size, :size] = backend.asarray(Dk)
            if size < b:
                D[k, size:, size:] = xp.eye(b - size)
        columns = []
        for j in range(n_t):
            rows = range(j + 1, n_t)
            r = np.array([U[i, j].shape[1] for i in rows], dtype=np.int64)
            width = int(r.max()) if r.size else 0
            Uj, Vj = xp.zeros((len(r), b, width)), xp.zeros((len(r), b, width))
            for p, i in enumerate(rows):
                Uj[p, : U[i, j].shape[0], : r[p]] = backend.asarray(U[i, j])
                Vj[p, :, : r[p]] = backend.asarray(V[i, j])
            columns.append(TileColumn.from_padded(xp, Uj, Vj, r))
        return cls(backend, n, b, D, columns)

    def views(self):
        """``(diagonal, U, V)``: a list and dicts of views trimmed to the real tile sizes and
        ranks."""
        sizes = np.diff(self.offsets)
        diagonal = [self.diagonal[k, : sizes[k], : sizes[k]] for k in range(self.n_tiles)]
        U, V = {}, {}
        for j, column in enumerate(self.columns):
            for p in range(column.count):
                i = j + 1 + p
                Up, Vp = column.tile(p)
                U[i, j], V[i, j] = Up[: sizes[i]], Vp
        return diagonal, U, V

    @property
    def tile_ranks(self):
        """``tile_ranks[j][p]``: the rank of tile ``(j + 1 + p, j)``."""
        return [column.ranks for column in self.columns]

    def rank_matrix(self):
        """``(n_tiles, n_tiles)`` symmetric ranks, tile sizes on the diagonal."""
        ranks = np.diag(np.diff(self.offsets)).astype(np.int64)
        for j, column in enumerate(self.columns):
            ranks[j + 1 :, j] = column.ranks
            ranks[j, j + 1 :] = column.ranks
        return ranks

    @property
    def nbytes(self):
        """Bytes allocated, padding included."""
        return int(self.diagonal.nbytes + sum(column.nbytes for column in self.columns))

    def pad(self, x):
        """`x` (``(n,)`` or ``(n, k)``) as ``(n_tiles, b, k)`` on the back end, zero in the
        padding."""
        xp = self.backend.xp
        x = self.backend.asarray(x)
        x2 = x.reshape(x.shape[0], -1)
        out = xp.zeros((self.n_padded, x2.shape[1]))
        out[: self.n] = x2
        return out.reshape(self.n_tiles, self.tile_size, x2.shape[1])

    def unpad(self, X, like):
        """Inverse of :meth:`pad`, shaped like the array `like`."""
        return X.reshape(self.n_padded, -1)[: self.n].reshape(like.shape)

    def symmetric_matmul(self, x):
        """``A x`` with the lower tiles and their transposes."""
        X = self.pad(x)
        Y = self.diagonal @ X
        for j, column in enumerate(self.columns):
            below, X_below = Y[j + 1 :], X[j + 1 :]
            for rows, U, V in column.stacks():
                below[rows] += U @ (V.transpose(0, 2, 1) @ X[j])
                Y[j] += (V @ (U.transpose(0, 2, 1) @ X_below[rows])).sum(axis=0)
        return self.unpad(Y, x)

    def to_dense(self, symmetric=True):
        """The matrix as a dense host array; ``symmetric=False``: the lower block triangle only."""
        xp = self.backend.xp
        n, b = self.n_padded, self.tile_size
        A = xp.zeros((n, n))
        for k in range(self.n_tiles):
            A[k * b : (k + 1) * b, k * b : (k + 1) * b] = self.diagonal[k]
        for j, column in enumerate(self.columns):
            for lo, hi, U, V in column.suffix(0):
                T = U @ V.transpose(0, 2, 1)
                rows = slice((j + 1 + lo) * b, (j + 1 + hi) * b)
                A[rows, j * b : (j + 1) * b] = T.reshape(-1, b)
                if symmetric:
                    A[j * b : (j + 1) * b, rows] = T.transpose(2, 0, 1).reshape(b, -1)
        return self.backend.to_host(A[: self.n, : self.n])

    def frobenius_norm(self):
        """``||A||_F`` from the factors (padding excluded)."""
        xp = self.backend.xp
        total = diagonal_squares(xp, self.diagonal, self.n)
        for column in self.columns:
            for _, U, V in column.stacks():
                total += 2.0 * float(
                    xp.sum((U.transpose(0, 2, 1) @ U) * (V.transpose(0, 2, 1) @ V))
                )
        return math.sqrt(max(total, 0.0))


def diagonal_squares(xp, D, n):
    """Sum of squares of the diagonal tiles ``D`` of an order-`n` matrix without the last tile's
    identity padding (summed apart, not subtracted, to avoid cancellation)."""
    last = n - (D.shape[0] - 1) * D.shape[1]
    return float(xp.sum(D[:-1] * D[:-1])) + float(xp.sum(D[-1, :last, :last] ** 2))
