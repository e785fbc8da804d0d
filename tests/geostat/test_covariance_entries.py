"""Sites.covariance_block(...).entries: the covariance at scattered index pairs, as the
blocks give it."""

import numpy as np
import pytest

import geostat.kernels._base as kernel_base
from geostat.covariance import Sites
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.kernels.tabulation import RadialFunction, RadialTable
from geostat.solvers import NUMPY


@pytest.mark.parametrize(
    "kernel, params, dim, distance",
    [
        ("exponential", {"variance": 2.0, "range": 0.1, "nugget": 0.05}, 2, "euclidean"),
        ("matern", {"variance": 1.0, "range": 0.2, "smoothness": 1.5}, 3, "euclidean"),
        ("exponential", {"variance": 1.0, "range": 500.0, "nugget": 0.1}, 2, "great_circle"),
    ],
    ids=["exp2d-nugget", "matern15-3d", "great-circle"],
)
def test_entries_equal_the_blocks(kernel, params, dim, distance):
    rng = np.random.default_rng(5)
    if distance == "great_circle":
        coords = np.column_stack([rng.uniform(-120, -80, 200), rng.uniform(30, 50, 200)])
    else:
        coords = rng.uniform(size=(200, dim))
    kern = get_kernel(kernel, params.get("smoothness"))
    block = Sites(coords, get_distance(distance), NUMPY).covariance_block(kern, params)
    rows, cols = np.arange(40, 120), np.arange(100, 160)  # overlapping: nugget on 20 entries
    C = block(rows, cols)
    # Both sum the squared coordinate differences in coordinate order (scipy's cdist on
    # the host, NumPy here): equal to rounding; a few ulps of d change exp(-d / range) by
    # a few ulps times d / range <= 20, far below 1e-12.
    np.testing.assert_allclose(block.entries(rows[:, None], cols[None, :]), C, rtol=1e-12, atol=0)
    # scattered pairs, stacked as the tile generators ask for them
    i = rng.integers(0, 200, size=(3, 50, 1))
    j = rng.integers(0, 200, size=(3, 1, 4))
    expected = np.stack([block(i[t, :, 0], j[t, 0, :]) for t in range(3)])
    np.testing.assert_allclose(block.entries(i, j), expected, rtol=1e-12, atol=0)
    same = block.entries(np.arange(10), np.arange(10))
    np.testing.assert_allclose(same, params["variance"] + params.get("nugget", 0.0), rtol=1e-15)


