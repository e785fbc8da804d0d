"""Tests of geostat.ordering: permutations, KD-tree leaves, Morton keys, tile ranks."""

import numpy as np
import pytest
from problems import covariance
from threadpoolctl import threadpool_limits

from geostat.ordering import (
    ORDERING_METHODS,
    _interleave,
    _interleave_generic,
    _quantize,
    auto_tile_size,
    identity_order,
    inverse_permutation,
    kdtree_order,
    morton_order,
    order_points,
)

ORDERERS = [
    pytest.param(kdtree_order, id="kdtree"),
    pytest.param(morton_order, id="morton"),
    pytest.param(identity_order, id="identity"),
    pytest.param(lambda x, t: order_points(x, "kdtree", t), id="order_points-kdtree"),
    pytest.param(lambda x, t: order_points(x, "Morton", t), id="order_points-Morton"),
    pytest.param(lambda x, t: order_points(x, "none", t), id="order_points-none"),
    pytest.param(lambda x, t: order_points(x), id="order_points-default"),
]
DIMS = [pytest.param(d, id=f"{d}d") for d in (1, 2, 3)]


def reference_kdtree(points, tile_size):
    """Recursive KD-tree order written plainly (a Python loop per node)."""
    points = np.asarray(points, dtype=float).reshape(len(points), -1)

    def split(index):
        if index.size <= tile_size:
            return [index]
        box = points[index]
        axis = int(np.argmax(box.max(axis=0) - box.min(axis=0)))
        index = index[np.lexsort((index, points[index, axis]))]
        n_tiles = -(-index.size // tile_size)
        left = 2 ** (int(np.ceil(np.log2(n_tiles))) - 1) * tile_size
        return split(index[:left]) + split(index[left:])

    return np.concatenate(split(np.arange(len(points))))


def tile_diameters(points, tile_size):
    """Bounding-box diagonal of every full tile of consecutive points."""
    n_full = len(points) // tile_size
    tiles = points[: n_full * tile_size].reshape(n_full, tile_size, -1)
    return np.linalg.norm(tiles.max(axis=1) - tiles.min(axis=1), axis=1)


def mean_offdiagonal_rank(points, tile_size, length=0.1, rtol=1e-8):
    """Mean numerical rank of the off-diagonal tiles of exp(-|x - y| / length)."""
    cov = covariance(points, range_=length)
    n_tiles = len(points) // tile_size
    ranks = []
    # small SVDs: one BLAS thread is faster and immune to a busy machine
    with threadpool_limits(1, "blas"):
        for i in range(n_tiles):
            for j in range(i):
                block = cov[
                    i * tile_size : (i + 1) * tile_size, j * tile_size : (j + 1) * tile_size
                ]
                s = np.linalg.svd(block, compute_uv=False)
                ranks.append(int(np.sum(s > rtol * s[0])))
    return float(np.mean(ranks))


# ---------------------------------------------------------------------- all orderings
@pytest.mark.parametrize("order", ORDERERS)
@pytest.mark.parametrize("d", DIMS)
def test_returns_deterministic_int64_permutation_without_mutating(order, d, rng):
    points = rng.random((1000, d))
    before = points.copy()
    perm = order(points, 128)
    assert perm.dtype == np.int64
    assert perm.shape == (1000,)
    np.testing.assert_array_equal(np.sort(perm), np.arange(1000))
    np.testing.assert_array_equal(order(points, 128), perm)
    np.testing.assert_array_equal(points, before)


@pytest.mark.parametrize("order", ORDERERS)
def test_single_point_and_one_dimensional_list(order):
    np.testing.assert_array_equal(order([[0.5, 0.5]], 1), [0])
    perm = order([3.0, 1.0, 2.0, 0.0], 2)
    np.testing.assert_array_equal(np.sort(perm), np.arange(4))


@pytest.mark.parametrize(
    "func", [pytest.param(kdtree_order, id="kdtree"), pytest.param(morton_order, id="morton")]
)
def test_one_dimensional_points_are_sorted(func):
    np.testing.assert_array_equal(func([3.0, 1.0, 2.0, 0.0], 2), [3, 1, 2, 0])
    np.testing.assert_array_equal(func([[3.0], [1.0], [2.0], [0.0]], 1), [3, 1, 2, 0])


def test_identity_order_is_arange(rng):
    np.testing.assert_array_equal(identity_order(rng.random((7, 2))), np.arange(7))


# ---------------------------------------------------------------------- kd-tree
@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize(
    "n, tile_size", [(1000, 128), (1024, 128), (777, 100), (50, 7), (5, 5), (5, 1)]
)
def test_kdtree_matches_recursive_reference(n, tile_size, d, rng):
    points = rng.random((n, d))
    np.testing.assert_array_equal(
        kdtree_order(points, tile_size), reference_kdtree(points, tile_size)
    )


def test_kdtree_ties_broken_by_original_index():
    # a 8 x 8 grid listed in a shuffled order: many equal coordinates
    grid = np.stack(np.meshgrid(np.arange(8.0), np.arange(8.0)), axis=-1).reshape(-1, 2)
    shuffled = grid[np.random.default_rng(3).permutation(64)]
    np.testing.assert_array_equal(kdtree_order(shuffled, 4), reference_kdtree(shuffled, 4))
    same = np.zeros((10, 2))
    np.testing.assert_array_equal(kdtree_order(same, 3), np.arange(10))


def test_kdtree_small_example():
    x = np.array([[0.0, 0.0], [5.0, 0.1], [0.1, 0.0], [5.1, 0.0]])
    np.testing.assert_array_equal(kdtree_order(x, 2), [0, 2, 1, 3])
    np.testing.assert_array_equal(kdtree_order(x, 4), [0, 1, 2, 3])


@pytest.mark.parametrize("d", DIMS)
def test_kdtree_tiles_are_compact(d, rng):
    # 78 full tiles and a ragged one of 8 points; a tile holds 1/78 of the unit cube,
    # so its diameter shrinks like 78**(-1/d) (about 0.24 of a random tile's in 3-D).
    points = rng.random((5000, d))
    tiled = points[kdtree_order(points, 64)]
    ratio = tile_diameters(tiled, 64).mean() / tile_diameters(points, 64).mean()
    assert ratio < 1 / 3


def separated(left, right):
    """True if a plane normal to some axis has every left point on one side."""
    return bool(np.any(left.max(axis=0) <= right.min(axis=0)))


def assert_clusters_nest(tiled, tile_size, start=0, stop=None):
    """Every cluster of more than one tile splits into separated halves of whole tiles."""
    stop = len(tiled) if stop is None else stop
    n_tiles = -(-(stop - start) // tile_size)
    if n_tiles <= 1:
        return
    middle = start + 2 ** (int(np.ceil(np.log2(n_tiles))) - 1) * tile_size
    assert separated(tiled[start:middle], tiled[middle:stop]), (start, middle, stop)
    assert_clusters_nest(tiled, tile_size, start, middle)
    assert_clusters_nest(tiled, tile_size, middle, stop)


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("n, tile_size", [(1000, 128), (4096, 64), (3001, 250)])
def test_kdtree_clusters_nest(n, tile_size, d, rng):
    # e.g. n = 1000, tile 128: 8 tiles, the last one ragged; the root splits into 4 | 4
    # tiles, each half into 2 | 2, each quarter into 1 | 1.
    points = rng.random((n, d))
    assert_clusters_nest(points[kdtree_order(points, tile_size)], tile_size)


def test_kdtree_first_tiles_form_left_cluster(rng):
    # two far-apart blobs of 300 and 700 points, tile 100: the root's left cluster is
    # the first 8 tiles, so it must be cut along x with the 300-point blob inside it.
    blobs = np.vstack([rng.random((700, 2)) + [10.0, 0.0], rng.random((300, 2))])
    tiled = blobs[kdtree_order(blobs, 100)]
    assert tiled[:300, 0].max() < 1.0
    assert tiled[800:, 0].min() > 10.0


# ---------------------------------------------------------------------- Morton
def test_morton_4x4_grid_is_z_order(rng):
    grid = np.array([[x, y] for y in range(4) for x in range(4)], dtype=float)  # row-major
    shuffle = rng.permutation(16)
    z_order = [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1),
               (0, 2), (1, 2), (0, 3), (1, 3), (2, 2), (3, 2), (2, 3), (3, 3)]  # fmt: skip
    np.testing.assert_array_equal(grid[shuffle][morton_order(grid[shuffle])], z_order)


def test_morton_2x2x2_cube_is_z_order():
    cube = np.array([[x, y, z] for x in range(2) for y in range(2) for z in range(2)], dtype=float)
    expected = [[x, y, z] for z in range(2) for y in range(2) for x in range(2)]
    np.testing.assert_array_equal(cube[morton_order(cube)], expected)


def test_morton_ties_keep_original_order():
    points = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(morton_order(points), [1, 3, 0, 2])


def test_morton_one_dimension_sorts(rng):
    x = rng.random(500)
    np.testing.assert_array_equal(morton_order(x), np.argsort(x, kind="stable"))


def test_morton_zero_extent_axis_is_ignored(rng):
    x = rng.random(200)
    flat = np.column_stack([x, np.full(200, 7.0), np.full(200, -1.0)])
    np.testing.assert_array_equal(morton_order(flat), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("d", [pytest.param(d, id=f"{d}d") for d in (2, 3)])
def test_morton_magic_numbers_match_bit_loop(d, rng):
    cells = _quantize(rng.random((1000, d)), 21)
    cells[:2] = [[0] * d, [2**21 - 1] * d]  # extreme cells
    np.testing.assert_array_equal(_interleave(cells, 21), _interleave_generic(cells, 21))


def test_morton_five_dimensions(rng):
    points = rng.random((3000, 5))
    perm = morton_order(points)
    np.testing.assert_array_equal(np.sort(perm), np.arange(3000))
    # 12 bits per axis; neighbours on the curve are closer than random pairs
    steps = np.linalg.norm(np.diff(points[perm], axis=0), axis=1).mean()
    assert steps < 0.7 * np.linalg.norm(np.diff(points, axis=0), axis=1).mean()
    cells = _quantize(points, 12)
    top = cells >> 11  # the highest bit of every axis decides the first 2**5 blocks
    key = (top * (1 << np.arange(5, dtype=np.uint64))).sum(axis=1)
    assert np.all(np.diff(key[perm].astype(np.int64)) >= 0)


# ---------------------------------------------------------------------- compression
@pytest.fixture(scope="module")
def square_points():
    """2048 uniform random sites in the unit square."""
    return np.random.default_rng(7).random((2048, 2))


@pytest.fixture(scope="module")
def random_order_rank(square_points):
    """Mean off-diagonal tile rank of exp(-r / 0.1), tile 256, in random order."""
    return mean_offdiagonal_rank(square_points, 256)


@pytest.mark.parametrize(
    "method", [pytest.param("kdtree", id="kdtree"), pytest.param("morton", id="morton")]
)
def test_ordering_lowers_offdiagonal_ranks(method, square_points, random_order_rank):
    ordered = square_points[order_points(square_points, method, 256)]
    assert mean_offdiagonal_rank(ordered, 256) < 0.5 * random_order_rank


# ---------------------------------------------------------------------- auto tile size
@pytest.mark.parametrize(
    "n, tile, costly_tile",
    [
        (1, 1, 1),
        (100, 100, 100),
        (255, 255, 255),
        (1000, 512, 256),
        (4096, 1024, 512),
        (8192, 1024, 512),
        (16384, 2048, 1024),
        (32768, 2048, 1024),
        (131072, 2048, 2048),
        (2**21, 2048, 2048),
    ],
    ids=lambda v: str(v),
)
def test_auto_tile_size(n, tile, costly_tile):
    assert auto_tile_size(n) == tile
    assert auto_tile_size(n, costly_kernel=True) == costly_tile
    assert isinstance(auto_tile_size(n), int)


@pytest.mark.parametrize(
    "kernel, smoothness, costly",
    [
        ("exponential", None, False),
        ("matern", 1.5, False),
        ("matern", 1.0, True),
        ("matern", None, True),
    ],
)
def test_site_order_takes_smaller_tiles_for_a_costly_kernel(kernel, smoothness, costly):
    from geostat.distance import get_distance
    from geostat.kernels import get_kernel
    from geostat.solvers import site_order

    points = np.random.default_rng(0).random((8192, 2))
    perm, tile = site_order(points, get_distance("euclidean"), get_kernel(kernel, smoothness))
    assert tile == auto_tile_size(8192, costly_kernel=costly)
    np.testing.assert_array_equal(perm, order_points(points, "kdtree", tile))


def test_auto_tile_size_is_used_by_default(rng):
    points = rng.random((3000, 2))
    np.testing.assert_array_equal(order_points(points), kdtree_order(points, auto_tile_size(3000)))
    assert auto_tile_size(np.int64(3000)) == auto_tile_size(3000)


@pytest.mark.parametrize(
    "n, error", [(0, ValueError), (-5, ValueError), (2.0, TypeError), (True, TypeError)]
)
def test_auto_tile_size_rejects(n, error):
    with pytest.raises(error, match="n must"):
        auto_tile_size(n)


# ---------------------------------------------------------------------- inverse
def test_inverse_permutation(rng):
    perm = rng.permutation(100)
    inverse = inverse_permutation(perm)
    assert inverse.dtype == np.int64
    np.testing.assert_array_equal(perm[inverse], np.arange(100))
    np.testing.assert_array_equal(inverse[perm], np.arange(100))
    values = rng.random(100)
    np.testing.assert_array_equal(values[perm][inverse], values)
    np.testing.assert_array_equal(inverse_permutation([2, 0, 1]), [1, 2, 0])
    assert inverse_permutation(np.array([], dtype=int)).size == 0


@pytest.mark.parametrize(
    "perm, error, match",
    [
        pytest.param([0, 0, 1], ValueError, "repeated", id="repeated"),
        pytest.param([0, 3, 1], ValueError, "outside", id="out-of-range"),
        pytest.param([-1, 0, 1], ValueError, "outside", id="negative"),
        pytest.param([[0, 1]], ValueError, "1-D", id="2-D"),
        pytest.param([0.0, 1.0], TypeError, "integer", id="float"),
    ],
)
def test_inverse_permutation_rejects(perm, error, match):
    with pytest.raises(error, match=match):
        inverse_permutation(perm)


# ---------------------------------------------------------------------- errors
FUNCTIONS = [
    pytest.param(kdtree_order, id="kdtree"),
    pytest.param(morton_order, id="morton"),
    pytest.param(identity_order, id="identity"),
    pytest.param(order_points, id="order_points"),
]


@pytest.mark.parametrize("func", FUNCTIONS)
@pytest.mark.parametrize(
    "points, error, match",
    [
        pytest.param([[0.0, np.nan], [1.0, 1.0]], ValueError, "points contains NaN", id="nan"),
        pytest.param(
            [[0.0, np.inf], [1.0, 1.0]], ValueError, "points contains NaN or infinite", id="inf"
        ),
        pytest.param(np.zeros((0, 2)), ValueError, "points must hold", id="empty"),
        pytest.param(np.zeros((3, 0)), ValueError, "points must hold", id="no-coordinates"),
        pytest.param(np.zeros((2, 2, 2)), ValueError, "points must be 2-D", id="3-D-array"),
        pytest.param([["a", "b"]], TypeError, "points must be a numeric", id="strings"),
    ],
)
def test_bad_points(func, points, error, match):
    with pytest.raises(error, match=match):
        func(points, tile_size=1)


@pytest.mark.parametrize("func", FUNCTIONS)
@pytest.mark.parametrize(
    "tile_size, error",
    [
        pytest.param(0, ValueError, id="zero"),
        pytest.param(-3, ValueError, id="negative"),
        pytest.param(11, ValueError, id="above-n"),
        pytest.param(2.5, TypeError, id="float"),
        pytest.param(4.0, TypeError, id="integral-float"),
        pytest.param(True, TypeError, id="bool"),
        pytest.param("4", TypeError, id="string"),
    ],
)
def test_bad_tile_size(func, tile_size, error, rng):
    with pytest.raises(error, match="tile_size"):
        func(rng.random((10, 2)), tile_size=tile_size)


def test_tile_size_accepts_numpy_integer_and_n(rng):
    points = rng.random((10, 2))
    np.testing.assert_array_equal(kdtree_order(points, np.int32(10)), np.arange(10))
    assert kdtree_order(points, np.int64(3)).dtype == np.int64


@pytest.mark.parametrize("method", ["octree", "", "kd-tree"])
def test_unknown_method(method, rng):
    with pytest.raises(ValueError, match="not one of") as info:
        order_points(rng.random((10, 2)), method)
    for name in ORDERING_METHODS:
        assert name in str(info.value)


def test_method_must_be_string(rng):
    with pytest.raises(TypeError, match="method must be a string"):
        order_points(rng.random((10, 2)), None)


def test_morton_rejects_more_than_63_dimensions(rng):
    with pytest.raises(ValueError, match="at most 63"):
        morton_order(rng.random((5, 64)))


# ---------------------------------------------------------------------- speed
@pytest.mark.parametrize(
    "method", [pytest.param("kdtree", id="kdtree"), pytest.param("morton", id="morton")]
)
def test_million_points_run(method):
    # a sanity run at a million points, not a timing
    points = np.random.default_rng(0).random((1_000_000, 2))
    perm = order_points(points, method, 1024)
    assert perm.shape == (1_000_000,)
