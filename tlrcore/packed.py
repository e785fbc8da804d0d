"""Packed tile layout: tiles of one size, stacked so that batched kernels see views.

The GPU algorithms (:mod:`tlrcore.cholesky_batched`) work on whole tile columns with
batched matrix products, so every tile has the same ``b x b`` shape: ``n`` is padded to
``n_tiles * b`` with an identity block on the diagonal and zero off-diagonal rows, which
changes neither the Cholesky factor of the original rows nor the log-determinant. Tile
column ``j``'s lower tiles ``(i, j)``, ``i > j``, are stacked as ``U[j]`` and ``V[j]`` of
shape ``(n_tiles - j - 1, b, r_j)``, padded with zero columns to the column's largest rank
``r_j``; so the tiles ``(i, j)`` for ``i >= k`` are the slice ``U[j][k - j - 1:]`` and no
data moves to form a batch (the "marshaling" of the H2Opus paper is slicing here).
Padding costs memory and flops in proportion to the spread of ranks within a column.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PackedTiles"]


class PackedTiles:
    """Dense diagonal tiles and column-stacked low-rank tiles of one size.

    Parameters
    ----------
    backend : tlrcore.backends.Backend
    n : int
        Order of the represented matrix (without the padding).
    tile_size : int
    diagonal : array of shape (n_tiles, b, b)
    U, V : list of arrays
        ``U[j]``, ``V[j]`` of shape ``(n_tiles - j - 1, b, r_j)``; ``A(i, j) = U[j][i - j - 1]
        @ V[j][i - j - 1].T``.
    ranks : list of ndarray of int
        ``ranks[j][i - j - 1]``, the rank of tile ``(i, j)`` (host arrays).
    """

    def __init__(self, backend, n, tile_size, diagonal, U, V, ranks):
        self.backend = backend
        self.n = int(n)
        self.tile_size = int(tile_size)
        self.n_tiles = int(diagonal.shape[0])
        self.diagonal, self.U, self.V = diagonal, list(U), list(V)
        self.tile_ranks = [np.asarray(r, dtype=np.int64) for r in ranks]

    @property
    def offsets(self):
        """Tile boundaries of the unpadded matrix."""
        return np.minimum(np.arange(self.n_tiles + 1) * self.tile_size, self.n)

    @property
    def n_padded(self):
        return self.n_tiles * self.tile_size

    @classmethod
    def from_tiles(cls, backend, diagonal, U, V, offsets):
        """Pack dict-of-tiles storage (as in :class:`~tlrcore.TLRMatrix`) into this layout.

        All tiles but the last must have the same size.
        """
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
        Us, Vs, ranks = [], [], []
        for j in range(n_t):
            rows = range(j + 1, n_t)
            r = np.array([U[i, j].shape[1] for i in rows], dtype=np.int64)
            width = int(r.max()) if r.size else 0
            Uj, Vj = xp.zeros((len(r), b, width)), xp.zeros((len(r), b, width))
            for p, i in enumerate(rows):
                Uj[p, : U[i, j].shape[0], : r[p]] = backend.asarray(U[i, j])
                Vj[p, :, : r[p]] = backend.asarray(V[i, j])
            Us.append(Uj)
            Vs.append(Vj)
            ranks.append(r)
        return cls(backend, n, b, D, Us, Vs, ranks)

    def views(self):
        """``(diagonal, U, V)`` as a list and dicts of views trimmed to the real tile
        sizes and ranks (the storage of :class:`~tlrcore.TLRMatrix`)."""
        off = self.offsets
        sizes = np.diff(off)
        diagonal = [self.diagonal[k, : sizes[k], : sizes[k]] for k in range(self.n_tiles)]
        U, V = {}, {}
        for j in range(self.n_tiles):
            for p, r in enumerate(self.tile_ranks[j]):
                i = j + 1 + p
                U[i, j] = self.U[j][p, : sizes[i], :r]
                V[i, j] = self.V[j][p, :, :r]
        return diagonal, U, V

    def rank_matrix(self):
        """``(n_tiles, n_tiles)`` symmetric ranks, tile sizes on the diagonal."""
        ranks = np.diag(np.diff(self.offsets)).astype(np.int64)
        for j, r in enumerate(self.tile_ranks):
            ranks[j + 1 :, j] = r
            ranks[j, j + 1 :] = r
        return ranks

    @property
    def nbytes(self):
        """Bytes allocated, padding included."""
        return int(self.diagonal.nbytes + sum(U.nbytes + V.nbytes for U, V in zip(self.U, self.V)))

    def pad(self, x):
        """`x` (``(n,)`` or ``(n, k)``, any array) as ``(n_tiles, b, k)`` on the back end,
        zero in the padding."""
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
        for j in range(self.n_tiles - 1):
            U, V = self.U[j], self.V[j]
            Y[j + 1 :] += U @ (V.transpose(0, 2, 1) @ X[j])
            Y[j] += (V @ (U.transpose(0, 2, 1) @ X[j + 1 :])).sum(axis=0)
        return self.unpad(Y, x)

    def to_dense(self, symmetric=True):
        """The matrix as a dense host array; ``symmetric=False`` gives the lower block
        triangle only (for factors)."""
        xp = self.backend.xp
        n, b = self.n_padded, self.tile_size
        A = xp.zeros((n, n))
        for k in range(self.n_tiles):
            A[k * b : (k + 1) * b, k * b : (k + 1) * b] = self.diagonal[k]
        for j in range(self.n_tiles - 1):
            T = self.U[j] @ self.V[j].transpose(0, 2, 1)
            A[(j + 1) * b :, j * b : (j + 1) * b] = T.reshape(-1, b)
            if symmetric:
                A[j * b : (j + 1) * b, (j + 1) * b :] = T.transpose(2, 0, 1).reshape(b, -1)
        return self.backend.to_host(A[: self.n, : self.n])

    def frobenius_norm(self):
        """``||A||_F`` from the factors (padding excluded)."""
        xp = self.backend.xp
        pad = self.n_padded - self.n
        total = float(xp.sum(self.diagonal * self.diagonal)) - pad
        for U, V in zip(self.U, self.V):
            total += 2.0 * float(xp.sum((U.transpose(0, 2, 1) @ U) * (V.transpose(0, 2, 1) @ V)))
        return math.sqrt(max(total, 0.0))
