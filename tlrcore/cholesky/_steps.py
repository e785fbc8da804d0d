"""Steps shared by the tile-by-tile factorizations (left-looking, right-looking, pivoted
Cholesky and the LDLᵀ of :mod:`tlrcore.ldl`): the block lower-triangular factor they
fill, the sampled update of an off-diagonal tile, the dense diagonal update and the
triangular solve of a tile column."""

from __future__ import annotations

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
from tlrcore.compress.ara import GaussianBlocks
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


class BlockDiagonal:
    """``blockdiag(M_0, ..., M_{k-1})`` kept as its blocks, in groups of similar shapes,
    each zero-padded to its largest.

    A product ``M X`` is one batched product per group of its padded blocks with the
    matching rows of ``X``, gathered (with a zero row as padding) and scattered back by
    precomputed indices: a few NumPy calls per group, whatever `k`, and
    ``2 sum_g k_g r_g c_g`` flops per column of ``X`` instead of the
    ``2 (sum_j r_j)(sum_j c_j)`` of the dense matrix. The groups are the blocks whose row
    and column counts fall into the same intervals ``(4^(m-1), 4^m]``
    (:func:`_shape_class`), so that padding at most quadruples each dimension of a
    block. In the sampled update of tile column ``k`` of a 64-column factor the dense form
    was a mostly zero ``R_i x R_k`` matrix of some 1,000 x 1,000; one group for all blocks
    was padded to the one or two blocks of rank 130 next to mostly ranks 4-11 (30 times
    the entries of the blocks at 131,072 sites, against 1.5 times in these groups); a
    loop of one product per block held the GIL long enough to leave the second core idle
    a third of the time.
    """

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
    """For blocks of `sizes` rows, starting at rows `firsts` of a stacked operand, padded to
    the largest: each padded row's row of the operand, or `end` (the zero row appended
    after them) for the padding."""
    position = np.arange(sizes.max())
    return np.where(
        position[None, :] < sizes[:, None], firsts[:, None] + position[None, :], end
    ).ravel()


class RowPanels:
    """The factors ``U(i, 0), U(i, 1), ...`` of each tile row of ``L`` side by side in one
    Fortran-ordered buffer per row, so that the stacked ``[U(i, 0) | ... | U(i, k-1)]``
    the sampled update of tile ``(i, k)`` multiplies with is a view, not a copy.

    The tiles are stored into the dict `U` as views of their row's buffer. A row starts
    with `capacities` columns (its pages are touched only as they are filled) and grows,
    copying, when a tile does not fit; its tiles' views are then renewed.
    """

    def __init__(self, U, rows, capacities):
        self._U = U
        self._buffers = [np.empty((m, c), order="F") for m, c in zip(rows, capacities)]
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
    """ARA compression of ``Ua Va^T - sum_j U_ij V_ij^T V_kj U_kj^T`` (never formed), through
    products with ``Ua Va^T - U_i M_ik U_k^T``, with the stacked ``U_i = [U_i0 | ...]`` and
    ``U_k`` and the :class:`BlockDiagonal` ``M_ik = blockdiag(V_ij^T V_kj)`` of the blocks
    `cross` (:func:`cross_grams`, or :meth:`ColumnGrams.blocks`).

    With `samples` (the :class:`ColumnSamples` of ``Uk``, and the same `seed` for every
    tile of the column, hence the same Gaussian blocks), the blocks and ``Uk^T Omega``
    come from the column's cache instead of being drawn and multiplied for each tile
    (without, from a cache of the tile's own); the result is the same.

    The rank of ``A(i, k)`` is ARA's rank hint: the update's rank is close to it (near-field
    tiles of 131,072 sites: ranks 100-190 in ``L`` for 130-140 in ``A``), so its first
    product samples that many columns at once instead of 16 at a time (one thread: those
    tiles 46-47 ms each instead of 53-54, the column's sampled updates 12.4 CPU seconds
    instead of 13.5; the factor the same bit for bit, as the blocks are the column's).
    """
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
    """``A @ B`` for a tall `A` and a `B` of few columns, as ``(B^T A^T)^T`` (Fortran-ordered).

    The same sums; OpenBLAS (SkylakeX kernels, one thread) computes a product whose
    result has few rows faster than one whose result has few columns: for ``A`` of
    2048 x 200-900, 38 GFLOP/s instead of 22 with 15 columns, 60 instead of 45 with 32.
    """
    return (B.T @ A.T).T


