"""Diagnostics of a TLR matrix: memory, ranks and achieved accuracy."""

from __future__ import annotations

import math

import numpy as np

from tlrcore._checks import check_int, check_random_state
from tlrcore._typing import BlockGenerator, Seed
from tlrcore.compress._recompress import check_block_output
from tlrcore.matrix import TLRMatrix

__all__ = ["summary"]


def summary(
    A: TLRMatrix,
    block: BlockGenerator | None = None,
    n_probe_tiles: int = 16,
    random_state: Seed = 0,
) -> dict[str, float]:
    """Memory, rank statistics and (optionally) an estimate of the achieved error.

    Returns a dict of ``n``, ``tile_size``, ``n_tiles``, ``nbytes``, ``dense_nbytes``,
    ``memory_fraction``, ``mean_rank``, ``max_rank`` (off-diagonal), ``tolerance`` (absolute,
    per tile) and ``error_bound`` (relative). With `block`, the generator `A` was built from,
    also ``estimated_error``, the relative Frobenius error estimated without bias from
    ``n_probe_tiles`` random off-diagonal tiles (`random_state` seeds the draw; for a zero
    ``A_tlr``, 0.0 or infinity), and ``probed_tiles``.

    Raises
    ------
    TypeError, ValueError
        For an `A` that is not a TLRMatrix, a `block` that is not callable or returns a wrong
        shape or non-finite values, or bad `n_probe_tiles` or `random_state`.
    ConsumedMatrixError
        If `A` was consumed by ``tlrcore.cholesky(A, overwrite_a=True)``.
    """
    if not isinstance(A, TLRMatrix):
        raise TypeError(f"A must be a tlrcore.TLRMatrix; got {type(A).__name__}.")
    if block is not None and not callable(block):
        raise TypeError("block must be None or the callable block(rows, cols) A was built from.")
    n_probe_tiles = check_int(n_probe_tiles, "n_probe_tiles", 1)
    random_state = check_random_state(random_state)
    ranks = [A.tile_rank(i, j) for i, j in A.U]
    dense_nbytes = 8 * A.n * A.n
    out = {
        "n": A.n,
        "tile_size": A.tile_size,
        "n_tiles": A.n_tiles,
        "nbytes": A.nbytes,
        "dense_nbytes": dense_nbytes,
        "memory_fraction": A.nbytes / dense_nbytes,
        "mean_rank": float(np.mean(ranks)) if ranks else 0.0,
        "max_rank": int(max(ranks)) if ranks else 0,
        "tolerance": A.tolerance,
        "error_bound": A.error_bound(),
    }
    if block is None or not ranks:
        return out
    rng = np.random.default_rng(random_state)
    pairs = list(A.U)
    chosen = rng.choice(len(pairs), size=min(n_probe_tiles, len(pairs)), replace=False)
    err_sq = 0.0
    for k in chosen:
        i, j = pairs[k]
        rows = np.arange(A.offsets[i], A.offsets[i + 1])
        cols = np.arange(A.offsets[j], A.offsets[j + 1])
        exact = check_block_output(
            block(rows, cols), (rows.size, cols.size), f"block (tile {(i, j)})"
        )
        err_sq += float(np.sum((exact - A.U[i, j] @ A.V[i, j].T) ** 2))
    total_sq = 2.0 * err_sq * len(pairs) / len(chosen)
    norm = A.frobenius_norm()
    out["estimated_error"] = (
        math.sqrt(total_sq) / norm if norm > 0 else (0.0 if total_sq == 0 else math.inf)
    )
    out["probed_tiles"] = int(len(chosen))
    return out
