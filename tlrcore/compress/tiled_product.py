r"""The product ``A @ X`` of a rectangular matrix given by a block generator, its tiles
compressed on the fly and never stored.

.. math::

    (A X)_{I_a} = \sum_{b \in D_a} A_{ab} X_{J_b}
                + \sum_{b \notin D_a} V_{ab} (U_{ab}^T X_{J_b}),
    \qquad \| A_{ab}^T - U_{ab} V_{ab}^T \|_F \le \tau,

the tiles ``D_a`` marked dense generated whole, the others compressed by ACA [1]_ per row
tile (terms unrecompressed: recompression costs more than the product it shortens). A tile
of rank ``k`` reads ``k (|I_a| + |J_b|)`` entries; memory is one row tile's work per
thread. Error: ``||(A X - Y)_{I_a}||_F <= tau sum_b ||X_{J_b}||_2``, ``tau`` as ACA
estimates it.

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
    """``A @ X`` (``(m, q)``, ``m`` the largest row index plus one) for ``A[rows][:, cols] =
    block(rows, cols)``, compressed tile by tile.

    `row_tiles` and `col_tiles` partition the rows and columns of ``A`` (``X`` has as many
    rows as columns); `dense` (``(len(row_tiles), len(col_tiles))`` bools) marks the tiles
    generated whole; the others are compressed to the positive `tolerance`; `description`
    labels the progress counter.

    Raises
    ------
    ValueError
        For a bad `tolerance`, shapes that do not match, or tiles out of range.
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
            for b, (U, V) in zip(far, factors, strict=True):
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
    """ACA factors ``(U, V)`` of ``A[rows][:, cols]^T`` for each of `col_tiles`, compressed
    together (the transposed tiles share their columns, `rows`)."""
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
