"""Orderings of sites that make the off-diagonal tiles of a covariance matrix low rank.

A tile low-rank (TLR) matrix groups its rows and columns into tiles of ``tile_size``
consecutive indices; the off-diagonal tile ``(i, j)`` of a covariance matrix is
numerically low rank when the sites of tiles ``i`` and ``j`` form two compact, well
separated clusters. Each ordering returns a new ``int64`` permutation ``perm`` of shape
``(n,)`` such that ``points[perm]`` is such an order: :func:`kdtree_order` (the
default, the cluster tree of [1]_), :func:`morton_order` (the Z-order curve, as in [2]_
and [3]_) or :func:`identity_order`. Ties (equal coordinates) are broken by the
original index, so the orderings are deterministic.

References
----------
.. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. (2021). H2OPUS-TLR: High
   performance tile low rank symmetric factorizations using adaptive randomized
   approximation. arXiv:2108.11932.
.. [2] Akbudak, K., Ltaief, H., Mikhalev, A., Keyes, D. (2017). Tile low rank Cholesky
   factorization for climate/weather modeling applications on manycore architectures.
   ISC High Performance, LNCS 10266.
.. [3] Abdulah, S., Ltaief, H., Sun, Y., Genton, M. G., Keyes, D. E. (2018). ExaGeoStat:
   A high performance unified software for geostatistics on manycore systems. IEEE
   Transactions on Parallel and Distributed Systems, 29(12).
"""

import math
import numbers

import numpy as np

__all__ = [
    "ORDERING_METHODS",
    "auto_tile_size",
    "identity_order",
    "inverse_permutation",
    "kdtree_order",
    "morton_order",
    "order_points",
]

#: Names accepted by :func:`order_points`.
ORDERING_METHODS = ("kdtree", "morton", "none")

# auto_tile_size: nearest power of two to _TILE_SCALE * sqrt(n) (_COSTLY_TILE_SCALE for a
# costly kernel), clipped to the bounds.
_TILE_SCALE = 15.0
_COSTLY_TILE_SCALE = 5.66
_MIN_AUTO_TILE = 256
_MAX_AUTO_TILE = 2048
# Largest number of bits per coordinate in a Morton key.
_MAX_MORTON_BITS = 21


# ---------------------------------------------------------------------- checks
def _check_points(points):
    """Return ``points`` as a finite ``(n, d)`` float64 array (1-D input: ``d = 1``)."""
    try:
        array = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError("points must be a numeric array of coordinates, shape (n, d).") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"points must be 2-D with shape (n, d); got {array.ndim} dimensions.")
    n, d = array.shape
    if n < 1 or d < 1:
        raise ValueError(
            "points must hold at least one site with at least one coordinate; got shape "
            f"{array.shape}."
        )
    if not np.isfinite(array).all():
        raise ValueError(
            "points contains NaN or infinite coordinates; drop or fill those rows first."
        )
    return array


def _check_tile_size(tile_size, n):
    """Return ``tile_size`` as an int in ``[1, n]``, or raise naming the fix."""
    if isinstance(tile_size, (bool, np.bool_)) or not isinstance(tile_size, numbers.Integral):
        raise TypeError(
            f"tile_size must be an integer; got {tile_size!r}. Pass e.g. tile_size=512 or None."
        )
    if not 1 <= tile_size <= n:
        raise ValueError(
            f"tile_size must be between 1 and the number of sites n={n}; got {tile_size}. "
            f"Pass tile_size=min(tile_size, n) or None for auto_tile_size(n)."
        )
    return int(tile_size)


def _check_optional_tile_size(tile_size, n):
    """Validate ``tile_size`` unless it is None."""
    if tile_size is not None:
        _check_tile_size(tile_size, n)


# ---------------------------------------------------------------------- kd-tree
def _axis_ranks(coords):
    """``ranks[k, i]``: position of site ``i`` in the stable sort of ``coords[k]``
    (`coords` of shape ``(d, n)``); int64 ``(d, n)``."""
    d, n = coords.shape
    ranks = np.empty((d, n), dtype=np.int64)
    positions = np.arange(n, dtype=np.int64)
    for axis, values in enumerate(coords):
        order = np.argsort(values)
        ordered = values[order]
        if (ordered[1:] == ordered[:-1]).any():  # ties: only a stable sort orders them by index
            order = np.argsort(values, kind="stable")
        ranks[axis, order] = positions
    return ranks


