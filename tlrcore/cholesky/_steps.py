"""Steps shared by the tile-layout factorizations (left-, right-looking and pivoted Cholesky,
and the LDLᵀ of :mod:`tlrcore.ldl`): the block lower-triangular factor, the sampled update
of an off-diagonal tile, the dense diagonal update and the triangular solve of a tile
column."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import qr

from tlrcore._checks import check_operand
from tlrcore._lapack import trsm_lower
from tlrcore._typing import FloatArray, IntArray
from tlrcore.backends import NUMPY
from tlrcore.cholesky.safeguards import DiagonalFactorizer, subtract_gram
from tlrcore.compress import ara_compress
from tlrcore.compress.ara import GaussianBlocks
from tlrcore.compress.single import CompactFactors
from tlrcore.concurrency.threads import submit

__all__ = [
    "SOLVE_CHUNK",
    "BlockDiagonal",
    "ColumnGrams",
    "ColumnSamples",
    "RowPanels",
    "TileDraws",
    "TileFactor",
    "ara_work",
    "cross_grams",
    "diagonal_update",
    "factor_diagonal",
    "fortran_copy",
    "gram_root",
    "sampled_update",
    "solve_column",
    "solve_stacked",
    "stack",
    "subtract_gram",
    "thin_product",
]


class TileFactor:
    """Block lower-triangular factor: dense `diagonal` tiles and low-rank tiles
    ``L(i, k) = U[i, k] @ V[i, k].T``, ``i > k``, on the tiles of `offsets` (NumPy arrays)."""

    backend = NUMPY

    def __init__(
        self,
        diagonal: Sequence[FloatArray],
        U: Mapping[tuple[int, int], FloatArray],
        V: Mapping[tuple[int, int], FloatArray],
        offsets: ArrayLike,
        tolerance: float,
    ) -> None:
        self.diagonal: Sequence[FloatArray] = diagonal
        self.U: Mapping[tuple[int, int], FloatArray] = U
        self.V: Mapping[tuple[int, int], FloatArray] = V
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
        ranks = np.diag(np.diff(self.offsets)).astype(np.int64)
        for i, k in self.U:
            ranks[i, k] = _rank(self.U, (i, k))
        return ranks

    def _check_rhs(self, b):
        return check_operand(b, self.n, "b")


def stack(blocks, rows):
    """`blocks` side by side in one Fortran-ordered array (``rows x 0`` for none)."""
    out = np.empty((rows, sum(b.shape[1] for b in blocks)), order="F")
    col = 0
    for b in blocks:
        out[:, col : col + b.shape[1]] = b
        col += b.shape[1]
    return out


class BlockDiagonal:
    """``blockdiag(M_0, ..., M_{k-1})`` kept as its blocks, grouped by shape class
    (:func:`_shape_class`, padding at most quadruples a dimension) and zero-padded per group:
    ``M X`` is one batched product per group, ``2 sum_g k_g r_g c_g`` flops per column instead
    of the dense ``2 (sum r_j)(sum c_j)``."""

    def __init__(self, blocks):
        rows = np.array([M.shape[0] for M in blocks], dtype=np.intp)
        cols = np.array([M.shape[1] for M in blocks], dtype=np.intp)
        self.shape = (int(rows.sum()), int(cols.sum()))
        first_row, first_col = np.cumsum(rows) - rows, np.cumsum(cols) - cols
        members = {}
        for j, M in enumerate(blocks):
            if M.size:
                members.setdefault((_shape_class(M.shape[0]), _shape_class(M.shape[1])), []).append(
                    j
                )
        self._groups = []  # (padded blocks, their rows' and columns' positions in M)
        for group in (members[key] for key in sorted(members)):
            padded = np.zeros((len(group), rows[group].max(), cols[group].max()))
            for position, j in enumerate(group):
                padded[position, : rows[j], : cols[j]] = blocks[j]
            self._groups.append(
                (
                    padded,
                    _padded_positions(rows[group], first_row[group], self.shape[0]),
                    _padded_positions(cols[group], first_col[group], self.shape[1]),
                )
            )

    @property
    def T(self):
        """The transpose, ``blockdiag(M_0^T, ...)`` (sharing the blocks)."""
        transposed = object.__new__(BlockDiagonal)
        transposed._groups = [
            (padded.transpose(0, 2, 1), cols, rows) for padded, rows, cols in self._groups
        ]
        transposed.shape = self.shape[::-1]
        return transposed

    def __matmul__(self, X):
        columns = X.shape[1]
        operand = np.zeros((X.shape[0] + 1, columns))  # its last row: the padding
        operand[:-1] = X
        out = np.zeros((self.shape[0] + 1, columns))  # the last row collects the padding
        for padded, rows, cols in self._groups:
            k, height, width = padded.shape
            out[rows] = np.matmul(padded, operand[cols].reshape(k, width, columns)).reshape(
                k * height, columns
            )
        return out[:-1]


def _shape_class(size):
    """``m`` with ``4^(m-1) < size <= 4^m`` (0 for 1): ``ceil(log_4 size)``."""
    return ((int(size) - 1).bit_length() + 1) // 2


def _padded_positions(sizes, firsts, end):
    """For blocks of `sizes` rows starting at rows `firsts` of a stacked operand, padded to the
    largest: each padded row's operand row, or `end` (the appended zero row) for padding."""
    position = np.arange(sizes.max())
    return np.where(
        position[None, :] < sizes[:, None], firsts[:, None] + position[None, :], end
    ).ravel()