def cross_grams(Vi, Vk):
    """``[V_i0^T V_k0, V_i1^T V_k1, ...]``, the blocks of ``M_ik`` in :func:`sampled_update`."""
    return [Vij.T @ Vkj for Vij, Vkj in zip(Vi, Vk)]


class ColumnGrams:
    """The blocks ``V(i, j)^T V(k, j)`` (``i > k > j``) that the sampled updates of tile
    column ``k`` read, from one Gram matrix per finished tile column ``j`` of ``L``.

    Block ``(i, k)`` of ``G_j = S_j^T S_j``, with the column's stacked
    ``S_j = [V(j+2, j) | ... | V(n_t-1, j)]``, is ``V(i, j)^T V(k, j)``: one product of
    ``p x R`` (2048 x ~900 at 131,072 sites), which NumPy computes as a symmetric rank-k
    update at the speed of a large product with the GIL released, in place of
    ``(n_t - j)^2 / 2`` separate ``p x r x r`` products (about 30 us each at r = 15,
    holding the GIL: a sixth of the GIL-held time of a two-thread factorization).

    Column ``j + 1`` reads the blocks with ``V(j+1, j)`` (solved apart, by the lookahead),
    taken from the thin ``S_j^T V(j+1, j)`` computed at once by :meth:`add`; ``G_j``,
    first read by column ``j + 2``, is computed by a pool thread meanwhile, and kept as
    one copy per tile column ``k`` of its block column ``G_j[k:, k]``, each dropped by
    :meth:`release` once column ``k`` is updated (kept whole until the end, the ``G_j``
    of 131,072 sites would add up to 150 MB).
    """

    def __init__(self, n_tiles):
        self._by_column = [{} for _ in range(n_tiles)]  # k -> {j: (block column, first rows)}
        self._pending = {}  # j -> future of G_j, until waited for

    def add(self, j, Vnext, S, ranks, pool):
        """Record finished column `j`: ``Vnext = V(j+1, j)`` and the stacked ``S`` of the
        ``V(i, j)``, ``i = j+2, ...``, of `ranks` columns each; ``G_j`` goes to `pool`."""
        first = np.concatenate([np.zeros(j + 3, dtype=np.intp), np.cumsum(ranks)])
        self._by_column[j + 1][j] = ((Vnext.T @ S).T, first)  # a third faster than S.T @ Vnext
        self._pending[j] = submit(pool, self._gram, j, S, first)

    def _gram(self, j, S, first):
        G = S.T @ S
        for k in range(j + 2, len(self._by_column)):
            self._by_column[k][j] = (
                np.array(G[first[k] :, first[k] : first[k + 1]]),
                first - first[k],
            )

    def wait(self, k):
        """Wait until the Gram matrices that column `k` reads, ``G_j`` for ``j < k - 1``, are
        computed (raising their errors)."""
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
    """The Gaussian blocks ``Omega_j`` that the tiles of a column sample with, and their
    products ``Uk^T Omega_j``, each drawn and computed once for the column.

    All tiles of a column seed their samples alike (one seed per column) and draw full
    blocks in the same sequence: ``2 block_size`` columns first (the two blocks ARA
    samples in one product), then `block_size` columns at a time. A tile's ``j``-th
    block is thus the column's: the generator :meth:`draws` hands a tile returns the
    column's shared arrays (read-only), and :meth:`project` recognizes them. A first
    draw of more blocks at once (ARA's rank hint, :func:`tlrcore.compress.ara_compress`)
    is the column's first blocks side by side (:meth:`first`), its product theirs; a
    tile whose draws leave the sequence (a narrower block, when its basis nears
    ``min(m, p)``) goes on from the state of the column's generator after its last
    shared block. Every tile's draws are thus determined by the seed alone, whichever
    tile asks first and whatever the threads; drawing them once saves the tiles' own
    Gaussian draws, which had cost about 4 % of a factorization, and a near-field tile
    that samples ten blocks at once shares their products with the column's other tiles.

    Parameters
    ----------
    Uk : ndarray of shape (p, R_k)
        ``[U_k0 | ... | U_k,k-1]``.
    block_size : int
        Columns of a full block after the first.
    """

    def __init__(self, Uk, block_size):
        self.Uk = Uk
        self.block_size = block_size
        self._streams = {}  # seed -> [(Omega_j, Uk^T Omega_j, generator state after it)]
        self._firsts = {}  # (seed, blocks) -> the first blocks side by side
        self._products = {}  # id(Omega) -> Uk^T Omega, for the blocks and their first runs
        self._lock = threading.Lock()

    def draws(self, seed):
        """The Gaussian blocks of a tile's ARA drawn from `seed`, whose full blocks are the
        column's shared ones (:class:`TileDraws`)."""
        return TileDraws(self, seed)

    def block(self, seed, j):
        """``(Omega_j, Uk^T Omega_j, state)``: the `j`-th full block drawn from `seed`, its
        product and the generator's state after it."""
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
        """The first `blocks` blocks of `block_size` columns drawn from `seed` side by side
        (full blocks ``0 .. blocks - 2``: the first has two), read-only, their product
        recognized by :meth:`project`."""
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
        """Columns of the `j`-th full block: two blocks' first (ARA samples them in one
        product, :func:`tlrcore.compress.ara._range_finder`), then `block_size`."""
        return 2 * self.block_size if j == 0 else self.block_size

    def project(self, X):
        """``Uk^T X``: the column's product when `X` is one of its shared blocks."""
        product = self._products.get(id(X))
        return self.Uk.T @ X if product is None else product


