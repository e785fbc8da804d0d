"""Space-time data in and out: time columns of numbers, datetime64 or cftime dates (as days
since 1970-01-01), tables in long format, xarray fields with a time dimension as one
space-time field, and predictions on templates with times."""

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat.data.fields import table_from_field
from geostat.data.times import column_to_days, convert_time_column

xr = pytest.importorskip("xarray")

EPOCH = np.datetime64("1970-01-01", "D")
KERNEL = gs.SpaceTime(space="exponential")
PARAMS = {"variance": 1.0, "range": 0.4, "time_range": 20.0, "separability": 0.5, "nugget": 0.05}


def _days(dates):
    return (np.asarray(dates, "datetime64[D]") - EPOCH).astype(np.float64)


# --------------------------------------------------------------------------- conversion


@pytest.mark.parametrize("unit", ["ns", "us", "ms", "s", "m", "h", "D"])
def test_datetime64_of_any_resolution_becomes_days_since_1970(unit):
    dates = np.array(["1969-12-31", "1970-01-01", "2000-03-01"], "datetime64[D]").astype(
        f"datetime64[{unit}]"
    )
    days, time_unit = column_to_days(dates)
    assert time_unit == "days since 1970-01-01"
    np.testing.assert_array_equal(days, [-1.0, 0.0, 11017.0])


def test_datetime64_fractions_are_exact_and_far_dates_do_not_overflow():
    days, _ = column_to_days(
        np.array(["1970-01-02T12:00", "1970-01-01T06:00:00.000000001"], "datetime64[ns]")
    )
    assert days[0] == 1.5 and days[1] == 0.25 + 1e-9 / 86400
    far, _ = column_to_days(
        np.array(["0900-01-01", "3000-01-01"], "datetime64[s]")
    )  # beyond datetime64[ns]
    np.testing.assert_array_equal(
        far, _days(np.array(["0900-01-01", "3000-01-01"], "datetime64[D]"))
    )
    months, _ = column_to_days(np.array(["1970-02", "1971-01"], "datetime64[M]"))
    np.testing.assert_array_equal(months, [31.0, 365.0])


def test_pandas_and_python_datetimes_and_numbers():
    stamps = pd.Series(pd.to_datetime(["2000-01-01 00:00", "2000-01-02 06:00"]))
    np.testing.assert_array_equal(column_to_days(stamps)[0], [10957.0, 10958.25])
    np.testing.assert_array_equal(
        column_to_days(np.array(list(stamps), dtype=object))[0], [10957.0, 10958.25]
    )
    assert column_to_days(np.array([1, 2]))[1] is None


@pytest.mark.parametrize(
    "values, match",
    [
        (pd.Series(pd.to_datetime(["2000-01-01"]).tz_localize("UTC")), "time-zone aware"),
        (np.array(["2000-01-01", "NaT"], "datetime64[ns]"), "missing date"),
        (np.array(["a", "b"], dtype=object), "numbers or dates"),
    ],
)
def test_bad_time_values_are_refused(values, match):
    with pytest.raises(ValueError, match=match):
        column_to_days(values, "X column 'time'")


def test_cftime_dates_become_days_in_their_calendar():
    cftime = pytest.importorskip("cftime")
    dates = np.array(
        [cftime.DatetimeNoLeap(1970, 3, 1), cftime.DatetimeNoLeap(2001, 1, 1, 12)], dtype=object
    )
    days, time_unit = column_to_days(dates)
    assert time_unit == "days since 1970-01-01 (noleap)"
    np.testing.assert_array_equal(days, [59.0, 31 * 365 + 0.5])  # no leap days
    mixed = np.array(
        [cftime.DatetimeNoLeap(2000, 1, 1), cftime.Datetime360Day(2000, 1, 1)], dtype=object
    )
    with pytest.raises(ValueError, match="several calendars"):
        column_to_days(mixed)


def test_only_the_time_column_is_converted():
    frame = pd.DataFrame({"x": [0.0, 1.0], "time": pd.to_datetime(["1970-01-03", "1970-01-04"])})
    converted, time_unit = convert_time_column(frame, 1)
    assert converted["time"].tolist() == [2.0, 3.0] and frame["time"].dtype.kind == "M"
    same, none = convert_time_column(np.ones((2, 3)), 2)
    assert none is None and same.shape == (2, 3)
    with pytest.raises(ValueError, match="fitted on times given as dates"):
        convert_time_column(np.ones((2, 3)), 2, expected="days since 1970-01-01")


# --------------------------------------------------------------------------- fits


@pytest.fixture(scope="module")
def grid():
    """A space-time field on a 6 x 5 grid at 6 weekly dates: (DataArray, numeric table, y)."""
    x, y = np.linspace(0.0, 1.0, 6), np.linspace(0.0, 0.8, 5)
    dates = np.arange("2000-01-03", "2000-02-14", 7, dtype="datetime64[D]").astype("datetime64[ns]")
    t, yy, xx = np.meshgrid(_days(dates), y, x, indexing="ij")  # time-major: the DataArray's order
    X = np.column_stack([xx.ravel(), yy.ravel(), t.ravel()])
    values = gs.simulate(X, PARAMS, kernel=KERNEL, random_state=3)
    values[[4, 77]] = np.nan
    da = xr.DataArray(
        values.reshape(t.shape),
        dims=("time", "y", "x"),
        coords={"time": dates, "y": y, "x": x},
        name="z",
    )
    return da, X, values