class RowPanels:
    """The factors ``U(i, 0), U(i, 1), ...`` of each tile row of ``L`` side by side in one
    Fortran-ordered buffer per row (``capacities`` columns, grown by copying), stored into the
    dict `U` as views, so the stacked ``[U(i, 0) | ... | U(i, k-1)]`` is a view."""

    def __init__(self, U, rows, capacities):
        self._U = U
        self._buffers = [np.empty((m, c), order="F") for m, c in zip(rows, capacities, strict=True)]
        self._spans = [[] for _ in rows]  # (k, first column, end column) of each tile

    def add(self, i, k, Ut):
        """Append ``U(i, k) = Ut`` to row `i` (tiles of a row come in the order of `k`)."""
        spans = self._spans[i]
        first = spans[-1][2] if spans else 0
        end = first + Ut.shape[1]
        if end > self._buffers[i].shape[1]:
            self._grow(i, end)
        buffer = self._buffers[i]
        buffer[:, first:end] = Ut
        spans.append((k, first, end))
        self._U[i, k] = buffer[:, first:end]

    def release(self, i):
        """Drop row `i`'s buffer (its tiles must have been stored elsewhere)."""
        self._buffers[i] = np.empty((self._buffers[i].shape[0], 0), order="F")
        self._spans[i] = []

    def stacked(self, i):
        """``[U(i, 0) | ... ]`` of the tiles added so far to row `i` (a view)."""
        spans = self._spans[i]
        return self._buffers[i][:, : spans[-1][2] if spans else 0]

    def _grow(self, i, needed):
        old = self._buffers[i]
        new = np.empty((old.shape[0], max(needed, 2 * old.shape[1])), order="F")
        for k, first, end in self._spans[i]:
            new[:, first:end] = old[:, first:end]
            self._U[i, k] = new[:, first:end]
        self._buffers[i] = new


