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


@pytest.mark.parametrize("method, kernel, distance", [
    ("tlr", "exponential", "euclidean"),
    ("exact", "matern", "euclidean"),
    ("tlr", "matern", "chordal"),
])
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
    model = gs.SpatialGP(kernel=kernel, smoothness=1.5 if kernel == "matern" else None, method=method,
                         tile_size=128, fixed=fixed, distance=distance, nugget=0.05).fit(X, y)
    got = model.predict(new)
    reference = dense_mean(model, new, monkeypatch)
    # The compression tolerance is set for a row error of 0.1 accuracy (1e-8) relative to
    # the product's largest entry in the root mean square (geostat.solvers); the largest
    # of 5,000 rows stays within 100 times that.
    scale = np.abs(reference - model.coef_).max()
    assert np.abs(got - reference).max() <= 1e-7 * scale


def test_replicates_and_missing_values(monkeypatch, compressed):
    rng = np.random.default_rng(5)
    n = 600
    X = rng.random((n, 2))
    y = rng.standard_normal((n, 3))
    y[rng.random((n, 3)) < 0.2] = np.nan
    model = gs.SpatialGP(kernel="exponential", tile_size=128, method="tlr", fixed={"range": 0.2}).fit(X, y)
    new = rng.random((3000, 2))
    got = model.predict(new)
    reference = dense_mean(model, new, monkeypatch)
    assert got.shape == (3000, 3)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference).max()


def test_std_keeps_the_dense_path(monkeypatch, compressed):
    """``return_std=True`` forms the cross-covariance for the variance: its mean is the dense one."""
    rng = np.random.default_rng(6)
    X, y = rng.random((300, 2)), rng.standard_normal(300)
    model = gs.SpatialGP(kernel="exponential", fixed={"range": 0.2}).fit(X, y)
    new = rng.random((200, 2))
    mean, std = model.predict(new, return_std=True)
    np.testing.assert_array_equal(mean, dense_mean(model, new, monkeypatch))
    assert np.all(std > 0)
