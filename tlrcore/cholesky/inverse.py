r"""The inverse of a TLR Cholesky factor in tile low-rank form, and the entries of
``A^{-1}`` it gives without ``n`` solves.

For ``A ~ L L^T`` the inverse factor ``X = L^{-1}`` is block lower triangular, with
dense diagonal tiles ``X(J, J) = L(J, J)^{-1}`` and, by block forward substitution on
tile column ``J``,

.. math::

    X(i, J) = -X(i, i) \sum_{l=J}^{i-1} L(i, l) X(l, J), \qquad i > J.

The sum is a stack of low-rank products (``L(i, l) X(l, J) = U_{il} (V_{il}^T P_l)
Q_l^T``), compressed by ARA through its stacked factors (never formed) before ``X(i,
i)`` multiplies it, to the tile tolerance divided by an estimate of ``||X(i, i)||_2``,
so that the truncation adds at most about the tile tolerance to ``X(i, J)``. Off the
diagonal ``X`` stays compressible: its rows hold the coefficients of the sequential
conditional expectations, which screen [1]_. The columns ``J`` are independent (each
runs on the tile pool), draw their Gaussian blocks from seeds of their own, and every
tile's operations come in a fixed order, so ``X`` does not depend on the number of
threads.

With ``X``, ``A^{-1} = X^T X``: its diagonal ``(A^{-1})_{cc} = \|X(:, c)\|^2`` from
the tiles' Gram matrices, and any principal block ``(A^{-1})_{SS}`` from the
off-diagonal tiles of ``X^T X`` (compressed once, by ARA through their stacked
factors) restricted to ``S``, and within each tile from the rows of ``X`` in ``S``:
what closed-form cross-validation needs [2]_.

References
----------
.. [1] Stein, M. L. (2002). The screening effect in kriging. The Annals of Statistics,
   30(1), 298-323.
.. [2] Dubrule, O. (1983). Cross validation of kriging in a unique neighborhood.
   Mathematical Geology, 15(6), 687-699.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from scipy.linalg import lapack

from tlrcore._checks import check_accuracy
from tlrcore._lapack import trmm_lower, trmm_lower_transposed
from tlrcore._typing import FloatArray, IntArray
from tlrcore.cholesky._steps import BlockDiagonal, TileFactor, stack, thin_product
from tlrcore.cholesky.factor import TLRCholesky
from tlrcore.compress.ara import GaussianBlocks, ara_compress
from tlrcore.concurrency.threads import column_progress, map_by_work, runner, tile_pool, workers
from tlrcore.errors import FactorizationError

__all__ = ["InverseFactor", "inverse_factor"]

#: Block power iterations estimating ``||X(i, i)||_2`` with :data:`NORM_BLOCK` vectors;
#: the estimate (a lower bound) is then enlarged by :data:`NORM_MARGIN`.
NORM_ITERATIONS = 6
NORM_BLOCK = 8
NORM_MARGIN = 1.5


class InverseFactor(TileFactor):
    """``X = L^{-1}`` of a TLR Cholesky factor ``A[perm][:, perm] ~ L L^T``, in tiles: dense
    lower-triangular ``diagonal[J]`` and ``X(i, J) = U[i, J] @ V[i, J].T`` for ``i > J``,
    the ``U`` of a tile row side by side in one array.

    Build one with :func:`inverse_factor`. Its methods return entries of ``A^{-1} = P^T
    X^T X P`` in the order of ``A``; the first :meth:`inverse_block` compresses the
    off-diagonal tiles of ``X^T X`` (:meth:`inverse_tiles`) and later ones reuse them.

    Attributes
    ----------
    n, n_tiles, offsets
        As for the factor.
    diagonal : list of ndarray
        ``X(J, J) = L(J, J)^{-1}``, dense lower triangular.
    U, V : dict of (int, int) to ndarray
        ``X(i, J) = U[i, J] @ V[i, J].T``, views into one array per tile row (``U``) and
        per tile column (``V``).
    tolerance, accuracy : float
        The tiles' absolute Frobenius tolerance, and the relative accuracy it came from.
    position : ndarray of int
        The factor's row of each row of ``A`` (the inverse of ``perm``).
    """

    def __init__(self, diagonal, panels, columns, offsets, tolerance, accuracy, perm=None):
        U, V = {}, {}
        for i, (panel, spans) in enumerate(panels):
            for J, span in spans.items():
                U[i, J] = panel[:, span]
                V[i, J] = columns[J].view()[:, columns[J].spans[i]]
        super().__init__(diagonal, U, V, offsets, tolerance)
        self.accuracy = accuracy
        self._panels, self._columns = panels, columns
        self._grams = None
        self._tiles = None
        n = int(np.asarray(offsets)[-1])
        #: position in the factor of each row of ``A``
        self.position = (
            np.arange(n) if perm is None else np.argsort(np.asarray(perm)).astype(np.intp)
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the tiles of ``X`` (and of ``X^T X`` once compressed)."""
        held = sum(D.nbytes for D in self.diagonal) + sum(V.nbytes for V in self.V.values())
        held += sum(panel.nbytes for panel, _ in self._panels)
        if self._tiles is not None:
            held += sum(A.nbytes + B.nbytes for A, B in self._tiles.values())
        return held

    def to_dense(self) -> FloatArray:
        """``X`` as a dense lower-triangular array (in the factor's order)."""
        X = np.zeros((self.n, self.n))
        for J, D in enumerate(self.diagonal):
            X[self.tile(J), self.tile(J)] = D
        for (i, J), U in self.U.items():
            X[self.tile(i), self.tile(J)] = U @ self.V[i, J].T
        return X

    def grams(self) -> list[FloatArray]:
        """``G_i = [U_i0 | ...]^T [U_i0 | ...]`` of each tile row (made once)."""
        if self._grams is None:
            with tile_pool(workers()) as pool:
                self._grams = list(runner(pool)(lambda panel: panel[0].T @ panel[0], self._panels))
        return self._grams

    def _core(self, i, J, K):
        """``U(i, J)^T U(i, K)``, a block of ``G_i``."""
        spans = self._panels[i][1]
        return self.grams()[i][spans[J], spans[K]]

    def inverse_diagonal(self) -> FloatArray:
        """``diag(A^{-1})``, shape ``(n,)``: ``||X(:, c)||^2`` for each column ``c``."""
        squares = np.zeros(self.n)
        for J, D in enumerate(self.diagonal):
            squares[self.tile(J)] = np.einsum("ij,ij->j", D, D)
        for (i, J), V in self.V.items():
            squares[self.tile(J)] += np.einsum("ij,ij->i", V @ self._core(i, J, J), V)
        return squares[self.position]

    def inverse_tiles(self) -> dict[tuple[int, int], tuple[FloatArray, FloatArray]]:
        """The off-diagonal tiles ``(X^T X)(J, K) ~ A B^T``, ``J > K``, as ``{(J, K): (A, B)}``.

        ``(X^T X)(J, K) = X(J, J)^T X(J, K) + sum_{i > J} V(i, J) U(i, J)^T U(i, K)
        V(i, K)^T``, compressed by ARA through its stacked factors to ``accuracy
        ||diag(A^{-1})|| / n_tiles`` (``||diag||`` bounds ``||A^{-1}||_F`` from below).
        Made once, on the tile pool.
        """
        if self._tiles is None:
            n_t = self.n_tiles
            tolerance = self.accuracy * float(np.linalg.norm(self.inverse_diagonal())) / n_t
            pairs = [(J, K) for J in range(n_t) for K in range(J)]
            streams = [DrawStream(self.diagonal[K].shape[0], seed=n_t + K) for K in range(n_t)]
            with tile_pool(workers()) as pool:
                run = runner(pool)
                # X(J, J)^T [X(J, 0) | ... ] for every tile row in one product each
                heads = list(
                    run(
                        lambda J: trmm_lower_transposed(
                            self.diagonal[J], np.array(self._panels[J][0], order="F")
                        ),
                        range(n_t),
                    )
                )
                tiles = map_by_work(
                    run,
                    lambda pair: self._inverse_tile(pair, tolerance, streams[pair[1]], heads),
                    pairs,
                    [n_t - J for J, _ in pairs],
                )
            self._tiles = dict(zip(pairs, tiles, strict=True))
        return self._tiles

    def _inverse_tile(self, pair, tolerance, draws, heads):
        """``(X^T X)(J, K)`` of ``pair = (J, K)`` compressed to `tolerance`, with
        ``heads[J] = X(J, J)^T [X(J, 0) | ...]``."""
        J, K = pair
        P = self.U[J, K]
        lefts = [heads[J][:, self._panels[J][1][K]], self._columns[J].view()]
        cores = [np.eye(P.shape[1])]
        cores += [self._core(i, J, K) for i in range(J + 1, self.n_tiles)]
        rights = [self._columns[K].view(self._columns[K].spans[J].start)]
        return StackedSum(lefts, cores, rights).compress(tolerance, draws.cursor(), P.shape[1])

    def inverse_block(self, index: IntArray) -> FloatArray:
        """``A^{-1}[index][:, index]`` for distinct row numbers `index` of ``A``.

        Between tiles from :meth:`inverse_tiles`; within tile ``J``, ``X(J, J)[:, S]^T
        X(J, J)[:, S] + sum_{i > J} V(i, J)[S] G_i(J, J) V(i, J)[S]^T``.
        """
        index = np.asarray(index)
        position = self.position[index]
        ascending = bool(np.all(np.diff(position) > 0))
        order = np.arange(index.size) if ascending else np.argsort(position, kind="stable")
        sorted_position = position[order]
        bounds = np.searchsorted(sorted_position, self.offsets)
        # the block's columns (sorted) in each tile, and their rows within the tile
        groups = [slice(int(bounds[J]), int(bounds[J + 1])) for J in range(self.n_tiles)]
        local = [sorted_position[g] - int(self.offsets[J]) for J, g in enumerate(groups)]
        tiles = self.inverse_tiles()
        out = np.empty((index.size, index.size))
        for J in range(self.n_tiles):
            if not local[J].size:
                continue
            D = self.diagonal[J][:, local[J]]
            within = D.T @ D
            for i in range(J + 1, self.n_tiles):
                VJ = self.V[i, J][local[J]]
                within += VJ @ self._core(i, J, J) @ VJ.T
            out[groups[J], groups[J]] = 0.5 * (within + within.T)  # symmetric to the bit
            for K in range(J):
                A, B = tiles[J, K]
                between = A[local[J]] @ B[local[K]].T
                out[groups[J], groups[K]] = between
                out[groups[K], groups[J]] = between.T
        if ascending:
            return out
        back = np.empty_like(order)
        back[order] = np.arange(index.size)
        return out[np.ix_(back, back)]


