"""SpatialGP(target_transform=...): the fit of g(y), and predictions in the units of y."""

import numpy as np
import pytest
from model_files import rewrite_header
from problems import covariance, uniform_sites
from scipy import stats

import geostat as gs
import geostat.optimize.search as search
from geostat.errors import ModelFileError
from geostat.transforms import BoxCox, Log


def lognormal_field(n, seed=0, mean=1.0, range_=0.2):
    """Sites in the unit square and exp of a zero-nugget exponential field (variance 1)."""
    rng = np.random.default_rng(seed)
    X = uniform_sites(n, seed=rng)
    C = covariance(X, range_=range_)
    z = mean + np.linalg.cholesky(C + 1e-10 * np.eye(n)) @ rng.standard_normal(n)
    return X, np.exp(z)


@pytest.fixture(scope="module")
def field():
    return lognormal_field(500)


@pytest.fixture(scope="module")
def log_model(field):
    X, y = field
    return gs.SpatialGP(kernel="exponential", nugget=False, target_transform="log").fit(
        X[:400], y[:400]
    )


@pytest.fixture(scope="module")
def gaussian_model(field):
    X, y = field
    return gs.SpatialGP(kernel="exponential", nugget=False).fit(X[:400], np.log(y[:400]))


def test_log_fit_is_the_fit_of_log_y_with_its_jacobian(log_model, gaussian_model, field):
    _, y = field
    for name, value in gaussian_model.params_.items():
        assert log_model.params_[name] == pytest.approx(value, rel=1e-12, abs=1e-300)
    # density of y = density of log y times |d log y / dy| = 1 / y
    assert log_model.loglik_ == pytest.approx(
        gaussian_model.loglik_ - np.sum(np.log(y[:400])), rel=1e-12
    )
    params = gaussian_model.params_
    assert log_model.log_likelihood(params) == pytest.approx(
        gaussian_model.log_likelihood(params) - np.sum(np.log(y[:400])), rel=1e-12
    )


def test_predictions_are_back_transformed(log_model, gaussian_model, field):
    X, _ = field
    new = X[400:]
    mu, s = gaussian_model.predict(new, return_std=True)
    mean, std = log_model.predict(new, return_std=True)
    np.testing.assert_allclose(mean, np.exp(mu + s**2 / 2), rtol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(np.expm1(s**2)) * np.exp(mu + s**2 / 2), rtol=1e-10)
    np.testing.assert_allclose(log_model.predict(new), mean, rtol=1e-12)
    q = log_model.predict_quantiles(new, (0.05, 0.5, 0.95))
    assert q.shape == (100, 3)
    np.testing.assert_allclose(q[:, 1], np.exp(mu), rtol=1e-10)
    np.testing.assert_allclose(q[:, 2], np.exp(mu + stats.norm.ppf(0.95) * s), rtol=1e-10)
    assert np.all(q[:, 1] < mean)  # the lognormal median is below its mean


def test_quantiles_of_an_observation_add_the_nugget():
    X, y = lognormal_field(300, seed=3)
    y = y * np.exp(0.3 * np.random.default_rng(4).standard_normal(300))
    model = gs.SpatialGP(kernel="exponential", target_transform="log").fit(X, y)
    latent = model.predict_quantiles(X[:20], (0.05, 0.95))
    observation = model.predict_quantiles(X[:20], (0.05, 0.95), include_nugget=True)
    assert model.params_["nugget"] > 0
    assert np.all(observation[:, 0] < latent[:, 0]) and np.all(observation[:, 1] > latent[:, 1])


def test_interval_coverage_in_original_units():
    """90 % intervals of held-out values of simulated lognormal fields cover about 90 %."""
    hits = total = 0
    for seed in range(4):
        X, y = lognormal_field(500, seed=seed)
        model = gs.SpatialGP(kernel="exponential", nugget=False, target_transform="log").fit(
            X[:300], y[:300]
        )
        low, high = model.predict_quantiles(X[300:], (0.05, 0.95)).T
        hits += int(np.sum((y[300:] >= low) & (y[300:] <= high)))
        total += 200
    # Correlated held-out values of a few fields: allow five binomial standard errors.
    assert abs(hits / total - 0.9) <= 5 * np.sqrt(0.09 / total)


