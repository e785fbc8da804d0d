"""Orderings of sites that make the off-diagonal tiles of a covariance matrix low rank.

A tile low-rank (TLR) matrix groups its rows and columns into tiles of ``tile_size``
consecutive indices. The off-diagonal tile ``(i, j)`` of a covariance matrix is
numerically low rank when the sites of tile ``i`` and those of tile ``j`` form two
compact, well separated clusters. The functions here return a permutation ``perm`` of
the sites such that ``points[perm]`` is a good order; every function returns a new
``int64`` array of shape ``(n,)`` and leaves its input untouched.

Public names
------------
kdtree_order
    Cluster tree of the H2Opus TLR paper: every block of ``tile_size`` consecutive sites
    is a leaf of a KD-tree (the default).
morton_order
    Sort by Morton (Z-order) code, as in the ExaGeoStat / HiCMA TLR papers.
identity_order
    Keep the input order (no reordering).
order_points
    Dispatch on ``method`` in :data:`ORDERING_METHODS`.
auto_tile_size
    Default tile size for ``n`` sites.
inverse_permutation
    ``inv`` with ``inv[perm] = arange(n)``, to map results back to the input order.

Notes
-----
Both tree and curve orderings break ties (equal coordinates) by the original index of
the site, so they are deterministic: the same input always gives the same permutation.
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
            f"points must hold at least one site with at least one coordinate; got shape {array.shape}."
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
    """Rank of every site along every axis, ties broken by original index.

    Parameters
    ----------
    coords : ndarray, shape (d, n)
        Coordinates, one row per axis.

    Returns
    -------
    ndarray of int64, shape (d, n)
        ``ranks[k, i]`` is the position of site ``i`` in the stable sort of
        ``coords[k]``; all entries of one row are distinct.
    """
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
    """Axis of largest bounding-box extent of every segment (first axis on ties).

    Parameters
    ----------
    coords : ndarray, shape (d, n)
        Coordinates, one row per axis.
    perm : ndarray of int64, shape (n,)
        Current order of the sites.
    starts : ndarray of int64
        First position of every segment of ``perm``, increasing, starting at 0.
    """
    ordered = np.take(coords, perm, axis=1)
    extent = np.maximum.reduceat(ordered, starts, axis=1) - np.minimum.reduceat(
        ordered, starts, axis=1
    )
    return np.argmax(extent, axis=0)


def _split_level(coords, ranks, perm, bounds, tile_size):
    """Split every cluster of more than ``tile_size`` sites once.

    A cluster is a segment ``perm[bounds[s]:bounds[s + 1]]``. Its sites are sorted along
    the axis of largest extent (ties by original index) and the segment is cut after
    :func:`_left_sizes` sites; smaller segments (leaves) keep their order.

    Parameters
    ----------
    coords : ndarray, shape (d, n)
        Coordinates, one row per axis.
    ranks : ndarray of int64, shape (d, n)
        :func:`_axis_ranks` of ``coords``.
    perm : ndarray of int64, shape (n,)
        Current order of the sites.
    bounds : ndarray of int64
        Segment boundaries, ``0 = bounds[0] < ... < bounds[-1] = n``.
    tile_size : int
        Largest leaf.

    Returns
    -------
    perm : ndarray of int64
        The new order (a new array).
    bounds : ndarray of int64
        Segment boundaries including the new cuts.
    """
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

    The cluster tree of the H2Opus TLR Cholesky paper: starting from all sites, a
    cluster of ``c > tile_size`` sites is sorted along the axis of largest extent of its
    bounding box (ties between coordinates by original index, ties between axes by the
    first axis) and split into a left cluster of ``2**(ceil(log2(ceil(c / tile_size))) - 1)
    * tile_size`` sites and a right cluster with the rest; both are split again until
    they hold at most ``tile_size`` sites. The left cluster is always a whole number of
    tiles, so every tile of ``points[perm]`` is one leaf: all hold exactly ``tile_size``
    sites except the last, which holds ``n % tile_size`` when that is not zero. Clusters
    nest: a cluster of ``t > 1`` tiles is a run of ``t`` consecutive tiles whose first
    ``2**(ceil(log2(t)) - 1)`` tiles form its left child. Sites inside a leaf stay
    sorted along the last split axis.

    The tree is built level by level, with one vectorized sort of all sites per level
    (``O(n log n log(n / tile_size))``): about 0.4 s for a million 2-D sites and 1.1 s
    for two million on two CPU cores.

    Parameters
    ----------
    points : array_like, shape (n, d) or (n,)
        Site coordinates; a 1-D array means ``d = 1``. Must be finite.
    tile_size : int
        Sites per tile, ``1 <= tile_size <= n``.

    Returns
    -------
    perm : ndarray of int64, shape (n,)
        Permutation: ``points[perm]`` is the new order.

    Raises
    ------
    TypeError
        If `points` is not numeric or `tile_size` is not an integer.
    ValueError
        If `points` is empty, not 2-D or not finite, or `tile_size` is outside ``[1, n]``.

    See Also
    --------
    morton_order : a cheaper space-filling-curve ordering.
    inverse_permutation : map results back to the input order.

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
    """Scale each coordinate to [0, 1] by the bounding box and quantize to ``bits`` bits.

    A zero-extent axis maps to 0. Returns a uint64 array of the same shape.
    """
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
    """Morton keys of quantized cells, shape (n, d): axis 0 holds the lowest bit of each group."""
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
            f"morton_order handles at most 63 dimensions; points has d={d}. Use kdtree_order instead."
        )
    return min(63 // d, _MAX_MORTON_BITS)


def morton_order(points, tile_size=None):
    """Order sites along the Morton (Z-order) space-filling curve.

    Each coordinate is scaled to ``[0, 1]`` by the global bounding box (an axis of zero
    extent maps to 0) and quantized to ``b = min(floor(63 / d), 21)`` bits (21 for
    ``d <= 3``); the bits are interleaved into a uint64 key, bit ``j`` of axis ``k``
    going to bit ``j * d + k`` (so axis 0 varies fastest), and the sites are sorted by
    key, ties by original index. Consecutive sites on the curve are close, but tiles are
    not aligned with the curve's quadrants unless ``n`` is a power of two times a
    uniform density, so :func:`kdtree_order` usually compresses a little better.

    Parameters
    ----------
    points : array_like, shape (n, d) or (n,)
        Site coordinates; a 1-D array means ``d = 1``; ``d <= 63``. Must be finite.
    tile_size : int, optional
        Ignored (accepted for a signature shared with :func:`kdtree_order`), but
        checked to be an integer in ``[1, n]`` when given.

    Returns
    -------
    perm : ndarray of int64, shape (n,)
        Permutation: ``points[perm]`` is the new order.

    Raises
    ------
    TypeError
        If `points` is not numeric or `tile_size` is not an integer.
    ValueError
        If `points` is empty, not 2-D, not finite or has ``d > 63``, or `tile_size` is
        outside ``[1, n]``.

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
    """Keep the input order: ``np.arange(n)``.

    Parameters
    ----------
    points : array_like, shape (n, d) or (n,)
        Site coordinates (checked like in :func:`kdtree_order`).
    tile_size : int, optional
        Ignored, but checked to be an integer in ``[1, n]`` when given.

    Returns
    -------
    perm : ndarray of int64, shape (n,)
        ``np.arange(n)``.
    """
    points = _check_points(points)
    n = points.shape[0]
    _check_optional_tile_size(tile_size, n)
    return np.arange(n, dtype=np.int64)


