"""Cross-validation of a model fitted on an xarray field: an ``xarray.Dataset`` on the
field's grid, equal to the table of the same observations fitted as a table."""

import json
import pickle
import subprocess
import sys
import zipfile

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from model_files import rewrite_header  # noqa: E402

import geostat as gs  # noqa: E402
from geostat.plotting import plot_standardized_residuals  # noqa: E402
from geostat.validation import NO_FOLD  # noqa: E402

xr = pytest.importorskip("xarray")

LON, LAT = np.linspace(-104.0, -96.0, 10), np.linspace(35.0, 41.0, 8)
TIMES = pd.date_range("2001-01-01", periods=3, freq="D")
PARAMS = {"variance": 1.0, "range": 300.0, "nugget": 0.1}
MISSING_CELL = (3, 4)  # (lat, lon) of a cell missing at every time: not a training site
#: The field fit and the table fit run the same computation on the same rows (equal to
#: the last bit here); a margin for a BLAS that rounds differently.
RTOL = 1e-12
#: The same field with its dimensions in another order: the sites come in another order,
#: so the factorizations round differently (below 1e-9 relative here; also absolute, for
#: standardized residuals near 0).
REORDER_RTOL = 1e-8
VARIABLES = ("observed", "mean", "std", "standardized")
KERNEL = gs.SpaceTime(space="exponential")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def field():
    """3 times x 8 lat x 10 lon, NaN at a few cells of one time and at one cell always."""
    lon, lat = np.meshgrid(LON, LAT)
    values = gs.simulate(
        np.column_stack([lon.ravel(), lat.ravel()]),
        PARAMS,
        kernel="exponential",
        n_samples=3,
        distance="chordal",
        random_state=5,
    )
    da = xr.DataArray(
        values.reshape(8, 10, 3).transpose(2, 0, 1) + 280.0,
        dims=("time", "lat", "lon"),
        coords={"time": TIMES, "lat": LAT, "lon": LON},
        name="tas",
        attrs={"units": "K", "long_name": "near-surface air temperature"},
    )
    da.lat.attrs["units"] = "degrees_north"
    da[0, 0, 0] = da[1, 5, 7] = da[2, 6, 2] = np.nan
    da[:, MISSING_CELL[0], MISSING_CELL[1]] = np.nan
    return da


def model():
    return gs.SpatialGP(kernel="exponential", method="exact", n_starts=1)


@pytest.fixture(scope="module")
def fitted(field):
    return model().fit(field)


def as_table(da):
    """The field's observations as a table (sites kept in (lat, lon) order, as the fit
    keeps them), an (n, 3) array and the flat (lat, lon) index of each site."""
    lon, lat = np.meshgrid(da.lon.values, da.lat.values)
    values = da.transpose("lat", "lon", "time").values.reshape(-1, da.sizes["time"])
    cells = np.flatnonzero(~np.isnan(values).all(axis=1))
    table = pd.DataFrame({"lon": lon.ravel()[cells], "lat": lat.ravel()[cells]})
    return table, values[cells], cells


@pytest.fixture(scope="module")
def table_fit(field):
    X, Y, cells = as_table(field)
    return model().fit(X, Y), cells


def on_grid(frame, cells, column, shape=(8, 10, 3)):
    """The column of a cross-validation table on a (lat, lon, time) array, NaN elsewhere."""
    out = np.full((shape[0] * shape[1], shape[2]), np.nan)
    out[cells[frame["site"].to_numpy()], frame["replicate"].to_numpy()] = frame[column]
    return out.reshape(shape)


def assert_matches_table(result, frame, cells, field):
    """`result` (a Dataset) holds the rows of `frame` on the grid, NaN where `field` is."""
    for name in VARIABLES:
        values = result[name].transpose("lat", "lon", "time").values
        np.testing.assert_array_equal(
            np.isnan(values), np.isnan(field.transpose("lat", "lon", "time").values), name
        )
        np.testing.assert_allclose(values, on_grid(frame, cells, name), rtol=RTOL, err_msg=name)


