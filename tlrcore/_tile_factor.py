"""What the TLR Cholesky and LDLᵀ factors share: the tile layout and right-hand sides."""

from __future__ import annotations

import numpy as np

from tlrcore._checks import check_operand

__all__ = ["TileFactor"]


class TileFactor:
    """Block lower-triangular factor: dense `diagonal` tiles and low-rank tiles
    ``L(i, k) = U[i, k] @ V[i, k].T`` for ``i > k``, on the tiles given by `offsets`."""

    def __init__(self, diagonal, U, V, offsets, tolerance):
        self.diagonal = diagonal
        self.U, self.V = U, V
        self.offsets = np.asarray(offsets)
        self.n = int(self.offsets[-1])
        self.n_tiles = len(diagonal)
        self.tolerance = tolerance

    def tile(self, i):
        """Index slice of tile `i`."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    @property
    def ranks(self):
        """``(n_tiles, n_tiles)`` ranks of ``L`` (lower triangle; diagonal = tile sizes)."""
        ranks = np.zeros((self.n_tiles, self.n_tiles), dtype=np.int64)
        for k, D in enumerate(self.diagonal):
            ranks[k, k] = D.shape[0]
        for (i, k), U in self.U.items():
            ranks[i, k] = U.shape[1]
        return ranks

    def _check_rhs(self, b):
        return check_operand(b, self.n, "b")
