"""The geostat command: the main job on the default dataset, JSON output, NetCDF fields,
saved models and predictions, errors."""

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from standin import StandIn

import geostat as gs
import geostat.estimator
from geostat import cli, datasets
from geostat.data.fields import table_from_field
from geostat.estimator import SpatialGP
from tlrcore.backends import cupy_available


def test_main_job_prints_table_and_writes_json_and_model(tmp_path, capsys):
    out, saved = tmp_path / "result.json", tmp_path / "model.npz"
    assert cli.main(["fit", "--output", str(out), "--save-model", str(saved)]) == 0
    printed = capsys.readouterr().out
    for word in (
        "variance",
        "range (km)",
        "smoothness",
        "nugget",
        "log-likelihood",
        "n = 1720",
        "method exact",
        "wall time",
        f"model written to {saved}",
    ):
        assert word in printed
    result = json.loads(out.read_text())
    assert result["data"] == datasets.DEFAULT and result["n"] == 1720
    assert result["distance"] == "chordal" and result["transform"] == "log"
    assert set(result["params"]) == {"variance", "range", "smoothness", "nugget"}
    assert all(np.isfinite(v) and v > 0 for k, v in result["stderr"].items())
    assert result["converged"]
    assert (
        result["kernel"] == f"Matern(smoothness={result['params']['smoothness']:.4g})"
        and result["kernel"] in printed
    )
    assert saved.stat().st_size <= 5 * 2**20
    start = time.perf_counter()
    model = gs.load(saved)
    assert time.perf_counter() - start < 1.0
    assert model.params_ == result["params"] and model.loglik_ == result["loglik"]


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert (
        stop.value.code == 0
        and capsys.readouterr().out == f"geostat {gs.__version__} (geostat-tlr)\n"
    )


