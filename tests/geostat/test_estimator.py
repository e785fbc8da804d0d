"""SpatialGP: scikit-learn contract, estimation properties, prediction and bad input."""

import warnings

import numpy as np
import pandas as pd
import pytest
from problems import covariance
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

import geostat as gs


@parametrize_with_checks(
    [gs.SpatialGP(kernel="exponential"), gs.SpatialGP(smoothness=1.5, n_starts=1)]
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)
        check(estimator)


@pytest.fixture(scope="module")
def field():
    """A simulated exponential field with nugget on 300 sites in the unit square."""
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(300, 2))
    truth = {"variance": 2.0, "range": 0.15, "nugget": 0.1}
    y = 5.0 + gs.simulate(X, truth, kernel="exponential", random_state=8)
    return X, y, truth


@pytest.fixture(scope="module")
def fitted(field):
    X, y, _ = field
    return gs.SpatialGP(kernel="exponential").fit(X, y)


def test_recovers_parameters_within_standard_errors(fitted, field):
    _, _, truth = field
    for name in ("variance", "range", "nugget"):
        assert abs(fitted.params_[name] - truth[name]) < 3 * fitted.stderr_[name], name
    assert abs(fitted.coef_[0] - 5.0) < 3 * fitted.coef_stderr_[0]
    assert fitted.converged_ and fitted.method_ == "exact" and fitted.distance_ == "euclidean"
    assert fitted.params_["smoothness"] == 0.5 and fitted.stderr_["smoothness"] == 0.0


def test_likelihood_is_a_local_maximum(fitted):
    best = fitted.log_likelihood(fitted.params_)
    assert best == pytest.approx(fitted.loglik_, rel=1e-12)
    p = fitted.params_
    steps = [
        ("variance", 0.03 * p["variance"]),
        ("range", 0.03 * p["range"]),
        ("nugget", 0.01 * p["variance"]),
    ]
    for name, step in steps:
        for sign in (-1, 1):
            if p[name] + sign * step < 0:
                continue
            moved = {**p, name: p[name] + sign * step}
            assert fitted.log_likelihood(moved) < best, (name, sign)


def test_likelihood_rises_from_the_starting_grid(field):
    X, y, _ = field
    est = gs.SpatialGP(kernel="exponential").fit(X, y)
    start = {
        "variance": float(np.var(y)),
        "range": 0.1 * est._likelihood.max_distance,
        "nugget": 0.01 * np.var(y),
    }
    assert est.loglik_ > est.log_likelihood(start)


def test_matches_dense_kriging_formulas(fitted, field):
    X, y, _ = field
    p = fitted.params_
    Xnew = np.random.default_rng(1).uniform(size=(25, 2))
    C = covariance(X, range_=p["range"], variance=p["variance"], nugget=p["nugget"])
    c0 = covariance(Xnew, X, range_=p["range"], variance=p["variance"])
    F, f0 = np.ones((len(X), 1)), np.ones((len(Xnew), 1))
    Ci = np.linalg.inv(C)
    beta = np.linalg.solve(F.T @ Ci @ F, F.T @ Ci @ y)
    mean = f0 @ beta + c0 @ Ci @ (y - F @ beta)
    u = f0.T - F.T @ Ci @ c0.T
    var = (
        p["variance"]
        - np.sum(c0 @ Ci * c0, axis=1)
        + np.sum(u * np.linalg.solve(F.T @ Ci @ F, u), axis=0)
    )
    got_mean, got_std = fitted.predict(Xnew, return_std=True)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-9)
    np.testing.assert_allclose(got_std, np.sqrt(var), rtol=1e-8)
    np.testing.assert_allclose(fitted.coef_, beta, rtol=1e-9)


