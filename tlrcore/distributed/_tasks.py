"""The tasks of :mod:`tlrcore.distributed`: pure functions run on the workers.

Each depends only on its arguments (no worker state, no randomness beyond its seeds,
inputs never modified), so a recomputed tile is bit-identical to a lost one. They call the
steps of :mod:`tlrcore.cholesky.left` in the same order with the same seeds. A factor row
is ``(U, V)`` with ``L(i, j) = U[j] @ V[j].T``; None for the empty row. A diagonal factor
tile ``L(k, k)`` is kept as its lower triangle, a one-tile
:class:`~tlrcore.dense.triangles.Triangles` (half the memory, solved in place by
``dtfsm``)."""

from __future__ import annotations

import numpy as np

from tlrcore.cholesky._steps import (
    ColumnSamples,
    cross_grams,
    diagonal_update,
    fortran_copy,
    sampled_update,
    stack,
)
from tlrcore.cholesky.safeguards import DiagonalFactorizer, compensation_lifts, subtract_gram
from tlrcore.compress.generated import compress_column, compress_tile
from tlrcore.compress.single import round_in_place
from tlrcore.dense.triangles import Triangles
from tlrcore.packed.build import host_diagonal_summary

__all__ = [
    "ColumnHeader",
    "after",
    "backward_step",
    "column_header",
    "column_tiles",
    "concatenate",
    "diagonal_summary",
    "diagonal_tile",
    "factor_diagonal",
    "forward_step",
    "log_diagonal",
    "multiply_row",
    "off_diagonal_tile",
    "prepared_diagonal",
    "row_summary",
    "start_backward",
    "tile_error",
    "tile_squares",
    "update_tile",
]


def after(_, value):
    """`value`, computed once the first argument (a dependency that orders the tasks) is."""
    return value


def _factors(row):
    """``(U list, V list)`` of a factor row (None: empty)."""
    return ([], []) if row is None else row


def diagonal_tile(checked, lo, hi, k):
    """Dense diagonal tile ``A(k, k)`` (indices ``lo:hi``)."""
    rows = np.arange(lo, hi)
    return checked(rows, rows, (k, k))


def diagonal_summary(checked, lo, hi, k, symmetric):
    """:func:`~tlrcore.packed.build.host_diagonal_summary` of diagonal tile `k`, generated
    for it and not kept."""
    return host_diagonal_summary(diagonal_tile(checked, lo, hi, k), symmetric)


def tile_squares(tile):
    """``||T||_F^2`` of a dense tile or of ``U V^T`` for a pair ``(U, V)``."""
    if isinstance(tile, tuple):
        U, V = tile
        return float(np.sum((U.T @ U) * (V.T @ V)))
    return float(np.sum(tile * tile))


def off_diagonal_tile(checked, rows, cols, i, j, tolerance, method, max_rank, seed):
    """``(U, V)`` of ``A(i, j)`` on the index ranges `rows`, `cols` (``[lo, hi]`` pairs), as in
    process (:func:`tlrcore.compress.generated.compress_tile`)."""
    return compress_tile(
        checked, np.arange(*rows), np.arange(*cols), (i, j), tolerance, method, max_rank, seed
    )


def column_tiles(checked, spans, j, rows, tolerance, max_rank):
    """``(U, V)`` of the tiles ``(i, j)``, ``i`` in `rows` (index ranges `spans` of every
    tile), compressed together by ACA as in process
    (:func:`tlrcore.compress.generated.compress_column`), each widened to float64 factors
    (:meth:`~tlrcore.compress.single.CompactPair.widened`)."""
    tiles = [np.arange(lo, hi) for lo, hi in spans]
    return [
        pair.widened() for pair in compress_column(checked, tiles, j, tolerance, max_rank, rows)
    ]


def tile_error(UV):
    """The recorded error of an off-diagonal tile (``LowRank.dropped``)."""
    return UV.dropped


def prepared_diagonal(Akk, row):
    """``A(k, k) - sum_j L(k, j) L(k, j)^T`` over the columns of `row` (row `k` of ``L``),
    in the lower triangle of a new Fortran-ordered tile: the update of diagonal tile `k` but
    for its last column, made before that column is factored."""
    D, W = diagonal_update(fortran_copy(Akk), list(zip(*_factors(row), strict=True)))
    return subtract_gram(D, W)