def sampled_update(Ua, Va, Ui, Uk, cross, tolerance, block_size, seed, samples=None):
    """ARA compression of the updated tile ``Ua Va^T - U_i M_ik U_k^T`` (never formed), with the
    stacked ``U_i``, ``U_k`` and ``M_ik = blockdiag(cross)``, ``cross`` the ``V_ij^T V_kj``.

    With `samples` (the column's :class:`ColumnSamples`, one `seed` per column) the Gaussian
    blocks and ``Uk^T Omega`` come from the column's cache, with the same result. The rank of
    ``A(i, k)`` is ARA's rank hint."""
    Mik = BlockDiagonal(cross)
    samples = ColumnSamples(Uk, block_size) if samples is None else samples

    def matmat(X):
        return thin_product(Ua, Va.T @ X) - thin_product(Ui, Mik @ samples.project(X))

    def rmatmat(Y):
        return thin_product(Va, Ua.T @ Y) - thin_product(Uk, Mik.T @ (Y.T @ Ui).T)

    shape = (Ua.shape[0], Va.shape[0])
    return ara_compress(
        matmat,
        rmatmat,
        shape,
        tolerance,
        block_size=block_size,
        rank_hint=Ua.shape[1],
        draws=samples.draws(seed),
    )


def thin_product(A, B):
    """``A @ B`` for a tall `A` and a `B` of few columns, as ``(B^T A^T)^T`` (Fortran-ordered): the
    same sums, in the form OpenBLAS runs faster."""
    return (B.T @ A.T).T


def cross_grams(Vi, Vk):
    """``[V_i0^T V_k0, V_i1^T V_k1, ...]``, the blocks of ``M_ik`` in :func:`sampled_update`."""
    return [Vij.T @ Vkj for Vij, Vkj in zip(Vi, Vk, strict=True)]


class ColumnGrams:
    """The blocks ``V(i, j)^T V(k, j)`` (``i > k > j``) of column ``k``'s updates, from one Gram
    matrix ``G_j = S_j^T S_j`` per finished column, ``S_j = [V(j+2, j) | ...]``: one large
    product without the GIL, computed on a pool thread (:meth:`add`) while column ``j + 1``
    reads the thin ``S_j^T V(j+1, j)``, and kept per column ``k`` until :meth:`release`."""

    def __init__(self, n_tiles):
        self._by_column = [{} for _ in range(n_tiles)]  # k -> {j: (block column, first rows)}
        self._pending = {}  # j -> future of G_j, until waited for

    def add(self, j, Vnext, S, ranks, pool):
        """Record finished column `j`: ``Vnext = V(j+1, j)`` and the stacked ``S`` of ``V(i, j)``,
        ``i >= j + 2`` (`ranks` columns each); ``G_j`` is computed on `pool`."""
        first = np.concatenate([np.zeros(j + 3, dtype=np.intp), np.cumsum(ranks)])
        self._by_column[j + 1][j] = ((Vnext.T @ S).T, first)  # faster than S.T @ Vnext
        self._pending[j] = submit(pool, self._gram, j, S, first)

    def _gram(self, j, S, first):
        G = S.T @ S
        for k in range(j + 2, len(self._by_column)):
            self._by_column[k][j] = (
                np.array(G[first[k] :, first[k] : first[k + 1]]),
                first - first[k],
            )

    def wait(self, k):
        """Wait until ``G_j``, ``j < k - 1``, are computed (raising their errors)."""
        for j in sorted(j for j in self._pending if j < k - 1):
            self._pending.pop(j).result()

    def blocks(self, i, k):
        """``[V(i, j)^T V(k, j) for j < k]``."""
        columns = self._by_column[k]
        return [C[first[i] : first[i + 1]] for C, first in (columns[j] for j in range(k))]

    def release(self, k):
        """Drop the blocks of column `k`."""
        self._by_column[k] = {}


