"""The distributed TLR Cholesky factor: :class:`DistributedCholesky`.

Its tiles stay on the workers; the log-determinant and the triangular solves are task
chains over the tile rows, and only scalars and right-hand sides (``n``-vectors or
``n x m`` matrices) travel: a solve sends tile ``k`` of the right-hand side to the worker
of row ``k`` and passes the solved part along the rows.
"""

from __future__ import annotations

import numpy as np
from distributed import wait
from numpy.typing import ArrayLike

from tlrcore._checks import check_operand
from tlrcore._typing import FloatArray
from tlrcore.cholesky.factor import TLRCholesky
from tlrcore.distributed._graph import prefix, submit
from tlrcore.distributed._tasks import backward_step, concatenate, forward_step, start_backward

__all__ = ["DistributedCholesky"]


class DistributedCholesky:
    """TLR Cholesky factor ``A ~ L L^T`` whose tiles live on the workers.

    Made by :func:`tlrcore.distributed.cholesky`; :meth:`gather` brings it into the
    process as a :class:`tlrcore.TLRCholesky`.

    Attributes
    ----------
    client : distributed.Client
    n, n_tiles, offsets, tolerance
        As for :class:`tlrcore.TLRCholesky`.
    diagonal : list of distributed.Future
        ``L(k, k)``.
    rows : list of distributed.Future
        ``rows[i] = ([U(i, 0), ...], [V(i, 0), ...])``, ``L(i, j) = U(i, j) V(i, j)^T``
        (None for row 0).
    """

    def __init__(self, client, placement, offsets, tolerance, diagonal, rows, log_diagonal):
        self.client, self.placement = client, placement
        self.offsets = np.asarray(offsets)
        self.n, self.n_tiles = int(self.offsets[-1]), len(diagonal)
        self.tolerance = tolerance
        self.diagonal, self.rows = diagonal, rows
        self._log_diagonal = log_diagonal

    def wait(self) -> DistributedCholesky:
        """Block until every tile is computed; raise the first failure (e.g.
        :class:`~tlrcore.NotPositiveDefiniteError` naming the tile)."""
        futures = self.diagonal + [row for row in self.rows if row is not None] + self._log_diagonal
        wait(futures)
        for future in futures:
            if future.status == "error":
                future.result()
        return self

    def logdet(self) -> float:
        """``log det(L L^T) = 2 sum_k sum log diag L(k, k)``: one scalar per tile comes back,
        summed in tile order (as :meth:`tlrcore.TLRCholesky.logdet`)."""
        return 2.0 * float(sum(self.client.gather(self._log_diagonal)))

    def _rhs_tiles(self, b):
        return [b[int(self.offsets[k]) : int(self.offsets[k + 1])] for k in range(self.n_tiles)]

    def solve_lower(self, b: ArrayLike) -> FloatArray:
        """``L^{-1} b`` by forward substitution, one task per tile row (vector or matrix `b`)."""
        b = check_operand(b, self.n, "b")
        name = prefix("forward")
        pieces = self._rhs_tiles(b)
        tasks: dict[tuple, tuple] = {}
        previous: object = np.zeros((0,) + b.shape[1:])
        for k in range(self.n_tiles):
            tasks[name, k] = (forward_step, previous, pieces[k], self.rows[k], self.diagonal[k])
            previous = (name, k)
        return self.client.gather(submit(self.client, tasks, self.placement, [previous]))[0]

    def solve_upper(self, b: ArrayLike) -> FloatArray:
        """``L^{-T} b`` by backward substitution, one task per tile row: row ``k`` solves its
        tile and subtracts ``L(k, j)^T x_k`` from the tiles ``j < k`` it passes on (the
        sums run in another order than in :meth:`tlrcore.TLRCholesky.solve_upper`, so the
        two agree to rounding)."""
        b = check_operand(b, self.n, "b")
        name = prefix("backward")
        last = self.n_tiles - 1
        tasks: dict[tuple, tuple] = {(name, last + 1): (start_backward, b)}
        for k in reversed(range(self.n_tiles)):
            tasks[name, k] = (backward_step, (name, k + 1), self.rows[k], self.diagonal[k])
        tasks[name, -1] = (concatenate, (name, 0))
        return self.client.gather(submit(self.client, tasks, self.placement, [(name, -1)]))[0]

    def solve(self, b: ArrayLike) -> FloatArray:
        """``(L L^T)^{-1} b``."""
        return self.solve_upper(self.solve_lower(b))

    def gather(self) -> TLRCholesky:
        """The factor as an in-process :class:`tlrcore.TLRCholesky` (every tile travels to
        the client: for tests and small matrices)."""
        diagonal = self.client.gather(self.diagonal)
        rows = self.client.gather([row for row in self.rows if row is not None])
        U, V = {}, {}
        for i, (Ui, Vi) in enumerate(rows, start=1):
            for j, (Uij, Vij) in enumerate(zip(Ui, Vi)):
                U[i, j], V[i, j] = Uij, Vij
        return TLRCholesky(diagonal, U, V, self.offsets, self.tolerance)

    def __repr__(self) -> str:
        return f"DistributedCholesky(n={self.n}, n_tiles={self.n_tiles}, workers={len(self.placement.addresses)})"
