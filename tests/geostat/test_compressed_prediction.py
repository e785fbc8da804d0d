"""The kriging mean through compressed cross-covariance tiles against dense blocks."""

import numpy as np
import pytest

import geostat as gs
from geostat import predict, solvers


@pytest.fixture
def compressed(monkeypatch):
    """Every mean-only prediction goes through compressed tiles."""
    monkeypatch.setattr(predict, "COMPRESSED_FROM", 0)


def dense_mean(model, X, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(predict, "COMPRESSED_FROM", 2**62)
        return model.predict(X)


@pytest.mark.parametrize(
    "method, kernel, distance",
    [
        ("tlr", "exponential", "euclidean"),
        ("exact", "matern", "euclidean"),
        ("tlr", "matern", "chordal"),
    ],
)
def test_compressed_mean_equals_dense(method, kernel, distance, monkeypatch, compressed):
    rng = np.random.default_rng(4)
    n, m = 900, 5000
    if distance == "chordal":
        X = np.c_[rng.uniform(-20, 20, n), rng.uniform(30, 60, n)]
        new = np.c_[rng.uniform(-20, 20, m), rng.uniform(30, 60, m)]
        fixed = {"range": 500.0, "variance": 1.0}
    else:
        X, new = rng.random((n, 2)), rng.random((m, 2))
        fixed = {"range": 0.1, "variance": 1.0}
    y = np.sin(6 * X[:, 0]) + 0.3 * rng.standard_normal(n)
    model = gs.SpatialGP(
        kernel=kernel,
        smoothness=1.5 if kernel == "matern" else None,
        method=method,
        tile_size=128,
        fixed=fixed,
        distance=distance,
        nugget=0.05,
    ).fit(X, y)
    got = model.predict(new)
    reference = dense_mean(model, new, monkeypatch)
    # The compression tolerance is set for a row error of the accuracy (1e-8) relative to
    # the product's largest entry in the root mean square (geostat.solvers); the largest
    # of 5,000 rows stays within 10 times that (a Gaussian tail reaches about 4 times the
    # root mean square at this count).
    scale = np.abs(reference - model.coef_).max()
    assert np.abs(got - reference).max() <= 1e-7 * scale


def test_replicates_and_missing_values(monkeypatch, compressed):
    rng = np.random.default_rng(5)
    n = 600
    X = rng.random((n, 2))
    y = rng.standard_normal((n, 3))
    y[rng.random((n, 3)) < 0.2] = np.nan
    model = gs.SpatialGP(
        kernel="exponential", tile_size=128, method="tlr", fixed={"range": 0.2}
    ).fit(X, y)
    new = rng.random((3000, 2))
    got = model.predict(new)
    reference = dense_mean(model, new, monkeypatch)
    assert got.shape == (3000, 3)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference).max()


def dense_prediction(model, X, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(predict, "COMPRESSED_FROM", 2**62)
        return model.predict(X, return_std=True)


@pytest.mark.parametrize("trend", ["constant", "linear"])
def test_std_from_all_sites_as_neighbours_is_the_dense_one(trend, monkeypatch, compressed):
    """With every site a neighbour the local variance is the exact one."""
    rng = np.random.default_rng(6)
    X, y = rng.random((300, 2)), rng.standard_normal(300)
    model = gs.SpatialGP(kernel="exponential", fixed={"range": 0.2}, trend=trend).fit(X, y)
    new = rng.random((500, 2))
    monkeypatch.setattr(predict, "LOCAL_NEIGHBOURS", 300)
    mean, std = model.predict(new, return_std=True)
    dense_mean, dense_std = dense_prediction(model, new, monkeypatch)
    np.testing.assert_allclose(std, dense_std, rtol=1e-8)
    assert np.abs(mean - dense_mean).max() <= 1e-7 * np.abs(dense_mean).max()


@pytest.mark.parametrize("nugget", [0.05, 1e-4])
def test_local_std_bounds_the_exact_one_from_above(nugget, monkeypatch, compressed):
    """Conditioning on fewer sites cannot lower the variance; with 100 of 1,500 sites as
    neighbours the screening effect keeps the excess far below 1 %."""
    rng = np.random.default_rng(7)
    X = rng.random((1500, 2))
    y = np.sin(5 * X[:, 0]) + rng.standard_normal(1500) * nugget**0.5
    model = gs.SpatialGP(
        kernel="matern",
        smoothness=1.5,
        method="exact",
        fixed={"range": 0.1, "variance": 1.0},
        nugget=nugget,
    ).fit(X, y)
    new = rng.random((2000, 2))
    monkeypatch.setattr(predict, "LOCAL_NEIGHBOURS", 100)
    _, std = model.predict(new, return_std=True)
    _, dense_std = dense_prediction(model, new, monkeypatch)
    # Both variances are 1 - ||L^{-1} c_0||^2 >= 1e-4 with rounding errors of order
    # eps cond(K) <= 1e-16 / 1e-4 each: 1e-6 relative is a wide margin.
    assert np.all(std >= dense_std * (1 - 1e-6))
    assert np.all(std <= dense_std * 1.01)


def test_known_noise_enters_the_local_variance(monkeypatch, compressed):
    rng = np.random.default_rng(8)
    X, y = rng.random((300, 2)), rng.standard_normal(300)
    noise = rng.uniform(0.01, 0.5, 300)
    model = gs.SpatialGP(kernel="exponential", fixed={"range": 0.2}).fit(X, y, noise_variance=noise)
    new = rng.random((400, 2))
    monkeypatch.setattr(predict, "LOCAL_NEIGHBOURS", 300)
    _, std = model.predict(new, return_std=True)
    np.testing.assert_allclose(std, dense_prediction(model, new, monkeypatch)[1], rtol=1e-8)


def interpolated_model(rng, n=2000):
    X = rng.random((n, 2))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    return gs.SpatialGP(
        kernel="exponential", fixed={"range": 0.1, "variance": 1.0}, nugget=1e-3, method="tlr"
    ).fit(X, y)


def test_planar_sites_take_the_interpolated_product(monkeypatch, compressed, caplog):
    """x/y sites go through the fast multipole product, checked at sampled targets; a small
    nugget makes the weights large against the mean, the case the check's scale is for."""
    rng = np.random.default_rng(9)
    model = interpolated_model(rng)
    new = rng.random((6000, 2)) * 1.2 - 0.1
    with caplog.at_level("DEBUG", logger="geostat.solvers"):
        got = model.predict(new)
    assert "interpolated at order" in caplog.text
    reference = dense_mean(model, new, monkeypatch)
    # the order is taken when the sampled error is a tenth of the accuracy (1e-8)
    # relative to the product; 100 times that covers the targets not sampled
    scale = np.abs(reference - model.coef_).max()
    assert np.abs(got - reference).max() <= 1e-7 * scale


def test_an_interpolation_that_misses_the_accuracy_gives_way_to_compressed_tiles(
    monkeypatch, compressed, caplog
):
    rng = np.random.default_rng(10)
    model = interpolated_model(rng)
    new = rng.random((6000, 2))
    monkeypatch.setattr(solvers, "INTERPOLATION_ORDERS", (2,))
    with caplog.at_level("INFO", logger="geostat.solvers"):
        got = model.predict(new)
    assert "another product instead" in caplog.text
    reference = dense_mean(model, new, monkeypatch)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference - model.coef_).max()


