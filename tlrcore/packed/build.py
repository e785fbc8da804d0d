"""Building a TLR matrix in the packed layout, a tile column at a time (the GPU path).

The block generator is called once per chunk of a tile column (all rows below the
column's diagonal tile, in chunks that fit the back end's free memory and hold at most
``_CHUNK_ENTRIES`` entries) and may return arrays of the back end, so that on a GPU the
covariance never crosses to the host. The column's tiles are compressed together by the
batched ARA of :mod:`tlrcore.compress.ara_batched`, which also reports each tile's largest
dropped singular value (:attr:`tlrcore.TLRMatrix.tile_errors`)."""

from __future__ import annotations

import math

import numpy as np

from tlrcore.compress.ara_batched import batched_ara
from tlrcore.concurrency.threads import column_progress
from tlrcore.dense._checks import SYMMETRY_RTOL, asymmetry
from tlrcore.errors import GeneratorError
from tlrcore.packed.column import TileColumn
from tlrcore.packed.tiles import PackedTiles, diagonal_squares

__all__ = ["build_packed"]

#: Fraction of the back end's free memory one chunk of dense tiles may take.
_CHUNK_MEMORY = 0.25
#: Most entries one generator call may return (1 GiB): the generator's temporaries are each
#: as large as its output. With 12 GiB or more free this cap binds, so the chunks, and with
#: them the random sketches and the result, do not depend on the memory free.
_CHUNK_ENTRIES = 2**27
#: Most entries of the diagonal tiles whose statistics are taken at once (temporaries).
_STATS_ENTRIES = 2**25
#: Size of the random sub-block that estimates the off-diagonal mass of ``||A||_F``.
_NORM_SAMPLE = 1024
#: Size of the random sub-block whose entries are compared with their transposes.
_SYMMETRY_SAMPLE = 64
_EPS = np.finfo(np.float64).eps


class GeneratorOutput:
    """Checks what a block generator returned, on its back end (one sync per call, none with
    ``finite=False``: the caller then checks the values' finiteness itself)."""

    def __init__(self, block, backend, error):
        if not callable(block):
            raise TypeError("block must be a callable block(rows, cols) -> array.")
        self.block, self.backend, self.error = block, backend, error

    def __call__(self, rows, cols, where, finite=True):
        xp = self.backend.xp
        try:
            values = self.backend.asarray(self.block(rows, cols))
        except (TypeError, ValueError) as exc:
            raise self.error(
                f"block generator ({where}) returned a non-numeric value: {exc}"
            ) from None
        if values.shape != (rows.size, cols.size):
            raise self.error(
                f"block generator ({where}) returned shape {values.shape}; "
                f"expected {(rows.size, cols.size)}."
            )
        if finite and not bool(xp.isfinite(values).all()):
            raise self.error(not_finite(where))
        return values


def not_finite(where):
    """The message of a generator that returned NaN or infinite values at `where`."""
    return f"block generator ({where}) returned NaN or infinite values."


