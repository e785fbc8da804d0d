"""Plots (matplotlib is imported only when a function is called)."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_ranks"]


def plot_ranks(matrix, ax=None, cmap="viridis", annotate=None):
    """Heatmap of the tile ranks of a TLR matrix (the papers' rank figures).

    Parameters
    ----------
    matrix : tlrcore.TLRMatrix
    ax : matplotlib Axes, optional
    cmap : str, default "viridis"
    annotate : bool, optional
        Write each rank in its cell; default when there are at most 16 tiles per side.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    ranks = matrix.ranks.astype(float)
    np.fill_diagonal(ranks, np.nan)  # dense diagonal tiles: not a rank
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.2))
    image = ax.imshow(ranks, cmap=cmap, interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label="rank")
    ax.set_title(
        f"TLR ranks: n = {matrix.n}, tile {matrix.tile_size}, accuracy {matrix.accuracy:.0e}\n"
        f"mean rank {matrix.mean_rank:.1f}, memory {matrix.nbytes / 2**20:.1f} MiB"
    )
    ax.set_xlabel("tile column")
    ax.set_ylabel("tile row")
    if annotate if annotate is not None else matrix.n_tiles <= 16:
        for (i, j), value in np.ndenumerate(matrix.ranks):
            if i != j:
                ax.text(j, i, str(value), ha="center", va="center", fontsize=7, color="w")
    return ax
