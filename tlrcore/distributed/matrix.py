"""A TLR matrix whose tiles live on the workers of a ``dask.distributed`` cluster, built as
:meth:`tlrcore.TLRMatrix.from_generator` builds them (same norm estimate, tolerance,
checks and seeds) on the worker of each tile's row: by ACA, the tiles of a tile column in
one worker's rows together, their generator reads shared (:data:`COLUMN_TILES` per task),
as in process; only scalars of the diagonal tiles come back to the client."""

from __future__ import annotations

import math
from operator import getitem

import distributed
import numpy as np
from distributed import Client

from tlrcore._checks import check_accuracy, check_int, check_random_state
from tlrcore._typing import BlockGenerator, Seed
from tlrcore.backends import NUMPY
from tlrcore.compress import COMPRESSORS, generator_method
from tlrcore.compress.generated import CheckedBlock
from tlrcore.distributed._graph import CriticalFirst, RowPlacement, check_open, prefix, submit
from tlrcore.distributed._tasks import (
    column_tiles,
    diagonal_summary,
    diagonal_tile,
    off_diagonal_tile,
    tile_squares,
)
from tlrcore.errors import ConsumedMatrixError
from tlrcore.matrix import TLRMatrix
from tlrcore.packed.build import (
    check_diagonal,
    check_symmetry_sample,
    host_diagonal_summary,
    norm_lower_estimate,
    promises_symmetry,
)

__all__ = ["COLUMN_TILES", "DistributedTLRMatrix"]

#: Tiles of a tile column compressed together by one task (ACA; their generator reads
#: shared), as the in-process build does.
COLUMN_TILES = 8