def test_kriging_interpolates_without_nugget(field):
    X, y, _ = field
    est = gs.SpatialGP(kernel="exponential", nugget=False).fit(X[:120], y[:120])
    mean, std = est.predict(X[:120], return_std=True)
    np.testing.assert_allclose(mean, y[:120], rtol=0, atol=1e-8 * np.abs(y).max())
    assert np.all(std < 1e-5)
    draws = est.sample_y(X[:10], n_samples=3, random_state=0)
    assert draws.shape == (10, 3)
    np.testing.assert_allclose(draws, np.repeat(y[:10, None], 3, axis=1), atol=1e-4)


def test_sample_y_matches_kriging_moments(fitted):
    Xnew = np.random.default_rng(2).uniform(size=(6, 2))
    draws = fitted.sample_y(Xnew, n_samples=4000, random_state=3)
    mean, std = fitted.predict(Xnew, return_std=True)
    np.testing.assert_allclose(draws.mean(axis=1), mean, atol=4 * std.max() / np.sqrt(4000) * 1.5)
    np.testing.assert_allclose(draws.std(axis=1), std, rtol=0.08)


def test_zero_nugget_optimum_is_exactly_zero(fitted):
    # For this simulated field the likelihood decreases from nugget = 0 on.
    p = fitted.params_
    assert p["nugget"] == 0.0
    assert fitted.loglik_ == pytest.approx(fitted.log_likelihood(p), rel=1e-12)
    assert fitted.log_likelihood({**p, "nugget": 1e-4 * p["variance"]}) < fitted.loglik_
    assert "nugget" in fitted.result_.at_bounds and fitted.converged_


def test_smooth_field_without_nugget_reports_a_numerically_zero_nugget():
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(200, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.3, "smoothness": 2.5}, kernel="matern", random_state=4
    )
    est = gs.SpatialGP(smoothness=2.5).fit(X, y)
    assert est.params_["nugget"] <= 1e-8 * est.params_["variance"]
    assert "nugget" in est.result_.at_bounds and est.converged_


def test_range_far_beyond_domain_identifies_variance_over_range():
    rng = np.random.default_rng(12)
    X = rng.uniform(size=(150, 2)) * 0.05
    y = gs.simulate(
        X, {"variance": 1.0, "range": 50.0, "nugget": 1e-4}, kernel="exponential", random_state=5
    )
    est = gs.SpatialGP(kernel="exponential").fit(X, y)
    assert est.converged_ and np.isfinite(est.loglik_)
    # only the microergodic ratio variance / range (= 0.02) is identified
    assert 0.5 < (est.params_["variance"] / est.params_["range"]) / 0.02 < 2.0
    assert est.stderr_["range"] > 0.5 * est.params_["range"]


def test_range_on_its_bound_warns():
    rng = np.random.default_rng(12)
    X = rng.uniform(size=(150, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.5, "nugget": 0.01}, kernel="exponential", random_state=5
    )
    with pytest.warns(gs.GeostatWarning, match="range ended on its bound"):
        est = gs.SpatialGP(kernel="exponential", bounds={"range": (1e-3, 0.05)}).fit(X, y)
    assert "range" in est.result_.at_bounds
    assert est.params_["range"] == pytest.approx(0.05)


def test_dataframe_in_pandas_out_and_lonlat_auto():
    rng = np.random.default_rng(13)
    frame = pd.DataFrame(
        {"latitude": rng.uniform(30, 50, 150), "longitude": rng.uniform(-120, -80, 150)}
    )
    frame.index = [f"s{i}" for i in range(150)]
    xyz = gs.distance.lonlat_to_xyz(frame[["longitude", "latitude"]].to_numpy())
    y = pd.Series(
        gs.simulate(
            xyz,
            {"variance": 1.0, "range": 800.0, "nugget": 0.1},
            kernel="exponential",
            random_state=1,
        ),
        index=frame.index,
        name="temp",
    )
    est = gs.SpatialGP(kernel="exponential").fit(frame, y)
    assert est.distance_ == "chordal"
    assert 50 < est.params_["range"] < 20000
    pred = est.predict(frame.iloc[:5])
    assert (
        isinstance(pred, pd.Series)
        and list(pred.index) == list(frame.index[:5])
        and pred.name == "temp"
    )
    # the same estimate from explicit xyz coordinates with Euclidean distance
    ref = gs.SpatialGP(kernel="exponential", distance="euclidean").fit(xyz, y.to_numpy())
    assert est.loglik_ == pytest.approx(ref.loglik_, rel=1e-8)