def test_draws_are_in_the_units_of_y(log_model, field):
    X, _ = field
    draws = log_model.sample_y(X[400:410], n_samples=3, random_state=1)
    assert draws.shape == (10, 3) and np.all(draws > 0)


def test_box_cox_lambda_maximizes_the_likelihood_with_its_jacobian():
    X, y = lognormal_field(200, seed=5)
    model = gs.SpatialGP(kernel="exponential", nugget=False, target_transform="boxcox").fit(X, y)
    lmbda = model.transform_.lmbda
    assert (
        model.n_params_ == gs.SpatialGP(kernel="exponential", nugget=False).fit(X, y).n_params_ + 1
    )
    # All 200 sites take part in the profile (at most BOX_COX_SITES), so fits at fixed
    # lambdas near the estimate have lower likelihoods of y (to the optimizer's tolerance).
    for other in (lmbda - 0.05, lmbda + 0.05):
        fixed = gs.SpatialGP(
            kernel="exponential", nugget=False, target_transform=BoxCox(lmbda=other)
        ).fit(X, y)
        assert fixed.loglik_ <= model.loglik_ + 1e-6 * abs(model.loglik_)


def test_cross_validation_reports_units_of_y(log_model, field):
    _, y = field
    table = log_model.cross_validate()
    np.testing.assert_allclose(table["observed"], y[:400][table["site"]], rtol=1e-12)
    scores = table.attrs["scores"]
    assert scores["rmse"] == pytest.approx(
        np.sqrt(np.mean((table["observed"] - table["mean"]) ** 2)), rel=1e-12
    )
    assert 0.8 <= scores["coverage"] <= 1.0


def test_model_file_keeps_the_transform(tmp_path, field):
    X, y = field
    model = gs.SpatialGP(
        kernel="exponential", nugget=False, target_transform=BoxCox(lmbda=0.2)
    ).fit(X[:200], y[:200])
    path = tmp_path / "m.npz"
    model.save(path)
    loaded = gs.load(path)
    assert loaded.transform_ == BoxCox(lmbda=0.2) and loaded.loglik_ == model.loglik_
    np.testing.assert_array_equal(loaded.predict(X[200:220]), model.predict(X[200:220]))


def test_a_model_file_with_a_foreign_transform_is_refused(tmp_path, log_model):
    path = tmp_path / "m.npz"
    log_model.save(path)
    assert isinstance(gs.load(path).transform_, Log)

    def unresolved(header):
        header["fitted"]["transform_"] = {"$record": ["BoxCox", {"lmbda": None}]}

    rewrite_header(path, unresolved)
    with pytest.raises(ModelFileError, match="transform_"):
        gs.load(path)


def test_bad_settings_and_data(field):
    X, y = field
    with pytest.raises(ValueError, match="target_transform"):
        gs.SpatialGP(target_transform="sqrt").fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="y"):
        gs.SpatialGP(target_transform="log").fit(X[:50], y[:50] - 10.0)
    with pytest.raises(ValueError, match="noise_variance"):
        gs.SpatialGP(target_transform="log").fit(X[:50], y[:50], noise_variance=np.full(50, 0.1))
    model = gs.SpatialGP(kernel="exponential", nugget=False, target_transform="log").fit(
        X[:50], y[:50]
    )
    for bad in (1.5, (0.1, 0.0), "median", ()):
        with pytest.raises(ValueError, match="quantiles"):
            model.predict_quantiles(X[:5], bad)