class DistributedTLRMatrix:
    """A symmetric TLR matrix with its tiles on the workers of a Dask cluster.

    Attributes
    ----------
    client : distributed.Client
    n, tile_size, n_tiles, offsets, accuracy, tolerance
        As for :class:`tlrcore.TLRMatrix`.
    placement : RowPlacement
        The worker of each tile row (``i mod P``).
    diagonal, tiles : list and dict of distributed.Future
        The dense diagonal tiles (rebuilt on first use after ``wait=False``), and the
        :class:`~tlrcore.compress._recompress.LowRank` ``(U, V)`` of each lower tile.
    """

    def __init__(
        self,
        client,
        offsets,
        accuracy,
        tolerance,
        placement,
        generator,
        diagonal,
        build,
    ):
        self.client = client
        self.offsets = np.asarray(offsets)
        self.n = int(self.offsets[-1])
        self.n_tiles = len(self.offsets) - 1
        self.tile_size = int(self.offsets[1] - self.offsets[0])
        self.accuracy, self.tolerance = accuracy, tolerance
        self.placement = placement
        self.generator = generator
        self._diagonal = diagonal
        # the compression tasks, the key name of the tiles and of the tasks of several tiles,
        # until they are submitted (:meth:`take_build`, or the first reader of the tiles)
        self._build = build
        self._tiles = None
        # (i, j) -> (future of the tiles compressed together, position of (i, j) among them)
        self._sources = {}
        self._consumed = False

    @classmethod
    def from_generator(
        cls,
        client: Client,
        block: BlockGenerator,
        n: int,
        tile_size: int,
        accuracy: float = 1e-8,
        method: str | None = None,
        max_rank: int | None = None,
        random_state: Seed = 0,
        wait: bool = True,
    ) -> DistributedTLRMatrix:
        """Compress a symmetric matrix given by a block generator on the `client`'s current
        workers, into the tiles of ``tlrcore.TLRMatrix.from_generator`` with the same arguments,
        bit for bit.

        Parameters
        ----------
        client : distributed.Client
        block : callable
            ``block(rows, cols)`` returns ``A[rows][:, cols]``; picklable (a top-level class, not
            a closure over a large array), sent to the workers once.
        n, tile_size, accuracy, method, max_rank, random_state
            As in :meth:`tlrcore.TLRMatrix.from_generator` (`method` one of the NumPy ones).
        wait : bool, default True
            Return when every tile is built, raising the generator's errors here; with False once
            the tolerance is known, the tiles built by the first reader of :attr:`tiles`, or by
            the factorization that consumes the matrix (``overwrite_a=True``), a few tile
            columns ahead of it, and diagonal tiles generated again inside the tasks that
            factor them: the workers never hold all of ``A``. Errors come from the first
            reader of a failed tile.

        Raises
        ------
        TypeError
            If `client` is not a ``distributed.Client``.
        ValueError, GeneratorError
            As :meth:`tlrcore.TLRMatrix.from_generator` (a worker's error comes back as itself);
            ValueError also for a closed `client`.
        """
        if not isinstance(client, Client):
            raise TypeError(f"client must be a distributed.Client; got {type(client).__name__}.")
        check_open(client)
        n = check_int(n, "n", 1)
        tile_size = check_int(tile_size, "tile_size", 1, n)
        accuracy = check_accuracy(accuracy)
        max_rank = check_int(max_rank, "max_rank", 0, allow_none=True)
        method = generator_method(block) if method is None else method
        if method not in COMPRESSORS:
            raise ValueError(
                f"method={method!r} is not one of {sorted(COMPRESSORS)} (on a cluster)."
            )
        checked = CheckedBlock(block)
        rng = np.random.default_rng(check_random_state(random_state))
        placement = RowPlacement.of(client)
        offsets = np.append(np.arange(0, n, tile_size), n)
        n_tiles = len(offsets) - 1
        pairs = [(i, j) for i in range(n_tiles) for j in range(i)]
        seeds = rng.integers(0, 2**63 - 1, size=len(pairs))
        span = [[int(offsets[i]), int(offsets[i + 1])] for i in range(n_tiles)]

        generator = client.submit(CheckedBlock, block, key=prefix("generator"))
        name, stats = prefix("diagonal"), prefix("diagonal-stats")
        symmetric = promises_symmetry(block)
        if wait:
            tasks = {(name, k): (diagonal_tile, generator, *span[k], k) for k in range(n_tiles)}
            tasks.update(
                {(stats, k): (host_diagonal_summary, (name, k), symmetric) for k in range(n_tiles)}
            )
            wanted = [(name, k) for k in range(n_tiles)]
        else:  # measured and dropped: the factorization generates them again
            tasks = {
                (stats, k): (diagonal_summary, generator, *span[k], k, symmetric)
                for k in range(n_tiles)
            }
            wanted = []
        futures = submit(client, tasks, placement, wanted + [(stats, k) for k in range(n_tiles)])
        diagonal = futures[: len(wanted)] or None
        squares, stats = zip(*client.gather(futures[len(wanted) :]), strict=True)
        scale = check_diagonal(stats, n)
        norm = norm_lower_estimate(sum(squares), checked, offsets, rng, np)
        tolerance = accuracy * norm / n_tiles
        check_symmetry_sample(checked, offsets, rng, scale)

        name, column = prefix("tile"), prefix("column-tiles")
        if method == "aca":
            tasks = _column_tasks(name, column, generator, span, placement, tolerance, max_rank)
        else:
            tasks = {
                (name, i, j): (
                    off_diagonal_tile,
                    generator,
                    span[i],
                    span[j],
                    i,
                    j,
                    tolerance,
                    method,
                    max_rank,
                    int(seed),
                )
                for (i, j), seed in zip(pairs, seeds, strict=True)
            }
        build = (tasks, name, column)
        matrix = cls(client, offsets, accuracy, tolerance, placement, generator, diagonal, build)
        if wait:
            futures = list(matrix.tiles.values())
            distributed.wait(futures)
            _raise_first_error(futures)
        return matrix

    def _check_usable(self):
        if self._consumed:
            raise ConsumedMatrixError(
                "A was consumed by tlrcore.distributed.cholesky(A, overwrite_a=True) (its tiles "
                "were released); build the matrix again, or factor it without overwrite_a=True to "
                "keep it."
            )
        check_open(self.client, "matrix")

    @property
    def diagonal(self) -> list:
        """Futures of the dense diagonal tiles."""
        self._check_usable()
        if self._diagonal is None:
            name = prefix("diagonal")
            tasks = {(name, k): self.diagonal_task(k) for k in range(self.n_tiles)}
            self._diagonal = submit(self.client, tasks, self.placement, list(tasks))
        return self._diagonal

    def diagonal_task(self, k: int):
        """Diagonal tile `k` as a task argument: its future, or the task that generates it."""
        self._check_usable()
        if self._diagonal is not None:
            return self._diagonal[k]
        return (diagonal_tile, self.generator, int(self.offsets[k]), int(self.offsets[k + 1]), k)

    @property
    def tiles(self) -> dict:
        """Futures of ``(U, V)`` of the lower off-diagonal tiles."""
        self._check_usable()
        if self._build is not None:
            self._submit_build()
        return self._tiles

    def _submit_build(self):
        """Submit the compression tasks: the tiles' futures, and where tiles are compressed
        together, the futures of those tasks."""
        tasks, name, column = self._build
        self._build = None
        pairs = [(i, j) for i in range(self.n_tiles) for j in range(i)]
        batches = [key for key in tasks if key[0] == column]
        futures = submit(
            self.client,
            tasks,
            self.placement,
            [(name, i, j) for i, j in pairs] + batches,
            CriticalFirst((name, column), self.n_tiles),
        )
        batch = dict(zip(batches, futures[len(pairs) :], strict=True))
        self._tiles = dict(zip(pairs, futures[: len(pairs)], strict=True))
        self._sources = {
            (i, j): (batch[task[1]], task[2])
            for (kind, i, j), task in tasks.items()
            if kind == name and task[0] is getitem
        }

    def take_build(self):
        """The compression tasks not yet submitted, for a graph that submits them itself:
        ``(tasks, reads, names)``, ``reads[i, j]`` tile ``(i, j)`` as an argument of
        that graph's tasks and ``names`` the key names of the tasks; None once they were
        submitted (``wait=True``, or a reader of :attr:`tiles`)."""
        self._check_usable()
        if self._build is None:
            return None
        tasks, name, column = self._build
        self._build = None
        selections = {key: task for key, task in tasks.items() if task[0] is getitem}
        reads = {(i, j): selections.get((kind, i, j), (kind, i, j)) for kind, i, j in tasks}
        compression = {key: task for key, task in tasks.items() if key not in selections}
        return compression, reads, (name, column)

    def tile_task(self, i: int, j: int):
        """Tile ``(i, j)`` as a task argument: taken from the result of the task that
        compressed it with others where there is one (no task of its own to schedule), else
        its future."""
        tiles = self.tiles
        if (i, j) in self._sources:
            future, position = self._sources[i, j]
            return (getitem, future, position)
        return tiles[i, j]

    def release(self) -> None:
        """Drop the client's hold on the tiles, each then freed once no pending task reads it; the
        matrix is consumed."""
        self._diagonal = self._tiles = self._build = None
        self._sources = {}
        self._consumed = True

    def frobenius_norm(self) -> float:
        """``||A_tlr||_F`` from the factors, summed as :meth:`tlrcore.TLRMatrix.frobenius_norm`;
        only scalars leave the workers."""
        self._check_usable()
        name = prefix("squares")
        order = list(self.tiles)
        tasks = {(name, i, j): (tile_squares, self.tiles[i, j]) for i, j in order}
        tasks.update({(name, k, k): (tile_squares, D) for k, D in enumerate(self.diagonal)})
        values = self.client.gather(submit(self.client, tasks, self.placement, list(tasks)))
        total = sum(values[len(order) :])
        for value in values[: len(order)]:
            total += 2.0 * value
        return math.sqrt(total)

    def gather(self) -> TLRMatrix:
        """The matrix as an in-process :class:`tlrcore.TLRMatrix` with its ``tile_errors`` (every
        tile travels: for tests and small matrices)."""
        self._check_usable()
        diagonal = self.client.gather(self.diagonal)
        factors = dict(zip(self.tiles, self.client.gather(list(self.tiles.values())), strict=True))
        U = {pair: f[0] for pair, f in factors.items()}
        V = {pair: f[1] for pair, f in factors.items()}
        errors = np.zeros((self.n_tiles, self.n_tiles))
        for (i, j), f in factors.items():
            errors[i, j] = errors[j, i] = f.dropped
        return TLRMatrix(
            diagonal, U, V, self.offsets, self.accuracy, self.tolerance, NUMPY, tile_errors=errors
        )

    def __repr__(self) -> str:
        state = ", consumed" if self._consumed else ""
        return (
            f"DistributedTLRMatrix(n={self.n}, tile_size={self.tile_size}, n_tiles={self.n_tiles}, "
            f"workers={len(self.placement.addresses)}{state})"
        )