def test_leave_one_out_on_a_field_is_a_dataset_on_its_grid(field, fitted, table_fit):
    result = fitted.cross_validate()
    table = table_fit[0].cross_validate()
    assert isinstance(result, xr.Dataset) and isinstance(table, pd.DataFrame)
    assert set(result.data_vars) == set(VARIABLES)
    assert tuple(result.dims) == field.dims
    assert all(result[name].dims == field.dims for name in VARIABLES)
    xr.testing.assert_identical(xr.Dataset(coords=result.coords), xr.Dataset(coords=field.coords))
    assert_matches_table(result, table, table_fit[1], field)
    # the observations are the field's own values, NaN exactly where it is
    np.testing.assert_array_equal(result["observed"].values, field.values)
    assert result.attrs["cv"] == "loo" and result.attrs["level"] == 0.9
    assert result.attrs["refit"] == 0
    scores = {k[len("score_") :]: v for k, v in result.attrs.items() if k.startswith("score_")}
    assert scores.keys() == table.attrs["scores"].keys()
    for name, value in table.attrs["scores"].items():
        assert scores[name] == pytest.approx(value, rel=RTOL), name


def test_variables_carry_the_field_units_and_a_long_name(fitted):
    result = fitted.cross_validate()
    assert result["observed"].attrs == {
        "units": "K",
        "long_name": "observation of near-surface air temperature",
    }
    assert result["mean"].attrs["long_name"] == (
        "cross-validation predictive mean of near-surface air temperature"
    )
    assert result["std"].attrs["units"] == "K"
    assert result["standardized"].attrs["units"] == "1"


def test_k_fold_adds_the_fold_of_each_site_and_matches_the_table(field, fitted, table_fit):
    result = fitted.cross_validate(cv=4, level=0.8, random_state=3)
    table = table_fit[0].cross_validate(cv=4, level=0.8, random_state=3)
    assert_matches_table(result, table, table_fit[1], field)
    fold = result["fold"]
    assert fold.dims == ("lat", "lon") and fold.dtype.kind == "i"
    expected = np.full(80, NO_FOLD)
    expected[table_fit[1][table["site"]]] = table["fold"]
    np.testing.assert_array_equal(fold.values.ravel(), expected)
    assert fold.values[MISSING_CELL] == NO_FOLD and (fold.values >= 0).sum() == 79
    assert result.attrs["cv"] == 4 and result.attrs["level"] == 0.8
    assert result.attrs["score_coverage"] == pytest.approx(
        table.attrs["scores"]["coverage"], rel=RTOL
    )


def test_refitted_k_fold_on_a_field(field, fitted, table_fit):
    result = fitted.cross_validate(cv=2, refit=True, scoring=["rmse"])
    table = table_fit[0].cross_validate(cv=2, refit=True, scoring=["rmse"])
    assert result.attrs["refit"] == 1 and result.attrs["cv"] == 2
    assert [k for k in result.attrs if k.startswith("score_")] == ["score_rmse"]
    assert_matches_table(result, table, table_fit[1], field)


def test_the_dataset_round_trips_through_netcdf(fitted, tmp_path):
    pytest.importorskip("netCDF4")
    result = fitted.cross_validate(cv=5)
    result.to_netcdf(tmp_path / "cv.nc")
    with xr.open_dataset(tmp_path / "cv.nc") as loaded:
        xr.testing.assert_identical(loaded.load(), result)


