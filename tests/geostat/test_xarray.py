"""Fields as xarray ``DataArray``s in and out of ``SpatialGP`` (xarray is optional: the
test extra installs it; importing geostat never needs it)."""

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import geostat as gs

xr = pytest.importorskip("xarray")

LON, LAT, TIME = np.linspace(-105, -95, 12), np.linspace(35, 42, 9), np.arange(3)
MISSING_CELL = (8, 11)  # (lat, lon) index missing on every day: dropped


@pytest.fixture(scope="module")
def field():
    lon, lat = np.meshgrid(LON, LAT)
    sites = np.column_stack([lon.ravel(), lat.ravel()])
    Y = gs.simulate(
        sites,
        {"variance": 1.0, "range": 300.0, "nugget": 0.05},
        kernel="exponential",
        n_samples=3,
        random_state=1,
    )
    da = xr.DataArray(
        Y.reshape(9, 12, 3).transpose(2, 0, 1),
        dims=("time", "lat", "lon"),
        coords={"time": TIME, "lat": LAT, "lon": LON},
        attrs={"units": "K"},
        name="tas",
    )
    da[0, 0, 0] = np.nan  # missing on one day only
    da[:, MISSING_CELL[0], MISSING_CELL[1]] = np.nan
    return da


@pytest.fixture(scope="module")
def fitted(field):
    return gs.SpatialGP(kernel="exponential").fit(field)


def as_table(da):
    """The same field as a sites table and an (n, r) array, by hand."""
    lon, lat = np.meshgrid(da.lon.values, da.lat.values)
    values = da.transpose("lat", "lon", "time").values.reshape(-1, da.sizes["time"])
    keep = ~np.all(np.isnan(values), axis=1)
    return pd.DataFrame({"lon": lon.ravel()[keep], "lat": lat.ravel()[keep]}), values[keep]


def test_fit_on_a_gridded_field_equals_the_table_fit(field, fitted):
    X, Y = as_table(field)
    reference = gs.SpatialGP(kernel="exponential").fit(X, Y)
    assert fitted.distance_ == "chordal"  # lon/lat coordinates recognised, as DataFrame columns are
    assert fitted.coef_.shape == (3, 1)  # one replicate per time step
    assert fitted.loglik_ == pytest.approx(reference.loglik_, rel=1e-10)
    for name, value in reference.params_.items():
        assert fitted.params_[name] == pytest.approx(value, rel=1e-6)


def test_fit_on_a_station_dimension():
    rng = np.random.default_rng(2)
    lon, lat = rng.uniform(-105, -95, 80), rng.uniform(35, 42, 80)
    y = gs.simulate(
        np.column_stack([lon, lat]),
        {"variance": 1.0, "range": 300.0, "nugget": 0.1},
        kernel="exponential",
        random_state=3,
    )
    da = xr.DataArray(y, dims="station", coords={"lon": ("station", lon), "lat": ("station", lat)})
    est = gs.SpatialGP(kernel="exponential").fit(da)
    reference = gs.SpatialGP(kernel="exponential").fit(pd.DataFrame({"lon": lon, "lat": lat}), y)
    assert np.ndim(est.coef_) == 1 and est.loglik_ == pytest.approx(reference.loglik_, rel=1e-10)