@pytest.mark.parametrize(
    "kernel, theta, name",
    [
        ("matern", {"range": 0.2, "smoothness": 1.5}, "range"),
        ("matern", {"range": 0.2, "smoothness": 1.3}, "smoothness"),
        ("exponential", {"range": 0.1}, "range"),
    ],
    ids=["matern15-range", "matern-smoothness", "exp-range"],
)
def test_gradient_entries_equal_the_blocks_and_the_kernel_derivative(kernel, theta, name):
    rng = np.random.default_rng(6)
    coords = rng.uniform(size=(150, 2))
    kern = get_kernel(kernel, None if name == "smoothness" else theta.get("smoothness"))
    sites = Sites(coords, get_distance("euclidean"), NUMPY)
    block = sites.gradient_block(kern, theta, name)
    rows, cols = np.arange(30, 100), np.arange(80, 130)
    D = block(rows, cols)
    shape = {k: v for k, v in theta.items() if k != "range"}
    expected = kern.correlation_and_gradient(sites.distances(rows, cols), theta["range"], **shape)[
        1
    ][name]
    expected[np.abs(expected) < 1e-100] = 0.0
    if kern.costly:  # interpolated by a RadialTable: about 1e-13 of the function's scale
        np.testing.assert_allclose(D, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    else:
        np.testing.assert_array_equal(D, expected)  # the same distances, the same formula
    # entries: the distances summed by NumPy instead of cdist, equal to rounding; the
    # derivatives are smooth in d away from 0, where both are exactly 0 (coinciding sites)
    np.testing.assert_allclose(
        block.entries(rows[:, None], cols[None, :]), D, rtol=1e-11, atol=1e-14
    )
    i = rng.integers(0, 150, size=(2, 40, 1))
    j = rng.integers(0, 150, size=(2, 1, 3))
    stacked = np.stack([block(i[t, :, 0], j[t, 0, :]) for t in range(2)])
    np.testing.assert_allclose(block.entries(i, j), stacked, rtol=1e-11, atol=1e-14)


def test_evaluate_gives_the_derivatives_asked_for():
    kern = get_kernel("matern", None)
    d = np.linspace(0.0, 1.0, 50)
    m_all, all_grads = kern.evaluate(d, 0.3, {"smoothness": 1.3}, gradient=True)
    m_range, range_only = kern.evaluate(d, 0.3, {"smoothness": 1.3}, gradient=("range",))
    assert set(all_grads) == {"range", "smoothness"} and set(range_only) == {"range"}
    np.testing.assert_array_equal(m_range, m_all)
    np.testing.assert_array_equal(range_only["range"], all_grads["range"])
    assert kern.evaluate(d, 0.3, {"smoothness": 1.3})[1] == {}


def test_the_nugget_goes_on_every_pair_of_one_site():
    coords = np.random.default_rng(7).uniform(size=(30, 2))
    params = {"variance": 1.5, "range": 0.2, "nugget": 0.25}
    block = Sites(coords, get_distance("euclidean"), NUMPY).covariance_block(
        get_kernel("exponential"), params
    )
    idx = np.arange(5, 25)
    C = block(idx, idx)  # a diagonal tile: the same increasing sites
    np.testing.assert_allclose(np.diagonal(C), 1.75, rtol=1e-15)
    assert np.all(C[~np.eye(20, dtype=bool)] < 1.5)
    rows, cols = np.array([3, 4, 3, 9]), np.array([3, 3, 8])  # repeated sites: every equal pair
    expected = block(rows, cols)
    same = rows[:, None] == cols[None, :]
    np.testing.assert_allclose(expected[same], 1.75, rtol=1e-15)
    assert np.all(expected[~same] < 1.5)
    np.testing.assert_array_equal(
        block(np.arange(20, 0, -1), np.arange(20, 0, -1)).diagonal(), np.full(20, 1.75)
    )
    far = block.entries(np.arange(0, 5)[:, None], np.arange(10, 15)[None, :])  # disjoint: no nugget
    np.testing.assert_allclose(far, block(np.arange(0, 5), np.arange(10, 15)), rtol=1e-12)
    assert np.all(far < 1.5)


@pytest.mark.parametrize("chunking", ["threaded", "bounded"])
@pytest.mark.parametrize("smoothness", [1.5, 0.8], ids=["formula", "table"])
def test_blocks_evaluated_in_chunks_equal_one_evaluation_of_the_distances(
    smoothness, chunking, monkeypatch
):
    """A block large enough to be cut into chunks (:func:`~geostat.kernels._base.map_chunks`)
    holds, chunk by chunk in the memory of its distances, what one evaluation of all its
    distances gives: through a formula to a few ulps (elementwise, but NumPy's ``exp`` on
    another length may take another code path for the last entries); to the table's
    rounding through a :class:`~geostat.kernels.tabulation.RadialTable`, whose log and
    floor may round differently on another length."""
    coords = np.random.default_rng(8).uniform(size=(300, 2))
    kern = get_kernel("matern", None if smoothness == 0.8 else smoothness)
    sites = Sites(coords, get_distance("euclidean"), NUMPY)
    theta = {"range": 0.2, "smoothness": smoothness}
    rows, cols = np.arange(0, 120), np.arange(50, 300)  # 30,000 entries: one evaluation
    d = sites.distances(rows, cols)
    shape = kern.resolve_shape({"smoothness": smoothness})
    radial = RadialTable if kern.costly else RadialFunction
    expected_C = 2.0 * radial(kern, 0.2, shape)(d.copy()) + 0.1 * (rows[:, None] == cols[None, :])
    expected_D = radial(kern, 0.2, shape, "range")(d.copy())
    expected_D[np.abs(expected_D) < 1e-100] = 0.0
    if chunking == "bounded":  # the loop of arrays other than NumPy's, on NumPy
        monkeypatch.setattr(kernel_base, "_CHUNK_LOOPS", {})
        monkeypatch.setattr(kernel_base, "DEVICE_CHUNK", 1000)
    else:
        monkeypatch.setattr(kernel_base, "_PARALLEL_MIN_SIZE", 1000)
        monkeypatch.setattr(kernel_base, "_CHUNK_SIZE", 777)
    C = sites.covariance_block(kern, {"variance": 2.0, "nugget": 0.1, **theta})(rows, cols)
    D = sites.gradient_block(kern, theta, "range")(rows, cols)
    if kern.costly:
        np.testing.assert_allclose(C, expected_C, rtol=0, atol=1e-12 * np.abs(expected_C).max())
        np.testing.assert_allclose(D, expected_D, rtol=0, atol=1e-12 * np.abs(expected_D).max())
    else:
        np.testing.assert_allclose(C, expected_C, rtol=8 * np.finfo(float).eps, atol=0)
        np.testing.assert_allclose(D, expected_D, rtol=8 * np.finfo(float).eps, atol=0)
    assert C.flags.c_contiguous and C.shape == D.shape == (120, 250)


@pytest.mark.parametrize(
    "distance, dim", [("euclidean", 1), ("euclidean", 2), ("euclidean", 3), ("great_circle", 2)]
)
@pytest.mark.parametrize(
    "kernel, smoothness", [("exponential", None), ("matern", 1.5), ("matern", 0.8)]
)
def test_diagonal_blocks_keep_the_symmetry_they_promise_to_tlrcore(
    distance, dim, kernel, smoothness
):
    """The covariance and derivative blocks promise tlrcore symmetric blocks
    (``symmetric_blocks``: their diagonal tiles are not scanned): ``block(r, r)`` equals its
    transpose bit for bit, on an odd number of sites (vector loops with a remainder), with
    repeated sites, and for the tabulated Matérn of a general smoothness."""
    rng = np.random.default_rng(dim)
    m = 203
    if distance == "great_circle":
        coords = np.column_stack([rng.uniform(-180, 180, m), rng.uniform(-89, 89, m)])
        range_ = 2000.0
    else:
        coords = rng.uniform(size=(m, dim))
        range_ = 0.2
    coords[7] = coords[100]
    sites = Sites(coords, get_distance(distance), NUMPY)
    params = {"variance": 1.7, "range": range_, "nugget": 0.05}
    theta = {"range": range_} if smoothness is None else {"range": range_, "smoothness": smoothness}
    names = ["range"] + (["smoothness"] if kernel == "matern" else [])
    generators = [sites.covariance_block(get_kernel(kernel, smoothness), params)]
    generators += [sites.gradient_block(get_kernel(kernel, None), theta, name) for name in names]
    rows = rng.permutation(m)[: m - 2]
    rows.sort()
    for block in generators:
        assert block.symmetric_blocks is True
        B = block(rows, rows)
        assert np.array_equal(B, B.T), type(block).__name__


@pytest.mark.parametrize(
    "kernel, smoothness, theta, distance",
    [
        ("exponential", None, {"range": 0.1}, "euclidean"),
        ("matern", 1.5, {"range": 0.2}, "euclidean"),
        ("matern", None, {"range": 0.3, "smoothness": 0.8}, "euclidean"),
        ("exponential", None, {"range": 500.0}, "great_circle"),
    ],
    ids=["exp", "matern15", "matern-free", "great-circle"],
)
def test_cross_correlation_is_the_validated_correlation_of_the_distances(
    kernel, smoothness, theta, distance
):
    """Written over the distances it computes, the cross-correlation is the value of the
    validated kernel call, bit for bit (large enough for the kernels' chunked threads), and
    the coordinates are left as they were."""
    from geostat.covariance import cross_correlation

    rng = np.random.default_rng(6)
    if distance == "great_circle":
        a = np.column_stack([rng.uniform(-120, -80, 700), rng.uniform(30, 50, 700)])
        b = np.column_stack([rng.uniform(-120, -80, 500), rng.uniform(30, 50, 500)])
    else:
        a, b = rng.uniform(size=(700, 2)), rng.uniform(size=(500, 2))
    a0, b0 = a.copy(), b.copy()
    kern, dist = get_kernel(kernel, smoothness), get_distance(distance)
    shape = {k: v for k, v in theta.items() if k != "range"}
    expected = kern.correlation(dist.cross(a, b), theta["range"], **shape)
    np.testing.assert_array_equal(cross_correlation(kern, dist, theta, a, b), expected)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