def inverse_factor(L: TLRCholesky, accuracy: float) -> InverseFactor:
    r"""``X = L^{-1}`` of a :class:`~tlrcore.TLRCholesky` in tile low-rank form.

    Each column of tiles is a block forward substitution (module docstring) whose sums
    are compressed by ARA through their stacked factors, never formed.

    Parameters
    ----------
    L : TLRCholesky
        The factor, in the tile layout, of ``A[perm][:, perm]`` (``L.perm``, or ``A``).
    accuracy : float
        In (0, 1). The tile tolerance ``tau = accuracy ||X||_F / n_tiles``, ``||X||_F``
        estimated from the diagonal tiles; ``X(i, J)`` is truncated to within ``tau``
        (the sum to ``tau / s_i``, ``s_i`` an estimate of ``||X(i, i)||_2``), so that
        ``L X = I - Delta`` with ``||Delta||_F <= tau sqrt(#tiles)`` and
        ``||X~ - X||_F <= ||X||_2 ||Delta||_F``.

    Returns
    -------
    InverseFactor
        Lower-triangular tiles of ``X``; entries of ``A^{-1}`` through
        :meth:`~InverseFactor.inverse_diagonal` and :meth:`~InverseFactor.inverse_block`.

    Raises
    ------
    TypeError
        If `L` is not in the tile layout (a packed or distributed factor).
    ValueError
        If `accuracy` is not in (0, 1).
    FactorizationError
        If a diagonal tile of `L` is singular (``.tile`` names it).

    References
    ----------
    .. [1] Halko, N., Martinsson, P.-G., Tropp, J. A. (2011). Finding structure with
       randomness: probabilistic algorithms for constructing approximate matrix
       decompositions. SIAM Review 53(2), 217-288.
    """
    if not isinstance(L, TLRCholesky):
        raise TypeError(
            f"L must be a tlrcore.TLRCholesky (the tile layout); got {type(L).__name__}."
        )
    accuracy = check_accuracy(accuracy)
    n_t = L.n_tiles
    with tile_pool(workers()) as pool, column_progress(n_t, "TLR inverse factor") as counter:
        run = runner(pool)
        diagonal = list(run(lambda k: _triangular_inverse(L.diagonal[k], k), range(n_t)))
        scales = list(run(_norm_estimate, diagonal))
        rows = list(run(lambda i: _row_panel(L, i), range(n_t)))
        tolerance = accuracy * math.sqrt(sum(float(np.sum(D * D)) for D in diagonal)) / n_t

        def column(J):
            result = _inverse_column(L, rows, diagonal, scales, J, tolerance)
            counter.update()
            return result

        columns = map_by_work(run, column, list(range(n_t)), [(n_t - J) ** 2 for J in range(n_t)])
    rows.clear()  # the copies of L's row panels
    panels = []
    for i in range(n_t):
        parts = [columns[J][0][i] for J in range(i)]
        ends = np.cumsum([P.shape[1] for P in parts], dtype=np.intp)
        spans = {
            J: slice(int(e) - P.shape[1], int(e))
            for J, (P, e) in enumerate(zip(parts, ends, strict=True))
        }
        panels.append((stack(parts, diagonal[i].shape[0]), spans))
    return InverseFactor(
        diagonal, panels, [c[1] for c in columns], L.offsets, tolerance, accuracy, L.perm
    )


