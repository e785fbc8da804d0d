"""The geostat command on hostile and real-world input: outputs that would replace inputs or
earlier results, failed writes, unbounded sample counts, columns given two roles or
degree-like names, non-UTF-8 tables, damaged model files, and NetCDF files with extra
dimensions. Every refusal is one line on standard error, exit status 2, before any work;
every write leaves either the new file or the old one. The property tests draw output
paths that collide with inputs in every way a path can (by name, link, hard link,
relative spelling) and ``--samples`` values of every size.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import PROPERTY_SETTINGS

import geostat as gs
from geostat import cli
from geostat.cli.files import MAX_SAMPLE_COLUMNS, MAX_SAMPLE_VALUES
from geostat.estimator import SpatialGP

xr = pytest.importorskip("xarray")

TABLE_ARGS = ["--value", "z", "--kernel", "exponential", "-q"]


def _fails(argv, capsys, status=2):
    """Run the command; it must exit with `status` and one line on stderr. Returns that line."""
    assert cli.main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("geostat: ") and err.count("\n") == 1, err
    return err


def _never(*args, **kwargs):
    raise AssertionError("work began before the arguments were checked")


def _table(n, seed=0, names=("lon", "lat")):
    """`n` sites in North America with a smooth observed value ``z``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({names[0]: rng.uniform(-100, -86, n), names[1]: rng.uniform(35, 44, n)})
    frame["z"] = np.sin(frame[names[0]] / 3) + 0.1 * rng.normal(size=n)
    return frame


