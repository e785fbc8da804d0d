"""The Cholesky factors ``A ~ L L^T``: :class:`TLRCholesky` (tile layout) and
:class:`PackedCholesky` (packed layout, any back end), both :class:`tlrcore.CholeskyFactor`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from tlrcore._checks import check_operand
from tlrcore._typing import BackendArray, FloatArray, IntArray
from tlrcore.cholesky._steps import TileFactor
from tlrcore.compress.single import CompactFactors
from tlrcore.concurrency.spill import Spill
from tlrcore.concurrency.threads import by_column_chunks, one_blas_thread
from tlrcore.dense.triangles import Triangles

if TYPE_CHECKING:
    from tlrcore.factor import CholeskyFactor
    from tlrcore.packed.tiles import PackedTiles

__all__ = ["PackedCholesky", "TLRCholesky"]


class TLRCholesky(TileFactor):
    """Tile low-rank Cholesky factor ``A ~ L L^T``; a :class:`~tlrcore.CholeskyFactor`.

    Attributes
    ----------
    n, n_tiles, offsets
        As for :class:`~tlrcore.TLRMatrix`.
    diagonal : Triangles
        ``L(k, k)``, dense lower triangular, each kept as its triangle
        (:class:`~tlrcore.dense.triangles.Triangles`; ``diagonal[k]`` unpacks a copy).
    U, V : CompactFactors
        ``L(i, k) = U[i, k] @ V[i, k].T`` for ``i > k``
        (:class:`~tlrcore.compress.single.CompactFactors`: trailing columns rounded to
        single precision by the factorization are stored as float32).
    tolerance : float
        Absolute Frobenius tolerance of the updated tiles.
    perm : ndarray of int or None
        With tile pivoting ``A[perm][:, perm] ~ L L^T`` (the methods work in ``A``'s order).
    perturbation, shift : float
        ``||E||_F`` of the safeguards' changes, ``L L^T ~ A + E`` (exactly 0.0 for none), and
        the diagonal shift in ``E``.
    perturbation_parts : dict of str to float
        ``||.||_F`` of ``E`` by source (``"shift"``, ``"compensation"``, ``"lift"``,
        ``"schur"``, ``"modified"``).
    compensated_tiles, lifted_tiles, modified_tiles : tuple of int
        Factor positions of the diagonal tiles changed so.
    backend : Backend
        :data:`tlrcore.backends.NUMPY`.
    spill : Spill or None
        Where finished tile rows were moved to files by the factorization
        (:class:`~tlrcore.concurrency.spill.Spill`, groups by tile row): the solves and
        products read the factor row by row and hand each row's pages back once read, so
        that a pass over the factor holds a row or two of it in memory, not all of it.
    """

    def __init__(
        self,
        diagonal: Triangles | list[FloatArray],
        U: Mapping[tuple[int, int], FloatArray],
        V: Mapping[tuple[int, int], FloatArray],
        offsets: ArrayLike,
        tolerance: float,
        perm: ArrayLike | None = None,
        spill: Spill | None = None,
    ) -> None:
        U = U if isinstance(U, CompactFactors) else CompactFactors(U)
        V = V if isinstance(V, CompactFactors) else CompactFactors(V)
        super().__init__(diagonal, U, V, offsets, tolerance)
        self.diagonal: Triangles = (
            diagonal if isinstance(diagonal, Triangles) else Triangles(diagonal)
        )
        self.U: CompactFactors = U
        self.V: CompactFactors = V
        self.perm: IntArray | None = None if perm is None else np.asarray(perm)
        self.spill = spill
        # set by the safeguarded factorization that made the factor
        self.perturbation = self.shift = 0.0
        self.perturbation_parts: dict[str, float] = {}
        self.compensated_tiles: tuple[int, ...] = ()
        self.lifted_tiles: tuple[int, ...] = ()
        self.modified_tiles: tuple[int, ...] = ()

    @property
    def nbytes(self) -> int:
        """Bytes held by the factor."""
        return self.diagonal.nbytes + self.U.nbytes + self.V.nbytes

    def logdet(self) -> float:
        """``log det(L L^T)``."""
        triangles = self.diagonal
        return 2.0 * float(sum(np.sum(np.log(triangles.diagonal(k))) for k in range(self.n_tiles)))

    def _to_factor_order(self, b):
        return b.copy() if self.perm is None else b[self.perm]

    def _from_factor_order(self, x):
        if self.perm is None:
            return x
        out = np.empty_like(x)
        out[self.perm] = x
        return out

    @one_blas_thread
    def solve_lower(self, b: ArrayLike) -> FloatArray:
        """``L^{-1} P b`` by forward substitution over tiles (``P`` the tile pivoting's
        permutation); a matrix's columns are solved in chunks on the tile pool."""
        return by_column_chunks(self._forward, self._to_factor_order(self._check_rhs(b)))

    def _forward(self, x):
        """Forward substitution in place on the C-ordered `x`, skipping the tiles before its first
        nonzero row (they stay zero)."""
        nonzero = np.flatnonzero(np.any(x.reshape(x.shape[0], -1) != 0, axis=1))
        if not nonzero.size:
            return x
        first = int(np.searchsorted(self.offsets, nonzero[0], side="right")) - 1
        for k in range(first, self.n_tiles):
            rows = self.tile(k)
            for j in range(first, k):
                x[rows] -= self.U.product((k, j), self.V, x[self.tile(j)])
            self.diagonal.solve(k, x[rows])
            self._read(k)
        return x

    @one_blas_thread
    def solve_upper(self, b: ArrayLike) -> FloatArray:
        """``P^T L^{-T} b`` by backward substitution over tiles, in column chunks."""
        return self._from_factor_order(by_column_chunks(self._backward, self._check_rhs(b)))

    def _backward(self, x):
        """Backward substitution in place on the C-ordered `x`, a tile row of ``L`` at a time:
        once ``x_k`` is solved, ``L(k, j)^T x_k`` is subtracted from each ``x_j``, ``j < k``."""
        for k in reversed(range(self.n_tiles)):
            rows = self.tile(k)
            self.diagonal.solve(k, x[rows], trans=True)
            for j in range(k):
                x[self.tile(j)] -= self.V.product((k, j), self.U, x[rows])
            self._read(k)
        return x

    @one_blas_thread
    def multiply_lower(self, z: ArrayLike) -> FloatArray:
        """``P^T L z`` (e.g. Gaussian draws with covariance ``P^T L L^T P``), in column chunks."""
        return self._from_factor_order(by_column_chunks(self._multiply, self._check_rhs(z)))

    def _multiply(self, z):
        y = np.empty_like(z)
        for i in range(self.n_tiles):
            rows = self.tile(i)
            y[rows] = self.diagonal.triangular_product(i, z[rows])
            for k in range(i):
                y[rows] += self.U.product((i, k), self.V, z[self.tile(k)])
            self._read(i)
        return y

    def _read(self, k):
        """Tile row `k` has been read by a pass: its pages go back where it was spilled."""
        if self.spill is not None:
            self.spill.release(k)

    def solve(self, b: ArrayLike) -> FloatArray:
        """``(P^T L L^T P)^{-1} b``, i.e. ``A^{-1} b`` up to compression and ``E``."""
        return self.solve_upper(self.solve_lower(b))

    def to_dense(self) -> FloatArray:
        """``L`` as a dense lower-triangular array (of ``A[perm][:, perm]`` with tile pivoting)."""
        L = np.zeros((self.n, self.n))
        for k, D in enumerate(self.diagonal):
            L[self.tile(k), self.tile(k)] = D
        for (i, k), U in self.U.items():
            L[self.tile(i), self.tile(k)] = U @ self.V[i, k].T
        return L

    def __repr__(self):
        off = [self.U.rank(key) for key in self.U]
        mean = float(np.mean(off)) if off else 0.0
        extra = f", perturbation={self.perturbation:.3g}" if self.perturbation else ""
        return (
            f"TLRCholesky(n={self.n}, n_tiles={self.n_tiles}, mean_rank={mean:.1f}, "
            f"nbytes={self.nbytes}{extra})"
        )


class PackedCholesky:
    """TLR Cholesky factor in the packed layout (`packed`), on its back end, with the interface
    of :class:`~tlrcore.TLRCholesky`; right-hand sides NumPy arrays or arrays of the back end.
    ``gemm_flops`` counts the low-rank products' flops (padding included) and
    ``allocated_bytes`` adds the tile pool's unused slots to :attr:`nbytes`."""

    perm: IntArray | None = None
    gemm_flops = 0.0
    allocated_bytes = 0

    def __init__(self, packed: PackedTiles, tolerance: float) -> None:
        self.packed = packed
        self.backend = packed.backend
        self.n, self.n_tiles, self.offsets = packed.n, packed.n_tiles, packed.offsets
        self.tolerance = tolerance
        self.perturbation = self.shift = 0.0
        self.perturbation_parts: dict[str, float] = {}
        self.compensated_tiles: tuple[int, ...] = ()
        self.lifted_tiles: tuple[int, ...] = ()
        self.modified_tiles: tuple[int, ...] = ()

    @property
    def ranks(self) -> IntArray:
        """``(n_tiles, n_tiles)`` ranks of ``L`` (lower triangle; diagonal = tile sizes)."""
        return np.tril(self.packed.rank_matrix())

    @property
    def nbytes(self) -> int:
        """Bytes held by the factor (padding included)."""
        return self.packed.nbytes

    def logdet(self) -> float:
        """``log det(L L^T)``."""
        xp = self.backend.xp
        return 2.0 * float(xp.sum(xp.log(xp.diagonal(self.packed.diagonal, axis1=1, axis2=2))))

    def _check_rhs(self, b):
        return check_operand(b, self.n, "b", self.backend.xp)

    def solve_lower(self, b: ArrayLike | BackendArray) -> BackendArray:
        """``L^{-1} b`` by forward substitution over tile columns."""
        b = self._check_rhs(b)
        P, solve = self.packed, self.backend.solve_triangular
        X = P.pad(b)
        with self.backend.small_kernels():
            for k, column in enumerate(P.columns):
                X[k] = solve(P.diagonal[k], X[k], lower=True)
                below = X[k + 1 :]
                for rows, U, V in column.stacks():
                    below[rows] -= U @ (V.transpose(0, 2, 1) @ X[k])
        return P.unpad(X, b)

    def solve_upper(self, b: ArrayLike | BackendArray) -> BackendArray:
        """``L^{-T} b`` by backward substitution over tile columns."""
        b = self._check_rhs(b)
        P, solve = self.packed, self.backend.solve_triangular
        X = P.pad(b)
        with self.backend.small_kernels():
            for k in reversed(range(self.n_tiles)):
                below = X[k + 1 :]
                for rows, U, V in P.columns[k].stacks():
                    X[k] -= (V @ (U.transpose(0, 2, 1) @ below[rows])).sum(axis=0)
                X[k] = solve(P.diagonal[k], X[k], lower=True, trans=True)
        return P.unpad(X, b)

    def solve(self, b: ArrayLike | BackendArray) -> BackendArray:
        """``(L L^T)^{-1} b``."""
        return self.solve_upper(self.solve_lower(b))

    def multiply_lower(self, z: ArrayLike | BackendArray) -> BackendArray:
        """``L z``."""
        z = self._check_rhs(z)
        P = self.packed
        X = P.pad(z)
        Y = P.diagonal @ X
        for j, column in enumerate(P.columns):
            below = Y[j + 1 :]
            for rows, U, V in column.stacks():
                below[rows] += U @ (V.transpose(0, 2, 1) @ X[j])
        return P.unpad(Y, z)

    def to_dense(self) -> FloatArray:
        """``L`` as a dense host array."""
        return self.packed.to_dense(symmetric=False)

    def __repr__(self):
        ranks = np.concatenate(self.packed.tile_ranks) if self.n_tiles > 1 else np.zeros(0)
        mean = float(ranks.mean()) if ranks.size else 0.0
        return (
            f"PackedCholesky(n={self.n}, n_tiles={self.n_tiles}, mean_rank={mean:.1f}, "
            f"nbytes={self.nbytes}, backend={self.backend.name!r})"
        )


if TYPE_CHECKING:  # both meet the factor contract (checked by mypy)
    _TILE_LAYOUT: type[CholeskyFactor] = TLRCholesky
    _PACKED_LAYOUT: type[CholeskyFactor] = PackedCholesky