def _row_panel(L, i):
    """``([U(i, 0) | ... | U(i, i-1)], first columns)`` of the factor's tile row `i`."""
    parts = [L.U[i, m] for m in range(i)]
    return stack(parts, L.offsets[i + 1] - L.offsets[i]), np.concatenate(
        [[0], np.cumsum([U.shape[1] for U in parts], dtype=np.intp)]
    )


def _triangular_inverse(Lkk, k):
    """``L(k, k)^{-1}`` (dense lower triangular); FactorizationError naming tile `k`."""
    X, info = lapack.dtrtri(np.asfortranarray(Lkk), lower=1)
    if info != 0 or not np.all(np.isfinite(X)):
        error = FactorizationError(
            f"diagonal tile {k} of the factor is singular: its inverse is not finite."
        )
        error.tile = k
        raise error
    return X  # zero above the diagonal, as the tile


def _norm_estimate(X):
    """``||X||_2`` by block power iteration on ``X^T X`` (:data:`NORM_BLOCK` vectors from
    a fixed start, :data:`NORM_ITERATIONS` steps), times :data:`NORM_MARGIN` (the
    iteration approaches the norm from below)."""
    block = np.ones((X.shape[1], NORM_BLOCK))
    block[:, 1:] = np.random.default_rng(0).standard_normal((X.shape[1], NORM_BLOCK - 1))
    for _ in range(NORM_ITERATIONS):
        block, _ = np.linalg.qr(X.T @ (X @ block))
    return NORM_MARGIN * float(np.linalg.norm(X @ block, 2))