def _fit(X, y=None, **kwargs):
    return gs.SpatialGP(kernel=KERNEL, method="exact", n_starts=1, **kwargs).fit(X, y)


@pytest.fixture(scope="module")
def numeric_fit(grid):
    _, X, values = grid
    seen = ~np.isnan(values)
    return _fit(X[seen], values[seen])


def test_a_dataframe_with_dates_fits_like_the_numeric_array(grid, numeric_fit):
    _, X, values = grid
    seen = ~np.isnan(values)
    frame = pd.DataFrame(
        {
            "x": X[seen, 0],
            "y": X[seen, 1],
            "time": EPOCH.astype("datetime64[ns]")
            + (X[seen, 2] * 86400e9).astype("timedelta64[ns]"),
        }
    )
    est = _fit(frame, values[seen])
    assert est.time_unit_ == "days since 1970-01-01" and numeric_fit.time_unit_ is None
    assert list(est.feature_names_in_) == ["x", "y", "time"]
    for name, value in numeric_fit.params_.items():
        np.testing.assert_allclose(est.params_[name], value, rtol=1e-10, err_msg=name)
    renamed = _fit(
        frame.rename(columns={"time": "date"})[["date", "x", "y"]], values[seen], time="date"
    )
    np.testing.assert_allclose(renamed.loglik_, numeric_fit.loglik_, rtol=1e-10)


def test_a_dataarray_with_a_time_dimension_is_one_space_time_field(grid, numeric_fit):
    da, _, values = grid
    est = _fit(da)
    assert est.time_unit_ == "days since 1970-01-01"
    assert est._field.replicate_dim is None and np.ndim(est.coef_) == 1
    for name, value in numeric_fit.params_.items():
        np.testing.assert_allclose(est.params_[name], value, rtol=1e-10, err_msg=name)
    np.testing.assert_allclose(est.loglik_, numeric_fit.loglik_, rtol=1e-10)
    table, y, _ = table_from_field(da, time=True)
    assert list(table.columns) == ["x", "y", "time"] and len(table) == np.isfinite(values).sum()
    same = _fit(da.to_dataset(), "z")
    np.testing.assert_allclose(same.loglik_, est.loglik_, rtol=1e-12)


def test_prediction_on_a_template_with_future_times(grid):
    da, _, _ = grid
    est = _fit(da)
    future = da.time.values[-1] + np.array([3, 10], "timedelta64[D]").astype("timedelta64[ns]")
    template = da.isel(time=slice(0, 2)).assign_coords(time=future).transpose("y", "time", "x")
    mean, std = est.predict(template, return_std=True)
    assert mean.dims == ("y", "time", "x") and mean.shape == (5, 2, 6)
    np.testing.assert_array_equal(mean.time.values, future)
    assert np.isfinite(mean.values).all() and (std.values > 0).all()
    assert (std.isel(time=1) >= std.isel(time=0)).all()  # farther from the data, less certain
    sites = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 0.8], "time": future})
    np.testing.assert_allclose(
        est.predict(sites),
        [
            float(mean.sel(x=0.0, y=0.0, time=future[0])),
            float(mean.sel(x=1.0, y=0.8, time=future[1])),
        ],
        rtol=1e-12,
    )
    draws = est.sample_y(template, n_samples=3, random_state=0)
    assert draws.dims == ("y", "time", "x", "sample")
    lazy = est.predict(template.chunk({"y": 2}))
    assert type(lazy.data).__module__.startswith("dask")
    np.testing.assert_allclose(lazy.compute().values, mean.values, rtol=1e-12)


def test_gap_filling_inside_the_fitted_span(grid):
    da, _, _ = grid
    est = _fit(da)
    filled = est.predict(da)
    assert filled.dims == da.dims and np.isfinite(filled.values).all()  # the NaN cells too


def test_mismatched_time_kinds_are_refused(grid, numeric_fit):
    da, _, _ = grid
    est = _fit(da)
    with pytest.raises(ValueError, match="holds numbers .* fitted on times given as dates"):
        est.predict(pd.DataFrame({"x": [0.5], "y": [0.5], "time": [11000.0]}))
    with pytest.raises(ValueError, match="holds dates .* fitted on times given as numbers"):
        numeric_fit.predict(
            pd.DataFrame(
                {"x": [0.5], "y": [0.5], "time": pd.to_datetime(["2000-02-01"])}
            ).to_numpy()
        )
    cftime = pytest.importorskip("cftime")
    noleap = da.isel(time=[0]).assign_coords(time=[cftime.DatetimeNoLeap(2000, 3, 1)])
    with pytest.raises(ValueError, match=r"\(noleap\)"):
        est.predict(noleap)


