"""Predictions on xarray templates and in NetCDF files keep what climate tools read: the
template's order of dimensions, its coordinates with their attributes and encoding, CF
attributes of the predicted variable, its grid mapping and bounds variables, output
variables named after the input variable, and a ``history`` line (xarray and netCDF4 are
optional extras: skipped without them)."""

import re

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat import cli
from geostat.cli.files import appended_history
from geostat.cli.predict import command_arguments
from geostat.data.fields import grid_mapping_names, prediction_attrs

xr = pytest.importorskip("xarray")
pytest.importorskip("netCDF4")

LON, LAT = np.linspace(-100.0, -88.0, 7), np.linspace(35.0, 42.0, 5)
TAS = {
    "units": "K",
    "standard_name": "air_temperature",
    "long_name": "near-surface air temperature",
    "grid_mapping": "crs",
    "cell_methods": "time: mean",
    "valid_range": [150.0, 350.0],
}
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def _dataset():
    """``tas(time, lat, lon)`` over 3 months with CF attributes, a grid mapping, latitude
    bounds, a time axis stored in days since 1990 on a proleptic Gregorian calendar, and
    global attributes."""
    grid = np.column_stack([a.ravel() for a in np.meshgrid(LON, LAT)])
    values = 280 + gs.simulate(
        grid,
        {"variance": 4.0, "range": 600.0, "nugget": 0.2},
        kernel="exponential",
        n_samples=3,
        random_state=2,
    ).T.reshape(3, LAT.size, LON.size)
    values[1, 2, 3] = np.nan
    half = (LAT[1] - LAT[0]) / 2
    ds = xr.Dataset(
        {
            "tas": (("time", "lat", "lon"), values, TAS),
            "crs": ((), 0, {"grid_mapping_name": "latitude_longitude"}),
            "lat_bnds": (("lat", "nv"), np.column_stack([LAT - half, LAT + half])),
        },
        coords={
            "time": (
                "time",
                pd.date_range("2000-01-01", periods=3, freq="MS"),
                {"standard_name": "time", "axis": "T"},
            ),
            "lat": (
                "lat",
                LAT,
                {
                    "units": "degrees_north",
                    "standard_name": "latitude",
                    "axis": "Y",
                    "bounds": "lat_bnds",
                },
            ),
            "lon": (
                "lon",
                LON,
                {
                    "units": "degrees_east",
                    "standard_name": "longitude",
                    "axis": "X",
                    "long_name": "longitude",
                },
            ),
        },
        attrs={
            "title": "test field",
            "Conventions": "CF-1.8",
            "history": "2020-01-01T00:00:00Z made by a test",
        },
    )
    ds["time"].encoding.update(units="days since 1990-01-01", calendar="proleptic_gregorian")
    return ds


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The field as a NetCDF file and a model fitted on it by ``geostat fit``."""
    folder = tmp_path_factory.mktemp("netcdf_output")
    path, model = folder / "field.nc", folder / "model.npz"
    _dataset().to_netcdf(path)
    assert (
        cli.main(
            [
                "fit",
                str(path),
                "--var",
                "tas",
                "--kernel",
                "exponential",
                "--save-model",
                str(model),
                "-q",
            ]
        )
        == 0
    )
    return path, model


@pytest.fixture(scope="module")
def opened(files):
    with xr.open_dataset(files[0]) as ds:
        yield ds.load()


@pytest.fixture(scope="module")
def model(files):
    return gs.load(files[1])


# ------------------------------------------------------------------ SpatialGP on a template
def test_predictions_keep_the_template_dimension_order_and_coordinates(model, opened):
    tas = opened["tas"]
    mean, std = model.predict(tas, return_std=True)
    assert mean.dims == std.dims == ("time", "lat", "lon")
    for name in ("lat", "lon"):
        assert mean[name].attrs == tas[name].attrs
    assert mean["time"].attrs == {"standard_name": "time", "axis": "T"}
    assert mean["time"].encoding["units"] == "days since 1990-01-01"
    assert mean["time"].encoding["calendar"] == "proleptic_gregorian"
    # the same numbers as on the template in another order
    other = model.predict(tas.transpose("lon", "time", "lat"))
    assert other.dims == ("lon", "time", "lat")
    np.testing.assert_array_equal(other.transpose(*mean.dims).values, mean.values)
    assert (
        tas.attrs.keys() == TAS.keys() and tas.attrs["units"] == "K"
    )  # the template is left as it was


def test_predictions_carry_cf_attributes_of_the_variable(model, opened):
    tas = opened["tas"].assign_coords(
        crs=opened["crs"]
    )  # the grid mapping comes along as a coordinate
    mean, std = model.predict(tas, return_std=True)
    assert mean.name == "mean" and std.name == "std"
    assert mean.attrs == {
        "units": "K",
        "standard_name": "air_temperature",
        "long_name": "kriging mean of near-surface air temperature",
        "grid_mapping": "crs",
    }
    assert std.attrs == {
        "units": "K",
        "standard_name": "air_temperature standard_error",
        "long_name": "kriging standard deviation of near-surface air temperature",
        "grid_mapping": "crs",
    }
    draws = model.sample_y(tas, n_samples=2, random_state=0)
    assert draws.dims == ("time", "lat", "lon", "sample")
    assert draws.attrs["long_name"] == "conditional simulation of near-surface air temperature"
    # without the grid-mapping variable, no reference to it
    assert "grid_mapping" not in model.predict(opened["tas"]).attrs


def test_a_template_without_the_replicate_dimension_gets_it_last(model, opened):
    grid = opened["tas"].isel(time=0, drop=True)
    mean = model.predict(grid)
    assert mean.dims == ("lat", "lon", "time")
    np.testing.assert_array_equal(mean["time"].values, opened["time"].values)
    np.testing.assert_array_equal(
        mean.transpose("time", "lat", "lon").values, model.predict(opened["tas"]).values
    )


def test_other_replicate_labels_are_the_fitted_ones_without_the_template_attributes(model, opened):
    later = opened["tas"].assign_coords(time=opened["time"].values + np.timedelta64(365, "D"))
    mean = model.predict(later)
    assert mean.dims == ("time", "lat", "lon") and mean["time"].attrs == {}
    np.testing.assert_array_equal(mean["time"].values, opened["time"].values)


def test_a_dataset_template_orders_like_its_widest_variable_and_has_no_variable_attributes(
    model, opened
):
    template = opened[["crs", "lat_bnds", "tas"]]
    mean = model.predict(template)
    assert mean.dims == ("time", "lat", "lon") and mean.attrs == {}


def test_a_dask_backed_template_stays_lazy_in_the_template_order(model, opened):
    dask_array = pytest.importorskip("dask.array")
    lazy = opened["tas"].chunk({"lat": 2, "lon": 4})
    mean, std = model.predict(lazy, return_std=True)
    assert isinstance(mean.data, dask_array.Array) and isinstance(std.data, dask_array.Array)
    assert mean.dims == ("time", "lat", "lon") and mean.attrs["units"] == "K"
    assert mean.chunks == ((3,), (2, 2, 1), (4, 3))
    eager_mean, eager_std = model.predict(opened["tas"], return_std=True)
    np.testing.assert_allclose(mean.values, eager_mean.values, rtol=1e-12)
    np.testing.assert_allclose(std.values, eager_std.values, rtol=1e-12)


# ------------------------------------------------------------------ attributes
def test_prediction_attrs():
    tas = xr.DataArray(np.zeros(2), dims="x", name="tas", attrs=dict(TAS))
    assert prediction_attrs(tas, "mean") == {
        "units": "K",
        "standard_name": "air_temperature",
        "long_name": "kriging mean of near-surface air temperature",
    }
    assert prediction_attrs(tas, "sample", carried=["crs"])["grid_mapping"] == "crs"
    assert tas.attrs == TAS
    unnamed = xr.DataArray(np.zeros(2), dims="x", name="pr", attrs={"units": "mm"})
    assert prediction_attrs(unnamed, "std") == {
        "units": "mm",
        "long_name": "kriging standard deviation of pr",
    }
    assert prediction_attrs(xr.DataArray(np.zeros(2), dims="x"), "mean") == {}
    encoded = xr.DataArray(np.zeros(2), dims="x", name="t")
    encoded.encoding["grid_mapping"] = "crsOSGB: x y crsWGS84: lat lon"
    assert (
        prediction_attrs(encoded, "mean", carried=["crsOSGB", "crsWGS84"])["grid_mapping"]
        == encoded.encoding["grid_mapping"]
    )
    assert "grid_mapping" not in prediction_attrs(encoded, "mean", carried=["crsOSGB"])


@pytest.mark.parametrize(
    "value, names",
    [
        ("crs", ["crs"]),
        ("  crs  ", ["crs"]),
        ("crsOSGB: x y crsWGS84: lat lon", ["crsOSGB", "crsWGS84"]),
    ],
)
def test_grid_mapping_names(value, names):
    assert grid_mapping_names(value) == names


@pytest.mark.parametrize(
    "previous, expected",
    [
        (None, "line"),
        ("", "line"),
        ("first", "first\nline"),
        ("first\n", "first\nline"),
        ("a\nb", "a\nb\nline"),
    ],
)
def test_appended_history(previous, expected):
    assert appended_history(previous, "line") == expected


# ------------------------------------------------------------------ geostat predict
def test_geostat_predict_writes_a_file_climate_tools_read(files, opened, model, tmp_path, capsys):
    path, saved = files
    out = tmp_path / "predicted.nc"
    argv = [
        "predict",
        str(saved),
        str(path),
        "-o",
        str(out),
        "--std",
        "--samples",
        "2",
        "--seed",
        "1",
        "-q",
    ]
    assert cli.main(argv) == 0
    assert (
        f"predictions on time 3 x lat {LAT.size} x lon {LON.size} written to {out}"
        in capsys.readouterr().out
    )
    with xr.open_dataset(out) as written:
        assert sorted(written.data_vars) == ["crs", "lat_bnds", "tas_mean", "tas_sample", "tas_std"]
        assert written["tas_mean"].dims == written["tas_std"].dims == ("time", "lat", "lon")
        assert written["tas_sample"].dims == ("time", "lat", "lon", "sample")
        assert written["tas_mean"].attrs == {
            "units": "K",
            "standard_name": "air_temperature",
            "long_name": "kriging mean of near-surface air temperature",
            "grid_mapping": "crs",
        }
        assert written["tas_std"].attrs["standard_name"] == "air_temperature standard_error"
        assert (
            written["tas_sample"].attrs["long_name"]
            == "conditional simulation of near-surface air temperature"
        )
        assert written["crs"].attrs == {"grid_mapping_name": "latitude_longitude"}
        for name in ("lat", "lon"):
            assert written[name].attrs == opened[name].attrs
        assert written["time"].attrs == {"standard_name": "time", "axis": "T"}
        assert written["time"].encoding["units"] == "days since 1990-01-01"
        assert written["time"].encoding["calendar"] == "proleptic_gregorian"
        assert written.attrs["title"] == "test field" and written.attrs["Conventions"] == "CF-1.8"
        first, line = written.attrs["history"].split("\n")
        assert first == "2020-01-01T00:00:00Z made by a test"
        assert re.fullmatch(
            f"{STAMP} geostat predict {re.escape(str(saved))} {re.escape(str(path))} --output "
            f"{re.escape(str(out))} --std --samples 2 --seed 1 --sep , --quiet",
            line,
        ), line
        mean, std = model.predict(opened, return_std=True)
        np.testing.assert_allclose(written["tas_mean"].values, mean.values, rtol=1e-12)
        np.testing.assert_allclose(written["tas_std"].values, std.values, rtol=1e-12)


def test_geostat_predict_keeps_a_length_one_time_of_the_file_first(opened, tmp_path):
    """A single month: the grid predicted has no time dimension, the file's variable has."""
    path, saved, out = tmp_path / "one.nc", tmp_path / "one.npz", tmp_path / "out.nc"
    opened.isel(time=[1]).to_netcdf(path)
    assert (
        cli.main(
            [
                "fit",
                str(path),
                "--var",
                "tas",
                "--kernel",
                "exponential",
                "--save-model",
                str(saved),
                "-q",
            ]
        )
        == 0
    )
    assert cli.main(["predict", str(saved), str(path), "-o", str(out), "-q"]) == 0
    with xr.open_dataset(out) as written:
        assert written["tas_mean"].dims == ("time", "lat", "lon") and written.sizes["time"] == 1
        np.testing.assert_array_equal(written["time"].values, opened["time"].values[[1]])