def _column_tasks(name, column, generator, span, placement, tolerance, max_rank):
    """The tasks of the off-diagonal tiles ``(name, i, j)`` of a matrix compressed by ACA: each
    worker compresses the tiles of a tile column in its rows together
    (:func:`~tlrcore.distributed._tasks.column_tiles`), :data:`COLUMN_TILES` at a time,
    keyed ``(column, first row, j)``; tile ``(j + 1, j)``, which the next diagonal tile waits
    for, alone."""
    n_tiles = len(span)
    workers = len(placement.addresses)
    tasks = {}
    for j in range(n_tiles - 1):
        chunks = [[j + 1]]
        for w in range(workers):
            rows = [i for i in range(j + 2, n_tiles) if i % workers == (j + 1 + w) % workers]
            chunks += [rows[c : c + COLUMN_TILES] for c in range(0, len(rows), COLUMN_TILES)]
        for rows in filter(None, chunks):
            key = (column, rows[0], j)
            tasks[key] = (column_tiles, generator, span, j, rows, tolerance, max_rank)
            tasks.update({(name, i, j): (getitem, key, t) for t, i in enumerate(rows)})
    return tasks


def _raise_first_error(futures):
    """Raise the exception of the first failed future (as raised on the worker)."""
    for future in futures:
        if future.status == "error":
            future.result()