_ORDERERS = {"kdtree": kdtree_order, "morton": morton_order, "none": identity_order}


def order_points(points, method="kdtree", tile_size=None):
    """Permutation of the sites for TLR compression by the named method.

    Parameters
    ----------
    points : array_like, shape (n, d) or (n,)
        Site coordinates; a 1-D array means ``d = 1``. Must be finite.
    method : {"kdtree", "morton", "none"}, default "kdtree"
        :func:`kdtree_order`, :func:`morton_order` or :func:`identity_order`;
        case-insensitive.
    tile_size : int, optional
        Sites per tile, ``1 <= tile_size <= n``; default :func:`auto_tile_size` of ``n``.

    Returns
    -------
    perm : ndarray of int64, shape (n,)
        Permutation: ``points[perm]`` is the new order.

    Raises
    ------
    TypeError
        If `method` is not a string, `points` is not numeric or `tile_size` is not an
        integer.
    ValueError
        If `method` is unknown, or `points` or `tile_size` is invalid.
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

    The rule is ``min(n, clip(2**round(log2(c sqrt(n))), 256, 2048))`` with ``c = 15``,
    or ``c = 5.66`` for a costly kernel: the power of two nearest ``c sqrt(n)`` (so the
    number of tiles also grows like ``sqrt(n)``), at least 256 so that per-tile overheads
    stay small, at most 2048 so that the dense diagonal tiles (``8 n tile`` bytes) stay a
    fraction of the factor, and never more than ``n`` (fewer than 256 sites make a single
    dense tile).

    Larger tiles mean fewer, larger BLAS calls (diagonal tiles of 1024 and more are
    factored by blocks on all cores, :mod:`tlrcore.dense.blocked`) but more kernel
    entries: ``n * tile`` in the dense diagonal tiles, for the covariance and for every
    derivative. Where an entry is cheap, the larger tiles win. One TLR log-likelihood on
    2 cores, medians of 3 (2-D, range 0.1, accuracy 1e-8):

    ========  ===========================================================
    n         seconds at tile 256 / 512 / 1024 / 2048
    ========  ===========================================================
    4,096     Matern 1.5: 1.41 / 1.06 / **0.69** / 0.73
    8,192     Matern 1.5: 4.64 / 1.85 / 1.87 / 1.69; co2 cells: 2.65 at
              512, **1.88** at 1024, 2.37 at 2048
    16,384    Matern 1.5: 14.4 / 7.65 / 4.50 / **3.74**
    32,768    exponential: - / 19.2 / 12.1 / **8.60**
    ========  ===========================================================

    A whole fit of the 8,192 co2 cells (Matérn 1.5 + nugget) took 29.0 s at tile 1024
    against 42.3 s at 512 (medians of 2). Where an entry is costly (a Matérn smoothness
    other than 0.5, 1.5, 2.5, or a shape parameter that is estimated, whose derivative
    needs its own dense tiles), the smaller tiles of ``c = 5.66`` win: ``geostat fit
    --dataset co2`` (26,633 cells, smoothness estimated) took 285 s at tile 1024 and
    505 s at 2048 (one run each); with the entries interpolated
    (:class:`geostat.kernels.tabulation.RadialTable`, 5-8 times faster), 41.4 s against
    55.1 s.

    ==============  ======  ======  ======  ======  =======  ========  ========
    n               100     1000    4096    8192    16384    131072    2**21
    tile            100     512     1024    1024    2048     2048      2048
    tile, costly    100     256     512     512     1024     2048      2048
    ==============  ======  ======  ======  ======  =======  ========  ========

    Parameters
    ----------
    n : int
        Number of sites, ``n >= 1``.
    costly_kernel : bool, default False
        Whether kernel entries are costly (:func:`geostat.solvers.site_order` says when).

    Returns
    -------
    int
        Tile size in ``[1, n]``.

    Raises
    ------
    TypeError
        If `n` is not an integer.
    ValueError
        If `n < 1`.
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
    """Inverse of a permutation: ``inv[perm] == arange(n)``.

    If ``y_ordered = y[perm]``, then ``y_ordered[inv] == y``.

    Parameters
    ----------
    perm : array_like of int, shape (n,)
        A permutation of ``0 .. n - 1``.

    Returns
    -------
    inv : ndarray of int64, shape (n,)

    Raises
    ------
    TypeError
        If `perm` is not an integer array.
    ValueError
        If `perm` is not 1-D or not a permutation of ``0 .. n - 1``.

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