@pytest.mark.parametrize("extent, charted", [(20.0, True), (80.0, False)])
def test_lonlat_sites_of_one_region_are_charted_on_their_tangent_plane(
    extent, charted, monkeypatch, compressed, caplog
):
    """Chordal distances within 40 degrees of the centre go through the interpolated
    product on the tangent plane; sites spread wider keep compressed tiles."""
    rng = np.random.default_rng(11)
    n = 1500

    def lonlat(count):
        return np.c_[
            rng.uniform(-extent, extent, count), rng.uniform(-extent / 2, extent / 2, count)
        ]

    X = lonlat(n)
    y = np.sin(X[:, 0] / 5) + 0.1 * rng.standard_normal(n)
    model = gs.SpatialGP(
        kernel="exponential",
        fixed={"range": 100.0 * extent, "variance": 1.0},
        nugget=1e-2,
        distance="chordal",
        method="tlr",
    ).fit(X, y)
    new = lonlat(30000)
    with caplog.at_level("DEBUG", logger="geostat.solvers"):
        got = model.predict(new)
    assert ("interpolated at order" in caplog.text) is charted
    reference = dense_mean(model, new, monkeypatch)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference - model.coef_).max()


@pytest.mark.parametrize("space_time", [False, True])
def test_kernels_of_coordinate_differences_are_interpolated_or_dense(
    space_time, monkeypatch, compressed, caplog
):
    """A geometric anisotropy is smooth away from a zero lag and goes through the
    interpolated product; a space-time product of kernels is not smooth across equal
    times and takes dense blocks (never ACA tiles, whose pivoting may miss entries)."""
    rng = np.random.default_rng(12)
    if space_time:
        sites = rng.random((150, 2))
        X = np.c_[np.repeat(sites, 8, axis=0), np.tile(np.arange(8.0), 150)]
        new = np.c_[rng.random((20000, 2)), rng.integers(0, 10, 20000)]
        kernel = gs.SpaceTime(space="exponential", separability=0.0)
        fixed = {"variance": 1.0, "range": 0.3}
    else:
        X, new = rng.random((1200, 2)), rng.random((20000, 2))
        kernel = gs.Anisotropic(gs.Exponential(), ratio=0.7, angle=0.5)
        fixed = {"variance": 1.0, "range": 0.3}
    y = np.sin(4 * X[:, 0]) + np.cos(X[:, -1]) + 0.1 * rng.standard_normal(X.shape[0])
    model = gs.SpatialGP(kernel=kernel, fixed=fixed, nugget=1e-2, n_starts=1).fit(X, y)
    with caplog.at_level("DEBUG", logger="geostat.solvers"):
        got = model.predict(new)
    assert ("interpolated at order" in caplog.text) is not space_time
    reference = dense_mean(model, new, monkeypatch)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference - model.coef_).max()


def test_sites_clustered_among_spread_targets_keep_compressed_tiles(
    monkeypatch, compressed, caplog
):
    """Leaves deep enough for a tight cluster of sites hold a target or two each over the
    rest of the region: the interpolated product would pay a local expansion per target."""
    rng = np.random.default_rng(13)
    X = 0.5 + 0.002 * rng.standard_normal((1500, 2))
    y = rng.standard_normal(1500)
    model = gs.SpatialGP(
        kernel="exponential", fixed={"range": 0.01, "variance": 1.0}, nugget=0.1, method="tlr"
    ).fit(X, y)
    new = rng.random((20000, 2))
    monkeypatch.setattr(solvers, "INTERPOLATION_FREE_LEAVES", 1000)
    with caplog.at_level("INFO", logger="geostat.solvers"):
        got = model.predict(new)
    assert "target leaves" in caplog.text
    reference = dense_mean(model, new, monkeypatch)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference - model.coef_).max()