def _csv(frame, folder, name="data.csv", **options):
    path = Path(folder) / name
    frame.to_csv(path, index=False, **options)
    return path


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A model fitted by 'geostat fit --save-model' on 40 lon/lat sites."""
    folder = tmp_path_factory.mktemp("model")
    saved = folder / "model.npz"
    assert (
        cli.main(["fit", str(_csv(_table(40), folder)), *TABLE_ARGS, "--save-model", str(saved)])
        == 0
    )
    return saved


def _sst(zlev=(0.0,), times=1, seed=0):
    """A global sea-surface-temperature-like field on dims (time, zlev, lat, lon): 6 x 8
    cells, a few of them land (NaN), one level per `zlev` value, monthly times."""
    rng = np.random.default_rng(seed)
    lon, lat = np.arange(0.0, 360.0, 45.0), np.linspace(-62.5, 62.5, 6)
    base = 25 * np.cos(np.radians(lat))[:, None] + np.sin(np.radians(2 * lon))[None, :]
    values = np.stack(
        [
            [base + level / 10 + 0.3 * rng.normal(size=base.shape) for level in zlev]
            for _ in range(times)
        ]
    )
    values[..., 2, 3] = values[..., 4, 0] = np.nan
    coords = {
        "time": pd.date_range("2000-01-01", periods=times, freq="MS"),
        "zlev": np.asarray(zlev),
        "lat": lat,
        "lon": lon,
    }
    return xr.Dataset({"sst": (("time", "zlev", "lat", "lon"), values)}, coords=coords)


def _fit_json(argv, tmp_path):
    out = tmp_path / "result.json"
    assert cli.main([*argv, "--output", str(out)]) == 0
    return json.loads(out.read_text())


# ---------------------------------------------------------------- outputs that replace inputs
def test_output_equal_to_the_input_csv_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    data = _csv(_table(30), tmp_path)
    before = data.read_bytes()
    err = _fails(["fit", str(data), *TABLE_ARGS, "--output", str(data), "--force"], capsys)
    assert "--output" in err and "would replace the input" in err and data.read_bytes() == before


def test_save_model_equal_to_the_input_csv_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    data = _csv(_table(30), tmp_path)
    before = data.read_bytes()
    os.symlink(data, tmp_path / "link.npz")  # the same file under another name
    for target in (data, tmp_path / "link.npz"):
        err = _fails(
            ["fit", str(data), *TABLE_ARGS, "--save-model", str(target), "--force"], capsys
        )
        assert "--save-model" in err and "would replace the input" in err
    assert data.read_bytes() == before


def test_predict_output_equal_to_the_input_netcdf_grid_is_refused(
    model_file, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(SpatialGP, "predict", _never)
    grid = tmp_path / "grid.nc"
    xr.Dataset(coords={"lat": np.linspace(36, 43, 4), "lon": np.linspace(-99, -87, 5)}).to_netcdf(
        grid
    )
    before = grid.read_bytes()
    err = _fails(["predict", str(model_file), str(grid), "-o", str(grid), "--force"], capsys)
    assert "-o" in err and "sites file" in err and grid.read_bytes() == before
    model = tmp_path / "model.nc"  # a model file may have any name
    model.write_bytes(model_file.read_bytes())
    err = _fails(["predict", str(model), str(grid), "-o", str(model), "--force"], capsys)
    assert "is the model file" in err and model.read_bytes() == model_file.read_bytes()


def test_existing_output_is_kept_unless_force(model_file, tmp_path, capsys):
    sites = _csv(_table(5, seed=1), tmp_path, "sites.csv")
    out = tmp_path / "out.csv"
    out.write_text("an earlier result\n")
    err = _fails(["predict", str(model_file), str(sites), "-o", str(out)], capsys)
    assert "exists; add --force" in err and out.read_text() == "an earlier result\n"
    assert cli.main(["predict", str(model_file), str(sites), "-o", str(out), "--force", "-q"]) == 0
    assert list(pd.read_csv(out).columns) == ["lon", "lat", "z", "mean"]


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    out = tmp_path / "both"
    err = _fails(
        [
            "fit",
            str(_csv(_table(30), tmp_path)),
            *TABLE_ARGS,
            "--output",
            str(out),
            "--save-model",
            str(tmp_path / "." / "both"),
        ],
        capsys,
    )
    assert "--output" in err and "--save-model" in err and "same file" in err and not out.exists()


# ---------------------------------------------------------------- failed writes keep the old file
def _write_part_then_fail(self, path, *args, **kwargs):
    """A writer that writes part of its file, then fails as a full disk does."""
    Path(path).write_bytes(b"partial")
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    "suffix, cls, method",
    [(".csv", pd.DataFrame, "to_csv"), (".nc", xr.Dataset, "to_netcdf")],
    ids=["csv", "netcdf"],
)
def test_failed_prediction_write_leaves_the_previous_file(
    suffix, cls, method, model_file, tmp_path, capsys, monkeypatch
):
    sites = _csv(_table(5, seed=1), tmp_path, "sites.csv")
    out = tmp_path / f"out{suffix}"
    assert cli.main(["predict", str(model_file), str(sites), "-o", str(out), "-q"]) == 0
    before = out.read_bytes()
    monkeypatch.setattr(cls, method, _write_part_then_fail)
    err = _fails(
        ["predict", str(model_file), str(sites), "-o", str(out), "--std", "--force"], capsys
    )
    assert "No space left" in err and out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["sites.csv", out.name]
    )  # no temporary left


def test_failed_json_write_leaves_the_previous_file(tmp_path, capsys, monkeypatch):
    out = tmp_path / "result.json"
    out.write_text("{}\n")
    data = _csv(_table(30), tmp_path)

    def full_disk(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    err = _fails(["fit", str(data), *TABLE_ARGS, "--output", str(out), "--force"], capsys)
    assert "No space left" in err and out.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "result.json"]


# ---------------------------------------------------------------- bounded outputs
def test_samples_a_million_at_8_sites_is_refused_up_front(
    model_file, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(SpatialGP, "sample_y", _never)
    sites = _csv(_table(8, seed=1), tmp_path, "sites.csv")
    out = tmp_path / "out.csv"
    err = _fails(
        ["predict", str(model_file), str(sites), "-o", str(out), "--samples", str(10**6)], capsys
    )
    assert (
        "--samples 1000000" in err
        and "1,000,000 columns" in err
        and f"at most {MAX_SAMPLE_COLUMNS}" in err
    )
    assert not out.exists()


@pytest.mark.parametrize("sites", ["csv", "netcdf"])
def test_samples_a_billion_fails_naming_samples(sites, model_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "sample_y", _never)
    if sites == "csv":
        path = _csv(_table(8, seed=1), tmp_path, "sites.csv")
    else:
        path = tmp_path / "grid.nc"
        xr.Dataset(
            coords={"lat": np.linspace(36, 43, 2), "lon": np.linspace(-99, -87, 4)}
        ).to_netcdf(path)
    err = _fails(
        [
            "predict",
            str(model_file),
            str(path),
            "-o",
            str(tmp_path / "out.nc"),
            "--samples",
            str(10**9),
        ],
        capsys,
    )
    assert (
        "--samples 1000000000" in err
        and "8,000,000,000 values" in err
        and f"{MAX_SAMPLE_VALUES:,}" in err
    )


def test_output_columns_named_like_site_columns_are_refused(
    model_file, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(SpatialGP, "sample_y", _never)
    frame = _table(6, seed=1)
    frame["mean"], frame["std"] = 1.0, 2.0  # the sites' own columns
    sites = _csv(frame, tmp_path, "sites.csv")
    out = tmp_path / "out.csv"
    err = _fails(
        ["predict", str(model_file), str(sites), "-o", str(out), "--std", "--samples", "2"], capsys
    )
    assert "['mean', 'std']" in err and "rename or drop" in err and not out.exists()


def test_sample_columns_named_like_site_columns_are_refused(model_file, tmp_path, capsys):
    frame = _table(6, seed=1)
    frame["sample_1"] = 0.0
    err = _fails(
        [
            "predict",
            str(model_file),
            str(_csv(frame, tmp_path, "sites.csv")),
            "-o",
            str(tmp_path / "out.csv"),
            "--samples",
            "2",
        ],
        capsys,
    )
    assert "['sample_1']" in err


def test_output_json_never_holds_infinity(tmp_path, monkeypatch):
    fit = SpatialGP.fit

    def unbounded(self, *args, **kwargs):
        fit(self, *args, **kwargs)
        self.stderr_ = {**self.stderr_, "range": float("inf")}
        return self

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    monkeypatch.setattr(SpatialGP, "fit", unbounded)
    out = tmp_path / "result.json"
    assert (
        cli.main(["fit", str(_csv(_table(30), tmp_path)), *TABLE_ARGS, "--output", str(out)]) == 0
    )
    result = json.loads(out.read_text(), parse_constant=refuse)
    assert result["stderr"]["range"] is None and result["stderr"]["variance"] > 0


# ---------------------------------------------------------------- coordinates never guessed
def test_coords_lon_lon_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    err = _fails(
        ["fit", str(_csv(_table(30), tmp_path)), *TABLE_ARGS, "--coords", "lon,lon"], capsys
    )
    assert "--coords names ['lon'] more than once" in err


@pytest.mark.parametrize("coords", [["--coords", "lon,lat"], []], ids=["given", "found-by-name"])
def test_coords_lon_lat_with_covariates_lon_is_refused(coords, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    err = _fails(
        ["fit", str(_csv(_table(30), tmp_path)), *TABLE_ARGS, *coords, "--covariates", "lon"],
        capsys,
    )
    assert "['lon'] is both a coordinate" in err and "covariate (--covariates)" in err


def test_value_among_the_coordinates_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    err = _fails(
        ["fit", str(_csv(_table(30), tmp_path)), "--value", "lat", "--coords", "lon,lat"], capsys
    )
    assert "['lat'] is both a coordinate (--coords) and a value (--value)" in err


@pytest.mark.parametrize(
    "names", [("lon_deg", "lat_deg"), ("longitude_deg", "latitude_deg"), ("LonDeg", "LAT_N")]
)
def test_lon_deg_lat_deg_columns_in_degrees_get_a_warning(names, tmp_path, capsys):
    data = _csv(_table(30, names=names), tmp_path)
    result = _fit_json(["fit", str(data), *TABLE_ARGS, "--coords", ",".join(names)], tmp_path)
    err = capsys.readouterr().err
    assert result["distance"] == "euclidean"
    assert (
        "warning" in err
        and "degrees" in err
        and "--distance chordal" in err
        and str(list(names)) in err
    )


def test_degree_like_columns_with_a_spherical_distance_put_longitude_first(tmp_path, capsys):
    data = _csv(_table(30, names=("lon_deg", "lat_deg"))[["lat_deg", "lon_deg", "z"]], tmp_path)
    saved = tmp_path / "model.npz"
    result = _fit_json(
        [
            "fit",
            str(data),
            *TABLE_ARGS,
            "--coords",
            "lat_deg,lon_deg",
            "--distance",
            "chordal",
            "--save-model",
            str(saved),
        ],
        tmp_path,
    )
    assert result["distance"] == "chordal" and "warning" not in capsys.readouterr().err
    assert list(gs.load(saved).feature_names_in_) == ["lon_deg", "lat_deg"]


@pytest.mark.parametrize(
    "names, distance",
    [(("x_deg", "y_deg"), "auto"), (("lon_deg", "lat_deg"), "euclidean")],
    ids=["not-named-like-lon-lat", "euclidean-asked"],
)
def test_no_degree_warning_without_lon_lat_names_or_with_a_distance_chosen(
    names, distance, tmp_path, capsys
):
    data = _csv(_table(30, names=names), tmp_path)
    assert (
        cli.main(
            ["fit", str(data), *TABLE_ARGS, "--coords", ",".join(names), "--distance", distance]
        )
        == 0
    )
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- files as they come
def test_latin1_csv_is_read_not_called_binary(tmp_path, capsys):
    frame = _table(30).rename(columns={"z": "température"})
    frame["ville"] = ["Zürich", "Genève", "Besançon"] * 10
    data = _csv(frame, tmp_path, encoding="latin-1")
    result = _fit_json(
        ["fit", str(data), "--value", "température", "--kernel", "exponential", "-q"], tmp_path
    )
    assert result["value"] == "température" and result["n"] == 30
    assert "not UTF-8" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "fit",
                str(data),
                "--value",
                "température",
                "--kernel",
                "exponential",
                "-q",
                "--encoding",
                "latin-1",
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == ""
    err = _fails(["fit", str(data), "--value", "température", "--encoding", "utf-8"], capsys)
    assert "is not utf-8 text" in err and "--encoding" in err


def test_latin1_sites_keep_their_names_in_the_utf8_output(model_file, tmp_path, capsys):
    frame = _table(3, seed=1)
    frame["ville"] = ["Zürich", "Genève", "Besançon"]
    out = tmp_path / "out.csv"
    assert (
        cli.main(
            [
                "predict",
                str(model_file),
                str(_csv(frame, tmp_path, "sites.csv", encoding="latin-1")),
                "-o",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    assert list(pd.read_csv(out, encoding="utf-8")["ville"]) == ["Zürich", "Genève", "Besançon"]


def _deeply_nested(model_file, folder):
    """`model_file` with its JSON replaced by one nested 100,000 lists deep."""
    path = Path(folder) / "damaged.npz"
    with zipfile.ZipFile(model_file) as source, zipfile.ZipFile(path, "w") as damaged:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "model.json":
                data = (
                    '{"format": "geostat-model", "version": 1, "params": '
                    + "[" * 100_000
                    + "]" * 100_000
                    + ', "fitted": {}}'
                ).encode()
            damaged.writestr(item, data)
    return path


def test_damaged_model_file_exits_2_naming_it(model_file, tmp_path, capsys):
    damaged = _deeply_nested(model_file, tmp_path)
    sites = _csv(_table(3, seed=1), tmp_path, "sites.csv")
    err = _fails(["predict", str(damaged), str(sites), "-o", str(tmp_path / "out.csv")], capsys)
    assert str(damaged) in err and "report" not in err


def test_damaged_model_file_prints_no_traceback(model_file, tmp_path):
    damaged = _deeply_nested(model_file, tmp_path)
    sites = _csv(_table(3, seed=1), tmp_path, "sites.csv")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "geostat",
            "predict",
            str(damaged),
            str(sites),
            "-o",
            str(tmp_path / "out.csv"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    assert (
        run.stderr.startswith("geostat: ")
        and run.stderr.count("\n") == 1
        and str(damaged) in run.stderr
    )


def test_model_path_that_is_a_pipe_is_refused(tmp_path, capsys):
    fifo = tmp_path / "model.npz"
    os.mkfifo(fifo)
    sites = _csv(_table(3, seed=1), tmp_path, "sites.csv")
    err = _fails(["predict", str(fifo), str(sites), "-o", str(tmp_path / "out.csv")], capsys)
    assert "not a regular file" in err


def test_global_sst_file_with_singleton_time_and_zlev_fits(tmp_path, capsys):
    path = tmp_path / "sst.nc"
    _sst().to_netcdf(path)
    result = _fit_json(["fit", str(path), "--kernel", "exponential", "-q"], tmp_path)
    assert (
        result["n"] == 46 and result["replicates"] == 1 and result["replicate_dimension"] == "time"
    )
    assert result["distance"] == "chordal" and result["converged"]


def test_select_zlev_picks_one_level(tmp_path):
    path = tmp_path / "sst.nc"
    ds = _sst(zlev=(0.0, 10.0, 20.0))
    ds.to_netcdf(path)
    result = _fit_json(
        ["fit", str(path), "--kernel", "exponential", "-q", "--select", "zlev=10"], tmp_path
    )
    level = ds["sst"].sel(zlev=10.0).squeeze("time")
    sites = level.stack(site=("lat", "lon")).dropna("site")
    X = pd.DataFrame({"lon": sites["lon"].values, "lat": sites["lat"].values})
    expected = gs.log_likelihood(
        X, sites.values, result["params"], kernel="exponential", trend="constant"
    )
    assert result["n"] == 46 and result["loglik"] == pytest.approx(expected, rel=1e-10)


def test_select_a_month_by_partial_date_and_a_level(tmp_path):
    path = tmp_path / "sst.nc"
    _sst(zlev=(0.0, 10.0), times=3).to_netcdf(path)
    result = _fit_json(
        [
            "fit",
            str(path),
            "--kernel",
            "exponential",
            "-q",
            "--select",
            "time=2000-02",
            "--select",
            "zlev=0",
        ],
        tmp_path,
    )
    assert result["replicates"] == 1 and result["n"] == 46


@pytest.mark.parametrize(
    "select, match",
    [
        ("zlev=5", "has no zlev 5; zlev has 3 value(s), from 0.0 to 20.0"),
        ("time=2001-01", "has no time 2001-01; time has 2 value(s), from 2000-01-01 to 2000-02-01"),
        ("zlev=deep", "zlev of"),
        ("depth=0", "has no dimension 'depth'"),
        ("lat=0", "lat is a spatial dimension"),
    ],
    ids=["absent-level", "absent-date", "not-a-number", "unknown-dimension", "spatial-dimension"],
)
def test_select_absent_label_names_the_dimension_and_its_range(
    select, match, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    path = tmp_path / "sst.nc"
    _sst(zlev=(0.0, 10.0, 20.0), times=2).to_netcdf(path)
    err = _fails(["fit", str(path), "--select", select], capsys)
    assert f"--select {select}" in err and match in err


def test_select_on_a_csv_file_is_refused(tmp_path, capsys):
    err = _fails(
        ["fit", str(_csv(_table(30), tmp_path)), *TABLE_ARGS, "--select", "zlev=0"], capsys
    )
    assert "--select applies to a NetCDF file" in err


def test_predict_on_a_grid_with_singleton_dimensions(tmp_path, capsys):
    path, out, saved = tmp_path / "sst.nc", tmp_path / "out.nc", tmp_path / "model.npz"
    ds = _sst(zlev=(0.0, 10.0))
    ds.to_netcdf(path)
    assert (
        cli.main(
            [
                "fit",
                str(path),
                "--kernel",
                "exponential",
                "-q",
                "--select",
                "zlev=0",
                "--save-model",
                str(saved),
            ]
        )
        == 0
    )
    assert (
        cli.main(["predict", str(saved), str(path), "-o", str(out), "--select", "zlev=0", "-q"])
        == 0
    )
    expected = gs.load(saved).predict(ds.isel(zlev=0, drop=True))
    with xr.open_dataset(out) as written:
        assert written["sst_mean"].dims == expected.dims == ("time", "lat", "lon")
        np.testing.assert_allclose(written["sst_mean"], expected, rtol=1e-12)


# ---------------------------------------------------------------- properties
@st.composite
def collisions(draw):
    """A command, its output option, a way of spelling the output path, and whether --force
    is given."""
    command = draw(st.sampled_from(["fit", "predict"]))
    option = draw(st.sampled_from(["--output", "--save-model"])) if command == "fit" else "-o"
    spellings = ["input", "relative", "dotdot", "symlink", "hardlink", "existing", "new"]
    spelling = draw(st.sampled_from(spellings + (["other-output"] if command == "fit" else [])))
    return command, option, spelling, draw(st.booleans())


def _spell(spelling, folder, data):
    """A path for an output: the input `data` under some spelling, or another file."""
    folder = Path(folder)
    (folder / "sub").mkdir(exist_ok=True)
    if spelling == "input":
        return str(data)
    if spelling == "relative":
        return os.path.relpath(data)
    if spelling == "dotdot":
        return str(folder / "sub" / ".." / data.name)
    if spelling in ("symlink", "hardlink"):
        link = folder / f"{spelling}.csv"
        (os.symlink if spelling == "symlink" else os.link)(data, link)
        return str(link)
    if spelling == "existing":
        (folder / "old.csv").write_text("an earlier result")
        return str(folder / "old.csv")
    return str(folder / "new.csv")  # "new"


def _reached(*args, **kwargs):
    raise ValueError("reached the data")


@settings(max_examples=60, **PROPERTY_SETTINGS)
@given(collisions())
def test_output_paths_never_replace_an_input_or_an_existing_file(case):
    command, option, spelling, force = case
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        data = _csv(_table(10), folder)
        before = data.read_bytes()
        if command == "predict":
            argv = ["predict", str(Path(folder) / "model.npz"), str(data)]
        elif spelling == "other-output":
            argv = [
                "fit",
                str(data),
                "--output" if option == "--save-model" else "--save-model",
                str(Path(folder) / "shared.csv"),
            ]
        else:
            argv = [
                "fit",
                str(data),
                "--output" if option == "--save-model" else "--save-model",
                str(Path(folder) / "second.csv"),
            ]
        path = (
            str(Path(folder) / "shared.csv")
            if spelling == "other-output"
            else _spell(spelling, folder, data)
        )
        patch.setattr("geostat.cli.fit.load_fit_data", _reached)
        patch.setattr("geostat.cli.predict.load_model", _reached)
        patch.setattr(sys, "stderr", io.StringIO())
        assert cli.main([*argv, option, path, *(["--force"] if force else [])]) == 2
        message = sys.stderr.getvalue()
        if spelling in ("input", "relative", "dotdot", "symlink", "hardlink"):
            assert "would replace the input" in message and option in message
        elif spelling == "other-output":
            assert "name the same file" in message
        elif spelling == "existing" and not force:
            assert (
                "exists; add --force" in message and Path(path).read_text() == "an earlier result"
            )
        else:
            assert "reached the data" in message
        assert data.read_bytes() == before


@st.composite
def sample_counts(draw):
    """A --samples value of any size, at CSV sites or on a grid."""
    samples = draw(
        st.one_of(
            st.integers(-3, 3),
            st.integers(4, 3 * MAX_SAMPLE_COLUMNS),
            st.integers(MAX_SAMPLE_COLUMNS, 10**15),
        )
    )
    return samples, draw(st.sampled_from(["csv", "netcdf"]))


@settings(max_examples=30, **PROPERTY_SETTINGS)
@given(sample_counts())
def test_samples_are_bounded_before_any_draw(model_file, case):
    samples, kind = case
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        if kind == "csv":
            sites, cells = _csv(_table(8, seed=1), folder, "sites.csv"), 8
        else:
            sites, cells = Path(folder) / "grid.nc", 12
            xr.Dataset(
                coords={"lat": np.linspace(36, 43, 3), "lon": np.linspace(-99, -87, 4)}
            ).to_netcdf(sites)

        def reached(self, X, n_samples=1, random_state=None):
            raise ValueError(f"reached {n_samples} draws")

        patch.setattr(SpatialGP, "sample_y", reached)
        patch.setattr(sys, "stderr", io.StringIO())
        out = Path(folder) / "out.nc"
        assert (
            cli.main(
                ["predict", str(model_file), str(sites), "-o", str(out), "--samples", str(samples)]
            )
            == 2
        )
        message = sys.stderr.getvalue()
        too_many = cells * samples > MAX_SAMPLE_VALUES or (
            kind == "csv" and samples > MAX_SAMPLE_COLUMNS
        )
        if samples < 1:
            assert "--samples must be a positive" in message
        elif too_many:
            assert f"--samples {samples}:" in message
        else:
            assert f"reached {samples} draws" in message
        assert not out.exists()