def test_covariate_trend_and_replicates_with_missing():
    rng = np.random.default_rng(14)
    X = rng.uniform(size=(100, 2))
    elev = rng.normal(size=100)
    Y = np.column_stack(
        [
            1.0
            + 2.0 * elev
            + gs.simulate(
                X,
                {"variance": 1.0, "range": 0.2, "nugget": 0.05},
                kernel="exponential",
                random_state=k,
            )
            for k in range(3)
        ]
    )
    Y[rng.uniform(size=Y.shape) < 0.15] = np.nan
    frame = pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "elev": elev})
    est = gs.SpatialGP(kernel="exponential", trend=["elev"]).fit(frame, Y)
    assert est.coef_.shape == (3, 2) and est.coef_names_ == ["intercept", "elev"]
    assert np.all(np.abs(est.coef_[:, 1] - 2.0) < 4 * est.coef_stderr_[:, 1])
    mean, std = est.predict(frame.iloc[:7], return_std=True)
    assert mean.shape == (7, 3) and std.shape == (7, 3)
    draws = est.sample_y(frame.iloc[:4], n_samples=2)
    assert draws.shape == (4, 6) and draws.columns.names == [
        "replicate",
        "sample",
    ]  # pandas in, pandas out
    score = est.score(frame, Y)
    pred = np.asarray(est.predict(frame))
    seen = ~np.isnan(Y[:, 0])
    r2_first = 1 - np.sum((Y[seen, 0] - pred[seen, 0]) ** 2) / np.sum(
        (Y[seen, 0] - Y[seen, 0].mean()) ** 2
    )
    assert np.isfinite(score) and 0 < score <= 1 and 0 < r2_first <= 1


def test_pipeline_clone_and_cross_validation(field):
    X, y, _ = field
    est = gs.SpatialGP(kernel="exponential", n_starts=1)
    pipe = make_pipeline(FunctionTransformer(), est)
    scores = cross_val_score(pipe, X[:150], y[:150], cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "params_")


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 3, np.nan, X), y), "NaN"),
        (
            lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 3, np.inf, X), y),
            "infinity|inf",
        ),
        (lambda X, y: (X, y[:-1]), "rows|samples|inconsistent"),
        (lambda X, y: (X[:3], y[:3]), "sample"),
        (lambda X, y: (X, np.where(np.arange(y.size) == 2, np.inf, y)), "infinite"),
    ],
    ids=["nan-coords", "inf-coords", "length-mismatch", "too-few-points", "inf-y"],
)
def test_bad_input_raises_value_error(make, match, field):
    X, y, _ = field
    Xb, yb = make(X[:50], y[:50])
    with pytest.raises(ValueError, match=match):
        gs.SpatialGP(kernel="exponential").fit(Xb, yb)


def test_duplicate_sites_need_a_nugget(field):
    X, y, _ = field
    Xd = np.vstack([X[:40], X[:5]])
    yd = np.concatenate([y[:40], y[:5] + 0.1])
    with pytest.raises(ValueError, match="duplicate sites.*nugget=True"):
        gs.SpatialGP(kernel="exponential", nugget=False).fit(Xd, yd)
    est = gs.SpatialGP(kernel="exponential").fit(Xd, yd)
    assert est.params_["nugget"] > 0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"kernel": "spherical"}, ValueError, "spherical"),
        ({"kernel": 3}, TypeError, "kernel"),
        ({"method": "fast"}, ValueError, "method"),
        ({"nugget": -1.0}, ValueError, "nugget"),
        ({"accuracy": 2.0}, ValueError, "accuracy"),
        ({"fixed": {"range": -1.0}}, ValueError, "range"),
        ({"bounds": {"range": (2.0, 1.0)}}, ValueError, "bounds"),
        ({"kernel": "exponential", "smoothness": 1.5}, ValueError, "smoothness"),
    ],
    ids=[
        "unknown-kernel",
        "kernel-type",
        "method",
        "negative-nugget",
        "accuracy",
        "fixed-range",
        "bounds",
        "exp-smoothness",
    ],
)
def test_bad_settings_raise(kwargs, error, match, field):
    X, y, _ = field
    with pytest.raises(error, match=match):
        gs.SpatialGP(**kwargs).fit(X[:30], y[:30])


