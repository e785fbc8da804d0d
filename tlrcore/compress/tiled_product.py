r"""The product ``A @ X`` of a rectangular matrix given by a block generator, its tiles
compressed on the fly and never stored.

``A`` is ``m x n`` with rows partitioned into row tiles ``I_a`` and columns into column
tiles ``J_b``. For each row tile the product is

.. math::

    (A X)_{I_a} = \sum_{b \in D_a} A_{ab} X_{J_b}
                + \sum_{b \notin D_a} V_{ab} (U_{ab}^T X_{J_b}),
    \qquad \| A_{ab}^T - U_{ab} V_{ab}^T \|_F \le \tau,

with the tiles of ``D_a`` (those the caller marks dense, e.g. where rows and columns
are near each other) generated whole and the others compressed by ACA with partial
pivoting (:func:`~tlrcore.compress.aca_column.aca_column`, the tiles of one row tile
together, their reads served by one generator call per round; the terms applied as ACA
leaves them, since an SVD recompression costs more than the product it would shorten).
A compressed tile of
rank ``k`` reads ``k (|I_a| + |J_b|)`` entries instead of ``|I_a| |J_b|``; its
factors are applied and dropped, so memory is that of one row tile's work per thread.

The error of the product is bounded tile by tile:
``||(A X - Y)_{I_a}||_F <= tau sum_b ||X_{J_b}||_2`` (ACA's estimate of ``tau``, see
:mod:`tlrcore.compress.aca`).

References
----------
.. [1] M. Bebendorf, "Approximation of boundary element matrices", Numer. Math. 86
   (2000) 565-589.
.. [2] W. Boukaram, G. Turkiyyah, D. Keyes, "Hierarchical matrix operations on GPUs:
   matrix-vector multiplication and compression", ACM Trans. Math. Softw. 45 (2019).
"""

from __future__ import annotations

import numpy as np

from tlrcore.compress.aca_column import aca_column
from tlrcore.compress.generated import CheckedBlock
from tlrcore.concurrency.threads import column_progress, runner, tile_pool, workers
from tlrcore.errors import GeneratorError

__all__ = ["tiled_product"]


def tiled_product(block, row_tiles, col_tiles, X, tolerance, dense, description="product"):
    """``A @ X`` for ``A`` given by ``block(rows, cols)``, compressed tile by tile.

    Parameters
    ----------
    block : callable
        ``block(rows, cols)`` -> the dense block ``A[rows][:, cols]`` (float64, finite)
        for integer index arrays.
    row_tiles, col_tiles : sequence of ndarray of int
        Partitions of the rows and of the columns of ``A`` into tiles.
    X : ndarray of shape (n, q)
        The right-hand sides, ``n`` the number of columns of ``A``.
    tolerance : float
        Absolute Frobenius tolerance of every compressed tile, positive.
    dense : ndarray of bool, shape (len(row_tiles), len(col_tiles))
        The tiles generated whole.
    description : str, default "product"
        The label of the progress counter (:func:`tlrcore.progress`).

    Returns
    -------
    ndarray of shape (m, q)
        Rows in the order of the row indices (``m`` the largest row index plus one).

    Raises
    ------
    ValueError
        For a bad `tolerance`, shapes that do not match or tiles out of range.
    GeneratorError
        If `block` returns a wrong shape or non-finite values.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, q); got shape {X.shape}.")
    if not (
        isinstance(tolerance, (float, int, np.floating))
        and np.isfinite(tolerance)
        and tolerance > 0
    ):
        raise ValueError(f"tolerance must be a positive number; got {tolerance!r}.")
    dense = np.asarray(dense, dtype=bool)
    if dense.shape != (len(row_tiles), len(col_tiles)):
        raise ValueError(
            f"dense must have shape {(len(row_tiles), len(col_tiles))}; got {dense.shape}."
        )
    n_cols = sum(tile.size for tile in col_tiles)
    if X.shape[0] != n_cols:
        raise ValueError(f"X has {X.shape[0]} rows but the column tiles hold {n_cols} columns.")
    m = 1 + max((int(tile.max()) for tile in row_tiles if tile.size), default=-1)
    checked = CheckedBlock(block)
    out = np.zeros((m, X.shape[1]))

    def row_tile(a):
        rows = row_tiles[a]
        far = [b for b in range(len(col_tiles)) if not dense[a, b] and col_tiles[b].size]
        total = np.zeros((rows.size, X.shape[1]))
        for b in np.flatnonzero(dense[a]):
            total += checked(rows, col_tiles[b], (a, int(b))) @ X[col_tiles[b]]
        if far and rows.size:
            factors = _compress_row_tile(checked, rows, [col_tiles[b] for b in far], a, tolerance)
            for b, (U, V) in zip(far, factors):
                if U.shape[1]:
                    total += V @ (U.T @ X[col_tiles[b]])
        return rows, total

    with (
        tile_pool(min(workers(), len(row_tiles))) as pool,
        column_progress(len(row_tiles), description, unit="tile") as counter,
    ):
        for rows, total in runner(pool)(row_tile, range(len(row_tiles))):
            out[rows] = total
            counter.update()
    return out


def _compress_row_tile(checked, rows, col_tiles, a, tolerance):
    """ACA factors ``(U, V)`` of ``A[rows][:, cols]^T`` for each of `col_tiles`: the
    transposed tiles share their columns (`rows`), so the tiles of a row tile are
    compressed together and the rows they ask for in a round read by one call."""
    where = f"row tile {a}"

    def read_rows(parts):
        cols = np.concatenate([col_tiles[t][idx] for t, idx in parts])
        try:
            values = checked(rows, cols, where).T
        except GeneratorError:
            for t, idx in parts:
                checked(rows, col_tiles[t][idx], where)
            raise
        return np.split(values, np.cumsum([idx.size for _, idx in parts[:-1]]))

    def read_columns(parts):
        return [checked(rows[idx], col_tiles[t], where).T for t, idx in parts]

    return aca_column(
        read_rows,
        read_columns,
        [tile.size for tile in col_tiles],
        rows.size,
        tolerance,
        recompressed=False,
    )