def test_geostat_predict_on_a_file_of_several_variables_keeps_plain_names(files, opened, tmp_path):
    """Two candidate variables: the predictions cannot be named after one of them."""
    path, saved = files
    two = tmp_path / "two.nc"
    opened.assign(tas2=opened["tas"] + 1.0).to_netcdf(two)
    out = tmp_path / "out.nc"
    assert cli.main(["predict", str(saved), str(two), "-o", str(out), "-q"]) == 0
    with xr.open_dataset(out) as written:
        assert sorted(written.data_vars) == [
            "lat_bnds",
            "mean",
        ]  # the bounds of its latitudes come along
        assert (
            written["mean"].dims == ("time", "lat", "lon")
            and "long_name" not in written["mean"].attrs
        )


def test_geostat_predict_at_csv_sites_to_netcdf_has_a_history(files, tmp_path):
    sites = tmp_path / "sites.csv"
    pd.DataFrame({"lon": [-95.0, -90.0], "lat": [36.0, 40.0]}).to_csv(sites, index=False)
    out = tmp_path / "sites.nc"
    assert cli.main(["predict", str(files[1]), str(sites), "-o", str(out), "-q"]) == 0
    with xr.open_dataset(out) as written:
        assert re.fullmatch(f"{STAMP} geostat predict .*", written.attrs["history"])


def test_command_arguments_are_quoted_for_a_shell(tmp_path):
    args = cli.build_parser().parse_args(
        [
            "predict",
            "my model.npz",
            "sites.nc",
            "-o",
            "out.nc",
            "--select",
            "zlev=0",
            "--select",
            "member=a b",
            "--force",
        ]
    )
    assert command_arguments(args) == (
        "'my model.npz' sites.nc --output out.nc --sep , --select zlev=0 "
        "--select 'member=a b' --force"
    )