def build_packed(checked, n, tile_size, accuracy, backend, rng, block_size=16, max_rank=None):
    """Evaluate and compress a symmetric matrix into :class:`PackedTiles`.

    Every tile is compressed to ``accuracy * N / n_tiles``, ``N`` the estimate of ``||A||_F``
    of :mod:`tlrcore.matrix`. Returns ``(packed, tolerance, tile_errors)``, the last on the
    host: ``||A(i, j) - U V^T||_2`` of each truncation (symmetric, zero diagonal)."""
    xp = backend.xp
    b = tile_size
    n_t = -(-n // b)
    offsets = np.minimum(np.arange(n_t + 1) * b, n)
    D = xp.zeros((n_t, b, b))
    for k in range(n_t):
        idx = np.arange(offsets[k], offsets[k + 1])
        D[k, : idx.size, : idx.size] = checked(idx, idx, f"tile ({k}, {k})", finite=False)
        if idx.size < b:
            D[k, idx.size :, idx.size :] = xp.eye(b - idx.size)
    sizes = np.diff(offsets)
    symmetric = promises_symmetry(checked.block)
    scale = check_diagonal(packed_diagonal_stats(checked, D, sizes, symmetric), n)
    norm = norm_lower_estimate(diagonal_squares(xp, D, n), checked, offsets, rng, xp)
    tolerance = accuracy * norm / n_t
    seeds = rng.integers(0, 2**62, size=n_t)
    check_symmetry_sample(checked, offsets, rng, scale)
    chunk = max(
        1,
        min(
            int(_CHUNK_MEMORY * backend.free_memory() / (8 * b * b * 3)), _CHUNK_ENTRIES // (b * b)
        ),
    )
    columns = []
    errors = np.zeros((n_t, n_t))
    with backend.small_kernels(), column_progress(n_t, "TLR compression") as counter:
        for j in range(n_t):
            factors = [
                _compress_rows(
                    checked,
                    offsets,
                    j,
                    first,
                    min(first + chunk, n_t),
                    tolerance,
                    backend,
                    int(seeds[j]) + first,
                    block_size,
                    max_rank,
                )
                for first in range(j + 1, n_t, chunk)
            ]
            U, V, ranks, dropped = _join(xp, factors, b)
            errors[j + 1 :, j] = errors[j, j + 1 :] = dropped
            columns.append(TileColumn.from_padded(xp, U, V, ranks))
            counter.update()
    return PackedTiles(backend, n, b, D, columns), tolerance, errors


def _compress_rows(
    checked, offsets, j, first, stop, tolerance, backend, seed, block_size, max_rank
):
    """Tiles ``(first..stop-1, j)``, evaluated by one generator call and compressed."""
    xp = backend.xp
    b = int(offsets[1] - offsets[0])
    rows = np.arange(offsets[first], offsets[stop])
    cols = np.arange(offsets[j], offsets[j + 1])
    values = checked(rows, cols, f"tiles ({first}..{stop - 1}, {j})")
    count = stop - first
    if rows.size < count * b:
        values = xp.concatenate([values, xp.zeros((count * b - rows.size, b))])
    T = values.reshape(count, b, b)

    def sample(active, omega):
        return (T if active.size == count else T[xp.asarray(active)]) @ omega

    def project(Q):
        return T.transpose(0, 2, 1) @ Q

    return batched_ara(
        sample, project, count, (b, b), tolerance, backend, seed, block_size, max_rank, (first, j)
    )


def _join(xp, factors, b):
    """Concatenate a column's chunks, padded to its largest rank, with their ranks and dropped
    singular values."""
    if not factors:
        return xp.zeros((0, b, 0)), xp.zeros((0, b, 0)), np.zeros(0, dtype=np.int64), np.zeros(0)
    width = max(U.shape[2] for U, *_ in factors)

    def widen(X):
        return (
            X
            if X.shape[2] == width
            else xp.concatenate([X, xp.zeros(X.shape[:2] + (width - X.shape[2],))], axis=2)
        )

    U = (
        xp.concatenate([widen(U) for U, *_ in factors])
        if len(factors) > 1
        else widen(factors[0][0])
    )
    V = (
        xp.concatenate([widen(V) for _, V, *_ in factors])
        if len(factors) > 1
        else widen(factors[0][1])
    )
    return (
        U,
        V,
        np.concatenate([r for *_, r, _ in factors]),
        np.concatenate([e for *_, e in factors]),
    )


def norm_lower_estimate(diag_sq, checked, offsets, rng, xp):
    """``||A||_F`` estimate that errs low: `diag_sq` (the diagonal tiles' exact squared norm)
    plus half the off-diagonal mass sampled from a random ``s x s`` sub-block."""
    n = int(offsets[-1])
    if len(offsets) == 2:
        return math.sqrt(diag_sq)
    s = min(n, _NORM_SAMPLE)
    rows = np.sort(rng.choice(n, size=s, replace=False))
    cols = np.sort(rng.choice(n, size=s, replace=False))
    sample = checked(rows, cols, "norm sample")
    tile_of = np.searchsorted(offsets, np.arange(n), side="right") - 1
    off = tile_of[rows][:, None] != tile_of[cols][None, :]
    off_count = n * n - int(np.sum(np.diff(offsets) ** 2))
    off_sq = float(xp.sum(sample[xp.asarray(off)] ** 2)) / max(int(off.sum()), 1) * off_count
    return math.sqrt(diag_sq + 0.5 * off_sq)


def scale_range(n):
    """``(low, high) = (sqrt(tiny) n / eps, sqrt(max) eps / n)``: the largest entries ``s =
    max|A|`` of an order-`n` TLR matrix for which sums of squares up to ``(n s)^2`` and
    squared tolerances down to ``(eps s / n)^2`` stay normal floats (about ``7e-135`` to
    ``3e134`` at ``n = 10^4``); outside, tiles silently underflow or overflow."""
    info = np.finfo(np.float64)
    return math.sqrt(info.tiny) * n / _EPS, math.sqrt(info.max) * _EPS / n


def check_scale(scale, n, what, error=GeneratorError):
    """Raise `error`, naming `what`, where ``s = max|A|`` (`scale`) is outside
    :func:`scale_range` of `n` (``s = 0`` apart)."""
    low, high = scale_range(n)
    if scale != 0.0 and not low <= scale <= high:
        raise error(
            f"{what} has entries up to {scale:.3g} in magnitude, outside [{low:.3g}, {high:.3g}], "
            f"the range in which the norms of an order-{n} TLR matrix neither underflow nor "
            "overflow; rescale the matrix by c = 1 / (its largest entry): the Cholesky factor of "
            "c A is sqrt(c) L, and log det(c A) = log det A + n log c."
        )


def promises_symmetry(block):
    """Whether the generator `block` has ``symmetric_blocks = True``: its diagonal tiles are then
    not scanned for asymmetry (the random sample still is)."""
    return getattr(block, "symmetric_blocks", False) is True


def diagonal_stats(T, symmetric=False):
    """``(max|T|, max|T - T^T|)`` of a diagonal tile for :func:`check_diagonal`; the asymmetry is
    0 without a scan for `symmetric` generators."""
    return max(float(T.max()), -float(T.min())), 0.0 if symmetric else float(asymmetry(T))


def packed_diagonal_stats(checked, D, sizes, symmetric=False):
    """:func:`diagonal_stats` of the real parts (`sizes`) of the padded diagonal tiles `D`,
    in one read of ``n_tiles`` numbers (twice as many unless `symmetric`); ``checked.error``
    naming the first tile with NaN or infinite values (its largest entry is not finite)."""
    backend = checked.backend
    xp = backend.xp
    n_t, b = D.shape[:2]
    real = xp.asarray(np.arange(b)[None, :] < sizes[:, None], dtype=xp.float64)
    largest, excess = [], []
    step = max(1, _STATS_ENTRIES // (b * b))  # the temporaries of a few tiles at a time
    for lo in range(0, n_t, step):
        mask = real[lo : lo + step]
        T = D[lo : lo + step] * (mask[:, :, None] * mask[:, None, :])
        largest.append(xp.max(xp.abs(T), axis=(1, 2)))
        if not symmetric:
            excess.append(xp.max(xp.abs(T - T.transpose(0, 2, 1)), axis=(1, 2)))
    stats = [xp.concatenate(largest)] + ([] if symmetric else [xp.concatenate(excess)])
    stats = backend.to_host(xp.stack(stats))
    bad = np.flatnonzero(~np.isfinite(stats[0]))
    if bad.size:
        raise checked.error(not_finite(f"tile ({bad[0]}, {bad[0]})"))
    excess = stats[1] if not symmetric else np.zeros(len(sizes))
    return [(float(a), float(e)) for a, e in zip(stats[0], excess, strict=True)]


def host_diagonal_summary(D, symmetric=False):
    """``(||D||_F^2, diagonal_stats(D, symmetric))`` of a NumPy diagonal tile."""
    return float(np.vdot(D, D)), diagonal_stats(D, symmetric)


def check_diagonal(stats, n):
    """``max|A|`` over the diagonal tiles (`stats` their :func:`diagonal_stats`), after checking
    its range and each tile's symmetry relative to it; GeneratorError naming the tile."""
    scale = max(largest for largest, _ in stats)
    check_scale(scale, n, "the block generator")
    for k, (_, excess) in enumerate(stats):
        if excess > SYMMETRY_RTOL * scale:
            raise GeneratorError(
                f"block generator (tile ({k}, {k})) returned a block that is not symmetric: "
                f"max|block(rows, rows) - block(rows, rows).T| = {excess:.3g} > {SYMMETRY_RTOL:g} "
                "* max|A|; "
                "a TLR matrix is symmetric, so block(cols, rows) must equal block(rows, cols).T."
            )
    return scale


def check_symmetry_sample(checked, offsets, rng, scale):
    """Compare ``A[r, c]`` with ``A[c, r]`` on a random ``64 x 64`` sample (two generator calls),
    relative to the largest entry seen; GeneratorError naming the tile of the worst pair."""
    n = int(offsets[-1])
    s = min(n, _SYMMETRY_SAMPLE)
    rows, cols = rng.choice(n, size=s, replace=False), rng.choice(n, size=s, replace=False)
    where = f"symmetry check on a sample of {s} random rows and columns across the tiles"
    forward, backward = checked(rows, cols, where), checked(cols, rows, where)
    scale = max(scale, float(forward.max()), -float(forward.min()))
    check_scale(scale, n, "the block generator")
    excess = asymmetry(forward, backward)
    if excess <= SYMMETRY_RTOL * scale:
        return
    p, q = np.unravel_index(int(abs(forward - backward.T).argmax()), forward.shape)
    r, c = int(rows[p]), int(cols[q])
    i, j = sorted(np.searchsorted(offsets, [r, c], side="right") - 1, reverse=True)
    raise GeneratorError(
        f"block generator (tile ({i}, {j})) is not symmetric: A[{r}, {c}] differs from A[{c}, {r}] "
        f"by {excess:.3g} > {SYMMETRY_RTOL:g} * max|A|; a TLR matrix is symmetric, so block(cols, "
        "rows) must equal block(rows, cols).T."
    )