def _left_sizes(sizes, tile_size):
    """Size of the left child of clusters of ``sizes`` points (each ``> tile_size``).

    The left child holds half of the smallest power of two ``>= ceil(size / tile_size)``
    tiles, so it is always a whole number of tiles and the right child is not empty.
    """
    n_tiles = -(-sizes // tile_size)
    # frexp(m)[1] is the bit length of the positive integer m (exact below 2**53).
    _, bits = np.frexp((n_tiles - 1).astype(np.float64))
    return (np.int64(1) << (bits.astype(np.int64) - 1)) * tile_size


def _split_axes(coords, perm, starts):
    """Axis of largest bounding-box extent (first axis on ties) of each segment of
    ``perm`` starting at `starts`; `coords` is ``(d, n)``."""
    ordered = np.take(coords, perm, axis=1)
    extent = np.maximum.reduceat(ordered, starts, axis=1) - np.minimum.reduceat(
        ordered, starts, axis=1
    )
    return np.argmax(extent, axis=0)


def _split_level(coords, ranks, perm, bounds, tile_size):
    """Split once every cluster ``perm[bounds[s]:bounds[s + 1]]`` of more than
    `tile_size` sites: sort it along its axis of largest extent and cut after
    :func:`_left_sizes` sites. Returns the new ``(perm, bounds)``."""
    n = perm.size
    starts, sizes = bounds[:-1], np.diff(bounds)
    active = sizes > tile_size
    segment = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    axes = _split_axes(coords, perm, starts)
    # Within a segment sort by the rank along its axis (unique), leaves by position.
    local = np.take(ranks, axes[segment] * n + perm)
    if not active.all():
        local = np.where(active[segment], local, np.arange(n, dtype=np.int64))
    perm = perm[np.argsort(segment * n + local)]
    cuts = starts[active] + _left_sizes(sizes[active], tile_size)
    return perm, np.union1d(bounds, cuts)


def kdtree_order(points, tile_size):
    """Order sites so that consecutive blocks of ``tile_size`` form KD-tree leaves.

    The cluster tree of [1]_: a cluster of ``c > tile_size`` sites is sorted along the
    axis of largest extent of its bounding box (first axis on ties) and split into a
    left cluster of ``2**(ceil(log2(ceil(c / tile_size))) - 1) * tile_size`` sites and a
    right one with the rest, recursively. The left cluster is a whole number of tiles,
    so every tile of ``points[perm]`` is one leaf, all of ``tile_size`` sites but the
    last (``n % tile_size`` when not zero). Built level by level with one vectorized
    sort per level: ``O(n log n log(n / tile_size))``.

    Parameters
    ----------
    points : array_like, shape (n, d) or (n,)
        Finite site coordinates; a 1-D array means ``d = 1``.
    tile_size : int
        Sites per tile, ``1 <= tile_size <= n``.

    Returns
    -------
    perm : ndarray of int64, shape (n,)
        ``points[perm]`` is the new order.

    Raises
    ------
    TypeError, ValueError
        For `points` not numeric, empty, not 2-D or not finite, or a `tile_size` that is
        not an integer in ``[1, n]``.

    References
    ----------
    .. [1] Boukaram, W., Zampini, S., Turkiyyah, G., Keyes, D. (2021). H2OPUS-TLR: High
       performance tile low rank symmetric factorizations using adaptive randomized
       approximation. arXiv:2108.11932.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0, 0.0], [5.0, 0.1], [0.1, 0.0], [5.1, 0.0]])
    >>> kdtree_order(x, 2)
    array([0, 2, 1, 3])
    """
    points = _check_points(points)
    n = points.shape[0]
    tile_size = _check_tile_size(tile_size, n)
    perm = np.arange(n, dtype=np.int64)
    if n <= tile_size:
        return perm
    coords = np.ascontiguousarray(points.T)
    ranks = _axis_ranks(coords)
    bounds = np.array([0, n], dtype=np.int64)
    while np.diff(bounds).max() > tile_size:
        perm, bounds = _split_level(coords, ranks, perm, bounds, tile_size)
    return perm


# ---------------------------------------------------------------------- Morton
def _quantize(points, bits):
    """Each coordinate scaled to [0, 1] by the bounding box (a zero-extent axis to 0)
    and quantized to ``bits`` bits, as uint64."""
    low = points.min(axis=0)
    extent = points.max(axis=0) - low
    scale = np.divide(1.0, extent, out=np.zeros_like(extent), where=extent > 0)
    unit = (points - low) * scale
    levels = 1 << bits
    cells = np.floor(unit * levels)
    return np.minimum(cells, levels - 1).astype(np.uint64)


def _spread_by_1(x):
    """Insert one zero bit between the low 32 bits of ``x`` (uint64)."""
    x = x & 0x00000000FFFFFFFF
    x = (x | (x << 16)) & 0x0000FFFF0000FFFF
    x = (x | (x << 8)) & 0x00FF00FF00FF00FF
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0F
    x = (x | (x << 2)) & 0x3333333333333333
    return (x | (x << 1)) & 0x5555555555555555


def _spread_by_2(x):
    """Insert two zero bits between the low 21 bits of ``x`` (uint64)."""
    x = x & 0x1FFFFF
    x = (x | (x << 32)) & 0x001F00000000FFFF
    x = (x | (x << 16)) & 0x001F0000FF0000FF
    x = (x | (x << 8)) & 0x100F00F00F00F00F
    x = (x | (x << 4)) & 0x10C30C30C30C30C3
    return (x | (x << 2)) & 0x1249249249249249


def _interleave_generic(cells, bits):
    """Morton keys by a loop over bits: bit ``j`` of axis ``k`` goes to bit ``j d + k``."""
    d = cells.shape[1]
    keys = np.zeros(cells.shape[0], dtype=np.uint64)
    for j in range(bits):
        for k in range(d):
            keys |= ((cells[:, k] >> j) & 1) << (j * d + k)
    return keys


def _interleave(cells, bits):
    """Morton keys of quantized cells ``(n, d)``; axis 0 holds the lowest bit of a group."""
    d = cells.shape[1]
    if d == 1:
        return cells[:, 0].copy()
    if d == 2:
        return _spread_by_1(cells[:, 0]) | (_spread_by_1(cells[:, 1]) << 1)
    if d == 3:
        return (
            _spread_by_2(cells[:, 0])
            | (_spread_by_2(cells[:, 1]) << 1)
            | (_spread_by_2(cells[:, 2]) << 2)
        )
    return _interleave_generic(cells, bits)


def _morton_bits(d):
    """Bits per coordinate: ``min(floor(63 / d), 21)``."""
    if d > 63:
        raise ValueError(
            f"morton_order handles at most 63 dimensions; points has d={d}. Use kdtree_order "
            "instead."
        )
    return min(63 // d, _MAX_MORTON_BITS)


def morton_order(points, tile_size=None):
    """Order sites along the Morton (Z-order) space-filling curve.

    Each coordinate is scaled to ``[0, 1]`` by the bounding box and quantized to
    ``b = min(floor(63 / d), 21)`` bits; bit ``j`` of axis ``k`` goes to bit
    ``j * d + k`` of a uint64 key, and the sites are sorted by key. Tiles are not aligned
    with the curve's quadrants, so :func:`kdtree_order` usually compresses better.

    `points` and the returned `perm` are as for :func:`kdtree_order`, with ``d <= 63``;
    `tile_size` is ignored but checked when given. Raises as :func:`kdtree_order`, and
    ValueError for ``d > 63``.

    Examples
    --------
    >>> import numpy as np
    >>> grid = np.array([[x, y] for y in range(2) for x in range(2)], dtype=float)
    >>> morton_order(grid[::-1])
    array([3, 2, 1, 0])
    """
    points = _check_points(points)
    n, d = points.shape
    _check_optional_tile_size(tile_size, n)
    bits = _morton_bits(d)
    keys = _interleave(_quantize(points, bits), bits)
    return np.argsort(keys, kind="stable").astype(np.int64, copy=False)


# ---------------------------------------------------------------------- others
def identity_order(points, tile_size=None):
    """Keep the input order: ``np.arange(n)`` (int64), after checking `points` and
    `tile_size` as :func:`morton_order` does."""
    points = _check_points(points)
    n = points.shape[0]
    _check_optional_tile_size(tile_size, n)
    return np.arange(n, dtype=np.int64)


_ORDERERS = {"kdtree": kdtree_order, "morton": morton_order, "none": identity_order}


def order_points(points, method="kdtree", tile_size=None):
    """Permutation of the sites for TLR compression by `method`: ``"kdtree"``
    (:func:`kdtree_order`), ``"morton"`` or ``"none"`` (case-insensitive).

    `points` and the result are as for :func:`kdtree_order`; `tile_size` defaults to
    :func:`auto_tile_size` of ``n``. Raises TypeError or ValueError for a bad `method`,
    `points` or `tile_size`.
    """
    if not isinstance(method, str):
        raise TypeError(f"method must be a string, one of {ORDERING_METHODS}; got {method!r}.")
    key = method.lower()
    if key not in _ORDERERS:
        raise ValueError(f"method={method!r} is not one of {ORDERING_METHODS}.")
    points = _check_points(points)
    if tile_size is None:
        tile_size = auto_tile_size(points.shape[0])
    return _ORDERERS[key](points, tile_size)


def auto_tile_size(n, costly_kernel=False):
    """Default tile size for ``n`` sites.

    ``min(n, clip(2**round(log2(c sqrt(n))), 256, 2048))`` with ``c = 15``, or
    ``c = 5.66`` for a costly kernel: the number of tiles grows like ``sqrt(n)``; at
    least 256 keeps per-tile overheads small, at most 2048 keeps the dense diagonal
    tiles (``8 n tile`` bytes) a fraction of the factor. Larger tiles mean larger BLAS
    calls but more kernel entries (``n * tile`` in the diagonal tiles, for the
    covariance and each derivative), hence smaller tiles when an entry is costly.

    ==============  ======  ======  ======  ======  =======  ========  ========
    n               100     1000    4096    8192    16384    131072    2**21
    tile            100     512     1024    1024    2048     2048      2048
    tile, costly    100     256     512     512     1024     2048      2048
    ==============  ======  ======  ======  ======  =======  ========  ========

    `costly_kernel`: whether kernel entries are costly (:func:`geostat.solvers.site_order`
    says when). Returns a tile size in ``[1, n]``; TypeError for a non-integer `n`,
    ValueError for ``n < 1``.
    """
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n must be an integer number of sites; got {n!r}.")
    if n < 1:
        raise ValueError(f"n must be at least 1; got {n}.")
    scale = _COSTLY_TILE_SCALE if costly_kernel else _TILE_SCALE
    exponent = math.floor(math.log2(scale * math.sqrt(n)) + 0.5)
    tile = min(max(1 << exponent, _MIN_AUTO_TILE), _MAX_AUTO_TILE)
    return int(min(n, tile))


def inverse_permutation(perm):
    """Inverse of a permutation: ``inv[perm] == arange(n)``, so ``y[perm][inv] == y``.

    Returns an int64 array; TypeError if `perm` is not an integer array, ValueError if
    it is not a 1-D permutation of ``0 .. n - 1``.

    Examples
    --------
    >>> inverse_permutation([2, 0, 1])
    array([1, 2, 0])
    """
    perm = np.asarray(perm)
    if perm.dtype.kind not in "iu":
        raise TypeError(f"perm must be an integer array; got dtype {perm.dtype}.")
    if perm.ndim != 1:
        raise ValueError(f"perm must be 1-D; got {perm.ndim} dimensions.")
    n = perm.size
    if n and (perm.min() < 0 or perm.max() >= n):
        raise ValueError(
            f"perm must be a permutation of 0..{n - 1}; it has entries outside that range."
        )
    inverse = np.full(n, -1, dtype=np.int64)
    inverse[perm] = np.arange(n, dtype=np.int64)
    if n and inverse.min() < 0:
        raise ValueError("perm must be a permutation; it has repeated entries.")
    return inverse