def _inverse_column(L, rows, diagonal, scales, J, tolerance):
    """Tile column `J` of ``X``: ``({i: P_i}, Q)`` with ``X(i, J) = P_i Q[:, span_i]^T``,
    the ``Q`` of the column side by side (``span_i`` the :class:`ColumnPanel`'s)."""
    n_t = L.n_tiles
    width = diagonal[J].shape[0]
    lefts, column = {}, ColumnPanel(width)
    draws = DrawStream(width, seed=J)
    # L(J, J)^{-T} V(i, J) = X(J, J)^T V(i, J) for the whole column in one product
    factors = [L.V[i, J] for i in range(J + 1, n_t)]
    ends = np.cumsum([V.shape[1] for V in factors], dtype=np.intp)
    solved_all = trmm_lower_transposed(diagonal[J], stack(factors, width))
    for i in range(J + 1, n_t):
        panel, first = rows[i]
        # sum_{m=J}^{i-1} U_im (V_im^T X(m, J)): the row panel's columns J .. i-1 times
        # blockdiag(I, V_im^T P_m, ...) times [X(J, J)^T V_iJ | Q_{J+1} | ...]^T
        end = int(ends[i - J - 1])
        solved = solved_all[:, end - factors[i - J - 1].shape[1] : end]
        cores = [np.eye(solved.shape[1])]
        cores += [L.V[i, m].T @ lefts[m] for m in range(J + 1, i)]
        operator = StackedSum([panel[:, first[J] : first[i]]], cores, [solved, column.view()])
        budget = tolerance / scales[i] if scales[i] else tolerance
        hint = lefts[i - 1].shape[1] if i - 1 > J else solved.shape[1]
        P, Q = operator.compress(budget, draws.cursor(), hint)
        lefts[i] = trmm_lower(diagonal[i], np.array(-P, order="F"))
        column.append(i, Q)
    return lefts, column.trimmed()