class TileDraws(GaussianBlocks):
    """The Gaussian blocks of one tile's ARA (:class:`~tlrcore.compress.ara.GaussianBlocks`),
    drawn from `seed`, whose full blocks are the :class:`ColumnSamples`' shared arrays.

    A draw of full blocks in the column's sequence (:meth:`ColumnSamples.width`), the
    first one of more than two blocks included (the column's first blocks side by side,
    :meth:`ColumnSamples.first`), is the column's; the first draw that leaves the
    sequence, and every later one, is the tile's own, from the state of the column's
    generator after the last shared block. The values are those of a generator seeded
    with `seed` drawing the column's blocks one after the other.
    """

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


def diagonal_update(Akk, factors, in_place=None):
    """``(D, W)``: a Fortran-ordered copy ``D`` of ``A(k, k)`` (or `in_place`, the tile
    itself in Fortran order, to be overwritten) and the root ``W`` of its update,
    ``W W^T = sum_j U_j V_j^T V_j U_j^T``, not yet subtracted."""
    D = fortran_copy(Akk) if in_place is None else in_place
    W = np.empty((D.shape[0], sum(V.shape[1] for _, V in factors)), order="F")
    col = 0
    for Uj, Vj in factors:
        gram_root(Uj, Vj, out=W[:, col : col + Vj.shape[1]])
        col += Vj.shape[1]
    return D, W


def gram_root(U, V, out=None):
    """``W = U C`` with ``C C^T = V^T V``, so that ``W W^T = U V^T V U^T`` (into `out` if
    given).

    ``C`` is the Cholesky factor of the small Gram matrix ``V^T V``: its rounding,
    ``eps ||V||^2``, is that of the update ``U V^T V U^T`` itself, and for the tall ``V``
    of a factor's tile (2048 x 15) it costs a tenth of the thin QR ``V = Q R``
    (``C = R^T``), which serves where the Gram matrix is singular to rounding.
    """
    gram = V.T @ V
    try:
        C = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        C = qr(V, mode="r", check_finite=False)[0][: V.shape[1]].T
    return np.matmul(U, C, out=out)


#: Columns per triangular solve of :func:`solve_column`.
SOLVE_CHUNK = 128


def solve_column(Lkk, factors, run):
    """``L(k, k)^{-1} V`` for every ``V`` of a tile column, as a few wide solves
    (:func:`solve_stacked`); the results are views into one Fortran-ordered array."""
    if not factors:
        return []
    stacked = solve_stacked(Lkk, factors, run)
    return np.hsplit(stacked, np.cumsum([V.shape[1] for V in factors])[:-1])


def solve_stacked(Lkk, factors, run):
    """``L(k, k)^{-1} [V_0 | V_1 | ...]`` for the `factors` ``V_t``, into one new
    Fortran-ordered array.

    The stacked columns are cut into chunks of a fixed width; each task of `run` copies
    its chunk's columns from the factors and solves them in place (``dtrsm``, releasing
    the GIL: :mod:`tlrcore._lapack`). The rounding, and hence the factor, does not depend
    on the number of threads; the copy, done by the thread that waited for the column's
    tiles, had left the other cores idle (0.24 of the 13 s of a 131,072-site
    factorization).
    """
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
    """Plain Cholesky factor of an updated diagonal tile, or NotPositiveDefiniteError."""
    return DiagonalFactorizer(0.0).factor(D, np.zeros((D.shape[0], 0)), k)