def test_cftime_field_fits_like_its_days(grid):
    cftime = pytest.importorskip("cftime")
    da, _, _ = grid
    days = np.arange(6) * 7.0 + 10960.0
    dates = cftime.num2date(days, "days since 1970-01-01", calendar="noleap")
    est = _fit(da.assign_coords(time=dates))
    assert est.time_unit_ == "days since 1970-01-01 (noleap)"
    numeric = _fit(da.assign_coords(time=days))
    assert numeric.time_unit_ is None
    for name, value in numeric.params_.items():
        np.testing.assert_allclose(est.params_[name], value, rtol=1e-10, err_msg=name)
    template = da.isel(time=[0]).assign_coords(
        time=cftime.num2date([days[-1] + 30], "days since 1970-01-01", calendar="noleap")
    )
    np.testing.assert_allclose(
        est.predict(template).values,
        numeric.predict(template.assign_coords(time=[days[-1] + 30])).values,
        rtol=1e-12,
    )


def test_a_spatial_kernel_keeps_the_time_dimension_as_replicates(grid):
    da, _, values = grid
    est = gs.SpatialGP(kernel="exponential", method="exact", n_starts=1).fit(da)
    assert (
        est._field.replicate_dim == "time"
        and np.shape(est.coef_) == (6, 1)
        and est.time_unit_ is None
    )
    table, y, _ = table_from_field(da)
    same = gs.SpatialGP(kernel="exponential", method="exact", n_starts=1).fit(table, y)
    assert same.params_ == est.params_
    with pytest.raises(ValueError, match="applies to a space-time kernel"):
        gs.SpatialGP(kernel="exponential", time="time").fit(da)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda da: da.drop_vars("time"), "no coordinate values along its time dimension"),
        (
            lambda da: da.expand_dims(member=2),
            "no dimension may be longer than 1|several are longer than 1",
        ),
    ],
)
def test_space_time_field_errors_name_the_fix(grid, change, match):
    da, _, _ = grid
    with pytest.raises(ValueError, match=match):
        _fit(change(da))


def test_a_template_without_times_is_refused_with_the_fix(grid):
    da, _, _ = grid
    with pytest.raises(ValueError, match="expand_dims"):
        _fit(da).predict(da.isel(time=0, drop=True))


def test_log_likelihood_and_simulate_take_dates(grid, numeric_fit):
    _, X, values = grid
    seen = ~np.isnan(values)
    frame = pd.DataFrame(
        {
            "x": X[seen, 0],
            "y": X[seen, 1],
            "date": EPOCH + X[seen, 2].astype(int).astype("timedelta64[D]"),
        }
    )
    params = numeric_fit.params_
    if params["separability"] == 0.0:
        params = {**params, "separability": 1e-9}
    expected = gs.log_likelihood(X[seen], values[seen], params, kernel=numeric_fit.kernel_)
    np.testing.assert_allclose(
        gs.log_likelihood(frame, values[seen], params, kernel=numeric_fit.kernel_, time="date"),
        expected,
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        gs.simulate(frame, PARAMS, kernel=KERNEL, time="date", random_state=1),
        gs.simulate(X[seen], PARAMS, kernel=KERNEL, random_state=1),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match="applies to a space-time kernel"):
        gs.simulate(X, {"variance": 1.0, "range": 0.3}, kernel="exponential", time=2)


def test_save_and_load_keep_the_time_unit(grid, tmp_path):
    da, _, _ = grid
    est = _fit(da)
    path = tmp_path / "model.npz"
    est.save(path)
    loaded = gs.load(path)
    assert loaded.time_unit_ == est.time_unit_
    template = da.isel(time=[-1])
    np.testing.assert_allclose(
        loaded.predict(template).values, est.predict(template).values, rtol=1e-12
    )


# --------------------------------------------------------------------------- real data


def test_southeast_us_monthly_space_time_fit():
    tas = gs.datasets.load("southeast_us_monthly", as_xarray=True)["tas"]
    sub = tas.isel(lon=slice(0, 81, 8), lat=slice(0, 33, 4))
    est = gs.SpatialGP(kernel=gs.SpaceTime(space="exponential"), method="exact", n_starts=1).fit(
        sub
    )
    assert est.time_unit_ == "days since 1970-01-01" and est.distance_ == "chordal"
    assert list(est.feature_names_in_) == ["lon", "lat", "time"]
    assert all(np.isfinite(v) for v in est.params_.values()) and est.converged_
    assert 10.0 < est.params_["time_range"] < 1e5  # days: the seasonal cycle spans months
    table, y, _ = table_from_field(sub, time=True)
    assert len(table) == int(sub.notnull().sum())
    params = {**est.params_, "separability": max(est.params_["separability"], 1e-9)}
    np.testing.assert_allclose(
        gs.log_likelihood(table, y, params, kernel=est.kernel_), est.loglik_, atol=1e-3
    )
    month = sub.isel(time=[0]).assign_coords(time=[np.datetime64("2000-01-31", "ns")])
    forecast = est.predict(month)
    assert forecast.dims == ("time", "lat", "lon") and np.isfinite(forecast.values).all()
