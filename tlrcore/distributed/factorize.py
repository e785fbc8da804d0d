"""The left-looking TLR Cholesky factorization as a Dask task graph.

The tasks are the steps of :mod:`tlrcore.cholesky.left` with its per-column seeds, so the
factor equals the in-process one to rounding: ``D(k)`` factors diagonal tile ``k`` from
row ``k`` by a :class:`~tlrcore.cholesky.safeguards.DiagonalFactorizer` (with its tally of
changes); where no safeguard reads the whole update, ``Q(k)`` subtracts all but the last
column's part of it beforehand, off the critical chain, and ``D(k)`` only the last. ``C(k)``
is the column header every tile of the column reads
(:class:`~tlrcore.distributed._tasks.ColumnHeader`); ``R(i, k)`` extends row ``i`` by
``L(i, k)``, one ARA compression and solve. Row ``i`` lives on worker ``i mod P``, so
only ``C(k)`` crosses the network, once per worker and column (``O(n_t^2)`` tile
messages, against ``O(n_t^3)`` for a right-looking graph); the critical chain ``R(k + 1,
k) -> D(k + 1) -> C(k + 1)`` runs first (:class:`~tlrcore.distributed._graph.CriticalFirst`).
Every task is pure: a lost worker's results are recomputed, the factor unchanged."""

from __future__ import annotations

import logging
from operator import getitem

from tlrcore._checks import check_accuracy, check_int, check_random_state
from tlrcore._typing import SafeguardSpec, Seed
from tlrcore.cholesky.safeguards import check_shift, compensation_form, parse_safeguard
from tlrcore.compress.single import factor_budget
from tlrcore.concurrency.threads import column_seeds
from tlrcore.distributed._graph import CriticalFirst, prefix, submit
from tlrcore.distributed._tasks import (
    after,
    column_header,
    factor_diagonal,
    log_diagonal,
    prepared_diagonal,
    tile_error,
    update_tile,
)
from tlrcore.distributed.factor import DistributedCholesky
from tlrcore.distributed.matrix import DistributedTLRMatrix

__all__ = ["cholesky"]

logger = logging.getLogger(__name__)

#: Where the factorization submits the compression of ``A``'s tiles itself (``A`` from
#: ``from_generator(..., wait=False)``, factored with ``overwrite_a=True``), the tiles of
#: column ``j`` are compressed once diagonal tile ``j - BUILD_AHEAD`` is factored: the
#: workers hold the tiles of a few columns ahead of the factorization, not the rest of
#: ``A``.
BUILD_AHEAD = 4


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
    """Left-looking TLR Cholesky factorization ``A ~ L L^T`` on the cluster of `A`, equal to
    ``tlrcore.cholesky(A.gather(), accuracy, block_size, random_state, safeguard=safeguard,
    shift=shift)`` to rounding, perturbation included.

    Parameters
    ----------
    A : DistributedTLRMatrix
    accuracy, block_size, random_state
        As in :func:`tlrcore.cholesky`.
    overwrite_a : bool, default False
        Release the client's hold on `A`'s tiles once submitted (`A` is consumed): each tile
        is freed once its column is factored.
    wait : bool, default True
        Return when the factor is computed, raising its errors here; with False at once, the
        first method that needs a failed tile raising its error.
    shift : float, default 0.0
        Added to the diagonal (`A` is not modified). Growing shifts are the caller's loop
        (:func:`tlrcore.cholesky.safeguards.shift_schedule`).
    safeguard : None, str or sequence of str, default None
        ``"compensate"``, ``"compensate-block"``, ``"schur"``, ``"modified"``, as in
        :func:`tlrcore.cholesky`.

    Returns
    -------
    DistributedCholesky

    Raises
    ------
    TypeError
        If `A` is not a DistributedTLRMatrix.
    ConsumedMatrixError
        If `A` was consumed by an earlier ``cholesky(A, overwrite_a=True)``.
    ValueError
        For a bad `accuracy`, `block_size`, `random_state` or `shift`, or a safeguard other
        than those above.
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
            f"safeguard={safeguard!r}: on a cluster 'shift' is the caller's loop (factor again "
            "with shift= from tlrcore.cholesky.safeguards.shift_schedule) and 'pivot' is not "
            "available; the cluster supports 'compensate', 'compensate-block', 'schur' and "
            "'modified' (combinations allowed)."
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
    budget = factor_budget(tolerance, A.tolerance * n_t / A.accuracy)  # as in process
    P, Q, D, T, C, R, G, E = (
        prefix(kind)
        for kind in (
            "diagonal-task",
            "diagonal-prepared",
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

    # Without the safeguards that read the whole update, diagonal tile k takes all but its
    # last column's update off the critical chain, once row k has column k - 2.
    split = not (compensate or "schur" in guards or "modified" in guards)
    tasks: dict[tuple, tuple] = {}
    if compensate:
        tasks.update({(E, i, j): (tile_error, tile) for (i, j), tile in A.tiles.items()})
    build = A.take_build() if overwrite_a else None
    critical = [R, Q]
    if build is None:
        tile = A.tile_task
    else:
        compression, reads, names = build
        for key, task in compression.items():
            j = key[2]
            tasks[key] = task if j < BUILD_AHEAD else (after, (G, j - BUILD_AHEAD), task)
        critical += names

        def tile(i, k):
            return reads[i, k]

    for k in range(n_t):
        diagonal, first = A.diagonal_task(k), 0
        if split and k >= 2:
            diagonal, first = (Q, k, k - 2), k - 1
            tasks[diagonal] = (prepared_diagonal, A.diagonal_task(k), row(k, k - 1))
        tasks[P, k] = (
            factor_diagonal,
            diagonal,
            row(k, k),
            k,
            options,
            errors(k) if compensate else None,
            first,
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
                tile(i, k),
                (C, k),
                tolerance,
                block_size,
                int(seeds[k]),
                budget,
            )
    wanted = (
        [(D, k) for k in range(n_t)]
        + [(R, i, i - 1) for i in range(1, n_t)]
        + [(G, k) for k in range(n_t)]
        + [(T, k) for k in range(n_t)]
    )
    try:
        futures = submit(A.client, tasks, A.placement, wanted, CriticalFirst(critical, n_t))
    finally:
        if overwrite_a:  # consumed, its compression taken by this graph or not
            A.release()
    logger.debug(
        "distributed TLR Cholesky: %d tasks on %d workers", len(tasks), len(A.placement.addresses)
    )
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
