"""Tests for geostat.datasets."""

import re

import numpy as np
import pandas as pd
import pytest

from geostat import datasets

EXPECTED = {
    "co2": (26633, ["lon", "lat", "co2", "co2_true"]),
    "colorado_temperature": (
        213,
        ["station", "lon", "lat", "elevation", "tmax_mam", "tmin_mam", "tmean_mam"],
    ),
    "north_american_rainfall": (
        1720,
        [
            "lon",
            "lat",
            "elevation",
            "precipitation",
            "precipitation_se",
            "trend",
            "trend_se",
            "type",
            "stereo_x",
            "stereo_y",
        ],
    ),
    "ozone2": (153, None),
    "rm_precip": (806, ["station", "lon", "lat", "elevation", "precipitation"]),
}
GRIDDED = "southeast_us_monthly"
TEXT = {"station", "type"}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def loaded(request):
    name = request.param
    return name, datasets.load(name), datasets.info(name)


def test_names():
    assert datasets.names() == sorted([*EXPECTED, GRIDDED])
    assert datasets.DEFAULT == "north_american_rainfall"
    assert datasets.DEFAULT in datasets.names()


def test_shape_and_columns(loaded):
    name, frame, _ = loaded
    n_rows, columns = EXPECTED[name]
    assert frame.shape[0] == n_rows
    if columns is not None:
        assert list(frame.columns) == columns


def test_dtypes(loaded):
    _, frame, _ = loaded
    for col in frame.columns:
        if col in TEXT:
            assert pd.api.types.is_string_dtype(frame[col])
            assert frame[col].notna().all()
        else:
            assert frame[col].dtype == np.float64, col


def test_coordinates(loaded):
    _, frame, meta = loaded
    assert meta["coords"] == ["lon", "lat"]
    lon, lat = frame["lon"].to_numpy(), frame["lat"].to_numpy()
    assert np.isfinite(lon).all() and np.isfinite(lat).all()
    assert ((lon >= -180) & (lon <= 180)).all()
    assert ((lat >= -90) & (lat <= 90)).all()
    assert not frame.duplicated(["lon", "lat"]).any()


def test_info_consistent_with_load(loaded):
    name, frame, meta = loaded
    expected_keys = {
        "description",
        "coords",
        "value",
        "transform",
        "covariates",
        "units",
        "n",
        "layout",
        "source",
        "licence",
    }
    assert set(meta) == expected_keys
    assert meta["n"] == len(frame)
    assert "\n" not in meta["description"]
    assert "GPL" in meta["licence"]  # every table comes from fields
    values = meta["value"] if isinstance(meta["value"], list) else [meta["value"]]
    assert set(values) <= set(frame.columns)
    assert set(meta["covariates"]) <= set(frame.columns)
    assert set(meta["units"]) == set(frame.columns) - TEXT
    assert meta["transform"] in (None, "log")
    if meta["transform"] == "log":
        assert (frame[values].to_numpy() > 0).all()
    assert frame.attrs == meta
    for col in meta["covariates"]:
        assert np.isfinite(frame[col]).all()


def test_default_dataset():
    meta = datasets.info(datasets.DEFAULT)
    assert meta["value"] == "precipitation"
    assert meta["transform"] == "log"
    assert meta["covariates"] == ["elevation"]


def test_single_value_columns_complete():
    for name in ["co2", "colorado_temperature", "north_american_rainfall", "rm_precip"]:
        frame = datasets.load(name)
        assert np.isfinite(frame[datasets.info(name)["value"]]).all()


def test_ozone2_replicates():
    frame = datasets.load("ozone2")
    days = datasets.info("ozone2")["value"]
    assert list(frame.columns) == ["station", "lon", "lat", *days]
    assert len(days) == 89
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) for day in days)
    assert days[0] == "1987-06-03" and days[-1] == "1987-08-31"
    assert "1987-06-18" in days and "1987-08-29" not in days  # fields has no 870829
    assert list(pd.to_datetime(days)) == sorted(pd.to_datetime(days))
    y = frame[days].to_numpy()
    assert y.shape == (153, 89)
    assert np.isnan(y).sum() == 495
    assert (np.nanmin(y) >= 0) and np.isfinite(y[~np.isnan(y)]).all()
    assert frame.loc[0, "station"] == "170010006"


def test_station_ids_keep_leading_zeros():
    assert datasets.load("rm_precip").loc[0, "station"] == "020750"
    assert datasets.load("colorado_temperature").loc[0, "station"] == "028468"


def test_known_values():
    # Values checked against the fields objects in R.
    nar = datasets.load("north_american_rainfall")
    assert nar.loc[0, "precipitation"] == 985.0995817467116
    assert nar.loc[0, "lon"] == -123.7
    co2 = datasets.load("co2")
    assert co2.loc[0, "co2"] == 374.9718015
    assert co2.loc[0, "co2_true"] == 375.156856957856
    col = datasets.load("colorado_temperature")
    np.testing.assert_array_equal(col["tmean_mam"], (col["tmax_mam"] + col["tmin_mam"]) / 2)


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown dataset name 'nope'.*north_american_rainfall"):
        datasets.load("nope")
    with pytest.raises(ValueError, match="unknown dataset name"):
        datasets.info("nope")
    with pytest.raises(ValueError, match="unknown dataset name"):
        datasets.load(["co2"])


