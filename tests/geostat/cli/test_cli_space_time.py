"""``geostat fit --space-time`` and ``geostat predict`` with a space-time model: NetCDF
fields and CSV tables with dates, the table and JSON of the new parameters, one-line errors."""

import json

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat import cli

xr = pytest.importorskip("xarray")
pytest.importorskip("netCDF4")


@pytest.fixture(scope="module")
def field_file(tmp_path_factory):
    """A small subset of the bundled monthly field, as a NetCDF file."""
    path = tmp_path_factory.mktemp("space_time") / "southeast.nc"
    ds = gs.datasets.load("southeast_us_monthly", as_xarray=True)
    ds.isel(lon=slice(0, 81, 16), lat=slice(0, 33, 6), time=slice(0, 6))[["tas"]].to_netcdf(path)
    return path


@pytest.fixture(scope="module")
def table_file(tmp_path_factory):
    """A space-time table in long format: x, y, a date column, a value column."""
    rng = np.random.default_rng(1)
    sites, dates = rng.uniform(size=(20, 2)), pd.date_range("2000-01-01", periods=6, freq="7D")
    frame = pd.DataFrame(
        {"x": np.repeat(sites[:, 0], 6), "y": np.repeat(sites[:, 1], 6), "date": np.tile(dates, 20)}
    )
    days = (frame["date"] - pd.Timestamp("1970-01-01")).dt.days.to_numpy(dtype=float)
    frame["z"] = gs.simulate(
        np.column_stack([frame.x, frame.y, days]),
        {"variance": 1.0, "range": 0.3, "time_range": 15.0, "nugget": 0.05},
        kernel=gs.SpaceTime(space="exponential", separability=0.0),
        random_state=0,
    )
    path = tmp_path_factory.mktemp("space_time") / "table.csv"
    frame.to_csv(path, index=False)
    return path


def test_fit_a_netcdf_field_as_one_space_time_field(field_file, tmp_path, capsys):
    out, model = tmp_path / "fit.json", tmp_path / "model.npz"
    code = cli.main(
        [
            "fit",
            str(field_file),
            "--var",
            "tas",
            "--space-time",
            "--kernel",
            "exponential",
            "--method",
            "exact",
            "--output",
            str(out),
            "--save-model",
            str(model),
            "-q",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    result = json.loads(out.read_text())
    assert result["time"] == "time" and result["time_unit"] == "days since 1970-01-01"
    assert {"time_range", "separability", "time_smoothness"} <= set(result["params"])
    assert result["replicate_dimension"] is None and result["n"] == result["n_observations"]
    assert (
        "time_range (days)" in printed
        and "space-time: time 'time' in days since 1970-01-01" in printed
    )
    assert "range (km)" in printed
    future = xr.open_dataset(field_file).isel(time=[0, 1])
    future = future.assign_coords(time=future.time.values + np.timedelta64(400, "D"))
    template, predicted = tmp_path / "future.nc", tmp_path / "predicted.nc"
    future.to_netcdf(template)
    assert (
        cli.main(
            ["predict", str(model), str(template), "-o", str(predicted), "--std", "--samples", "2"]
        )
        == 0
    )
    with xr.open_dataset(predicted) as written:
        assert written["tas_mean"].dims == ("time", "lat", "lon")
        np.testing.assert_array_equal(written.time.values, future.time.values)
        assert (
            np.isfinite(written["tas_mean"].values).all()
            and written["tas_sample"].sizes["sample"] == 2
        )
    assert (
        cli.main(
            [
                "predict",
                str(model),
                str(template),
                "-o",
                str(tmp_path / "p.nc"),
                "--select",
                "time=2000-03-05",
            ]
        )
        == 2
    )
    assert "times it predicts" in capsys.readouterr().err


def test_fit_a_csv_table_with_dates_separable_and_anisotropic(table_file, tmp_path, capsys):
    out, model = tmp_path / "fit.json", tmp_path / "model.npz"
    code = cli.main(
        [
            "fit",
            str(table_file),
            "--value",
            "z",
            "--space-time",
            "--time",
            "date",
            "--separable",
            "--anisotropy",
            "geometric",
            "--kernel",
            "exponential",
            "--method",
            "exact",
            "--output",
            str(out),
            "--save-model",
            str(model),
            "-q",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    result = json.loads(out.read_text())
    assert result["params"]["separability"] == 0.0 and "separability" not in result["at_bounds"]
    angle = result["params"]["anisotropy_angle"]
    assert "anisotropy_angle (rad)" in printed and "anisotropy_angle (deg)" in printed
    assert f"{np.degrees(angle):.6g}" in printed
    sites = tmp_path / "sites.csv"
    pd.DataFrame({"x": [0.2, 0.7], "y": [0.5, 0.5], "date": ["2000-02-20", "2000-03-01"]}).to_csv(
        sites, index=False
    )
    predicted = tmp_path / "predicted.csv"
    assert cli.main(["predict", str(model), str(sites), "-o", str(predicted), "--std"]) == 0
    written = pd.read_csv(predicted)
    assert (
        list(written.columns) == ["x", "y", "date", "mean", "std"]
        and np.isfinite(written["std"]).all()
    )
    expected = gs.load(model).predict(
        pd.DataFrame(
            {"x": [0.2, 0.7], "y": [0.5, 0.5], "date": pd.to_datetime(["2000-02-20", "2000-03-01"])}
        )
    )
    np.testing.assert_allclose(written["mean"], expected, rtol=1e-12)


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--value", "z", "--time", "date"],
            "--time applies to a space-time fit; add --space-time",
        ),
        (["--value", "z", "--separable"], "--separable applies to a space-time fit"),
        (["--value", "z", "--space-time"], "--space-time needs a time column: name it with --time"),
        (["--value", "z", "--space-time", "--time", "when"], "--time when:"),
        (
            ["--value", "z", "--space-time", "--time", "date", "--time-kernel", "cubic"],
            "Unknown kernel 'cubic'",
        ),
    ],
)
def test_space_time_option_errors_are_one_line(table_file, options, message, capsys):
    assert cli.main(["fit", str(table_file), *options, "-q"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_dates_that_do_not_parse_are_one_line(table_file, tmp_path, capsys):
    frame = pd.read_csv(table_file)
    frame.loc[3, "date"] = "soon"
    path = tmp_path / "bad.csv"
    frame.to_csv(path, index=False)
    assert cli.main(["fit", str(path), "--value", "z", "--space-time", "--time", "date", "-q"]) == 2
    err = capsys.readouterr().err
    assert (
        "time column 'date' must hold numbers or dates" in err
        and "data row 4" in err
        and err.count("\n") == 1
    )
