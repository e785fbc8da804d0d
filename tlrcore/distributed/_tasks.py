"""The tasks of :mod:`tlrcore.distributed`: pure functions that run on the workers.

Each is a function of its arguments only (no worker state, no randomness beyond the
seeds it is given, inputs never modified), so that the scheduler may run it again, on
any worker, after a worker is lost: a recomputed tile is bit-identical to the lost one.
They call the same steps as the in-process factorization (:mod:`tlrcore.cholesky.left`),
in the same order, with the same per-tile seeds.

A factor row is a pair of lists ``(U, V)``: ``L(i, j) = U[j] @ V[j].T`` for ``j`` below
the column the row has reached; None for the empty row (no tile left of column 0).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from tlrcore._lapack import trsm_lower
from tlrcore.cholesky._steps import (
    ColumnSamples,
    cross_grams,
    diagonal_update,
    sampled_update,
    stack,
)
from tlrcore.cholesky.safeguards import DiagonalFactorizer, compensation_lifts
from tlrcore.compress.generated import compress_tile

__all__ = [
    "ColumnHeader",
    "backward_step",
    "column_header",
    "concatenate",
    "diagonal_tile",
    "factor_diagonal",
    "forward_step",
    "log_diagonal",
    "multiply_row",
    "off_diagonal_tile",
    "row_summary",
    "start_backward",
    "tile_error",
    "tile_squares",
    "update_tile",
]


def _factors(row):
    """``(U list, V list)`` of a factor row (None: empty)."""
    return ([], []) if row is None else row


def diagonal_tile(checked, lo, hi, k):
    """Dense diagonal tile ``A(k, k)`` (indices ``lo:hi``)."""
    rows = np.arange(lo, hi)
    return checked(rows, rows, (k, k))


def tile_squares(tile):
    """``||T||_F^2`` of a dense tile, or of ``U V^T`` for a pair ``(U, V)``, computed as
    in :meth:`tlrcore.TLRMatrix.frobenius_norm`."""
    if isinstance(tile, tuple):
        U, V = tile
        return float(np.sum((U.T @ U) * (V.T @ V)))
    return float(np.sum(tile * tile))


def off_diagonal_tile(checked, rows, cols, i, j, tolerance, method, max_rank, seed):
    """``(U, V)`` of the off-diagonal tile ``A(i, j)`` on index ranges `rows` and `cols`
    (``[lo, hi]`` pairs), as :meth:`tlrcore.TLRMatrix.from_generator` compresses it
    (:func:`tlrcore.compress.generated.compress_tile`)."""
    return compress_tile(
        checked, np.arange(*rows), np.arange(*cols), (i, j), tolerance, method, max_rank, seed
    )


def tile_error(UV):
    """The compression error ``e_ij`` the build recorded for an off-diagonal tile: the
    largest singular value its truncation dropped (``LowRank.dropped``, see
    :attr:`tlrcore.TLRMatrix.tile_errors`)."""
    return UV.dropped


def factor_diagonal(Akk, row, k, options, errors=None):
    """``(L(k, k), tally)``: the factor of ``A(k, k) - sum_j L(k, j) L(k, j)^T`` from row
    `k` of ``L``, by a :class:`~tlrcore.cholesky.safeguards.DiagonalFactorizer` made here
    with `options`, its positional arguments ``[tolerance, shift, schur, modified,
    compensate]``, exactly as in process (the update subtracted inside the factorizer,
    ``updated=False``, as :mod:`tlrcore.cholesky.left` does). The tally is that
    factorizer's ``(total, parts, compensated_tiles, lifted_tiles, modified_tiles)``,
    which hold this tile's changes only.

    With compensation, `errors` is tile row `k` of the recorded tile errors (``n_tiles``
    floats, ``e_kk = 0``): the lift of tile `k` comes from it by
    :func:`~tlrcore.cholesky.safeguards.compensation_lifts`, as in process (the same sum
    over the same row); the factorizer reads only entry `k` of its lifts.

    Raises
    ------
    NotPositiveDefiniteError
        Naming tile `k`, if it is not positive definite and the safeguards did not help.
    """
    lifts = None
    if errors is not None:
        lifts = np.zeros(len(errors))
        lifts[k] = compensation_lifts(
            np.array([errors], dtype=np.float64), options[0], len(errors)
        )[0]
    factorizer = DiagonalFactorizer(*options, lifts=lifts)
    D, W = diagonal_update(Akk, list(zip(*_factors(row))))
    L = factorizer.factor(D, W, k, updated=False)
    return L, (
        factorizer.total,
        factorizer.parts,
        factorizer.compensated_tiles,
        factorizer.lifted_tiles,
        factorizer.modified_tiles,
    )


class ColumnHeader:
    """What every tile of column ``k`` reads: ``Uk = [U(k, 0) | ... ]``, the ``V(k, j)``
    and ``L(k, k)``, with the column's sample products.

    A worker holds one copy of a header for all the tiles of the column it updates, so
    the products ``Uk^T Omega_j`` with the Gaussian blocks every tile of the column draws
    alike (one seed per column) are computed once per worker and column, as in process
    (:class:`~tlrcore.cholesky._steps.ColumnSamples`). The products are a cache: they are
    not pickled (a worker that receives the header computes its own), and the tiles do not
    depend on which tile filled it.
    """

    def __init__(self, Uk, Vk, Lkk, block_size):
        self.Uk, self.Vk, self.Lkk, self.block_size = Uk, Vk, Lkk, block_size
        self.samples = ColumnSamples(Uk, block_size)

    def __reduce__(self):
        return ColumnHeader, (self.Uk, self.Vk, self.Lkk, self.block_size)


def column_header(row, Lkk, block_size):
    """The :class:`ColumnHeader` of column ``k`` from row `k` of ``L`` and ``L(k, k)``."""
    U, V = _factors(row)
    return ColumnHeader(stack(U, Lkk.shape[0]), V, Lkk, block_size)


def update_tile(row, UV, header, tolerance, block_size, seed):
    """Row `i` extended by ``L(i, k) = (A(i, k) - sum_j L(i, j) L(k, j)^T) L(k, k)^{-T}``:
    the sampled update of :func:`tlrcore.cholesky._steps.sampled_update` (with the
    header's shared sample products), then the triangular solve on its ``V`` side."""
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
    return Ui + [Ut], Vi + [trsm_lower(header.Lkk, np.asfortranarray(Vt))]


def log_diagonal(Lkk):
    """``sum log diag L(k, k)``."""
    return np.sum(np.log(np.diagonal(Lkk)))


def row_summary(row, Lkk):
    """``(bytes, ranks)`` of tile row ``k`` of ``L``: the bytes of ``L(k, k)`` and of the
    factors ``U(k, j), V(k, j)``, and the list of ranks ``[rank L(k, 0), ...]``."""
    U, V = _factors(row)
    return Lkk.nbytes + sum(u.nbytes + v.nbytes for u, v in zip(U, V)), [u.shape[1] for u in U]


def multiply_row(z, offsets, k, row, Lkk):
    """Tile ``k`` of ``L z``: ``L(k, k) z_k + sum_{j<k} U(k, j) (V(k, j)^T z_j)``, summed in
    the order of :meth:`tlrcore.TLRCholesky.multiply_lower`; `z` is the whole right-hand
    side and `offsets` the tile boundaries."""
    yk = Lkk @ z[offsets[k] : offsets[k + 1]]
    for j, (U, V) in enumerate(zip(*_factors(row))):
        yk += U @ (V.T @ z[offsets[j] : offsets[j + 1]])
    return yk


def forward_step(x, bk, row, Lkk):
    """Forward substitution through tile row `k`: ``x_k = L(k, k)^{-1} (b_k - sum_j
    L(k, j) x_j)`` appended to the solved prefix `x` (tiles ``0..k-1``, stacked)."""
    xk = bk.copy()
    start = 0
    for U, V in zip(*_factors(row)):
        stop = start + V.shape[0]
        xk -= U @ (V.T @ x[start:stop])
        start = stop
    xk = solve_triangular(Lkk, xk, lower=True, check_finite=False)
    return np.concatenate([x, xk])


def start_backward(b):
    """The carry of :func:`backward_step` before the last tile row: ``(b, [])``."""
    return b, []


def backward_step(carry, row, Lkk):
    """Backward substitution through tile row `k`.

    `carry` is ``(y, pieces)``: ``y`` the right-hand side of tiles ``0..k``, less the
    contributions of the rows already solved, and ``pieces`` the solved tiles ``x_{k+1},
    ...``. Solves ``x_k = L(k, k)^{-T} y_k`` and removes ``L(k, j)^T x_k`` from ``y_j``,
    ``j < k``.
    """
    y, pieces = carry
    size = Lkk.shape[0]
    xk = solve_triangular(Lkk, y[-size:], lower=True, trans="T", check_finite=False)
    rest = y[:-size].copy()
    start = 0
    for U, V in zip(*_factors(row)):
        stop = start + V.shape[0]
        rest[start:stop] -= V @ (U.T @ xk)
        start = stop
    return rest, [xk] + pieces


def concatenate(carry):
    """The solution assembled from the last :func:`backward_step`."""
    return np.concatenate(carry[1])