def test_a_field_in_another_dimension_order_gives_its_order(field, fitted):
    reordered = field.transpose("lon", "lat", "time")
    est = model().fit(reordered)
    result = est.cross_validate(cv=3)
    assert tuple(result.dims) == ("lon", "lat", "time")
    assert result["mean"].dims == ("lon", "lat", "time") and result["fold"].dims == ("lon", "lat")
    np.testing.assert_array_equal(result["observed"].values, reordered.values)
    assert result["fold"].values[MISSING_CELL[1], MISSING_CELL[0]] == NO_FOLD
    # the sites are kept in (lon, lat) order here, so the random folds differ from those of
    # the (time, lat, lon) field; leave-one-out does not depend on the order
    loo, reference = est.cross_validate(), fitted.cross_validate()
    for name in VARIABLES:
        np.testing.assert_allclose(
            loo[name].transpose(*field.dims).values,
            reference[name].values,
            rtol=REORDER_RTOL,
            atol=REORDER_RTOL,
        )


def test_a_station_field_without_replicates(field):
    stations = field.isel(time=0).stack(station=("lat", "lon")).reset_index("station")
    stations = stations.dropna("station")
    result = model().fit(stations).cross_validate()
    assert result["mean"].dims == ("station",) and result.sizes["station"] == stations.size
    np.testing.assert_array_equal(result["observed"].values, stations.values)
    assert np.isfinite(result["standardized"].values).all()


def test_plot_of_standardized_residuals_accepts_the_dataset(fitted, table_fit):
    result = fitted.cross_validate()
    histogram, qq = plot_standardized_residuals(result)
    _, (histogram_table, qq_table) = plt.subplots(1, 2)
    plot_standardized_residuals(table_fit[0].cross_validate(), axes=(histogram_table, qq_table))
    z = result["standardized"].values
    z = np.sort(z[np.isfinite(z)])
    assert histogram.get_title().startswith(f"{z.size} held-out observations")
    assert qq.get_title() == qq_table.get_title() and "inside the central 90%" in qq.get_title()
    np.testing.assert_allclose(qq.get_lines()[0].get_ydata(), z)


def test_plot_refuses_a_dataset_without_standardized_residuals(fitted):
    with pytest.raises(ValueError, match="standardized"):
        plot_standardized_residuals(fitted.cross_validate().drop_vars("standardized"))


def test_a_model_read_from_a_file_keeps_the_grid(fitted, tmp_path):
    fitted.save(tmp_path / "model.npz")
    loaded = gs.load(tmp_path / "model.npz")
    again = loaded.cross_validate(cv=5)
    assert isinstance(again, xr.Dataset)
    xr.testing.assert_identical(again, fitted.cross_validate(cv=5))
    assert isinstance(pickle.loads(pickle.dumps(loaded)).cross_validate(), xr.Dataset)


def test_a_version_3_file_without_a_grid_still_loads_and_gives_the_table(fitted, tmp_path):
    path = tmp_path / "model.npz"
    fitted.save(path)

    def as_version_3(header):
        header["version"] = 3
        del header["fitted"]["_field_grid"]

    rewrite_header(path, as_version_3)
    with zipfile.ZipFile(path) as archive:  # the grid's arrays, which model.json no longer uses
        members = {n: archive.read(n) for n in archive.namelist() if "_field_grid" not in n}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    loaded = gs.load(path)
    assert loaded._field.grid is None
    assert isinstance(loaded.cross_validate(cv=5), pd.DataFrame)


def test_a_grid_a_model_file_cannot_hold_leaves_the_table(field, tmp_path):
    """Coordinates of Python objects (cftime dates, say) cannot be stored without pickle:
    the file has no grid, and the loaded model's results are the table."""
    labelled = field.assign_coords(label=("lat", np.array([object()] * 8, dtype=object)))
    model().fit(labelled).save(tmp_path / "model.npz")
    assert isinstance(gs.load(tmp_path / "model.npz").cross_validate(cv=5), pd.DataFrame)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda g: g["sizes"].update(lat=9), "does not hold values|cells are not"),
        (lambda g: g.update(cell_dims=["lat", "depth"]), "cell_dims"),
        (lambda g: g.update(replicate_dim="lat"), "replicate_dim"),
        (lambda g: g.update(name=5), "name"),
        (lambda g: g["coords"]["lat"].update(dims=["lon"]), "coordinate 'lat'"),
        (lambda g: g.update(attrs={"units": {"nested": 1}}), "attrs are not"),
        (lambda g: g["sizes"].update(lat=2**40), "spans more than"),
        (lambda g: g.update(extra=1), "is not a grid record"),
    ],
    ids=["size", "cell-dims", "replicate-dim", "name", "coordinate", "attrs", "huge", "keys"],
)
def test_a_damaged_grid_is_refused_naming_it(fitted, tmp_path, change, match):
    path = tmp_path / "model.npz"
    fitted.save(path)
    rewrite_header(path, lambda header: change(header["fitted"]["_field_grid"]))
    with pytest.raises(gs.errors.ModelFileError, match=f"_field_grid.*({match})"):
        gs.load(path)


