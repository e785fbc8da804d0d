"""The distributed TLR Cholesky factor: :class:`DistributedCholesky`.

Its tiles stay on the workers; the log-determinant and triangular solves are task chains
over the tile rows, and only scalars and right-hand sides travel (:meth:`~DistributedCholesky.solve`
keeps ``L^{-1} b`` on the cluster). ``L z`` is one task per tile row."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from distributed import wait
from numpy.typing import ArrayLike

from tlrcore._checks import check_operand
from tlrcore._typing import FloatArray, IntArray
from tlrcore.backends import NUMPY
from tlrcore.cholesky.factor import TLRCholesky
from tlrcore.cholesky.safeguards import DiagonalFactorizer
from tlrcore.concurrency.threads import column_progress
from tlrcore.dense.triangles import Triangles
from tlrcore.distributed._graph import check_open, prefix, submit
from tlrcore.distributed._tasks import (
    backward_step,
    concatenate,
    forward_step,
    multiply_row,
    row_summary,
    start_backward,
)

__all__ = ["DistributedCholesky"]


class DistributedCholesky:
    """TLR Cholesky factor on the workers, a :class:`~tlrcore.CholeskyFactor`; :meth:`gather`
    brings it into the process.

    Attributes
    ----------
    client : distributed.Client
    n, n_tiles, offsets, tolerance, shift, backend
        As for :class:`tlrcore.TLRCholesky` (``perm`` is None).
    diagonal, rows : list of distributed.Future
        ``L(k, k)`` (a one-tile :class:`~tlrcore.dense.triangles.Triangles`), and ``rows[i] =
        ([U(i, 0), ...], [V(i, 0), ...])`` (None for row 0).
    perturbation, perturbation_parts, compensated_tiles, lifted_tiles, modified_tiles
        As :func:`tlrcore.cholesky` reports them, summed in tile order on first use.
    """

    backend = NUMPY
    perm = None

    def __init__(
        self,
        client,
        placement,
        offsets,
        tolerance,
        diagonal,
        rows,
        log_diagonal,
        tallies,
        shift=0.0,
    ):
        self.client, self.placement = client, placement
        self.offsets = np.asarray(offsets)
        self.n, self.n_tiles = int(self.offsets[-1]), len(diagonal)
        self.tolerance = tolerance
        self.diagonal, self.rows = diagonal, rows
        self._log_diagonal = log_diagonal
        self._tallies, self._tally = tallies, None
        self.shift = shift
        self._summary = None

    def _check_usable(self):
        """Raise a ValueError when the client (and the tiles with it) is gone
        (:func:`~tlrcore.distributed._graph.check_open`)."""
        check_open(self.client, "factor")

    def wait(self) -> DistributedCholesky:
        """Block until every tile is computed, raising the first failure (such as
        :class:`~tlrcore.NotPositiveDefiniteError` naming the tile); inside :func:`tlrcore.progress`
        a counter ticks per diagonal tile."""
        self._check_usable()
        with column_progress(self.n_tiles, "TLR Cholesky on the cluster") as counter:
            for future in self.diagonal:
                wait(future)
                counter.update()
        futures = self.diagonal + [row for row in self.rows if row is not None] + self._log_diagonal
        wait(futures)
        for future in futures:
            if future.status == "error":
                future.result()
        return self

    def _summed_tally(self):
        """The tiles' tallies, gathered once and summed in tile order."""
        if self._tally is None:
            self._check_usable()
            tally = DiagonalFactorizer(self.tolerance)
            for total, parts, compensated, lifted, modified in self.client.gather(self._tallies):
                tally.total += total
                for part, value in parts.items():
                    tally.parts[part] += value
                tally.compensated_tiles += compensated
                tally.lifted_tiles += lifted
                tally.modified_tiles += modified
            self._tally = tally
        return self._tally

    @property
    def perturbation(self) -> float:
        """``||E||_F`` of the changes to the diagonal tiles (0.0 when none)."""
        return self._summed_tally().perturbation

    @property
    def perturbation_parts(self) -> dict:
        """``||.||_F`` of the changes by source."""
        return self._summed_tally().perturbation_parts

    @property
    def compensated_tiles(self) -> tuple:
        """The tiles compensated (tails or Schur compensation)."""
        return tuple(self._summed_tally().compensated_tiles)

    @property
    def lifted_tiles(self) -> tuple:
        """The tiles lifted for the compression errors of their tile row."""
        return tuple(self._summed_tally().lifted_tiles)

    @property
    def modified_tiles(self) -> tuple:
        """The tiles given a modified Cholesky."""
        return tuple(self._summed_tally().modified_tiles)

    def logdet(self) -> float:
        """``log det(L L^T)``, summed in tile order as :meth:`tlrcore.TLRCholesky.logdet`."""
        self._check_usable()
        return 2.0 * float(sum(self.client.gather(self._log_diagonal)))

    def _rhs_tiles(self, b):
        return [b[int(self.offsets[k]) : int(self.offsets[k + 1])] for k in range(self.n_tiles)]

    def _forward(self, b, tasks):
        """Add the forward substitution of `b` to `tasks`; the key of its result."""
        name = prefix("forward")
        pieces = self._rhs_tiles(b)
        previous = np.zeros((0,) + b.shape[1:])
        for k in range(self.n_tiles):
            tasks[name, k] = (forward_step, previous, pieces[k], self.rows[k], self.diagonal[k])
            previous = (name, k)
        return previous

    def _backward(self, b, tasks):
        """Add the backward substitution of `b` (an array or a key) to `tasks`; the key of its
        result."""
        name = prefix("backward")
        last = self.n_tiles - 1
        tasks[name, last + 1] = (start_backward, b)
        for k in reversed(range(self.n_tiles)):
            tasks[name, k] = (backward_step, (name, k + 1), self.rows[k], self.diagonal[k])
        tasks[name, -1] = (concatenate, (name, 0))
        return name, -1

    def _run(self, tasks, key):
        self._check_usable()
        return self.client.gather(submit(self.client, tasks, self.placement, [key]))[0]

    def solve_lower(self, b: ArrayLike) -> FloatArray:
        """``L^{-1} b`` by forward substitution, one task per tile row."""
        tasks: dict[tuple, tuple] = {}
        return self._run(tasks, self._forward(check_operand(b, self.n, "b"), tasks))

    def solve_upper(self, b: ArrayLike) -> FloatArray:
        """``L^{-T} b`` by backward substitution, one task per tile row (summed in another order
        than :meth:`tlrcore.TLRCholesky.solve_upper`: equal to rounding)."""
        tasks: dict[tuple, tuple] = {}
        return self._run(tasks, self._backward(check_operand(b, self.n, "b"), tasks))

    def solve(self, b: ArrayLike) -> FloatArray:
        """``(L L^T)^{-1} b``: both chains in one graph."""
        tasks: dict[tuple, tuple] = {}
        return self._run(
            tasks, self._backward(self._forward(check_operand(b, self.n, "b"), tasks), tasks)
        )

    def multiply_lower(self, z: ArrayLike) -> FloatArray:
        """``L z``, one task per tile row, summed in the order of
        :meth:`tlrcore.TLRCholesky.multiply_lower` (equal to rounding); `z` is a task of the
        graph."""
        z = check_operand(z, self.n, "z")
        self._check_usable()
        name = prefix("multiply")
        offsets = [int(value) for value in self.offsets]
        tasks: dict[tuple, tuple] = {(name, -1): (np.asarray, z)}
        for k in range(self.n_tiles):
            tasks[name, k] = (multiply_row, (name, -1), offsets, k, self.rows[k], self.diagonal[k])
        keys = [(name, k) for k in range(self.n_tiles)]
        return np.concatenate(self.client.gather(submit(self.client, tasks, self.placement, keys)))

    def _row_summaries(self):
        """``(bytes, ranks)`` of every tile row, gathered once."""
        if self._summary is None:
            self._check_usable()
            name = prefix("summary")
            tasks = {
                (name, k): (row_summary, self.rows[k], self.diagonal[k])
                for k in range(self.n_tiles)
            }
            keys = [(name, k) for k in range(self.n_tiles)]
            self._summary = self.client.gather(submit(self.client, tasks, self.placement, keys))
        return self._summary

    @property
    def nbytes(self) -> int:
        """Bytes of the factor on the workers."""
        return sum(size for size, _ in self._row_summaries())

    @property
    def ranks(self) -> IntArray:
        """``(n_tiles, n_tiles)`` ranks of ``L`` (lower triangle; diagonal = tile sizes)."""
        ranks = np.diag(np.diff(self.offsets)).astype(np.int64)
        for k, (_, row) in enumerate(self._row_summaries()):
            ranks[k, : len(row)] = row
        return ranks

    def gather(self) -> TLRCholesky:
        """The factor as an in-process :class:`tlrcore.TLRCholesky` (every tile travels)."""
        self._check_usable()
        diagonal = Triangles(tile.lower(0) for tile in self.client.gather(self.diagonal))
        rows = self.client.gather([row for row in self.rows if row is not None])
        U, V = {}, {}
        for i, (Ui, Vi) in enumerate(rows, start=1):
            for j, (Uij, Vij) in enumerate(zip(Ui, Vi, strict=True)):
                U[i, j], V[i, j] = Uij, Vij
        return TLRCholesky(diagonal, U, V, self.offsets, self.tolerance)

    def to_dense(self) -> FloatArray:
        """``L`` as a dense array, through :meth:`gather` (for tests and small matrices)."""
        return self.gather().to_dense()

    def __repr__(self) -> str:
        return (
            f"DistributedCholesky(n={self.n}, n_tiles={self.n_tiles}, "
            f"workers={len(self.placement.addresses)})"
        )


if TYPE_CHECKING:  # it meets the factor contract (checked by mypy)
    from tlrcore.factor import CholeskyFactor

    _DISTRIBUTED: type[CholeskyFactor] = DistributedCholesky