def test_mutation_does_not_leak():
    frame = datasets.load("rm_precip")
    frame.loc[:, "precipitation"] = -1.0
    frame.attrs["units"]["precipitation"] = "changed"
    frame.attrs["covariates"].append("lon")
    del frame["lon"]
    fresh = datasets.load("rm_precip")
    assert (fresh["precipitation"] >= 0).all()
    assert "lon" in fresh.columns
    assert fresh.attrs["units"]["precipitation"] == "mm"
    assert fresh.attrs["covariates"] == ["elevation"]
    meta = datasets.info("ozone2")
    meta["value"].clear()
    assert len(datasets.info("ozone2")["value"]) == 89


def test_fields_reference_json_matches_datasets():
    # The R reference values (tests/geostat/reference) refer to these datasets.
    import json
    from pathlib import Path

    path = Path(__file__).parent / "reference" / "fields_reference.json"
    records = json.loads(path.read_text())
    assert [r["case"] for r in records] == [1, 2, 3, 4, 5, 6]
    for rec in records:
        meta = datasets.info(rec["dataset"])
        frame = datasets.load(rec["dataset"])
        assert rec["n"] == meta["n"]
        assert rec["coords"] == "chordal_xyz_km"
        assert rec["y"]["column"] in frame.columns
        assert rec["y"]["transform"] == meta["transform"]
        assert set(rec["trend"]["covariates"]) <= set(frame.columns)
        assert len(rec["beta"]) == 1 + len(rec["trend"]["covariates"])
        assert rec["nugget"] == pytest.approx(rec["lambda"] * rec["variance"], rel=1e-12)
        assert abs(rec["check"]["direct_minus_fields"]) < 1e-8
        assert len(rec["at_fixed"]) == 3
        for point in rec["at_fixed"]:
            assert point["loglik"] <= rec["loglik"] + 1e-9 or rec["reml"]


# ------------------------------------------------------------------ the gridded dataset
def test_grid_as_frame_is_the_observed_cells():
    frame = datasets.load(GRIDDED)
    meta = datasets.info(GRIDDED)
    assert list(frame.columns) == ["time", "lon", "lat", "tas", "pr"]
    assert frame["time"].dtype == "datetime64[ns]"
    assert frame.shape == (12 * meta["n"], 5)  # 2080 land cells every month
    assert frame.groupby("time").size().eq(meta["n"]).all()
    assert not frame.duplicated(["time", "lon", "lat"]).any()
    assert frame[["tas", "pr"]].notna().all().all()
    assert frame["lon"].between(-85, -74.9).all() and frame["lat"].between(33, 37.1).all()
    assert set(meta["units"]) == {"lon", "lat", "tas", "pr"}
    assert "Apache-2.0" in meta["licence"] and "Maurer" in meta["source"]
    assert meta["layout"] == "grid" and datasets.info(datasets.DEFAULT)["layout"] == "stations"
    assert frame.attrs == meta


def test_grid_as_xarray_matches_the_frame():
    xr = pytest.importorskip("xarray")
    ds = datasets.load(GRIDDED, as_xarray=True)
    assert isinstance(ds, xr.Dataset)
    assert dict(ds.sizes) == {"time": 12, "lat": 33, "lon": 81}
    assert str(ds.time.dtype) == "datetime64[ns]"
    assert np.all(np.diff(ds.lon) == 0.125) and np.all(np.diff(ds.lat) == 0.125)
    assert ds.tas.attrs["units"] == "degC" and ds.pr.attrs["units"] == "mm per month"
    mask = ds.tas.notnull()
    assert (mask == ds.pr.notnull()).all() and (mask.sum(("lat", "lon")) == 2080).all()
    long = ds.to_dataframe().dropna().reset_index()[["time", "lon", "lat", "tas", "pr"]]
    frame = datasets.load(GRIDDED)
    merged = frame.merge(long, on=["time", "lon", "lat"], suffixes=("", "_x"))
    assert len(merged) == len(frame)
    np.testing.assert_array_equal(merged["tas"], merged["tas_x"])
    # Values checked against the original netCDF-4 file of the stars package.
    assert ds.tas.isel(time=0, lat=0, lon=0).item() == float(np.float32(8.643871))
    assert ds.time.values[6] == np.datetime64("1999-07-31")


def test_station_tables_as_xarray():
    pytest.importorskip("xarray")
    ozone = datasets.load("ozone2", as_xarray=True)
    frame = datasets.load("ozone2")
    assert dict(ozone.sizes) == {"station": 153, "time": 89}
    np.testing.assert_array_equal(
        ozone.ozone.values, frame[datasets.info("ozone2")["value"]].to_numpy()
    )
    np.testing.assert_array_equal(ozone.lon.values, frame["lon"].to_numpy())
    rain = datasets.load(datasets.DEFAULT, as_xarray=True)
    np.testing.assert_array_equal(
        rain.precipitation.values, datasets.load(datasets.DEFAULT)["precipitation"]
    )
    assert rain.precipitation.dims == ("station",)


def test_a_station_dataset_fits_as_a_field():
    pytest.importorskip("xarray")
    import geostat as gs

    rain = datasets.load("colorado_temperature", as_xarray=True)
    frame = datasets.load("colorado_temperature")
    kw = dict(kernel="exponential", nugget=True)
    from_field = gs.SpatialGP(**kw).fit(rain.tmax_mam)
    from_table = gs.SpatialGP(**kw).fit(frame[["lon", "lat"]], frame["tmax_mam"])
    assert from_field.loglik_ == pytest.approx(from_table.loglik_, rel=1e-10)


def test_as_xarray_without_xarray(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_xarray(name, *args, **kwargs):
        if name == "xarray" or name.startswith("xarray."):
            raise ImportError("no xarray here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_xarray)
    with pytest.raises(ImportError, match="needs xarray: pip install"):
        datasets.load(GRIDDED, as_xarray=True)
    assert len(datasets.load(GRIDDED)) == 24960  # the frame needs only SciPy