class ColumnSamples:
    """The Gaussian blocks ``Omega_j`` a column's tiles sample with, and the products
    ``Uk^T Omega_j`` (`Uk` ``= [U_k0 | ...]``), each made once for the column.

    All tiles draw full blocks from one seed in one sequence (``2 block_size`` columns first,
    then `block_size`), so a tile's ``j``-th block is the column's (:meth:`draws`, read-only,
    recognized by :meth:`project`); a first draw of more blocks is the column's first blocks
    side by side (:meth:`first`). Every tile's draws are thus determined by the seed alone,
    whatever the threads."""

    def __init__(self, Uk, block_size):
        self.Uk = Uk
        self.block_size = block_size
        self._streams = {}  # seed -> [(Omega_j, Uk^T Omega_j, generator state after it)]
        self._firsts = {}  # (seed, blocks) -> the first blocks side by side
        self._products = {}  # id(Omega) -> Uk^T Omega, for the blocks and their first runs
        self._lock = threading.Lock()

    def draws(self, seed):
        """A tile's :class:`TileDraws` from `seed`."""
        return TileDraws(self, seed)

    def block(self, seed, j):
        """``(Omega_j, Uk^T Omega_j, state)``: the `j`-th full block drawn from `seed`, its product
        and the generator's state after it."""
        with self._lock:
            stream = self._streams.setdefault(seed, [])
            while len(stream) <= j:
                generator = np.random.default_rng(seed)
                if stream:
                    generator.bit_generator.state = stream[-1][2]
                Omega = generator.standard_normal((self.Uk.shape[0], self.width(len(stream))))
                Omega.flags.writeable = False
                product = self.Uk.T @ Omega
                self._products[id(Omega)] = product
                stream.append((Omega, product, generator.bit_generator.state))
            return stream[j]

    def first(self, seed, blocks):
        """The first `blocks` blocks drawn from `seed` side by side (full blocks
        ``0 .. blocks - 2``, the first double), read-only, their product known to
        :meth:`project`."""
        key = (seed, blocks)
        with self._lock:
            found = self._firsts.get(key)
        if found is None:
            parts = [self.block(seed, j) for j in range(blocks - 1)]
            Omega = np.hstack([part[0] for part in parts])
            Omega.flags.writeable = False
            product = np.hstack([part[1] for part in parts])
            with self._lock:
                found = self._firsts.setdefault(key, Omega)
                self._products.setdefault(id(found), product)
        return found

    def width(self, j):
        """Columns of the `j`-th full block: ``2 block_size`` for the first, then `block_size`."""
        return 2 * self.block_size if j == 0 else self.block_size

    def project(self, X):
        """``Uk^T X``: the column's product when `X` is one of its shared blocks."""
        product = self._products.get(id(X))
        return self.Uk.T @ X if product is None else product


class TileDraws(GaussianBlocks):
    """The Gaussian blocks of one tile's ARA from `seed`: in the column's sequence, the
    :class:`ColumnSamples`' shared arrays; from the first draw that leaves it, the tile's own,
    continuing the column generator's state. The values are those of one generator seeded with
    `seed`."""

    def __init__(self, samples, seed):
        super().__init__(np.random.default_rng(seed))
        self._samples, self._seed = samples, seed
        self._shared = 0  # shared blocks handed out; None once the draws left them

    def first(self, rows, blocks, block_size):
        samples = self._samples
        if (
            self._shared == 0
            and rows == samples.Uk.shape[0]
            and block_size == samples.block_size
            and blocks > 2
        ):
            self._shared = blocks - 1
            return samples.first(self._seed, blocks)
        return self.next(rows, blocks * block_size)

    def next(self, rows, columns):
        samples = self._samples
        shared = self._shared
        if shared is not None and (rows, columns) == (samples.Uk.shape[0], samples.width(shared)):
            self._shared = shared + 1
            return samples.block(self._seed, shared)[0]
        if shared:
            self.rng.bit_generator.state = samples.block(self._seed, shared - 1)[2]
        self._shared = None
        return super().next(rows, columns)


