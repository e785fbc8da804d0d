r"""The left-looking TLR Cholesky factorization as a Dask task graph.

The tasks are the steps of :mod:`tlrcore.cholesky.left` with the same seeds (one per
tile column, :func:`tlrcore.concurrency.threads.column_seeds`), so the factor equals the in-process
one:

* ``D(k)``: ``L(k, k) = chol(A(k, k) - sum_{j<k} L(k, j) L(k, j)^T)``, from row ``k``,
  by the in-process :class:`~tlrcore.cholesky.safeguards.DiagonalFactorizer` (shift and
  tile-local safeguards), with the tile's tally of changes beside it;
* ``C(k)``: the column header ``([U(k, 0) | ...], [V(k, j)], L(k, k))``, which every tile
  of column ``k`` reads, with the products of ``[U(k, 0) | ...]^T`` and the column's
  Gaussian sample blocks, computed once per worker (:class:`~tlrcore.distributed._tasks.ColumnHeader`);
* ``R(i, k)``: row ``i`` extended by ``L(i, k)``: the sampled update of ``A(i, k)`` by
  ``L(i, :k)`` and ``L(k, :k)`` (one ARA compression), then ``L(k, k)^{-1}`` on its
  ``V`` side.

The rows are placed cyclically (:mod:`tlrcore.distributed._graph`): ``R(i, k)`` runs on
the worker of row ``i`` and finds ``R(i, k - 1)``, ``A(i, k)`` there; only ``C(k)``
crosses the network, once per worker and column. Per worker this keeps its rows of ``L``
(and the tiles of ``A`` not yet consumed) plus one column header and the tiles in flight.

Why left-looking: each tile of ``L`` is compressed once, from ``A(i, k)`` and the final
rows, with the seeds of the in-process factorization, so the factors agree; a
right-looking graph would send every updated trailing tile across the network after
every column (``O(n_t^3)`` tile messages, against ``O(n_t^2)`` here) and recompress it
each time. The critical path is the chain ``R(k + 1, k) -> D(k + 1) -> C(k + 1)``; the
other tiles of a column run beside it: :class:`~tlrcore.distributed._graph.CriticalFirst`
gives the chain the
highest priority and the other tiles that of their column (earlier first), the
lookahead of the in-process code.

Safeguards: the tile-local ones, ``"compensate"`` / ``"compensate-block"`` (always-on
compensation), ``"schur"`` and ``"modified"``, run inside ``D(k)`` by the same rules as
in process (:mod:`tlrcore.cholesky.safeguards`). The lifts of the compensation come from
the tile errors the build recorded: each off-diagonal tile's largest dropped singular
value (``LowRank.dropped``), read by a task on the tile's worker, so that one scalar per
tile travels, to the diagonal tasks of its row and column; ``D(k)`` then also waits for
the tiles of column ``k``, which ``R(i, k)`` reads right after it anyway. The driver sums
the tallies in tile order, as the in-process factorizer does, into ``.perturbation``,
``.perturbation_parts`` and the tile lists. ``"shift"`` (a retry loop) is the caller's:
:func:`tlrcore.cholesky.safeguards.shift_schedule` with ``shift=``.

Resilience: every task is a pure function of its inputs, and the tiles of ``A`` are tasks
of the generator (:mod:`tlrcore.distributed.matrix`), so when a worker is lost the
scheduler recomputes what it held from the lineage, and the factor is bit-identical.
"""

from __future__ import annotations

import logging
from operator import getitem

from tlrcore._checks import check_accuracy, check_int, check_random_state
from tlrcore._typing import SafeguardSpec, Seed
from tlrcore.cholesky.safeguards import check_shift, compensation_form, parse_safeguard
from tlrcore.concurrency.threads import column_seeds
from tlrcore.distributed._graph import CriticalFirst, prefix, submit
from tlrcore.distributed._tasks import (
    column_header,
    factor_diagonal,
    log_diagonal,
    tile_error,
    update_tile,
)
from tlrcore.distributed.factor import DistributedCholesky
from tlrcore.distributed.matrix import DistributedTLRMatrix

__all__ = ["cholesky"]

logger = logging.getLogger(__name__)