def test_predict_and_sample_on_a_grid_template(field, fitted):
    grid = xr.DataArray(
        np.zeros((4, 5)),
        dims=("lat", "lon"),
        attrs={"units": "K"},
        coords={"lat": np.linspace(36, 40, 4), "lon": np.linspace(-104, -96, 5)},
    )
    mean, std = fitted.predict(grid, return_std=True)
    assert mean.dims == std.dims == ("lat", "lon", "time") and mean.shape == (4, 5, 3)
    assert mean.name == "mean" and std.name == "std" and mean.attrs == {"units": "K"}
    np.testing.assert_array_equal(mean.lon.values, grid.lon.values)
    np.testing.assert_array_equal(mean.time.values, TIME)
    lon, lat = np.meshgrid(grid.lon.values, grid.lat.values)
    table = pd.DataFrame({"lon": lon.ravel(), "lat": lat.ravel()})
    expected_mean, expected_std = fitted.predict(table, return_std=True)
    np.testing.assert_allclose(mean.values.reshape(20, 3), expected_mean.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(std.values.reshape(20, 3), expected_std.to_numpy(), rtol=1e-12)
    draws = fitted.sample_y(grid, n_samples=2, random_state=0)
    assert draws.dims == ("lat", "lon", "time", "sample") and draws.shape == (4, 5, 3, 2)
    np.testing.assert_allclose(
        draws.values.reshape(20, 3, 2),
        fitted.sample_y(table, n_samples=2, random_state=0).to_numpy().reshape(20, 3, 2),
    )


def test_a_table_fit_predicts_on_a_field(field):
    X, Y = as_table(field)
    est = gs.SpatialGP(kernel="exponential").fit(X, Y[:, 1])
    grid = field.isel(time=0).drop_vars("time")
    mean = est.predict(grid)
    assert mean.dims == ("lat", "lon") and mean.shape == (9, 12)


@pytest.mark.parametrize(
    "case, error, match",
    [
        ("y-given", ValueError, "y must be omitted"),
        ("dataset", TypeError, "DataArray"),
        ("no-position", ValueError, "lon/lat"),
        ("two-extra-dims", ValueError, "at most one"),
        ("all-nan", ValueError, "no observed value"),
    ],
)
def test_field_errors_name_the_fix(field, case, error, match):
    if case == "y-given":
        call = lambda: gs.SpatialGP().fit(field, np.ones(3))  # noqa: E731
    elif case == "dataset":
        call = lambda: gs.SpatialGP().fit(field.to_dataset())  # noqa: E731
    elif case == "no-position":
        call = lambda: gs.SpatialGP().fit(field.rename(lon="a", lat="b"))  # noqa: E731
    elif case == "two-extra-dims":
        call = lambda: gs.SpatialGP().fit(field.expand_dims(member=2))  # noqa: E731
    else:
        call = lambda: gs.SpatialGP().fit(field * np.nan)  # noqa: E731
    with pytest.raises(error, match=match):
        call()


def test_importing_geostat_does_not_import_xarray():
    code = "import sys, geostat; assert 'xarray' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_array_fit_predicts_on_an_x_y_field():
    rng = np.random.default_rng(4)
    X = rng.uniform(size=(60, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.3, "nugget": 0.1}, kernel="exponential", random_state=5
    )
    est = gs.SpatialGP(kernel="exponential").fit(X, y)
    grid = xr.DataArray(
        np.zeros((3, 4)),
        dims=("y", "x"),
        coords={"y": np.linspace(0, 1, 3), "x": np.linspace(0, 1, 4)},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no feature-name warning from scikit-learn
        mean = est.predict(grid)
    xx, yy = np.meshgrid(grid.x.values, grid.y.values)
    np.testing.assert_allclose(
        mean.values.ravel(), est.predict(np.column_stack([xx.ravel(), yy.ravel()])), rtol=1e-12
    )


# ------------------------------------------------------------------ covariates from a Dataset
@pytest.fixture(scope="module")
def climate(field):
    """The field in a Dataset with an elevation-like covariate on the grid (NaN on one
    unobserved cell) and a time-varying variable."""
    lon, lat = np.meshgrid(LON, LAT)
    height = 1000 + 40 * (lon - LON[0]) - 25 * (lat - LAT[0])
    height[MISSING_CELL] = np.nan  # only where nothing is observed
    ds = xr.Dataset(
        {
            "tas": field + 0.002 * xr.DataArray(np.nan_to_num(height), dims=("lat", "lon")),
            "height": (("lat", "lon"), height),
            "wind": field * 0 + 1.0,
        }
    )
    return ds


def test_fit_on_a_dataset_with_covariates_equals_the_table_fit(climate):
    est = gs.SpatialGP(kernel="exponential", trend=["height"]).fit(climate, y="tas")
    X, Y = as_table(climate.tas)
    lon, lat = np.meshgrid(LON, LAT)
    keep = ~np.all(
        np.isnan(climate.tas.transpose("lat", "lon", "time").values.reshape(-1, 3)), axis=1
    )
    X["height"] = climate.height.values.ravel()[keep]
    reference = gs.SpatialGP(kernel="exponential", trend=["height"]).fit(X, Y)
    assert est.coef_names_ == ["intercept", "height"] and est.coef_.shape == (3, 2)
    assert est.loglik_ == pytest.approx(reference.loglik_, rel=1e-10)
    np.testing.assert_allclose(est.coef_, reference.coef_, rtol=1e-6)
    # A covariate held as a coordinate of the DataArray works the same way.
    da = climate.tas.assign_coords(height=climate.height)
    assert gs.SpatialGP(kernel="exponential", trend=["height"]).fit(da).loglik_ == pytest.approx(
        est.loglik_, rel=1e-12
    )


def test_predict_on_a_dataset_template_uses_its_covariates(climate):
    est = gs.SpatialGP(kernel="exponential", trend=["height"]).fit(climate, y="tas")
    template = climate[["height"]]
    mean, std = est.predict(template, return_std=True)
    assert mean.dims == ("lat", "lon", "time")
    assert np.isnan(mean.values[MISSING_CELL]).all()  # no covariate there: no prediction
    assert np.isfinite(mean.values).sum() == (9 * 12 - 1) * 3
    lon, lat = np.meshgrid(LON, LAT)
    table = pd.DataFrame(
        {"lon": lon.ravel(), "lat": lat.ravel(), "height": climate.height.values.ravel()}
    ).dropna()
    expected = est.predict(table)
    np.testing.assert_allclose(
        mean.values.reshape(-1, 3)[table.index], expected.to_numpy(), rtol=1e-12
    )
    draws = est.sample_y(template, n_samples=2, random_state=0)
    assert draws.shape == (9, 12, 3, 2) and np.isnan(draws.values[MISSING_CELL]).all()
    with pytest.raises(ValueError, match="trend names 'height'"):
        est.predict(climate[["wind"]].drop_vars("height", errors="ignore").isel(time=0))


@pytest.mark.parametrize(
    "case, error, match",
    [
        ("dataset-without-y", TypeError, "y names the observed variable"),
        ("unknown-variable", ValueError, "not a data variable"),
        ("unknown-covariate", ValueError, "trend names 'slope'"),
        ("time-varying-covariate", ValueError, "varies along"),
        ("nan-covariate", ValueError, "NaN at 1 observed cell"),
    ],
)
def test_dataset_errors_name_the_fix(climate, case, error, match):
    kw = dict(kernel="exponential")
    if case == "dataset-without-y":
        call = lambda: gs.SpatialGP(**kw).fit(climate)  # noqa: E731
    elif case == "unknown-variable":
        call = lambda: gs.SpatialGP(**kw).fit(climate, y="pr")  # noqa: E731
    elif case == "unknown-covariate":
        call = lambda: gs.SpatialGP(trend=["slope"], **kw).fit(climate, y="tas")  # noqa: E731
    elif case == "time-varying-covariate":
        call = lambda: gs.SpatialGP(trend=["wind"], **kw).fit(climate, y="tas")  # noqa: E731
    else:
        bad = climate.copy()
        bad["height"] = bad.height.where(~((bad.lat == LAT[0]) & (bad.lon == LON[0])))
        call = lambda: gs.SpatialGP(trend=["height"], **kw).fit(bad, y="tas")  # noqa: E731
    with pytest.raises(error, match=match):
        call()


# ------------------------------------------------------------------ Dask-backed fields
def test_a_dask_backed_field_fits_like_the_loaded_one(field, fitted):
    pytest.importorskip("dask.array")
    lazy = field.chunk({"time": 1, "lat": 5})
    est = gs.SpatialGP(kernel="exponential").fit(lazy)
    assert est.loglik_ == fitted.loglik_  # the same numbers, computed from the same values


def test_prediction_on_a_dask_backed_template_stays_lazy(fitted):
    dask_array = pytest.importorskip("dask.array")
    grid = xr.DataArray(
        dask_array.zeros((6, 8), chunks=(3, 4)),
        dims=("lat", "lon"),
        coords={"lat": np.linspace(36, 40, 6), "lon": np.linspace(-104, -96, 8)},
    )
    calls = []
    original = fitted._predict_rows
    fitted._predict_rows = lambda *a: calls.append(1) or original(*a)
    try:
        mean, std = fitted.predict(grid, return_std=True)
        assert not calls and isinstance(mean.data, dask_array.Array)  # nothing computed yet
        assert mean.chunks[:2] == ((3, 3), (4, 4)) and mean.dims == ("lat", "lon", "time")
        computed_mean, computed_std = mean.compute(), std.compute()
    finally:
        del fitted._predict_rows
    assert len(calls) == 2 * 4  # one call per chunk, for each output computed on its own
    eager_mean, eager_std = fitted.predict(grid.compute(), return_std=True)
    np.testing.assert_allclose(computed_mean.values, eager_mean.values, rtol=1e-12)
    np.testing.assert_allclose(computed_std.values, eager_std.values, rtol=1e-12)


def test_a_table_fit_with_replicates_predicts_on_a_field(field):
    X, Y = as_table(field)
    labels = ["day1", "day2", "day3"]
    est = gs.SpatialGP(kernel="exponential").fit(X, pd.DataFrame(Y, columns=labels))
    grid = field.isel(time=0, drop=True)
    mean, std = est.predict(grid, return_std=True)
    assert mean.dims == ("lat", "lon", "replicate") and list(mean.replicate.values) == labels
    lon, lat = np.meshgrid(LON, LAT)
    table = pd.DataFrame({"lon": lon.ravel(), "lat": lat.ravel()})
    np.testing.assert_allclose(
        mean.values.reshape(-1, 3), est.predict(table).to_numpy(), rtol=1e-12
    )
    draws = est.sample_y(grid, n_samples=2, random_state=0)
    assert draws.dims == ("lat", "lon", "replicate", "sample")
    unnamed = gs.SpatialGP(kernel="exponential").fit(X, Y).predict(grid)
    assert list(unnamed.replicate.values) == [0, 1, 2]