def test_python_dash_m_geostat_runs_the_command():
    run = subprocess.run(
        [sys.executable, "-m", "geostat", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout == f"geostat {gs.__version__} (geostat-tlr)\n"


def test_fit_a_csv_file_with_options(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(size=80), "y": rng.uniform(size=80)})
    frame["z"] = np.sin(6 * frame.x) + 0.1 * rng.normal(size=80)
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    assert (
        cli.main(
            [
                "fit",
                str(path),
                "--coords",
                "x,y",
                "--value",
                "z",
                "--kernel",
                "exponential",
                "--trend",
                "linear",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "distance euclidean" in printed and "intercept" in printed


def test_fit_with_the_tlr_method_reports_accuracy_and_error(tmp_path, capsys):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x": rng.uniform(size=300), "y": rng.uniform(size=300)})
    frame["z"] = np.sin(6 * frame.x) + 0.1 * rng.normal(size=300)
    path, out = tmp_path / "data.csv", tmp_path / "result.json"
    frame.to_csv(path, index=False)
    argv = [
        "fit",
        str(path),
        "--coords",
        "x,y",
        "--value",
        "z",
        "--kernel",
        "exponential",
        "--method",
        "tlr",
        "--accuracy",
        "1e-9",
        "--tile-size",
        "64",
        "--output",
        str(out),
    ]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "method tlr (accuracy 1e-09)" in printed and "estimated TLR error" in printed
    result = json.loads(out.read_text())
    assert (
        result["method"] == "tlr"
        and result["accuracy"] == 1e-9
        and 0 <= result["loglik_error"] < 1e-3
    )


def test_device_gpu_fits_through_the_gpu_back_end(tmp_path, capsys, monkeypatch):
    """``--device gpu`` reaches the estimator: with NumPy standing in for CuPy, the TLR fit
    runs the GPU's code paths and finds the CPU's estimates."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"x": rng.uniform(size=300), "y": rng.uniform(size=300)})
    frame["z"] = np.sin(6 * frame.x) + 0.1 * rng.normal(size=300)
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    argv = [
        "fit",
        str(path),
        "--coords",
        "x,y",
        "--value",
        "z",
        "--kernel",
        "exponential",
        "--method",
        "tlr",
        "--tile-size",
        "64",
    ]
    results, asked = {}, []

    def standing_in(device):
        asked.append(device)
        return StandIn()

    for device in ("cpu", "gpu"):
        out = tmp_path / f"{device}.json"
        with monkeypatch.context() as patch:
            if device == "gpu":
                patch.setattr(geostat.estimator, "get_backend", standing_in)
            assert cli.main([*argv, "--device", device, "--output", str(out)]) == 0
        results[device] = json.loads(out.read_text())
        assert ("on the GPU" in capsys.readouterr().out) == (device == "gpu")
    assert asked and set(asked) == {"gpu"}
    assert results["gpu"]["device"] == "gpu" and results["cpu"]["device"] == "cpu"
    for name, value in results["cpu"]["params"].items():
        assert results["gpu"]["params"][name] == pytest.approx(
            value, rel=1e-4
        )  # TLR factors at 1e-8


@pytest.mark.skipif(cupy_available(), reason="CuPy and a GPU are available")
def test_device_gpu_without_cupy_fails_with_one_line(capsys):
    assert "needs CuPy" in _fails(["fit", "--device", "gpu"], capsys)


ARGS = ["--coords", "x,y", "--value", "z", "--kernel", "exponential"]


@pytest.fixture
def sites():
    """60 sites with positive observations."""
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.uniform(size=60), "y": rng.uniform(size=60)})
    frame["z"] = np.exp(np.sin(6 * frame.x) + 0.1 * rng.normal(size=60))
    return frame


def _write(frame, tmp_path):
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    return str(path)


def _fails(argv, capsys, status=2):
    """Run the command; it must exit with `status` and one line on stderr. Returns that line."""
    assert cli.main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("geostat: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["fit", "--dataset", "nope"], "nope"),
        (["fit", "missing.csv"], "no such file"),
        (["fit", "--value", "rain"], "rain"),
        (["fit", "--kernel", "spherical"], "spherical"),
        (["fit", "--nugget", "abc"], "--nugget"),
    ],
    ids=["unknown-dataset", "missing-file", "unknown-column", "unknown-kernel", "bad-nugget"],
)
def test_errors_exit_with_a_message(argv, match, capsys):
    assert match in _fails(argv, capsys)


@pytest.mark.parametrize("transform", ["log", "boxcox"])
def test_log_transform_of_non_positive_values_fails_naming_the_column(
    transform, sites, tmp_path, capsys
):
    sites.loc[[4, 9], "z"] = [-1.0, 0.0]
    err = _fails(["fit", _write(sites, tmp_path), *ARGS, "--transform", transform], capsys)
    assert (
        "'z'" in err
        and "2 value(s) <= 0" in err
        and "data row 5" in err
        and "--transform none" in err
    )


def test_log_transform_keeps_missing_values_missing(sites, tmp_path, capsys):
    sites.loc[3, "z"] = np.nan
    out = tmp_path / "result.json"
    assert (
        cli.main(
            ["fit", _write(sites, tmp_path), *ARGS, "--transform", "log", "--output", str(out)]
        )
        == 0
    )
    assert json.loads(out.read_text())["n_observations"] == 59


@pytest.mark.parametrize(
    "content, match",
    [
        (b"x,y,z\n1,2,3\n4,5,6,7,8\n", "Expected 3 fields"),
        (b"", "No columns"),
        (bytes(np.random.default_rng(0).integers(128, 256, 500, dtype=np.uint8)), "binary"),
        (gzip.compress(b"x,y,z\n1,2,3\n"), "binary"),
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "binary"),
    ],
    ids=["ragged-rows", "empty-file", "random-bytes", "gzip", "png"],
)
def test_unreadable_csv_fails_with_one_line(content, match, tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    err = _fails(["fit", str(path), *ARGS], capsys)
    assert str(path) in err and match in err


def test_directory_as_input_file_fails_with_one_line(tmp_path, capsys):
    assert "is a folder" in _fails(["fit", str(tmp_path), *ARGS], capsys)


@pytest.mark.parametrize(
    "column, role, extra",
    [("z", "value", []), ("x", "coordinate", []), ("c", "covariate", ["--covariates", "c"])],
    ids=["value", "coordinate", "covariate"],
)
def test_non_numeric_column_fails_naming_it(column, role, extra, sites, tmp_path, capsys):
    sites["c"] = 1.0
    sites = sites.astype(object)
    sites.loc[7, column] = "abc"
    err = _fails(["fit", _write(sites, tmp_path), *ARGS, *extra], capsys)
    assert f"{role} column {column!r}" in err and "data row 8" in err and "'abc'" in err


@pytest.mark.parametrize(
    "output, match",
    [
        (lambda tmp: tmp / "missing" / "result.json", "does not exist"),
        (lambda tmp: tmp, "is a folder"),
        pytest.param(
            lambda tmp: Path("/proc/geostat-result.json"),
            "cannot be written",
            marks=pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)"),
        ),
    ],
    ids=["output-in-missing-folder", "output-is-a-folder", "unwritable-output"],
)
@pytest.mark.parametrize("option", ["--output", "--save-model"])
def test_bad_output_path_fails_before_fitting(
    option, output, match, sites, tmp_path, capsys, monkeypatch
):
    def fit(*args, **kwargs):
        raise AssertionError("the fit ran before the output path was checked")

    monkeypatch.setattr(SpatialGP, "fit", fit)
    err = _fails(["fit", _write(sites, tmp_path), *ARGS, option, str(output(tmp_path))], capsys)
    assert match in err and option in err


def _nan(column, rows):
    def change(frame):
        frame.loc[rows, column] = np.nan

    return change


@pytest.mark.parametrize(
    "change, options, match",
    [
        (_nan("z", slice(None)), [], "'z' has no values"),
        (_nan("z", slice(2, None)), [], "2 observed value(s)"),
        (_nan("x", [3]), [], "coordinate column 'x'"),
        (None, ["--accuracy", "0"], "accuracy"),
        (None, ["--accuracy", "2"], "accuracy"),
        (None, ["--tile-size", "0"], "tile_size"),
        (None, ["--nugget", "-1"], "nugget"),
        (None, ["--kernel", "matern", "--smoothness", "-1"], "smoothness"),
        (None, ["--kernel", "nonsense"], "nonsense"),
        (None, ["--distance", "nonsense"], "nonsense"),
        (None, ["--method", "nonsense"], "nonsense"),
        (None, ["--coords", "x,q"], "['q']"),
    ],
    ids=[
        "all-nan-value",
        "two-usable-rows",
        "nan-coordinate",
        "accuracy-0",
        "accuracy-2",
        "tile-size-0",
        "negative-nugget",
        "negative-smoothness",
        "unknown-kernel",
        "unknown-distance",
        "unknown-method",
        "missing-coordinate-column",
    ],
)
def test_bad_data_or_option_fails_with_one_named_line(
    change, options, match, sites, tmp_path, capsys
):
    if change:
        change(sites)
    assert match in _fails(["fit", _write(sites, tmp_path), *ARGS, *options], capsys)


@pytest.mark.parametrize(
    "error, status, expected",
    [
        (np.linalg.LinAlgError("not positive definite"), 2, "geostat: not positive definite\n"),
        (MemoryError("needs 9 GB"), 2, "geostat: needs 9 GB\n"),
        (
            NotImplementedError("no such thing\non two lines"),
            2,
            "geostat: no such thing on two lines\n",
        ),
        (KeyboardInterrupt(), 130, "geostat: interrupted\n"),
        (KeyError("oops"), 1, "geostat: internal error: KeyError: 'oops' (please report this)\n"),
    ],
    ids=["linalg-error", "memory-error", "multi-line-message", "interrupt", "unexpected-error"],
)
def test_main_turns_every_exception_into_one_line(error, status, expected, capsys, monkeypatch):
    def fail(args):
        raise error

    monkeypatch.setattr(cli, "run_fit", fail)
    assert cli.main(["fit"]) == status
    assert capsys.readouterr().err == expected


@pytest.mark.parametrize(
    "content, match",
    [(b"x,y,z\n1,2\n1,2,3,4\n", "cannot read"), (b"x,y,z\n1,2,-1\n", "--transform none")],
    ids=["ragged-csv", "log-of-negative"],
)
def test_command_line_prints_no_traceback(content, match, tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    command = [sys.executable, "-c", "from geostat.cli import main; import sys; sys.exit(main())"]
    run = subprocess.run(
        [*command, "fit", str(path), *ARGS, "--transform", "log"], capture_output=True, text=True
    )
    assert run.returncode == 2 and run.stdout == ""
    assert (
        run.stderr.startswith("geostat: ") and run.stderr.count("\n") == 1 and match in run.stderr
    )


def test_datasets_command_lists_bundled_data(capsys):
    assert cli.main(["datasets"]) == 0
    printed = capsys.readouterr().out
    for name in datasets.names():
        assert name in printed


# ------------------------------------------------------------------------- CSV conveniences
@pytest.mark.parametrize(
    "names, distance",
    [(("Longitude", "LAT"), "chordal"), (("x", "y"), "euclidean")],
    ids=["lon-lat", "x-y"],
)
def test_coordinate_columns_are_found_by_name(names, distance, tmp_path):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({names[0]: rng.uniform(-100, -90, 60), names[1]: rng.uniform(35, 45, 60)})
    frame["z"] = np.sin(frame[names[0]] / 2) + 0.1 * rng.normal(size=60)
    out = tmp_path / "result.json"
    argv = [
        "fit",
        _write(frame, tmp_path),
        "--value",
        "z",
        "--kernel",
        "exponential",
        "--output",
        str(out),
    ]
    assert cli.main(argv) == 0
    assert json.loads(out.read_text())["distance"] == distance


def test_without_coordinate_columns_asks_for_coords(sites, tmp_path, capsys):
    err = _fails(
        ["fit", _write(sites.rename(columns={"x": "a", "y": "b"}), tmp_path), "--value", "z"],
        capsys,
    )
    assert "--coords" in err and "['a', 'b', 'z']" in err


def test_separator_option_reads_semicolon_files(sites, tmp_path, capsys):
    path = tmp_path / "data.csv"
    sites.to_csv(path, index=False, sep=";")
    assert cli.main(["fit", str(path), *ARGS, "--sep", ";"]) == 0
    assert "n = 60" in capsys.readouterr().out


def test_estimates_on_a_bound_are_marked_and_warnings_follow_the_table(tmp_path, capsys):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"x": rng.uniform(size=60), "y": rng.uniform(size=60)})
    frame["z"] = np.sin(
        6 * frame.x
    )  # smooth, noise-free: smoothness and nugget end on their bounds
    assert cli.main(["fit", _write(frame, tmp_path), "--value", "z"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("kernel Matern(smoothness=10)")
    rows = {
        line.split()[0]: line
        for line in lines
        if line.split() and line.split()[0] in ("smoothness", "nugget")
    }
    assert "*" in rows["smoothness"] and "*" in rows["nugget"]
    note = next(line for line in lines if line.startswith("* on its bound:"))
    assert "smoothness = 10" in note and "nugget = 0" in note
    table_end = lines.index(next(line for line in lines if line.startswith("wall time")))
    assert any(
        line.startswith("warning: the estimate of smoothness ended on its bound")
        for line in lines[table_end:]
    )


# ------------------------------------------------------------------------- NetCDF fields
@pytest.fixture(scope="module")
def field_file(tmp_path_factory):
    """A NetCDF file: tas and pr on a 15 x 10 lon/lat grid over 3 months (some cells NaN,
    one cell missing throughout), and elevation over the grid."""
    xr = pytest.importorskip("xarray")
    lon, lat = np.linspace(-100, -86, 15), np.linspace(35, 44, 10)
    grid = np.column_stack([a.ravel() for a in np.meshgrid(lon, lat)])
    tas = gs.simulate(
        grid,
        {"variance": 4.0, "range": 500.0, "nugget": 0.1},
        kernel="exponential",
        n_samples=3,
        random_state=0,
    ).T.reshape(3, 10, 15)
    tas[0, 0, :4] = tas[2, 5, 5] = np.nan
    tas[:, 9, 14] = np.nan
    elevation = np.add.outer(np.linspace(0, 1, 10), np.linspace(0, 2, 15))
    dims = ("time", "lat", "lon")
    ds = xr.Dataset(
        {
            "tas": (dims, tas),
            "pr": (dims, np.exp(tas / 4)),
            "elevation": (("lat", "lon"), elevation),
        },
        coords={"time": pd.date_range("2000-01-01", periods=3, freq="MS"), "lat": lat, "lon": lon},
    )
    path = tmp_path_factory.mktemp("netcdf") / "field.nc"
    ds.to_netcdf(path)
    return path, ds


FIELD_ARGS = ["--var", "tas", "--kernel", "exponential"]


def _fit_field(field_file, tmp_path, *options):
    out = tmp_path / "result.json"
    assert cli.main(["fit", str(field_file[0]), *FIELD_ARGS, "--output", str(out), *options]) == 0
    return json.loads(out.read_text())


def test_fit_a_netcdf_field_with_time_replicates_and_save_it(field_file, tmp_path, capsys):
    path, ds = field_file
    saved = tmp_path / "model.npz"
    result = _fit_field(field_file, tmp_path, "--save-model", str(saved))
    assert "(value: tas, 3 replicates along time, transform: none)" in capsys.readouterr().out
    assert result["n"] == 149 and result["n_observations"] == int(ds["tas"].notnull().sum())
    assert (
        result["replicates"] == 3
        and result["replicate_dimension"] == "time"
        and result["distance"] == "chordal"
    )
    mean = gs.load(saved).predict(ds.isel(time=0, drop=True))
    assert mean.dims == ("lat", "lon", "time") and np.array_equal(mean["time"], ds["time"])


@pytest.mark.parametrize(
    "options, replicates, steps",
    [
        (["--time-slice", "2000-02:2000-03"], 2, [1, 2]),
        (["--time-slice", ":2000-01"], 1, [0]),
        (["--time-index", "-1"], 1, [2]),
    ],
    ids=["slice", "open-start", "index"],
)
def test_time_selection(options, replicates, steps, field_file, tmp_path):
    result = _fit_field(field_file, tmp_path, *options)
    assert result["replicates"] == replicates
    assert result["n_observations"] == int(field_file[1]["tas"].isel(time=steps).notnull().sum())


def test_transform_and_covariates_of_a_field(field_file, tmp_path):
    result = _fit_field(
        field_file,
        tmp_path,
        "--var",
        "pr",
        "--transform",
        "log",
        "--covariates",
        "elevation",
        "--time-index",
        "0",
    )
    assert result["value"] == "pr" and set(result["coef"]) == {"intercept", "elevation"}


@pytest.mark.parametrize(
    "options, match",
    [
        (
            ["--kernel", "exponential"],
            "has 3 data variables ['tas', 'pr', 'elevation']; choose one with --var",
        ),
        (["--var", "tmax"], "--var tmax is not a data variable"),
        ([*FIELD_ARGS, "--time-slice", "2000-02"], "--time-slice must be START:END"),
        ([*FIELD_ARGS, "--time-slice", "2001-01:2001-06"], "selects no step of variable 'tas'"),
        ([*FIELD_ARGS, "--time-slice", "2000-13:"], "--time-slice 2000-13: cannot select"),
        (
            [*FIELD_ARGS, "--time-index", "3"],
            "--time-index 3 is out of range: time of variable 'tas'",
        ),
        ([*FIELD_ARGS, "--time-index", "0", "--time-slice", ":"], "not both"),
        ([*FIELD_ARGS, "--transform", "log"], "--transform log needs positive values"),
        ([*FIELD_ARGS, "--coords", "lon,lat"], "--coords applies to CSV files"),
        (
            ["--var", "elevation", "--time-index", "0"],
            "select along the one time (non-spatial) dimension",
        ),
    ],
    ids=[
        "several-variables",
        "unknown-var",
        "slice-without-colon",
        "slice-selects-nothing",
        "slice-bad-date",
        "index-out-of-range",
        "slice-and-index",
        "log-of-negative",
        "coords-option",
        "no-time-dimension",
    ],
)
def test_bad_field_options_fail_with_one_line(options, match, field_file, capsys):
    assert match in _fails(["fit", str(field_file[0]), *options], capsys)


@pytest.mark.parametrize(
    "name, content, match",
    [("missing.nc", None, "no such file"), ("broken.nc", b"this is not NetCDF\n", "cannot read")],
    ids=["missing-file", "corrupt-file"],
)
def test_unreadable_netcdf_fails_with_one_line(name, content, match, tmp_path, capsys):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    assert match in _fails(["fit", str(path), *FIELD_ARGS], capsys)


def test_field_option_on_a_csv_file_fails(sites, tmp_path, capsys):
    assert "--var applies to a NetCDF file" in _fails(
        ["fit", _write(sites, tmp_path), *ARGS, "--var", "z"], capsys
    )


def test_missing_xarray_names_the_install_command(field_file, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "xarray", None)
    err = _fails(["fit", str(field_file[0]), *FIELD_ARGS], capsys)
    assert 'pip install "geostat-tlr[netcdf]"' in err


# ------------------------------------------------------------------------- geostat predict
@pytest.fixture(scope="module")
def saved_models(field_file, tmp_path_factory):
    """Models saved by 'geostat fit --save-model': one fitted on a CSV table, one on the field."""
    folder = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"lon": rng.uniform(-100, -86, 80), "lat": rng.uniform(35, 44, 80)})
    frame["z"] = np.sin(frame.lon / 3) + 0.1 * rng.normal(size=80)
    frame.to_csv(folder / "table.csv", index=False)
    table, field = folder / "table.npz", folder / "field.npz"
    assert (
        cli.main(
            [
                "fit",
                str(folder / "table.csv"),
                "--value",
                "z",
                "--kernel",
                "exponential",
                "--save-model",
                str(table),
            ]
        )
        == 0
    )
    assert cli.main(["fit", str(field_file[0]), *FIELD_ARGS, "--save-model", str(field)]) == 0
    return {"table": table, "field": field}


def _new_sites(tmp_path):
    frame = pd.DataFrame(
        {"name": ["a", "b", "c"], "lon": [-95.0, -90.5, -88.0], "lat": [36.0, 40.0, 43.5]}
    )
    path = tmp_path / "sites.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_predict_at_csv_sites_writes_mean_std_and_samples(saved_models, tmp_path, capsys):
    path, frame = _new_sites(tmp_path)
    out = tmp_path / "predictions.csv"
    argv = [
        "predict",
        str(saved_models["table"]),
        str(path),
        "-o",
        str(out),
        "--std",
        "--samples",
        "2",
        "--seed",
        "5",
    ]
    assert cli.main(argv) == 0
    assert f"predictions at 3 sites written to {out}" in capsys.readouterr().out
    written = pd.read_csv(out)
    assert list(written.columns) == ["name", "lon", "lat", "mean", "std", "sample_0", "sample_1"]
    model = gs.load(saved_models["table"])
    mean, std = model.predict(frame[["lon", "lat"]], return_std=True)
    np.testing.assert_allclose(written["mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(written["std"], std, rtol=1e-12)
    draws = model.sample_y(frame[["lon", "lat"]], n_samples=2, random_state=5)
    np.testing.assert_allclose(written[["sample_0", "sample_1"]], draws, rtol=1e-12)


def test_predict_on_a_netcdf_grid_writes_a_dataset(saved_models, field_file, tmp_path, capsys):
    xr = pytest.importorskip("xarray")
    out = tmp_path / "predictions.nc"
    argv = [
        "predict",
        str(saved_models["field"]),
        str(field_file[0]),
        "-o",
        str(out),
        "--std",
        "--samples",
        "2",
    ]
    assert cli.main(argv) == 0
    assert "predictions on time 3 x lat 10 x lon 15" in capsys.readouterr().out
    with xr.open_dataset(out) as written:
        assert (
            written["mean"].dims == ("time", "lat", "lon")
            and written["sample"].dims[-1] == "sample"
        )
        mean, std = gs.load(saved_models["field"]).predict(field_file[1], return_std=True)
        np.testing.assert_allclose(written["mean"], mean, rtol=1e-12)
        np.testing.assert_allclose(written["std"], std, rtol=1e-12)


@pytest.mark.parametrize(
    "model, sites, output",
    [("field", "csv", "nc"), ("table", "nc", "csv")],
    ids=["csv-sites-to-netcdf", "grid-to-csv"],
)
def test_predict_writes_either_format_from_either_input(
    model, sites, output, saved_models, field_file, tmp_path
):
    xr = pytest.importorskip("xarray")
    path = _new_sites(tmp_path)[0] if sites == "csv" else field_file[0]
    out = tmp_path / f"predictions.{output}"
    assert cli.main(["predict", str(saved_models[model]), str(path), "-o", str(out)]) == 0
    if output == "csv":
        assert {"lat", "lon", "mean"} <= set(pd.read_csv(out).columns) and len(
            pd.read_csv(out)
        ) == 150
    else:
        with xr.open_dataset(out) as written:
            assert written["mean_0"].dims == ("site",) and written.sizes["site"] == 3


def _not_a_model(tmp_path):
    path = tmp_path / "model.npz"
    path.write_text("x,y\n1,2\n")
    return path


@pytest.mark.parametrize(
    "argv, match",
    [
        (
            lambda m, s, tmp: [str(tmp / "missing.npz"), s, "-o", str(tmp / "out.csv")],
            "no such file",
        ),
        (
            lambda m, s, tmp: [str(_not_a_model(tmp)), s, "-o", str(tmp / "out.csv")],
            "is not a geostat model file",
        ),
        (
            lambda m, s, tmp: [m, str(tmp / "missing.csv"), "-o", str(tmp / "out.csv")],
            "no such file",
        ),
        (
            lambda m, s, tmp: [
                m,
                _write(pd.DataFrame({"x": [1.0], "y": [2.0]}), tmp),
                "-o",
                str(tmp / "out.csv"),
            ],
            "lacks the column(s) ['lon', 'lat'] the model was fitted on",
        ),
        (lambda m, s, tmp: [m, s, "-o", str(tmp / "missing" / "out.csv")], "does not exist"),
        (lambda m, s, tmp: [m, s, "-o", str(tmp / "out.txt")], "must end in .csv or .nc"),
        (
            lambda m, s, tmp: [m, s, "-o", str(tmp / "out.csv"), "--samples", "0"],
            "--samples must be a positive",
        ),
    ],
    ids=[
        "missing-model",
        "not-a-model",
        "missing-sites",
        "sites-lack-columns",
        "output-folder-missing",
        "output-suffix",
        "no-samples",
    ],
)
def test_bad_predict_input_fails_with_one_line(argv, match, saved_models, tmp_path, capsys):
    sites = str(_new_sites(tmp_path)[0])
    assert match in _fails(["predict", *argv(str(saved_models["table"]), sites, tmp_path)], capsys)


def test_predict_with_a_truncated_model_fails_with_one_line(saved_models, tmp_path, capsys):
    path = tmp_path / "model.npz"
    data = saved_models["table"].read_bytes()
    path.write_bytes(data[: len(data) // 2])
    err = _fails(
        ["predict", str(path), str(_new_sites(tmp_path)[0]), "-o", str(tmp_path / "out.csv")],
        capsys,
    )
    assert "damaged geostat model file" in err


def test_the_bundled_grid_is_fitted_as_a_field(tmp_path, capsys):
    out = tmp_path / "grid.json"
    code = cli.main(
        [
            "fit",
            "--dataset",
            "southeast_us_monthly",
            "--time-index",
            "6",
            "--kernel",
            "exponential",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert (
        result["n"] == 2080
    )  # the land cells of one month, not the 24,960 cell-months of the long table
    # The CLI's estimates, evaluated by the library on July's field, give its log-likelihood:
    # the CLI fitted that field (the library's own fit of it is tested elsewhere).
    july = datasets.load("southeast_us_monthly", as_xarray=True)["tas"].isel(time=6)
    sites, values, _ = table_from_field(july)
    expected = gs.log_likelihood(sites, values, result["params"], kernel="exponential")
    assert result["loglik"] == pytest.approx(expected, rel=1e-10) and result["converged"]


@pytest.mark.parametrize("method", ["wald", "profile"])
def test_ci_prints_and_writes_the_library_intervals(method, tmp_path, capsys):
    out = tmp_path / "ci.json"
    argv = [
        "fit",
        "--dataset",
        "colorado_temperature",
        "--kernel",
        "exponential",
        "--ci",
        method,
        "-q",
        "--output",
        str(out),
    ]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"95% lower     95% upper  ({method})" in printed
    result = json.loads(out.read_text())
    frame = datasets.load("colorado_temperature")
    expected = (
        SpatialGP(kernel="exponential")
        .fit(frame[["lon", "lat"]], frame["tmax_mam"])
        .confidence_intervals(0.95, method)
    )
    assert result["intervals"]["method"] == method and result["intervals"]["level"] == 0.95
    for name, row in expected.iterrows():
        assert result["intervals"][name] == pytest.approx([row.lower, row.upper], rel=1e-9)


def test_ci_with_a_bad_level_fails_with_one_line(capsys):
    assert (
        cli.main(
            ["fit", "--dataset", "colorado_temperature", "--ci", "wald", "--level", "1.5", "-q"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("geostat: ") and "level" in err and len(err.strip().splitlines()) == 1