class StackedSum:
    """``sum_t A_t M_t B_t^T = [A_0 | A_1 | ...] blockdiag(M_0, ...) [B_0 | ...]^T``, the
    stacks given as pieces side by side (`lefts`, `rights`: views, never copied)."""

    def __init__(self, lefts, cores, rights):
        self.lefts, self.rights = lefts, rights
        self.core = BlockDiagonal(cores)
        self.shape = (lefts[0].shape[0], rights[0].shape[0])

    def matmat(self, X):
        return _stacked_product(self.lefts, self.core @ _stacked_transpose(self.rights, X))

    def rmatmat(self, Y):
        return _stacked_product(self.rights, self.core.T @ _stacked_transpose(self.lefts, Y))

    def compress(self, tolerance, draws, hint):
        """``(U, V)`` by ARA to `tolerance` (Frobenius), Gaussian blocks from `draws`."""
        return ara_compress(
            self.matmat, self.rmatmat, self.shape, tolerance, rank_hint=hint, draws=draws
        )


def _stacked_transpose(pieces, X):
    """``[P_0 | P_1 | ...]^T X``."""
    return np.vstack([(X.T @ P).T for P in pieces])


def _stacked_product(pieces, Z):
    """``[P_0 | P_1 | ...] Z``."""
    out, first = None, 0
    for P in pieces:
        part = thin_product(P, Z[first : first + P.shape[1]])
        out = part if out is None else out + part
        first += P.shape[1]
    return out


class ColumnPanel:
    """Factors of one tile column side by side, appended in row order: ``view()`` is the
    stack so far (no copy), ``span(i)`` the columns of row `i`'s factor."""

    def __init__(self, rows):
        self._buffer = np.empty((rows, 64), order="F")
        self._end = 0
        self.spans = {}

    def append(self, i, Q):
        end = self._end + Q.shape[1]
        if end > self._buffer.shape[1]:
            grown = np.empty(
                (self._buffer.shape[0], max(end, 2 * self._buffer.shape[1])), order="F"
            )
            grown[:, : self._end] = self._buffer[:, : self._end]
            self._buffer = grown
        self._buffer[:, self._end : end] = Q
        self.spans[i] = slice(self._end, end)
        self._end = end

    def view(self, start=0):
        """Columns from `start` to the end (a view)."""
        return self._buffer[:, start : self._end]

    def trimmed(self):
        """The panel cut to its columns (a copy, releasing the spare capacity)."""
        self._buffer = np.array(self._buffer[:, : self._end], order="F")
        return self


class DrawStream:
    """One seeded stream of Gaussian columns of `rows` entries, shared by the tiles of a
    column (each reads it from the start through a :meth:`cursor`): equal results for any
    order of the tiles.

    Column ``c`` holds the generator's draws ``c rows, ..., (c + 1) rows - 1`` whatever
    the sequence of requests that extended the stream, so which tile asks first does not
    matter.
    """

    def __init__(self, rows, seed):
        self._rng = np.random.default_rng(seed)
        self._drawn = np.empty((rows, 0))
        self._lock = threading.Lock()

    def columns(self, end):
        """The first `end` columns (read-only)."""
        with self._lock:
            if end > self._drawn.shape[1]:
                more = self._rng.standard_normal(
                    (
                        max(end, 2 * self._drawn.shape[1]) - self._drawn.shape[1],
                        self._drawn.shape[0],
                    )
                ).T
                self._drawn = np.hstack([self._drawn, more])
                self._drawn.flags.writeable = False
            return self._drawn[:, :end]

    def cursor(self):
        return _Cursor(self)


class _Cursor(GaussianBlocks):
    """One tile's reading of a :class:`DrawStream`."""

    def __init__(self, stream):
        super().__init__(None)
        self._stream, self._position = stream, 0

    def first(self, rows, blocks, block_size):
        return self.next(rows, blocks * block_size)

    def next(self, rows, columns):
        start, self._position = self._position, self._position + columns
        return self._stream.columns(self._position)[:, start:]