def ara_work(A, U, i, k, block_size, columns=None):
    """Estimated flops to sample and compress the updated tile ``(i, k)``: about ``rank A(i, k) +
    block_size`` samples, each a product with ``U_A V_A^T`` and ``U_i M_ik U_k^T`` plus its
    orthogonalization, over the factor's first `columns` tile columns (default `k`)."""
    columns = k if columns is None else columns
    rows, cols = (int(A.offsets[t + 1] - A.offsets[t]) for t in (i, k))
    rank = A.tile_rank(i, k)
    stacked_i = sum(_rank(U, (i, j)) for j in range(columns))
    stacked_k = sum(_rank(U, (k, j)) for j in range(columns))
    samples = rank + block_size
    per_sample = (rows + cols) * rank + rows * stacked_i + cols * stacked_k + stacked_i * stacked_k
    return samples * (per_sample + rows * samples)


def _rank(U, key):
    """Columns of the factor `key` of `U` (a dict, or a CompactFactors without assembling)."""
    return U.rank(key) if isinstance(U, CompactFactors) else U[key].shape[1]


def fortran_copy(M):
    """A Fortran-ordered copy of the symmetric tile `M` (a C-ordered `M` through its transpose:
    the same matrix, copied as plain memory)."""
    return np.array(M.T if M.flags.c_contiguous else M, order="F")


def diagonal_update(D, factors):
    """``(D, W)``: `D`, the Fortran-ordered tile ``A(k, k)`` (its lower triangle) that the
    factorization overwrites, and the root ``W`` of its update,
    ``W W^T = sum_j U_j V_j^T V_j U_j^T``, not yet subtracted."""
    W = np.empty((D.shape[0], sum(V.shape[1] for _, V in factors)), order="F")
    col = 0
    for Uj, Vj in factors:
        gram_root(Uj, Vj, out=W[:, col : col + Vj.shape[1]])
        col += Vj.shape[1]
    return D, W


def gram_root(U, V, out=None):
    """``W = U C`` (into `out`) with ``C C^T = V^T V``: ``W W^T = U V^T V U^T``. ``C`` is the
    Gram matrix's Cholesky factor (rounding ``eps ||V||^2``, as the update's), or ``R^T`` of a
    thin QR where the Gram matrix is singular to rounding."""
    gram = V.T @ V
    try:
        C = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        C = qr(V, mode="r", check_finite=False)[0][: V.shape[1]].T
    return np.matmul(U, C, out=out)


#: Columns per triangular solve of :func:`solve_column`.
SOLVE_CHUNK = 128


def solve_column(Lkk, factors, run):
    """``L(k, k)^{-1} V`` for every ``V`` of a tile column (:func:`solve_stacked`), as views into
    one Fortran-ordered array."""
    if not factors:
        return []
    stacked = solve_stacked(Lkk, factors, run)
    return np.hsplit(stacked, np.cumsum([V.shape[1] for V in factors])[:-1])


def solve_stacked(Lkk, factors, run):
    """``L(k, k)^{-1} [V_0 | V_1 | ...]`` into one new Fortran-ordered array.

    Each task of `run` copies one fixed-width chunk of columns and solves it in place
    (``dtrsm`` without the GIL); the factor does not depend on the number of threads."""
    widths = np.array([V.shape[1] for V in factors], dtype=np.intp)
    ends = np.cumsum(widths)
    starts = ends - widths
    stacked = np.empty((Lkk.shape[0], int(ends[-1]) if widths.size else 0), order="F")

    def solve(first):
        last = min(first + SOLVE_CHUNK, stacked.shape[1])
        for t in range(int(np.searchsorted(ends, first, side="right")), len(factors)):
            if starts[t] >= last:
                break
            a, b = max(starts[t], first), min(ends[t], last)
            stacked[:, a:b] = factors[t][:, a - starts[t] : b - starts[t]]
        trsm_lower(Lkk, stacked[:, first:last])

    list(run(solve, range(0, stacked.shape[1], SOLVE_CHUNK)))
    return stacked


def factor_diagonal(D, k):
    """Plain Cholesky factor of an updated diagonal tile; NotPositiveDefiniteError naming tile
    `k`."""
    return DiagonalFactorizer(0.0).factor(D, np.zeros((D.shape[0], 0)), k)
