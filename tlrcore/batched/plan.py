"""How a batch of matrices of varying shapes becomes a few stacked calls.

A *plan* gives the dimensions each item (``m``; ``(m, k)``; ``(m, k, n)``) is computed at;
items sharing them form one *bucket*, one stacked call. ``"group"`` keeps every item's own
dimensions (no extra flops); ``"pad"`` rounds them up to the grid of :func:`pad_up` (at
most about 9 % larger), exactly: matrices to factor or solve with get an identity block
(``chol(diag(A, I)) = diag(chol(A), I)``), others zeros. ``"auto"`` is the back end's
``batched_strategy``: grouping on the CPU, where fewer calls gain little, with Cholesky
orders that are multiples of 64 (from 128) moved up by 8 (:func:`off_alignment`: NumPy's
transposing stack copies suffer cache conflicts there); padding on a GPU, where each call
costs launches and a synchronization."""

from __future__ import annotations

import math

import numpy as np

STRATEGIES = ("auto", "group", "pad")

#: Ratio of successive padded sizes: a dimension grows by at most 9% or 8 (whichever is
#: more), plus 8 where the grid skips a multiple of 64.
PAD_RATIO = 2.0**0.125

_GRID = np.arange(8, 65, 8)


def check_strategy(strategy):
    """`strategy` if it names a plan, else TypeError or ValueError listing the choices."""
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be one of {STRATEGIES}; got {type(strategy).__name__}.")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r} is unknown; use one of {STRATEGIES}.")
    return strategy


def _grid(limit):
    """Padded sizes up to at least `limit`: multiples of 8 up to 64, then multiples of 8 about
    ``PAD_RATIO`` apart, skipping multiples of 64."""
    global _GRID
    if _GRID[-1] < limit:
        sizes = list(_GRID)
        while sizes[-1] < limit:
            size = max(sizes[-1] + 8, 8 * math.floor(sizes[-1] * PAD_RATIO / 8))
            sizes.append(size + 8 if size % 64 == 0 else size)
        _GRID = np.array(sizes)
    return _GRID


def pad_up(dims):
    """Each entry of the integer array `dims` rounded up to the padding grid."""
    dims = np.asarray(dims)
    if dims.size == 0:
        return dims.copy()
    grid = _grid(int(dims.max()))
    return grid[np.searchsorted(grid, dims)]


def off_alignment(dims):
    """`dims` with every multiple of 64 from 128 on moved up by 8."""
    dims = np.asarray(dims)
    return np.where((dims >= 128) & (dims % 64 == 0), dims + 8, dims)


def computed_dims(dims, strategy, backend, factor=False):
    """Dimensions ``(count, d)`` at which each item of `dims` is computed; with `factor` the first
    dimension is the order of a matrix to factor (:func:`off_alignment`)."""
    resolved = backend.batched_strategy if strategy == "auto" else strategy
    if resolved == "pad":
        return pad_up(dims)
    if factor and strategy == "auto" and backend.cholesky_off_alignment:
        out = dims.copy()
        out[:, 0] = off_alignment(dims[:, 0])
        return out
    return dims


def buckets(computed):
    """``(indices, shape)`` for each distinct row of `computed` (count, d)."""
    if len(computed) == 0:
        return []
    keys, inverse = np.unique(computed, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    order = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[order], np.arange(len(keys) + 1))
    return [
        (order[starts[j] : starts[j + 1]], tuple(int(v) for v in keys[j])) for j in range(len(keys))
    ]


def pack(backend, batch, fixed, indices, shape, identity=False):
    """Stack the matrices `indices` of `batch` into ``(len(indices), *shape)``: each in the
    leading block, zeros elsewhere (ones on the padded diagonal with `identity`); views when
    nothing is padded."""
    xp = backend.xp
    if fixed:  # `indices` are consecutive
        part = batch[int(indices[0]) : int(indices[-1]) + 1]
        if part.shape[1:] == shape:
            return part
        out = xp.zeros((len(part), *shape))
        if identity:
            diagonal = xp.arange(min(shape))
            out[:, diagonal, diagonal] = 1.0
        out[:, : part.shape[1], : part.shape[2]] = part
        return out
    items = [batch[i] for i in indices]
    if all(a.shape == shape for a in items):
        return items[0][None] if len(items) == 1 else xp.stack(items)
    out = xp.zeros((len(items), *shape))
    if identity:
        diagonal = xp.arange(min(shape))
        out[:, diagonal, diagonal] = 1.0
    for j, a in enumerate(items):
        out[(j, *(slice(0, d) for d in a.shape))] = a
    return out