def test_a_grid_on_a_table_model_is_refused(fitted, table_fit, tmp_path):
    field_path, table_path = tmp_path / "field.npz", tmp_path / "table.npz"
    fitted.save(field_path)
    table_fit[0].save(table_path)
    with zipfile.ZipFile(field_path) as archive:
        grid = json.loads(archive.read("model.json"))["fitted"]["_field_grid"]
    grid = {**grid, "cells": None, "coords": {}}
    rewrite_header(table_path, lambda header: header["fitted"].update(_field_grid=grid))
    with pytest.raises(gs.errors.ModelFileError, match="_field_grid is given for a model fitted"):
        gs.load(table_path)


def test_a_space_time_field_gives_every_cell_its_own_result():
    x, y = np.linspace(0.0, 1.0, 5), np.linspace(0.0, 0.6, 4)
    days = np.arange(4) * 7.0
    t, yy, xx = np.meshgrid(days, y, x, indexing="ij")
    X = np.column_stack([xx.ravel(), yy.ravel(), t.ravel()])
    params = {"variance": 1.0, "range": 0.4, "time_range": 20.0, "separability": 0.5}
    values = gs.simulate(X, {**params, "nugget": 0.05}, kernel=KERNEL, random_state=2)
    values[[3, 41]] = np.nan
    da = xr.DataArray(
        values.reshape(t.shape), dims=("time", "y", "x"), coords={"time": days, "y": y, "x": x}
    )
    est = gs.SpatialGP(kernel=KERNEL, method="exact", n_starts=1).fit(da)
    result = est.cross_validate(cv=3)
    assert result["mean"].dims == result["fold"].dims == ("time", "y", "x")
    np.testing.assert_array_equal(np.isnan(result["mean"].values), np.isnan(da.values))
    assert (result["fold"].values.ravel()[[3, 41]] == NO_FOLD).all()
    assert result["mean"].attrs == {"long_name": "cross-validation predictive mean"}  # unnamed
    seen = ~np.isnan(values)
    table = (
        gs.SpatialGP(kernel=KERNEL, method="exact", n_starts=1)
        .fit(X[seen], values[seen])
        .cross_validate(cv=3)
    )
    expected = np.full(values.size, np.nan)
    expected[np.flatnonzero(seen)[table["site"]]] = table["mean"]
    np.testing.assert_allclose(result["mean"].values.ravel(), expected, rtol=RTOL)


def test_a_coordinate_named_like_a_result_variable_is_refused(field):
    est = model().fit(field.assign_coords(std=1.0))
    with pytest.raises(ValueError, match=r"coordinate\(s\) or dimension\(s\) \['std'\].*rename"):
        est.cross_validate()


def test_cross_validating_a_table_fit_does_not_import_xarray():
    code = (
        "import sys, numpy as np, geostat as gs\n"
        "X = np.random.default_rng(0).uniform(size=(30, 2))\n"
        "y = np.sin(6 * X[:, 0]) + 0.1 * np.random.default_rng(1).normal(size=30)\n"
        "result = gs.SpatialGP(kernel='exponential', n_starts=1).fit(X, y).cross_validate(cv=3)\n"
        "assert type(result).__name__ == 'DataFrame' and 'xarray' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