def test_quantiles_on_an_xarray_template(log_model):
    xr = pytest.importorskip("xarray")
    grid = xr.Dataset(coords={"y": np.linspace(0, 1, 4), "x": np.linspace(0, 1, 5)})
    q = log_model.predict_quantiles(grid, (0.1, 0.5, 0.9))
    assert q.dims == ("y", "x", "quantile") and list(q["quantile"].values) == [0.1, 0.5, 0.9]
    table = np.column_stack([g.ravel() for g in np.meshgrid(grid.x.values, grid.y.values)])
    np.testing.assert_allclose(
        q.values.reshape(-1, 3), log_model.predict_quantiles(table, (0.1, 0.5, 0.9)), rtol=1e-12
    )


@pytest.mark.parametrize("nugget", [True, 0.2])
def test_a_warm_start_keeps_the_parameters_relative_to_the_data_variance(nugget):
    """A refit of transformed data starts where the last fit's variance and nugget were
    the same shares of the data variance: with the variance profiled the coordinates are
    the log range and log ratio, with a fixed nugget the log variance and log range; a
    value beyond the space's bounds is taken at the bound."""
    from geostat.estimator import _relative_params, _warm_start
    from geostat.kernels import get_kernel
    from geostat.optimize import ParameterSpace

    kernel = get_kernel("exponential")
    before = ParameterSpace(kernel, nugget=nugget, data_variance=4.0, max_distance=10.0)
    after = ParameterSpace(kernel, nugget=nugget, data_variance=0.5, max_distance=10.0)
    params = {"variance": 2.0, "range": 3.0, "nugget": 0.2}
    z = _warm_start(after, _relative_params(params, before.data_variance))
    values = after.to_natural(z)
    assert values["range"] == pytest.approx(3.0, rel=1e-12)
    if after.profiled:
        assert after.names == ["range", "ratio"]
        assert values["ratio"] == pytest.approx(0.1, rel=1e-12)
    else:
        assert after.names == ["variance", "range"]
        assert values["variance"] == pytest.approx(2.0 * 0.5 / 4.0, rel=1e-12)
    far = _warm_start(after, {**_relative_params(params, 4.0), "range": 1e9})
    assert after.to_natural(far)["range"] == pytest.approx(after.natural_bounds["range"][1])


@pytest.mark.parametrize("method", ["exact", "tlr"])
def test_box_cox_lambda_is_refined_on_the_whole_data(monkeypatch, method):
    """Beyond BOX_COX_SITES sites the first lambda, from a subsample, is refined on the whole
    data between refits: the fit ends at the joint maximum of the likelihood of y over
    lambda and the covariance (the profile over lambda by full fits of g(y), brute force),
    within the refits' stopping gain, and the setting is left as given."""
    import geostat.estimator as estimator

    monkeypatch.setattr(estimator, "BOX_COX_SITES", 100)
    X, y = lognormal_field(300, seed=7)
    settings = dict(kernel="exponential", nugget=False, method=method)
    starts = []
    pilot_start = search._starting_point
    monkeypatch.setattr(
        search, "_starting_point", lambda *args: starts.append(args) or pilot_start(*args)
    )
    model = gs.SpatialGP(target_transform="boxcox", **settings).fit(X, y)
    assert model.target_transform == "boxcox"
    # the refits start at the last fit's estimate (the other starts are the subsample's)
    assert sum(args[0].n == len(y) for args in starts) == 1
    monkeypatch.setattr(search, "_starting_point", pilot_start)
    monkeypatch.setattr(estimator, "BOX_COX_REFITS", 0)
    first = gs.SpatialGP(target_transform="boxcox", **settings).fit(X, y)
    best = BoxCox.estimate(y, lambda z: gs.SpatialGP(**settings).fit(X, z).loglik_)
    at_best = gs.SpatialGP(target_transform=best, **settings).fit(X, y)
    assert model.loglik_ > first.loglik_ + 1.0  # the subsample's lambda: 3.5 lower here
    assert model.loglik_ == pytest.approx(at_best.loglik_, abs=5 * estimator.BOX_COX_GAIN)
    assert model.transform_.lmbda == pytest.approx(best.lmbda, abs=0.01)
    assert model.n_evaluations_ > first.n_evaluations_