def factor_diagonal(Akk, row, k, options, errors=None, first=0):
    """``(L(k, k), tally)`` for ``A(k, k) - sum_j L(k, j) L(k, j)^T`` (``j >= first``) from row
    `k`, by a :class:`~tlrcore.cholesky.safeguards.DiagonalFactorizer` of `options`
    (``[tolerance, shift, schur, modified, compensate]``), as in process; ``L(k, k)`` as a
    one-tile :class:`Triangles`. With ``first > 0``, `Akk` is the
    :func:`prepared_diagonal` of row `k` through column ``first - 1``.

    The tally is the factorizer's ``(total, parts, compensated_tiles, lifted_tiles,
    modified_tiles)`` for this tile. With compensation, `errors` is tile row `k` of the tile
    errors, the lift computed from it as in process.

    Raises
    ------
    NotPositiveDefiniteError
        Naming tile `k`, if the safeguards did not help.
    """
    lifts = None
    if errors is not None:
        lifts = np.zeros(len(errors))
        lifts[k] = compensation_lifts(
            np.array([errors], dtype=np.float64), options[0], len(errors)
        )[0]
    factorizer = DiagonalFactorizer(*options, lifts=lifts)
    factors = list(zip(*_factors(row), strict=True))[first:]
    D, W = diagonal_update(fortran_copy(Akk), factors)
    L = factorizer.factor(D, W, k, updated=False)
    return Triangles([L]), (
        factorizer.total,
        factorizer.parts,
        factorizer.compensated_tiles,
        factorizer.lifted_tiles,
        factorizer.modified_tiles,
    )


class ColumnHeader:
    """What every tile of column ``k`` reads: ``Uk = [U(k, 0) | ... ]``, the ``V(k, j)`` and
    ``L(k, k)``, with the column's sample products (computed once per worker and column; a
    cache, not pickled)."""

    def __init__(self, Uk, Vk, Lkk, block_size):
        self.Uk, self.Vk, self.Lkk, self.block_size = Uk, Vk, Lkk, block_size
        self.samples = ColumnSamples(Uk, block_size)

    def __reduce__(self):
        return ColumnHeader, (self.Uk, self.Vk, self.Lkk, self.block_size)


def column_header(row, Lkk, block_size):
    """The :class:`ColumnHeader` of column ``k`` from row `k` of ``L`` and ``L(k, k)``."""
    U, V = _factors(row)
    return ColumnHeader(stack(U, Lkk.size(0)), V, Lkk, block_size)


def update_tile(row, UV, header, tolerance, block_size, seed, budget):
    """Row `i` extended by ``L(i, k) = (A(i, k) - sum_j L(i, j) L(k, j)^T) L(k, k)^{-T}`` (the
    sampled update, then the solve on its ``V`` side), its trailing columns rounded to single
    precision within `budget` (:func:`tlrcore.compress.single.round_in_place`), as in
    process."""
    Ui, Vi = _factors(row)
    Ut, Vt = sampled_update(
        UV[0],
        UV[1],
        stack(Ui, UV[0].shape[0]),
        header.Uk,
        cross_grams(Vi, header.Vk),
        tolerance,
        block_size,
        seed,
        header.samples,
    )
    Vt = header.Lkk.solve(0, np.asfortranarray(Vt))
    Ut = np.array(Ut, order="F")
    round_in_place(Ut, Vt, budget)
    return Ui + [Ut], Vi + [Vt]


def log_diagonal(Lkk):
    """``sum log diag L(k, k)``."""
    return np.sum(np.log(Lkk.diagonal(0)))


def row_summary(row, Lkk):
    """``(bytes, ranks)`` of tile row ``k`` of ``L``."""
    U, V = _factors(row)
    return Lkk.tile_nbytes(0) + sum(u.nbytes + v.nbytes for u, v in zip(U, V, strict=True)), [
        u.shape[1] for u in U
    ]


def multiply_row(z, offsets, k, row, Lkk):
    """Tile ``k`` of ``L z``, summed in the order of :meth:`tlrcore.TLRCholesky.multiply_lower`."""
    yk = Lkk[0] @ z[offsets[k] : offsets[k + 1]]
    for j, (U, V) in enumerate(zip(*_factors(row), strict=True)):
        yk += U @ (V.T @ z[offsets[j] : offsets[j + 1]])
    return yk


def forward_step(x, bk, row, Lkk):
    """``x_k = L(k, k)^{-1} (b_k - sum_j L(k, j) x_j)`` appended to the solved prefix `x`."""
    xk = bk.copy()
    start = 0
    for U, V in zip(*_factors(row), strict=True):
        stop = start + V.shape[0]
        xk -= U @ (V.T @ x[start:stop])
        start = stop
    Lkk.solve(0, xk)
    return np.concatenate([x, xk])


def start_backward(b):
    """The carry of :func:`backward_step` before the last tile row: ``(b, [])``."""
    return b, []


def backward_step(carry, row, Lkk):
    """Backward substitution through tile row `k`.

    `carry` is ``(y, pieces)``: the right-hand side of tiles ``0..k`` less the rows solved,
    and the solved tiles ``x_{k+1}, ...``. Solves ``x_k = L(k, k)^{-T} y_k`` and subtracts
    ``L(k, j)^T x_k`` from ``y_j``, ``j < k``."""
    y, pieces = carry
    size = Lkk.size(0)
    xk = Lkk.solve(0, y[-size:].copy(), trans=True)
    rest = y[:-size].copy()
    start = 0
    for U, V in zip(*_factors(row), strict=True):
        stop = start + V.shape[0]
        rest[start:stop] -= V @ (U.T @ xk)
        start = stop
    return rest, [xk] + pieces


def concatenate(carry):
    """The solution assembled from the last :func:`backward_step`."""
    return np.concatenate(carry[1])