def test_fit_does_not_mutate_inputs(field):
    X, y, _ = field
    X0, y0 = X[:60].copy(), y[:60].copy()
    gs.SpatialGP(kernel="exponential", n_starts=1).fit(X0, y0)
    np.testing.assert_array_equal(X0, X[:60])
    np.testing.assert_array_equal(y0, y[:60])


def test_unidentified_parameters_get_infinite_standard_errors(field):
    # With a range far below the site spacing C = (variance + nugget) I: only the sum is
    # identified, and the Fisher information of (variance, nugget) is singular.
    X, y, _ = field
    with pytest.warns(gs.GeostatWarning, match="Fisher information is singular"):
        est = gs.SpatialGP(kernel="exponential", fixed={"range": 1e-6}).fit(X[:80], y[:80])
    assert est.stderr_["variance"] == np.inf and est.stderr_["nugget"] == np.inf
    assert est.stderr_["range"] == 0.0
    total = est.params_["variance"] + est.params_["nugget"]
    assert total == pytest.approx(np.mean((y[:80] - y[:80].mean()) ** 2), rel=1e-6)


def test_simulate_through_a_tlr_factor_has_the_model_covariance():
    rng = np.random.default_rng(21)
    X = rng.uniform(size=(1500, 2))
    params = {"variance": 2.0, "range": 0.1, "nugget": 0.5}
    draws = gs.simulate(
        X, params, kernel="exponential", n_samples=600, random_state=3, method="tlr", tile_size=256
    )
    assert draws.shape == (1500, 600)
    # per-site variance 2.5 and the covariance of close pairs, in the caller's order
    assert np.mean(draws.var(axis=1)) == pytest.approx(2.5, rel=0.03)
    d = np.linalg.norm(X[:-1] - X[1:], axis=1)
    near = d < 0.05
    empirical = np.mean(draws[:-1][near] * draws[1:][near], axis=1)
    expected = 2.0 * np.exp(-d[near] / 0.1)
    assert np.mean(empirical - expected) == pytest.approx(0.0, abs=0.1)
    same = gs.simulate(
        X, params, kernel="exponential", n_samples=600, random_state=3, method="tlr", tile_size=256
    )
    np.testing.assert_array_equal(draws, same)


def test_sample_y_returns_pandas_for_pandas_input_like_predict():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.uniform(size=(60, 2)), columns=["x", "y"], index=np.arange(100, 160))
    y = pd.Series(
        gs.simulate(
            frame.to_numpy(),
            {"variance": 1.0, "range": 0.3, "nugget": 0.1},
            kernel="exponential",
            random_state=1,
        ),
        index=frame.index,
        name="z",
    )
    est = gs.SpatialGP(kernel="exponential").fit(frame, y)
    new = frame.iloc[:5] + 0.01
    draws = est.sample_y(new, n_samples=3, random_state=2)
    assert isinstance(draws, pd.DataFrame) and list(draws.index) == list(new.index)
    assert list(draws.columns) == [0, 1, 2] and draws.columns.name == "sample"
    with pytest.warns(
        UserWarning, match="feature names"
    ):  # scikit-learn's warning for a bare array
        bare = est.sample_y(new.to_numpy(), n_samples=3, random_state=2)
    np.testing.assert_array_equal(draws.to_numpy(), bare)
