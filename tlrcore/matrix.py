"""Symmetric tile low-rank (TLR) matrices.

The indices ``0..n-1`` are cut into tiles of ``tile_size`` (the last ragged). Diagonal
tiles are dense (kept as their lower triangles, :class:`~tlrcore.dense.triangles.Triangles`);
each lower off-diagonal tile is ``A(i, j) ~ U(i, j) V(i, j)^T``, with its
own rank, compressed to the absolute tolerance ``tau = eps N / n_t`` for ``accuracy = eps``
and ``N`` an estimate of ``||A||_F``. As ``||A - A_tlr||_F^2 <= n_t (n_t - 1) tau^2 <
(eps N)^2``, ``||A - A_tlr||_F <= eps ||A||_F`` whenever ``N <= ||A||_F``: ``N`` is the
exact norm of the diagonal tiles plus half a sampled estimate of the off-diagonal part,
below ``||A||_F`` unless the sample overestimates that part twofold. (A per-tile relative
threshold would waste rank on tiles that hardly contribute.)"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from tlrcore._checks import check_accuracy, check_int, check_operand, check_random_state
from tlrcore._typing import BackendArray, BlockGenerator, FloatArray, IntArray, Seed
from tlrcore.backends import NUMPY, Backend, get_backend
from tlrcore.compress import COMPRESSORS, generator_method
from tlrcore.compress._recompress import recompress
from tlrcore.compress.deferred import DeferredColumns
from tlrcore.compress.generated import CheckedBlock, compress_column, compress_tile
from tlrcore.compress.in_processes import column_compressor
from tlrcore.compress.single import CompactFactors, compact
from tlrcore.concurrency.heap import numpy_allocated_bytes, pin_mmap_threshold
from tlrcore.concurrency.threads import (
    by_rows,
    column_progress,
    map_by_work,
    runner,
    tile_pool,
    tile_work,
    workers,
)
from tlrcore.dense._checks import check_symmetric
from tlrcore.dense.triangles import GeneratedTiles, Triangles, symmetric_squared_norm
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

#: Diagonal tiles whose triangles take more bytes than this are not kept by
#: :meth:`TLRMatrix.from_generator`: the generator makes them again when they are read
#: (:class:`~tlrcore.dense.triangles.GeneratedTiles`), the same values bit for bit.
STORED_DIAGONAL_BYTES = 3 << 30

#: The tile layout's stores of diagonal tiles.
_TILE_STORES = (Triangles, GeneratedTiles)

#: Placeholder of a tile freed by :meth:`TLRMatrix._release_column`.
_RELEASED = np.full((0, 0), np.nan)


class TLRMatrix:
    """A symmetric matrix in tile low-rank form; build one with :meth:`from_generator` or
    :meth:`from_dense`.

    Attributes
    ----------
    n, tile_size, n_tiles : int
    offsets : ndarray of shape (n_tiles + 1,)
        Tile boundaries.
    diagonal : Triangles, GeneratedTiles or list of ndarray
        Dense diagonal tiles: in the tile layout a :class:`~tlrcore.dense.triangles.Triangles`
        (each tile stored as its lower triangle; ``diagonal[k]`` unpacks a symmetric copy) or,
        above :data:`STORED_DIAGONAL_BYTES` of them, a
        :class:`~tlrcore.dense.triangles.GeneratedTiles` (made again when read); in the
        packed layout views of its storage.
    U, V : mapping of (int, int) to ndarray
        Lower off-diagonal tiles, ``A(i, j) ~ U[i, j] @ V[i, j].T``: in the tile layout a
        :class:`~tlrcore.compress.single.CompactFactors`, which keeps the trailing columns the
        compression rounded to single precision as float32 and hands out float64 arrays.
    accuracy, tolerance : float
        Requested relative accuracy; absolute Frobenius tolerance of each tile.
    backend : Backend
    packed : PackedTiles or None
        The packed layout (:mod:`tlrcore.packed`) of a matrix built with ``method="batched"``,
        of which `diagonal`, `U`, `V` are views; :func:`tlrcore.cholesky` then uses
        ``variant="packed"``.
    tile_errors : ndarray of shape (n_tiles, n_tiles) or None
        Each tile's ``||A(i, j) - U V^T||_2``, the largest singular value its truncation
        dropped (symmetric, zero diagonal), as built by :meth:`from_generator`; the
        safeguard ``"compensate"`` lifts diagonal tiles by them.
    deferred_columns : list of int
        The tile columns not yet compressed (``from_generator(..., deferred=True)``).

    Notes
    -----
    ``tlrcore.cholesky(A, overwrite_a=True)`` consumes `A`, whether it succeeds or fails: its
    tiles, and everything computed from them, then raise :class:`~tlrcore.ConsumedMatrixError`;
    the shape attributes and ``repr`` remain.
    """

    def __init__(
        self,
        diagonal: Sequence[BackendArray],
        U: Mapping[tuple[int, int], BackendArray],
        V: Mapping[tuple[int, int], BackendArray],
        offsets: ArrayLike,
        accuracy: float,
        tolerance: float,
        backend: Backend,
        packed: PackedTiles | None = None,
        tile_errors: FloatArray | None = None,
    ) -> None:
        self._packed = packed
        self._tile_errors = tile_errors
        #: The tile columns still to compress (``from_generator(..., deferred=True)``).
        self._deferred: DeferredColumns | None = None
        self._packed_copy: PackedTiles | None = None
        if packed is None:
            if not isinstance(diagonal, _TILE_STORES):
                diagonal = Triangles(diagonal, symmetric=True)
            U = U if isinstance(U, CompactFactors) else CompactFactors(U)
            V = V if isinstance(V, CompactFactors) else CompactFactors(V)
        # a Triangles or GeneratedTiles and CompactFactors in the tile layout, views of the
        # packed storage in the packed layout
        self._diagonal: Any = diagonal
        self._U: Any = U
        self._V: Any = V
        self._consumed = False
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
        deferred: bool = False,
    ) -> TLRMatrix:
        """Compress a symmetric matrix given by a block generator, with no ``n x n`` array.

        Parameters
        ----------
        block : callable
            ``block(rows, cols)`` returns ``A[rows][:, cols]`` for integer index arrays. Optional
            attributes: ``entries(i, j)``, ``A[i, j]`` elementwise for broadcasting arrays (ACA
            then reads a tile column's columns in one call per round); ``symmetric_blocks = True``
            (skips the asymmetry scan of diagonal tiles); ``cross_approximation = False`` (tiles
            whose few large entries ACA may miss: ARA by default).
        n : int
        tile_size : int
            ``1 <= tile_size <= n``; the last tile holds the remainder.
        accuracy : float, default 1e-8
            ``||A - A_tlr||_F <= accuracy ||A||_F``.
        method : {"aca", "ara", "svd", "batched"}, optional
            One tile at a time on NumPy, or ``"batched"``: batched ARA of a tile column at a time
            into the packed layout, the generator returning arrays of the back end. Default
            ``"aca"`` (or ``"ara"``, above) on NumPy, ``"batched"`` elsewhere.
        max_rank : int, optional
            Cap on every tile's rank (the accuracy may then not be met).
        backend : str or Backend, default "numpy"
            ``"numpy"`` or ``"cupy"`` (with ``method="batched"``).
        random_state : int or numpy Generator, default 0
            Seeds the norm sample and randomized compression.
        deferred : bool, default False
            Measure only the diagonal tiles and the norm now, and compress each off-diagonal
            tile column when it is first read (:mod:`tlrcore.compress.deferred`), to the same
            factors bit for bit. ``cholesky(A, overwrite_a=True)`` then compresses the columns a
            few ahead of the one it factors and releases each once factored, so the low-rank
            tiles of `A` are never held whole; anything else that reads the tiles (``A.U``,
            ``A @ x``, :attr:`tile_errors`, ...) compresses all the columns still pending. Not
            with ``method="batched"``.

        Raises
        ------
        ValueError
            For a bad `n`, `tile_size`, `accuracy`, `method` or `max_rank`, or `deferred` with
            ``method="batched"``; as
            :class:`GeneratorError`, naming the tile, when `block` returns a wrong shape or
            non-finite values, when a diagonal tile (unless ``symmetric_blocks``) or a random
            64 x 64 sample is not symmetric to ``1e-10 max|A|``, or when ``max|A|`` is outside
            about ``[1e-134, 1e134]`` (:func:`tlrcore.packed.build.check_scale`).
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
        if deferred and method == "batched":
            raise ValueError(
                "deferred=True compresses tile columns in the tile layout when read; "
                "method='batched' builds the packed layout whole. Drop one of them."
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
        with contextlib.ExitStack() as held:
            # Worker processes, if any, are forked before the first tile (column_compressor)
            compress = (
                held.enter_context(
                    column_compressor(
                        block,
                        offsets,
                        max_rank,
                        lambda j, tolerance: compress_column(
                            checked, tiles, j, tolerance, max_rank
                        ),
                    )
                )
                if method == "aca"
                else None
            )
            with tile_pool(workers()) as pool:
                run = runner(pool)
                diagonal, tolerance = _measured_diagonal(
                    checked, block, tiles, offsets, accuracy, rng, run
                )

                def compress_pair(pair_seed):
                    (i, j), seed = pair_seed
                    return compress_tile(
                        checked, tiles[i], tiles[j], (i, j), tolerance, method, max_rank, seed
                    )

                if deferred:

                    def compress_deferred(j):
                        with tile_work():  # BLAS as on the pool, in any thread
                            if compress is not None:
                                return compress(j, tolerance)
                            # (i, j) is pairs[i (i - 1) / 2 + j]
                            return [
                                compress_pair(((i, j), seeds[i * (i - 1) // 2 + j]))
                                for i in range(j + 1, n_tiles)
                            ]

                    columns = DeferredColumns(compress_deferred, n_tiles, held.pop_all())
                    matrix = cls(
                        diagonal,
                        {},
                        {},
                        offsets,
                        accuracy,
                        tolerance,
                        backend,
                        tile_errors=np.zeros((n_tiles, n_tiles)),
                    )
                    matrix._deferred = columns
                    weakref.finalize(matrix, columns.close)
                    logger.debug(
                        "TLR matrix n=%d tiles=%d tolerance=%.3g, columns compressed when read",
                        n,
                        n_tiles,
                        tolerance,
                    )
                    return matrix
                if compress is not None:
                    with column_progress(n_tiles, "TLR compression") as counter:

                        def compress_and_count(j):
                            column = compress(j, tolerance)
                            counter.update()
                            return column

                        columns_made = map_by_work(
                            run,
                            compress_and_count,
                            range(n_tiles),
                            [n_tiles - j for j in range(n_tiles)],
                        )
                    factors = [columns_made[j][i - j - 1] for i, j in pairs]
                else:
                    with column_progress(n_tiles, "TLR compression", unit="row") as counter:
                        factors = list(
                            by_rows(
                                run(compress_pair, zip(pairs, seeds, strict=True)),
                                range(n_tiles),
                                counter,
                            )
                        )
        U, V = CompactFactors(), CompactFactors()
        errors = np.zeros((n_tiles, n_tiles))
        for (i, j), f in zip(pairs, factors, strict=True):
            U_head, U_tail, V_head, V_tail = f = compact(f)
            U.store_parts((i, j), U_head, U_tail)
            V.store_parts((i, j), V_head, V_tail)
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
        """Compress the dense symmetric `M`; other arguments as :meth:`from_generator` (default
        method ``"svd"``).

        Raises
        ------
        TypeError
            If `M` is not real and numeric.
        ValueError
            If `M` is not square, finite and symmetric (``max|M - M.T| <= 1e-10 max|M|``), has
            entries too large or small for the norms, or for bad settings.
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
        """A second matrix on the same tiles as read-only views, at no copy.

        It stays usable after ``cholesky(self, overwrite_a=True)``, which writes into no tile
        (low-rank factors are replaced, diagonal tiles unpacked into new arrays); the tiles stay
        in memory while it lives.

        Raises
        ------
        ValueError
            For a matrix in the packed layout (whose factorization may overwrite its tiles).
        ConsumedMatrixError
            If the matrix was consumed by ``cholesky(A, overwrite_a=True)``.
        """
        self._check_usable()
        self._complete()
        if self.packed is not None:
            raise ValueError(
                "shared() works on matrices in the tile layout; this one is packed (built with "
                "method='batched'), whose factorization may overwrite its tiles: copy it instead."
            )
        view = type(self)(
            self._diagonal.view(),
            self._U.view(),
            self._V.view(),
            self.offsets,
            self.accuracy,
            self.tolerance,
            self.backend,
            tile_errors=self.tile_errors,
        )
        view.truncation_error = self.truncation_error
        return view

    def truncated(self, accuracy: float) -> TLRMatrix:
        """A copy at the coarser `accuracy` in ``[self.accuracy, 1)``, from the factors.

        Each ``U V^T`` is truncated (:func:`tlrcore.compress._recompress.recompress`) with the
        budget ``tau' - tau``, ``tau' = tau accuracy / self.accuracy``: the copy meets the accuracy
        bound at `accuracy` whenever this matrix meets it at its own. :attr:`tile_errors` add
        likewise; :attr:`truncation_error` is ``||copy - self||_F``. Diagonal tiles are shared
        (copied if packed); a factorization unpacks them into new arrays.
        The copy is on NumPy, in the tile layout.

        Raises
        ------
        ValueError
            If `accuracy` is not in ``[self.accuracy, 1)``, or the matrix is not on NumPy.
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
            for (i, j), f in zip(pairs, factors, strict=True):
                errors[i, j] = errors[j, i] = errors[i, j] + f.dropped
        if self.packed is not None:
            diagonal = [np.array(D) for D in self.diagonal]
        else:
            diagonal = self._diagonal.view()
        copy = type(self)(
            diagonal,
            {pair: f[0] for pair, f in zip(pairs, factors, strict=True)},
            {pair: f[1] for pair, f in zip(pairs, factors, strict=True)},
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
                "A was consumed by tlr.cholesky(A, overwrite_a=True) (its tiles were released); "
                "build the matrix again, or factor it without overwrite_a=True to keep it."
            )

    @property
    def tile_errors(self) -> FloatArray | None:
        """Each tile's ``||A(i, j) - U V^T||_2`` (see the class docstring)."""
        if not self._consumed:
            self._complete()
        return self._tile_errors

    @property
    def deferred_columns(self) -> list[int]:
        """The tile columns not yet compressed, in order (empty unless built with
        ``deferred=True``)."""
        return [] if self._deferred is None else self._deferred.remaining

    def _compressed_column(self, j):
        """Compress tile column `j` now if pending (from any thread; a second caller waits)."""
        deferred = self._deferred
        if deferred is not None:
            deferred.compress(j, self._store_column)

    def _store_column(self, j, factors):
        """Store the factors of the tiles ``(i, j)``, ``i > j``, of a deferred column `j`."""
        for i, f in enumerate(factors, start=j + 1):
            U_head, U_tail, V_head, V_tail = f = compact(f)
            self._U.store_parts((i, j), U_head, U_tail)
            self._V.store_parts((i, j), V_head, V_tail)
            self._tile_errors[i, j] = self._tile_errors[j, i] = f.dropped

    def _complete(self):
        """Compress every pending tile column; the tiles then in the order of an eager
        build (row by row), which sums over them follow."""
        deferred = self._deferred
        if deferred is None:
            return
        with tile_pool(workers()) as pool:
            list(runner(pool)(self._compressed_column, deferred.remaining))
        order = [(i, j) for i in range(self.n_tiles) for j in range(i)]
        self._U.reorder(order)
        self._V.reorder(order)
        self._deferred = None

    @property
    def diagonal(self) -> Sequence[BackendArray]:
        """The dense diagonal tiles: ``diagonal[k]`` is tile ``k`` (a new array in the tile
        layout, a view in the packed layout)."""
        self._check_usable()
        return self._diagonal

    @property
    def U(self) -> Any:
        """``{(i, j): U}`` of the lower off-diagonal tiles ``A(i, j) ~ U V^T``."""
        self._check_usable()
        self._complete()
        return self._U

    @property
    def V(self) -> Any:
        """``{(i, j): V}`` of the lower off-diagonal tiles."""
        self._check_usable()
        self._complete()
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
        self._check_usable()
        ranks = np.diag(np.diff(self.offsets)).astype(np.int64)
        for (i, j), rank in self._off_diagonal_ranks().items():
            ranks[i, j] = ranks[j, i] = rank
        return ranks

    def tile_rank(self, i: int, j: int) -> int:
        """Rank of the low-rank tile ``(i, j)``, ``i != j`` (either triangle), without
        assembling its factors."""
        key = (max(i, j), min(i, j))
        self._check_usable()
        self._compressed_column(key[1])
        U = self._U
        return U.rank(key) if isinstance(U, CompactFactors) else int(U[key].shape[1])

    def _off_diagonal_ranks(self):
        """``{(i, j): rank}`` of the lower low-rank tiles."""
        return {(i, j): self.tile_rank(i, j) for i, j in self.U}

    def pack(self) -> PackedTiles:
        """The matrix in the packed layout (:class:`~tlrcore.packed.tiles.PackedTiles`): its
        storage if built so, else a copy made once (the matrix keeps its layout and default
        factorization)."""
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
        ranks = list(self._off_diagonal_ranks().values())
        return float(np.mean(ranks)) if ranks else 0.0

    @property
    def nbytes(self) -> int:
        """Bytes of the dense diagonal tiles and low-rank factors (padding included if packed);
        of the columns compressed so far where some are :attr:`deferred_columns`."""
        if self.packed is not None:
            return self.packed.nbytes
        return self._diagonal.nbytes + self._U.nbytes + self._V.nbytes

    def estimated_nbytes(self) -> int:
        """:attr:`nbytes` once every column is compressed, without compressing them: exact
        unless some are :attr:`deferred_columns`; then the low-rank tiles are counted at the
        mean bytes of those compressed, the first tile column compressed now if none is.

        Raises
        ------
        ConsumedMatrixError
            If the matrix was consumed by ``cholesky(A, overwrite_a=True)``.
        """
        self._check_usable()
        if self._deferred is None:
            return self.nbytes
        if not len(self._U):
            self._compressed_column(0)
        compressed = len(self._U)
        total = self.n_tiles * (self.n_tiles - 1) // 2
        low_rank = self._U.nbytes + self._V.nbytes
        return self._diagonal.nbytes + (low_rank * total // compressed if compressed else 0)

    def frobenius_norm(self) -> float:
        """``||A_tlr||_F``, exactly, from the factors (no densification)."""
        if self.packed is not None:
            return self.packed.frobenius_norm()
        total = sum(self._diagonal.squared_norm(k) for k in range(self.n_tiles))
        for U, V in zip(self.U.values(), self.V.values(), strict=True):
            total += 2.0 * float(np.sum((U.T @ U) * (V.T @ V)))
        return math.sqrt(total)

    def error_bound(self) -> float:
        """Relative error bound ``sqrt(n_t (n_t - 1)) tau / ||A_tlr||_F`` of the tile tolerance
        (when no tile was capped by ``max_rank``)."""
        norm = self.frobenius_norm()
        n_t = self.n_tiles
        return math.sqrt(n_t * (n_t - 1)) * self.tolerance / norm if norm > 0 else 0.0

    # ------------------------------------------------------------------ products
    def __matmul__(self, x: ArrayLike) -> BackendArray:
        """``A_tlr @ x`` for a vector ``(n,)`` or a matrix ``(n, k)`` (an array of the matrix's back
        end in the packed layout).

        Each row tile of the result, ``D_i x_i + sum_{j<i} U_ij V_ij^T x_j + sum_{j>i} V_ji U_ji^T
        x_j``, is one task of the tile pool, so each diagonal tile is read once. The result does
        not depend on the number of threads."""
        if self.packed is not None:
            return self.packed.symmetric_matmul(check_operand(x, self.n, "x", self.backend.xp))
        x = check_operand(x, self.n, "x")
        y = np.empty_like(x)
        U, V = self.U, self.V

        def row(i):
            out = self._diagonal.symmetric_product(i, x[self.tile(i)])
            for j in range(i):
                out += U.product((i, j), V, x[self.tile(j)])
            for j in range(i + 1, self.n_tiles):
                out += V.product((j, i), U, x[self.tile(j)])
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

    def _diagonal_lower(self, k, out=None):
        """Diagonal tile `k` in the lower triangle of a Fortran-ordered array, `out` (of its
        shape) or a new one: what a factorization overwrites."""
        if isinstance(self._diagonal, _TILE_STORES):
            return self._diagonal.lower(k, out)
        return np.array(self.backend.to_host(self._diagonal[k]), order="F")

    def _take_diagonal(self, k):
        """Release diagonal tile `k` and hand over its storage for the factor's triangle
        (:meth:`~tlrcore.dense.triangles.Triangles.take`), or None."""
        if isinstance(self._diagonal, _TILE_STORES):
            return self._diagonal.take(k)
        return None

    def _release_column(self, k):
        """Free tile column `k`, for ``cholesky(A, overwrite_a=True)`` (which marks the matrix
        consumed when it returns or raises).

        Returns the bytes of the low-rank factors released that NumPy had allocated
        (:func:`~tlrcore.concurrency.heap.numpy_allocated_bytes`)."""
        if isinstance(self._diagonal, _TILE_STORES):
            self._diagonal.release(k)
        else:
            self._diagonal[k] = _RELEASED
        released = 0
        if self._deferred is not None and self._deferred.drop(k):
            return released  # never compressed
        for i in range(k + 1, self.n_tiles):
            for factors in (self._U, self._V):
                released += _release(factors, (i, k))
        return released

    def _consume(self):
        """Mark the matrix consumed: every later use raises :class:`ConsumedMatrixError`."""
        self._consumed = True
        if self._deferred is not None:
            self._deferred.close()
            self._deferred = None

    def __getstate__(self):
        """Pickled with every tile column compressed."""
        if not self._consumed:
            self._complete()
        return self.__dict__

    def __repr__(self) -> str:
        if self._consumed:
            return (
                f"TLRMatrix(n={self.n}, tile_size={self.tile_size}, n_tiles={self.n_tiles}, "
                "consumed)"
            )
        if self._deferred is not None:
            return (
                f"TLRMatrix(n={self.n}, tile_size={self.tile_size}, n_tiles={self.n_tiles}, "
                f"deferred_columns={len(self.deferred_columns)}, nbytes={self.nbytes})"
            )
        return (
            f"TLRMatrix(n={self.n}, tile_size={self.tile_size}, n_tiles={self.n_tiles}, "
            f"mean_rank={self.mean_rank:.1f}, nbytes={self.nbytes})"
        )


def _measured_diagonal(checked, block, tiles, offsets, accuracy, rng, run):
    """``(diagonal, tolerance)``: the diagonal tiles (a :class:`Triangles`, or a
    :class:`GeneratedTiles` above :data:`STORED_DIAGONAL_BYTES`) made, checked and measured
    on ``run``, and the tile tolerance ``accuracy N / n_t`` of the norm estimate ``N`` (module
    docstring); the symmetry sample checked."""
    n_tiles, n = len(tiles), int(offsets[-1])
    symmetric = promises_symmetry(block)
    sizes = [len(t) for t in tiles]
    keep = 8 * sum(b * (b + 1) // 2 + b for b in sizes) <= STORED_DIAGONAL_BYTES
    diagonal = Triangles.empty(sizes, symmetric=True)
    kept_squares = [0.0] * n_tiles

    def diagonal_tile(i):
        # the figures the checks and the norm need, on the pool; the tile kept as its lower
        # triangle (generated tiles are symmetric to the checks' tolerance), or only its
        # norm, to be made again when read
        D = checked(tiles[i], tiles[i], (i, i))
        summary = host_diagonal_summary(D, symmetric)
        if keep:
            diagonal.store(i, D)
        else:
            kept_squares[i] = symmetric_squared_norm(D)
        return summary

    squares, stats = zip(*run(diagonal_tile, range(n_tiles)), strict=True)
    if not keep:
        diagonal = GeneratedTiles(
            functools.partial(_diagonal_tile, checked, tiles), sizes, kept_squares
        )
    scale = check_diagonal(stats, n)
    norm = norm_lower_estimate(sum(squares), checked, offsets, rng, np)
    check_symmetry_sample(checked, offsets, rng, scale)
    return diagonal, accuracy * norm / n_tiles


def _diagonal_tile(checked, tiles, k):
    """Diagonal tile `k` from the checked generator, as the build read it."""
    return checked(tiles[k], tiles[k], (k, k))


def _release(factors, key):
    """Replace the factor `key` of `factors` by the released placeholder; the bytes NumPy had
    allocated for it."""
    if isinstance(factors, CompactFactors):
        return factors.release(key, _RELEASED)
    freed = numpy_allocated_bytes(factors[key])
    factors[key] = _RELEASED
    return freed