def cholesky(
    A: DistributedTLRMatrix,
    accuracy: float | None = None,
    block_size: int = 16,
    random_state: Seed = 0,
    overwrite_a: bool = False,
    wait: bool = True,
    shift: float = 0.0,
    safeguard: SafeguardSpec = None,
) -> DistributedCholesky:
    """Left-looking TLR Cholesky factorization ``A ~ L L^T`` on the cluster of `A`.

    Equals ``tlrcore.cholesky(A.gather(), accuracy, block_size, random_state,
    safeguard=safeguard, shift=shift)`` (the in-process left-looking variant) to rounding,
    the reported perturbation included.

    Parameters
    ----------
    A : DistributedTLRMatrix
        Symmetric positive definite.
    accuracy, block_size, random_state
        As in :func:`tlrcore.cholesky`.
    overwrite_a : bool, default False
        Release the client's hold on the tiles of `A` once the graph is submitted (`A`
        is consumed): each tile is then freed as soon as its column is factored, which
        keeps the workers' memory near their share of ``L``.
    wait : bool, default True
        Return when the factor is computed (raising its errors here). With False, return
        at once; errors are raised by the first method that needs the failed tiles.
    shift : float, default 0.0
        Added to every diagonal entry of `A` (which is not modified), as in
        :func:`tlrcore.cholesky`; the factor reports ``.shift`` and, without other
        safeguards, ``.perturbation = shift sqrt(n)``. A retry with growing shifts (in process, ``safeguard="shift"``)
        is the caller's loop: :func:`tlrcore.cholesky.safeguards.shift_schedule` gives
        the same shifts.
    safeguard : None, str or sequence of str, default None
        The tile-local safeguards of :func:`tlrcore.cholesky`, applied in the diagonal
        tasks by the same rules: ``"compensate"`` (always-on compensation, update tails
        in diagonal rowsum form, lifts from the tile errors the build recorded) or
        ``"compensate-block"`` (tails as full blocks), ``"schur"``, ``"modified"``;
        combine as ``"compensate-block+modified"``. Not ``"shift"`` (the caller's loop,
        see `shift`) nor ``"pivot"``.

    Returns
    -------
    DistributedCholesky
        With ``.shift``, ``.perturbation = ||E||_F``, ``.perturbation_parts``,
        ``.compensated_tiles``, ``.lifted_tiles`` and ``.modified_tiles`` as the
        in-process factor reports them (gathered from the tiles' tallies on first use).

    Raises
    ------
    TypeError
        If `A` is not a DistributedTLRMatrix.
    ConsumedMatrixError
        If `A` was consumed by an earlier ``cholesky(A, overwrite_a=True)``.
    ValueError
        For a bad `accuracy`, `block_size`, `random_state` or `shift`, an unknown
        safeguard, or ``"shift"`` or ``"pivot"``.
    NotPositiveDefiniteError
        If an updated diagonal tile is not positive definite and the safeguards did not
        help; ``.tile`` is its index.
    """
    if not isinstance(A, DistributedTLRMatrix):
        raise TypeError(
            f"A must be a tlrcore.distributed.DistributedTLRMatrix; got {type(A).__name__}."
        )
    A._check_usable()
    block_size = check_int(block_size, "block_size", 1)
    random_state = check_random_state(random_state)
    shift = check_shift(shift)
    guards = parse_safeguard(safeguard)
    if guards & {"shift", "pivot"}:
        raise ValueError(
            f"safeguard={safeguard!r}: on a cluster 'shift' is the caller's loop (factor again with shift= from "
            "tlrcore.cholesky.safeguards.shift_schedule) and 'pivot' is not available; the cluster supports "
            "'compensate', 'compensate-block', 'schur' and 'modified' (combinations allowed)."
        )
    compensate = compensation_form(guards)
    tolerance = (
        A.tolerance
        if accuracy is None
        else check_accuracy(accuracy) * A.frobenius_norm() / A.n_tiles
    )
    options = [tolerance, shift, "schur" in guards, "modified" in guards, compensate]
    n_t = A.n_tiles
    seeds = column_seeds(random_state, n_t)
    P, D, T, C, R, G, E = (
        prefix(kind)
        for kind in (
            "diagonal-task",
            "diagonal-factor",
            "diagonal-tally",
            "column",
            "row",
            "log-diagonal",
            "tile-error",
        )
    )

    def row(i, k):
        """Key of row `i` through column ``k - 1`` (None before column 0)."""
        return None if k == 0 else (R, i, k - 1)

    def errors(k):
        """Keys of the recorded errors of tile row `k` (0.0 on the diagonal)."""
        return [(E, k, j) if j < k else (E, j, k) if j > k else 0.0 for j in range(n_t)]

    tasks: dict[tuple, tuple] = {}
    if compensate:
        tasks.update({(E, i, j): (tile_error, tile) for (i, j), tile in A.tiles.items()})
    for k in range(n_t):
        tasks[P, k] = (
            factor_diagonal,
            A.diagonal_task(k),
            row(k, k),
            k,
            options,
            errors(k) if compensate else None,
        )
        tasks[D, k] = (getitem, (P, k), 0)
        tasks[T, k] = (getitem, (P, k), 1)
        tasks[G, k] = (log_diagonal, (D, k))
        if k + 1 < n_t:
            tasks[C, k] = (column_header, row(k, k), (D, k), block_size)
        for i in range(k + 1, n_t):
            tasks[R, i, k] = (
                update_tile,
                row(i, k),
                A.tiles[i, k],
                (C, k),
                tolerance,
                block_size,
                int(seeds[k]),
            )
    wanted = (
        [(D, k) for k in range(n_t)]
        + [(R, i, i - 1) for i in range(1, n_t)]
        + [(G, k) for k in range(n_t)]
        + [(T, k) for k in range(n_t)]
    )
    futures = submit(A.client, tasks, A.placement, wanted, CriticalFirst(R, n_t))
    logger.debug(
        "distributed TLR Cholesky: %d tasks on %d workers", len(tasks), len(A.placement.addresses)
    )
    if overwrite_a:
        A.release()
    factor = DistributedCholesky(
        A.client,
        A.placement,
        A.offsets,
        tolerance,
        futures[:n_t],
        [None] + futures[n_t : 2 * n_t - 1],
        futures[2 * n_t - 1 : 3 * n_t - 1],
        futures[3 * n_t - 1 :],
        shift,
    )
    return factor.wait() if wait else factor
