"""The kriging mean through compressed cross-covariance tiles against dense blocks."""

import numpy as np
import pytest

import geostat as gs
from geostat import predict


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
