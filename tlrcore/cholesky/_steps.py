"""Steps shared by the tile-by-tile factorizations (left-looking, right-looking, pivoted
Cholesky and the LDLᵀ of :mod:`tlrcore.ldl`): the block lower-triangular factor they
fill, the sampled update of an off-diagonal tile, the dense diagonal update and the
triangular solve of a tile column."""

from __future__ import annotations

import itertools
import threading

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import qr

from tlrcore._checks import check_operand
from tlrcore._lapack import trsm_lower
from tlrcore._typing import FloatArray, IntArray
from tlrcore.backends import NUMPY
from tlrcore.cholesky.safeguards import DiagonalFactorizer, subtract_gram
from tlrcore.compress import ara_compress

__all__ = [
    "SOLVE_CHUNK",
    "ColumnSamples",
    "TileFactor",
    "ara_work",
    "block_diagonal",
    "diagonal_update",
    "factor_diagonal",
    "fortran_copy",
    "gram_root",
    "sampled_update",
    "solve_column",
    "stack",
    "subtract_gram",
]


class TileFactor:
    """Block lower-triangular factor: dense `diagonal` tiles and low-rank tiles
    ``L(i, k) = U[i, k] @ V[i, k].T`` for ``i > k``, on the tiles given by `offsets`.

    Its arrays are NumPy arrays: :attr:`backend` is :data:`tlrcore.backends.NUMPY`.
    """

    backend = NUMPY

    def __init__(
        self,
        diagonal: list[FloatArray],
        U: dict[tuple[int, int], FloatArray],
        V: dict[tuple[int, int], FloatArray],
        offsets: ArrayLike,
        tolerance: float,
    ) -> None:
        self.diagonal = diagonal
        self.U, self.V = U, V
        self.offsets = np.asarray(offsets)
        self.n = int(self.offsets[-1])
        self.n_tiles = len(diagonal)
        self.tolerance = tolerance

    def tile(self, i: int) -> slice:
        """Index slice of tile `i`."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    @property
    def ranks(self) -> IntArray:
        """``(n_tiles, n_tiles)`` ranks of ``L`` (lower triangle; diagonal = tile sizes)."""
        ranks = np.zeros((self.n_tiles, self.n_tiles), dtype=np.int64)
        for k, D in enumerate(self.diagonal):
            ranks[k, k] = D.shape[0]
        for (i, k), U in self.U.items():
            ranks[i, k] = U.shape[1]
        return ranks

    def _check_rhs(self, b):
        return check_operand(b, self.n, "b")


def stack(blocks, rows):
    """`blocks` side by side in one Fortran-ordered array (``rows x 0`` for none), whose
    column blocks BLAS and LAPACK then read and write in place."""
    out = np.empty((rows, sum(b.shape[1] for b in blocks)), order="F")
    col = 0
    for b in blocks:
        out[:, col : col + b.shape[1]] = b
        col += b.shape[1]
    return out


def block_diagonal(blocks):
    """The block-diagonal matrix of `blocks` (``scipy.linalg.block_diag`` without its
    per-block conversions, which cost more than the products here)."""
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    row = col = 0
    for b in blocks:
        out[row : row + b.shape[0], col : col + b.shape[1]] = b
        row, col = row + b.shape[0], col + b.shape[1]
    return out


def sampled_update(Ua, Va, Ui_list, Vi_list, Uk, Vk_list, tolerance, block_size, seed, samples=None):
    """ARA compression of ``Ua Va^T - sum_j U_ij V_ij^T V_kj U_kj^T`` (never formed), through
    products with ``Ua Va^T - U_i M_ik U_k^T``, ``U_i = [U_i0 | ...]``, ``M_ik =
    blockdiag(V_ij^T V_kj)``.

    With `samples` (the :class:`ColumnSamples` of ``Uk``, and the same `seed` for every
    tile of the column, hence the same Gaussian blocks), ``Uk^T Omega`` comes from the
    column's cache instead of one product per tile.
    """
    Ui = stack(Ui_list, Ua.shape[0])
    Mik = block_diagonal([Vij.T @ Vkj for Vij, Vkj in zip(Vi_list, Vk_list)])
    calls = itertools.count()

    def matmat(X):
        UkX = Uk.T @ X if samples is None else samples.project(next(calls), X)
        return Ua @ (Va.T @ X) - Ui @ (Mik @ UkX)

    def rmatmat(Y):
        return Va @ (Ua.T @ Y) - Uk @ (Mik.T @ (Ui.T @ Y))

    shape = (Ua.shape[0], Va.shape[0])
    return ara_compress(matmat, rmatmat, shape, tolerance, block_size=block_size, rng=np.random.default_rng(seed))


class ColumnSamples:
    """``Uk^T Omega_j`` for the Gaussian blocks ``Omega_j`` that every tile of a column
    draws alike (one seed per column), each product computed once for the column.

    Parameters
    ----------
    Uk : ndarray of shape (p, R_k)
        ``[U_k0 | ... | U_k,k-1]``.
    block_size : int
        Columns of a full block; only full blocks are kept (a tile whose basis nears
        ``min(m, p)`` draws a narrower last block, computed directly).
    """

    def __init__(self, Uk, block_size):
        self.Uk = Uk
        self.block_size = block_size
        self._blocks = []
        self._lock = threading.Lock()

    def project(self, j, X):
        """``Uk^T X`` for the `j`-th block `X` a tile samples with.

        The cached product is used only if `X` equals the block it was computed from,
        so the result never depends on which tile asked first (nor on the threads).
        """
        if X.shape[1] != self.block_size:
            return self.Uk.T @ X
        with self._lock:
            if j == len(self._blocks):
                Omega = X.copy()
                self._blocks.append((Omega, self.Uk.T @ Omega))
            Omega, product = self._blocks[j] if j < len(self._blocks) else (None, None)
        if Omega is not None and np.array_equal(Omega, X):
            return product
        return self.Uk.T @ X


def ara_work(A, U, i, k, block_size, columns=None):
    """Estimated flops to sample and compress the updated tile ``(i, k)``.

    ARA draws about ``rank A(i, k) + block_size`` samples (a tile of large rank in `A`
    tends to keep a large rank in `L`); each costs a product with ``U_A V_A^T`` and with
    ``U_i M_ik U_k^T`` (stacked ranks ``R_i``, ``R_k``), plus its orthogonalization.
    The update sums over the factor's first `columns` tile columns (default `k`; the tile
    pivoting keys `U` by tile of `A` and factor column, and reads ``A(i, k)`` through its
    transpose when ``i < k``).
    """
    columns = k if columns is None else columns
    rows, cols = A.diagonal[i].shape[0], A.diagonal[k].shape[0]
    rank = A.U[max(i, k), min(i, k)].shape[1]
    stacked_i = sum(U[i, j].shape[1] for j in range(columns))
    stacked_k = sum(U[k, j].shape[1] for j in range(columns))
    samples = rank + block_size
    per_sample = (rows + cols) * rank + rows * stacked_i + cols * stacked_k + stacked_i * stacked_k
    return samples * (per_sample + rows * samples)


def fortran_copy(M):
    """A Fortran-ordered copy of the symmetric tile `M`.

    A C-ordered `M` is copied through its transpose, which is Fortran-ordered and, `M`
    being symmetric, the same matrix: a plain memory copy (reordering element by element
    costs about 7 times more for a 2048 x 2048 tile).
    """
    return np.array(M.T if M.flags.c_contiguous else M, order="F")


def diagonal_update(Akk, factors):
    """``(D, W)``: a Fortran-ordered copy ``D`` of ``A(k, k)`` and the root ``W`` of its
    update, ``W W^T = sum_j U_j V_j^T V_j U_j^T``, not yet subtracted."""
    D = fortran_copy(Akk)
    W = np.empty((D.shape[0], sum(V.shape[1] for _, V in factors)), order="F")
    col = 0
    for Uj, Vj in factors:
        gram_root(Uj, Vj, out=W[:, col : col + Vj.shape[1]])
        col += Vj.shape[1]
    return D, W


def gram_root(U, V, out=None):
    """``W = U R^T`` with ``V = Q R`` (thin QR), so that ``W W^T = U V^T V U^T`` (into
    `out` if given)."""
    return np.matmul(U, qr(V, mode="r", check_finite=False)[0][: V.shape[1]].T, out=out)


#: Columns per triangular solve of :func:`solve_column`.
SOLVE_CHUNK = 128


def solve_column(Lkk, factors, run):
    """``L(k, k)^{-1} V`` for every ``V`` of a tile column, as a few wide solves.

    The right-hand sides are stacked in one Fortran-ordered array and cut into chunks of
    a fixed width, each solved in place (``dtrsm``, releasing the GIL:
    :mod:`tlrcore._lapack`), so that the rounding, and hence the factor, does not depend on
    the number of threads. The results are views into that array.
    """
    if not factors:
        return []
    stacked = stack(factors, Lkk.shape[0])

    def solve(first):
        cols = slice(first, min(first + SOLVE_CHUNK, stacked.shape[1]))
        trsm_lower(Lkk, stacked[:, cols])

    list(run(solve, range(0, stacked.shape[1], SOLVE_CHUNK)))
    return np.hsplit(stacked, np.cumsum([V.shape[1] for V in factors])[:-1])


def factor_diagonal(D, k):
    """Plain Cholesky factor of an updated diagonal tile, or NotPositiveDefiniteError."""
    return DiagonalFactorizer(0.0).factor(D, np.zeros((D.shape[0], 0)), k)
