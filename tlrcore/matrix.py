r"""Symmetric tile low-rank (TLR) matrices.

The index range ``0..n-1`` is cut into tiles of ``tile_size`` consecutive indices (the last
one ragged). Diagonal tiles are stored dense; each lower off-diagonal tile ``A(i, j)``,
``i > j``, is stored as ``U(i, j) V(i, j)^T`` with its own rank.

Accuracy
--------
``accuracy = eps`` means ``||A - A_tlr||_F <= eps ||A||_F``. Every off-diagonal tile is
compressed to the same absolute Frobenius tolerance ``tau = eps * N / n_tiles``, where ``N``
estimates ``||A||_F``. Since ``||A - A_tlr||_F^2 = sum_{i != j} ||E_ij||_F^2 <=
n_tiles (n_tiles - 1) tau^2 < (eps N)^2``, the contract holds whenever ``N <= ||A||_F``.
``N`` adds the exact norms of the diagonal tiles to half of a sampled estimate of the
off-diagonal part (a random ``s x s`` sub-block), so it stays below ``||A||_F`` unless the
sample overestimates the off-diagonal mass by more than a factor of two.
(A per-tile *relative* threshold would waste rank on tiles that hardly contribute.)
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from tlrcore._checks import check_accuracy, check_int, check_operand, check_random_state
from tlrcore._typing import BackendArray, BlockGenerator, FloatArray, IntArray, Seed
from tlrcore.backends import NUMPY, Backend, get_backend
from tlrcore.compress import COMPRESSORS, generator_method
from tlrcore.compress._recompress import recompress
from tlrcore.compress.generated import CheckedBlock, compress_column, compress_tile
from tlrcore.compress.in_processes import column_compressor
from tlrcore.concurrency.heap import numpy_allocated_bytes, pin_mmap_threshold
from tlrcore.concurrency.threads import (
    by_rows,
    column_progress,
    map_by_work,
    runner,
    tile_pool,
    workers,
)
from tlrcore.dense._checks import check_symmetric
from tlrcore.errors import ConsumedMatrixError, GeneratorError
from tlrcore.packed.build import (
    GeneratorOutput,
    build_packed,
    check_diagonal,
    check_scale,
    check_symmetry_sample,
    host_diagonal_summary,
    norm_lower_estimate,
    promises_symmetry,
)
from tlrcore.packed.tiles import PackedTiles

__all__ = ["TLRMatrix", "GeneratorError"]

logger = logging.getLogger(__name__)

#: Compression of the off-diagonal tiles (:meth:`TLRMatrix.from_generator`).
CompressionMethod = Literal["aca", "ara", "svd", "batched"]

#: Placeholder of a tile freed by :meth:`TLRMatrix._release_column`.
_RELEASED = np.full((0, 0), np.nan)


class TLRMatrix:
    """A symmetric matrix in tile low-rank form.

    Build one with :meth:`from_generator` or :meth:`from_dense`.

    Attributes
    ----------
    n : int
        Order of the matrix.
    tile_size : int
    n_tiles : int
    offsets : ndarray of shape (n_tiles + 1,)
        Tile boundaries.
    diagonal : list of ndarray
        Dense diagonal tiles.
    U, V : dict of (int, int) to ndarray
        Factors of the lower off-diagonal tiles, ``A(i, j) ~ U[i, j] @ V[i, j].T``.
    accuracy : float
        Requested relative accuracy.
    tolerance : float
        Absolute Frobenius tolerance each off-diagonal tile was compressed to.
    backend : Backend
    packed : PackedTiles or None
        The packed layout (:mod:`tlrcore.packed`) when the matrix was built with
        ``method="batched"``; then `diagonal`, `U` and `V` are views into it, and
        :func:`tlrcore.cholesky` uses its packed variant.
    tile_errors : ndarray of shape (n_tiles, n_tiles) or None
        Estimated spectral norm of each off-diagonal tile's compression error,
        ``||A(i, j) - U V^T||_2`` (symmetric, zero diagonal): the largest singular value the
        truncation dropped (:class:`~tlrcore.compress._recompress.LowRank`; for
        ``method="batched"``, :mod:`tlrcore.compress.ara_batched`). Recorded by
        :meth:`from_generator` and :meth:`from_dense`; None for other builds.
        The safeguard ``"compensate"`` lifts each diagonal tile by these errors.

    Notes
    -----
    ``tlrcore.cholesky(A, overwrite_a=True)`` consumes `A`, whether it succeeds or
    fails: afterwards the tiles (`diagonal`, `U`, `V`, `packed`) and everything computed
    from them raise :class:`~tlrcore.ConsumedMatrixError`; the shape attributes and
    ``repr`` remain.
    """

    def __init__(
        self,
        diagonal: list[BackendArray],
        U: dict[tuple[int, int], BackendArray],
        V: dict[tuple[int, int], BackendArray],
        offsets: ArrayLike,
        accuracy: float,
        tolerance: float,
        backend: Backend,
        packed: PackedTiles | None = None,
        tile_errors: FloatArray | None = None,
    ) -> None:
        self._packed = packed
        self.tile_errors = tile_errors
        self._packed_copy: PackedTiles | None = None
        self._diagonal = diagonal
        self._U, self._V = U, V
        self._consumed = False
        #: Whether views made by :meth:`shared` or :meth:`truncated` read the diagonal
        #: tiles, which ``cholesky(A, overwrite_a=True)`` then copies instead of factoring
        #: them in place.
        self._diagonal_shared = False
        self.offsets = np.asarray(offsets)
        self.n = int(self.offsets[-1])
        self.n_tiles = len(diagonal)
        self.tile_size = int(self.offsets[1] - self.offsets[0]) if self.n_tiles else 0
        self.accuracy = accuracy
        self.tolerance = tolerance
        self.backend = backend
        #: ``||A_tlr - B_tlr||_F`` (both triangles) for a copy made by ``B.truncated()``,
        #: from the dropped singular values; None otherwise.
        self.truncation_error: float | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_generator(
        cls,
        block: BlockGenerator,
        n: int,
        tile_size: int,
        accuracy: float = 1e-8,
        method: CompressionMethod | None = None,
        max_rank: int | None = None,
        backend: str | Backend = "numpy",
        random_state: Seed = 0,
    ) -> TLRMatrix:
        """Compress a symmetric matrix given by a block generator.

        No ``n x n`` array is allocated: diagonal tiles are evaluated dense, off-diagonal
        tiles are compressed one by one (ACA touches only ``O(k m)`` entries of each).

        Parameters
        ----------
        block : callable
            ``block(rows, cols)`` returns the dense block ``A[rows][:, cols]`` for integer
            index arrays ``rows`` and ``cols``. If it has a method ``entries(i, j)``
            returning ``A[i, j]`` elementwise for integer arrays that broadcast together
            (of their broadcast shape), ACA reads the columns of all the tiles of a tile
            column with one call of it per round (:mod:`tlrcore.compress.aca_column`)
            instead of one ``block`` call per tile. A generator whose blocks are
            symmetric by construction (``block(cols, rows)`` is ``block(rows, cols).T``
            to rounding) may say so with an attribute ``symmetric_blocks = True``: its
            diagonal tiles are then not scanned for asymmetry (the random sample below
            still is). A generator whose off-diagonal tiles may hold a few large
            entries in rows and columns that partial pivoting need not visit (ACA's
            known failure mode, :mod:`tlrcore.compress.aca`) says so with
            ``cross_approximation = False``: its tiles are then compressed by ARA by
            default, which sees whole tiles.
        n : int
            Order of the matrix.
        tile_size : int
            Rows per tile, ``1 <= tile_size <= n``; the last tile holds the remainder.
        accuracy : float, default 1e-8
            Relative Frobenius accuracy ``||A - A_tlr||_F <= accuracy ||A||_F``.
        method : {"aca", "ara", "svd", "batched"}, optional
            Compression of the off-diagonal tiles: one at a time (``"aca"``, ``"ara"``,
            ``"svd"``, on NumPy arrays), or ``"batched"``: a tile column at a time, one
            generator call per column chunk returning arrays of the back end, into the
            packed layout (:mod:`tlrcore.packed.build`), the GPU path. Default
            ``"aca"`` on NumPy (``"ara"`` for a generator with
            ``cross_approximation = False``) and ``"batched"`` on other back ends.
        max_rank : int, optional
            Cap on every tile's rank (the accuracy may then not be met; see
            :meth:`error_bound`).
        backend : str or Backend, default "numpy"
            ``"numpy"`` or ``"cupy"`` (GPU; needs ``method="batched"``).
        random_state : int or numpy Generator, default 0
            Seeds the norm sample and randomized compression.

        Returns
        -------
        TLRMatrix

        Raises
        ------
        ValueError
            For a bad `n`, `tile_size`, `accuracy`, `method` or `max_rank`, and
            (:class:`GeneratorError`) when `block` returns a wrong shape or non-finite
            values, when a diagonal tile (unless the generator promises
            ``symmetric_blocks``), or one of a random sample of 64 x 64 entries compared
            with their transposes, is not symmetric to ``1e-10 max|A|`` (the criterion of
            :mod:`tlrcore.dense`), or when the entries are too large or too
            small for the norms (``max|A|`` outside about ``[1e-134, 1e134]``, see
            :func:`tlrcore.packed.build.check_scale`); the message names the tile.
        """
        n = check_int(n, "n", 1)
        tile_size = check_int(tile_size, "tile_size", 1, n)
        accuracy = check_accuracy(accuracy)
        max_rank = check_int(max_rank, "max_rank", 0, allow_none=True)
        backend = get_backend(backend)
        if method is None:
            method = "batched" if backend.batched_by_default else generator_method(block)
        if method not in (*COMPRESSORS, "batched"):
            raise ValueError(
                f"method={method!r} is not one of {sorted([*COMPRESSORS, 'batched'])}."
            )
        if method != "batched" and backend.batched_by_default:
            raise ValueError(
                f"backend={backend.name!r} builds tiles with method='batched' only; got {method!r}."
            )
        pin_mmap_threshold()
        rng = np.random.default_rng(check_random_state(random_state))
        if method == "batched":
            packed, tolerance, errors = build_packed(
                GeneratorOutput(block, backend, GeneratorError),
                n,
                tile_size,
                accuracy,
                backend,
                rng,
                max_rank=max_rank,
            )
            diagonal, U, V = packed.views()
            matrix = cls(
                diagonal,
                U,
                V,
                packed.offsets,
                accuracy,
                tolerance,
                backend,
                packed,
                tile_errors=errors,
            )
            logger.debug(
                "TLR matrix (batched) n=%d tiles=%d tolerance=%.3g memory %.1f MB",
                n,
                matrix.n_tiles,
                tolerance,
                matrix.nbytes / 1e6,
            )
            return matrix
        checked = CheckedBlock(block)
        offsets = np.append(np.arange(0, n, tile_size), n)
        n_tiles = len(offsets) - 1
        tiles = [np.arange(offsets[i], offsets[i + 1]) for i in range(n_tiles)]
        pairs = [(i, j) for i in range(n_tiles) for j in range(i)]
        seeds = rng.integers(0, 2**63 - 1, size=len(pairs))
        # Worker processes, if any, are forked before the first tile (column_compressor)
        compressor = (
            column_compressor(
                block,
                offsets,
                max_rank,
                lambda j, tolerance: compress_column(checked, tiles, j, tolerance, max_rank),
            )
            if method == "aca"
            else contextlib.nullcontext()
        )
        with compressor as compress, tile_pool(workers()) as pool:
            run = runner(pool)

            symmetric = promises_symmetry(block)

            def diagonal_tile(i):
                # the tile and the figures the checks and the norm need, on the pool
                D = checked(tiles[i], tiles[i], (i, i))
                return D, *host_diagonal_summary(D, symmetric)

            diagonal, squares, stats = zip(*run(diagonal_tile, range(n_tiles)))
            diagonal = list(diagonal)
            scale = check_diagonal(stats, n)
            norm = norm_lower_estimate(sum(squares), checked, offsets, rng, np)
            tolerance = accuracy * norm / n_tiles
            check_symmetry_sample(checked, offsets, rng, scale)

            if method == "aca":
                with column_progress(n_tiles, "TLR compression") as counter:

                    def compress_and_count(j):
                        column = compress(j, tolerance)
                        counter.update()
                        return column

                    columns = map_by_work(
                        run,
                        compress_and_count,
                        range(n_tiles),
                        [n_tiles - j for j in range(n_tiles)],
                    )
                factors = [columns[j][i - j - 1] for i, j in pairs]
            else:

                def compress(pair_seed):
                    (i, j), seed = pair_seed
                    return compress_tile(
                        checked, tiles[i], tiles[j], (i, j), tolerance, method, max_rank, seed
                    )

                with column_progress(n_tiles, "TLR compression", unit="row") as counter:
                    factors = list(
                        by_rows(run(compress, zip(pairs, seeds)), range(n_tiles), counter)
                    )
        U = {pair: f[0] for pair, f in zip(pairs, factors)}
        V = {pair: f[1] for pair, f in zip(pairs, factors)}
        errors = np.zeros((n_tiles, n_tiles))
        for (i, j), f in zip(pairs, factors):
            errors[i, j] = errors[j, i] = f.dropped
        matrix = cls(diagonal, U, V, offsets, accuracy, tolerance, backend, tile_errors=errors)
        logger.debug(
            "TLR matrix n=%d tiles=%d tolerance=%.3g mean rank=%.1f memory %.1f MB",
            n,
            n_tiles,
            tolerance,
            matrix.mean_rank,
            matrix.nbytes / 1e6,
        )
        return matrix

    @classmethod
    def from_dense(
        cls,
        M: ArrayLike,
        tile_size: int,
        accuracy: float = 1e-8,
        method: CompressionMethod = "svd",
        max_rank: int | None = None,
        random_state: Seed = 0,
    ) -> TLRMatrix:
        """Compress a dense symmetric matrix.

        Parameters
        ----------
        M : array_like of shape (n, n)
            Symmetric; the lower off-diagonal tiles are compressed.
        tile_size, accuracy, method, max_rank, random_state
            As in :meth:`from_generator` (default method ``"svd"``).

        Returns
        -------
        TLRMatrix

        Raises
        ------
        ValueError
            If `M` is not square and finite, not symmetric (``max|M - M.T| <= 1e-10
            max|M|``, the criterion of :mod:`tlrcore.dense`), has entries too large or too
            small for the norms (see :meth:`from_generator`), or for bad settings.
        """
        M = np.asarray(M)
        if M.dtype.kind not in "biuf":
            raise TypeError(f"M must be a real numeric matrix; got dtype {M.dtype}.")
        M = M.astype(np.float64, copy=False)
        if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
            raise ValueError(f"M must be a non-empty square matrix; got shape {M.shape}.")
        if not np.isfinite(M).all():
            raise ValueError("M contains NaN or infinite values.")
        check_scale(max(M.max(), -M.min()), M.shape[0], "M", ValueError)
        check_symmetric(M)
        return cls.from_generator(
            lambda rows, cols: M[np.ix_(rows, cols)],
            M.shape[0],
            tile_size,
            accuracy=accuracy,
            method=method,
            max_rank=max_rank,
            random_state=random_state,
        )

    def shared(self) -> TLRMatrix:
        """A second matrix on the same tile arrays, as read-only views, at no copy.

        It stays usable after ``cholesky(self, overwrite_a=True)``, which releases this
        matrix's references to its tiles but then writes into none of them (tlrcore's
        factorizations replace, never update, the low-rank factors, and a matrix with
        shared tiles has its diagonal tiles copied before they are updated, where
        ``overwrite_a=True`` otherwise factors them in place), so that the tiles can
        serve later, e.g. :meth:`truncated` after the factorization. The tiles stay in
        memory while it lives.

        Returns
        -------
        TLRMatrix

        Raises
        ------
        ValueError
            For a matrix in the packed layout (its packed factorization with
            ``overwrite_a=True`` factors the diagonal tiles in place).
        ConsumedMatrixError
            If the matrix was consumed by ``cholesky(A, overwrite_a=True)``.
        """
        self._check_usable()
        if self.packed is not None:
            raise ValueError(
                "shared() works on matrices in the tile layout; this one is packed (built with "
                "method='batched'), whose factorization may overwrite its tiles: copy it instead."
            )
        self._diagonal_shared = True
        view = type(self)(
            [_read_only(D) for D in self.diagonal],
            {key: _read_only(U) for key, U in self.U.items()},
            {key: _read_only(V) for key, V in self.V.items()},
            self.offsets,
            self.accuracy,
            self.tolerance,
            self.backend,
            tile_errors=self.tile_errors,
        )
        view.truncation_error = self.truncation_error
        return view

    def truncated(self, accuracy: float) -> TLRMatrix:
        r"""A copy at the coarser `accuracy`, from the factors (the generator is not read).

        The diagonal tiles are this matrix's arrays, as read-only views: tlrcore's
        factorizations then copy a diagonal tile of either matrix before updating it, also
        with ``overwrite_a=True`` (which otherwise factors the tiles in place), so
        neither matrix's factorization changes the other, and the copy costs no memory
        for them (``8 n tile`` bytes: 268 MB at 16,384 sites in tiles of 2048, where
        copying took 0.2-0.6 s). A matrix in the packed layout, whose packed
        factorization with ``overwrite_a=True`` factors its diagonal tiles in place, has
        them copied. Each off-diagonal tile's ``U V^T`` is truncated
        (orthonormal bases of both factors and an SVD, :func:`tlrcore.compress._recompress.recompress`)
        with the Frobenius budget ``tau' - tau``, where ``tau' = tau accuracy / self.accuracy`` is the tolerance a
        build at `accuracy` with the same norm estimate would use. A tile's two errors
        add at most to ``tau'``, so the copy meets the module's contract at `accuracy`
        whenever this matrix meets it at its own. :attr:`tile_errors` add likewise (a
        bound on the spectral norms), and :attr:`truncation_error` is ``||copy - self||_F``.
        It costs two thin factorizations and an SVD of the rank's size per tile, against the kernel
        evaluations and ACA of a new build.

        Parameters
        ----------
        accuracy : float
            In ``[self.accuracy, 1)``.

        Returns
        -------
        TLRMatrix
            On the NumPy back end, tile by tile (not packed).

        Raises
        ------
        ValueError
            If `accuracy` is not in ``[self.accuracy, 1)``, or the matrix is not on the
            NumPy back end.
        ConsumedMatrixError
            If the matrix was consumed by ``cholesky(A, overwrite_a=True)``.
        """
        accuracy = check_accuracy(accuracy)
        if accuracy < self.accuracy:
            raise ValueError(
                f"accuracy must be at least the matrix's own, {self.accuracy:g} (truncation only "
                f"coarsens); got {accuracy:g}."
            )
        if self.backend.name != NUMPY.name:
            raise ValueError(
                f"truncated() works on NumPy matrices; this one is on {self.backend.name!r}: build "
                "again at the coarser accuracy instead."
            )
        self._check_usable()
        tolerance = self.tolerance * (accuracy / self.accuracy)
        budget = tolerance - self.tolerance
        pairs = list(self.U)
        with tile_pool(workers()) as pool:
            factors = list(
                runner(pool)(lambda pair: recompress(self.U[pair], self.V[pair], budget), pairs)
            )
        errors = None
        if self.tile_errors is not None:
            errors = np.array(self.tile_errors, dtype=np.float64)
            for (i, j), f in zip(pairs, factors):
                errors[i, j] = errors[j, i] = errors[i, j] + f.dropped
        diagonal = [
            np.array(D) if self.packed is not None else _read_only(D) for D in self.diagonal
        ]
        self._diagonal_shared = self._diagonal_shared or self.packed is None
        copy = type(self)(
            diagonal,
            {pair: f[0] for pair, f in zip(pairs, factors)},
            {pair: f[1] for pair, f in zip(pairs, factors)},
            self.offsets,
            accuracy,
            tolerance,
            self.backend,
            tile_errors=errors,
        )
        copy.truncation_error = math.sqrt(2.0 * math.fsum(f.dropped_frobenius**2 for f in factors))
        return copy

    # ------------------------------------------------------------------ properties
    def _check_usable(self):
        """Raise :class:`ConsumedMatrixError` if the tiles were released."""
        if self._consumed:
            raise ConsumedMatrixError(
                "A was consumed by tlr.cholesky(A, overwrite_a=True) (its tiles were released); build the "
                "matrix again, or factor it without overwrite_a=True to keep it."
            )

    @property
    def diagonal(self) -> list[BackendArray]:
        """The dense diagonal tiles (a list)."""
        self._check_usable()
        return self._diagonal

    @property
    def U(self) -> dict[tuple[int, int], BackendArray]:
        """``{(i, j): U}`` of the lower off-diagonal tiles ``A(i, j) ~ U V^T``."""
        self._check_usable()
        return self._U

    @property
    def V(self) -> dict[tuple[int, int], BackendArray]:
        """``{(i, j): V}`` of the lower off-diagonal tiles."""
        self._check_usable()
        return self._V

    @property
    def packed(self) -> PackedTiles | None:
        """The packed storage (matrices built with ``method="batched"``), else None."""
        self._check_usable()
        return self._packed

    def tile(self, i: int) -> slice:
        """Index slice of tile `i`."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    @property
    def ranks(self) -> IntArray:
        """``(n_tiles, n_tiles)`` integer ranks, symmetric; the diagonal holds tile sizes."""
        ranks = np.zeros((self.n_tiles, self.n_tiles), dtype=np.int64)
        for i, D in enumerate(self.diagonal):
            ranks[i, i] = D.shape[0]
        for (i, j), U in self.U.items():
            ranks[i, j] = ranks[j, i] = U.shape[1]
        return ranks

    def pack(self) -> PackedTiles:
        """The matrix in the packed layout (:class:`~tlrcore.packed.tiles.PackedTiles`): the
        storage itself if it was built that way, else a copy made once (the matrix keeps
        its tile layout and its default factorization)."""
        if self.packed is not None:
            return self.packed
        if self._packed_copy is None:
            self._packed_copy = PackedTiles.from_tiles(
                self.backend, self.diagonal, self.U, self.V, self.offsets
            )
        return self._packed_copy

    @property
    def mean_rank(self) -> float:
        """Mean rank of the off-diagonal tiles (0.0 with a single tile)."""
        return float(np.mean([U.shape[1] for U in self.U.values()])) if self.U else 0.0

    @property
    def nbytes(self) -> int:
        """Bytes held by the dense diagonal tiles and the low-rank factors (padding
        included in the packed layout)."""
        if self.packed is not None:
            return self.packed.nbytes
        dense = sum(D.nbytes for D in self.diagonal)
        return dense + sum(U.nbytes + V.nbytes for U, V in zip(self.U.values(), self.V.values()))

    def frobenius_norm(self) -> float:
        """``||A_tlr||_F``, exactly, from the factors (no densification)."""
        if self.packed is not None:
            return self.packed.frobenius_norm()
        total = sum(float(np.sum(D * D)) for D in self.diagonal)
        for U, V in zip(self.U.values(), self.V.values()):
            total += 2.0 * float(np.sum((U.T @ U) * (V.T @ V)))
        return math.sqrt(total)

    def error_bound(self) -> float:
        """Relative error bound ``sqrt(n_t (n_t - 1)) tau / ||A_tlr||_F`` implied by the
        per-tile tolerance (when no tile was capped by ``max_rank``)."""
        norm = self.frobenius_norm()
        n_t = self.n_tiles
        return math.sqrt(n_t * (n_t - 1)) * self.tolerance / norm if norm > 0 else 0.0

    # ------------------------------------------------------------------ products
    def __matmul__(self, x: ArrayLike) -> BackendArray:
        """``A_tlr @ x`` for a vector ``(n,)`` or a matrix ``(n, k)`` (an array of the
        matrix's back end in the packed layout).

        Each row tile of the result, ``D_i x_i + sum_{j<i} U_ij V_ij^T x_j + sum_{j>i}
        V_ji U_ji^T x_j``, is one task of the tile pool, so that a diagonal tile is read
        once whatever the number of columns (in chunks of columns, each chunk read all the
        diagonal tiles again, and two threads took 37 ms instead of 51 ms on one for
        8,192 sites, tiles of 1024 and 64 columns). The result does not depend on the
        number of threads.
        """
        if self.packed is not None:
            return self.packed.symmetric_matmul(check_operand(x, self.n, "x", self.backend.xp))
        x = check_operand(x, self.n, "x")
        y = np.empty_like(x)
        terms: list[list[tuple[int, BackendArray, BackendArray]]] = [
            [] for _ in range(self.n_tiles)
        ]
        # (j, left, right): left @ right^T @ x_j joins row tile i
        for (i, j), U in self.U.items():
            terms[i].append((j, U, self.V[i, j]))
            terms[j].append((i, self.V[i, j], U))

        def row(i):
            out = self.diagonal[i] @ x[self.tile(i)]
            for j, left, right in terms[i]:
                out += left @ (right.T @ x[self.tile(j)])
            y[self.tile(i)] = out

        with tile_pool(workers() if x.ndim == 2 else 1) as pool:
            list(runner(pool)(row, range(self.n_tiles)))
        return y

    def to_dense(self) -> FloatArray:
        """The represented matrix as a dense ``(n, n)`` NumPy array."""
        if self.packed is not None:
            return self.packed.to_dense()
        A = np.empty((self.n, self.n))
        for i, D in enumerate(self.diagonal):
            A[self.tile(i), self.tile(i)] = D
        for (i, j), U in self.U.items():
            T = U @ self.V[i, j].T
            A[self.tile(i), self.tile(j)] = T
            A[self.tile(j), self.tile(i)] = T.T
        return A

    def _diagonal_in_place(self, k):
        """Diagonal tile `k` as a Fortran-ordered array to factor in place: the tile itself
        (a C-ordered tile through its transpose, the same symmetric matrix), or None where
        it must be copied (shared with views, read-only or not contiguous).

        Only for ``cholesky(A, overwrite_a=True)``, which consumes the matrix.
        """
        D = self._diagonal[k]
        if self._diagonal_shared or not D.flags.writeable:
            return None
        if D.flags.f_contiguous:
            return D
        return D.T if D.flags.c_contiguous else None

    def _release_column(self, k):
        """Free tile column `k` (the diagonal tile and the tiles below it).

        Only for ``cholesky(A, overwrite_a=True)``, which marks the matrix consumed when
        it returns or raises (:meth:`_consume`); until then it still reads the tiles.

        Returns
        -------
        int
            Bytes of the low-rank factors released that NumPy had allocated
            (:func:`~tlrcore.concurrency.heap.numpy_allocated_bytes`): those of factors read from a
            worker's memory file go back to the system without a heap trim.
        """
        self._diagonal[k] = _RELEASED
        released = 0
        for i in range(k + 1, self.n_tiles):
            released += numpy_allocated_bytes(self._U[i, k]) + numpy_allocated_bytes(self._V[i, k])
            self._U[i, k] = self._V[i, k] = _RELEASED
        return released

    def _consume(self):
        """Mark the matrix consumed: every later use raises :class:`ConsumedMatrixError`."""
        self._consumed = True

    def __repr__(self) -> str:
        if self._consumed:
            return f"TLRMatrix(n={self.n}, tile_size={self.tile_size}, n_tiles={self.n_tiles}, consumed)"
        return (
            f"TLRMatrix(n={self.n}, tile_size={self.tile_size}, n_tiles={self.n_tiles}, "
            f"mean_rank={self.mean_rank:.1f}, nbytes={self.nbytes})"
        )


def _read_only(array):
    """A view of `array` that cannot be written through."""
    view = array.view()
    view.flags.writeable = False
    return view
