"""The geostat command: the main job on the default dataset, JSON output, errors."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geostat import cli, datasets
from geostat.estimator import SpatialGP


def test_main_job_prints_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "result.json"
    assert cli.main(["fit", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    for word in ("variance", "range (km)", "smoothness", "nugget", "log-likelihood", "n = 1720", "method exact", "wall time"):
        assert word in printed
    result = json.loads(out.read_text())
    assert result["data"] == datasets.DEFAULT and result["n"] == 1720
    assert result["distance"] == "chordal" and result["transform"] == "log"
    assert set(result["params"]) == {"variance", "range", "smoothness", "nugget"}
    assert all(np.isfinite(v) and v > 0 for k, v in result["stderr"].items())
    assert result["converged"]


def test_fit_a_csv_file_with_options(tmp_path, capsys):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(size=80), "y": rng.uniform(size=80)})
    frame["z"] = np.sin(6 * frame.x) + 0.1 * rng.normal(size=80)
    path = tmp_path / "data.csv"
    frame.to_csv(path, index=False)
    assert cli.main(["fit", str(path), "--coords", "x,y", "--value", "z", "--kernel", "exponential", "--trend", "linear"]) == 0
    printed = capsys.readouterr().out
    assert "distance euclidean" in printed and "intercept" in printed


def test_fit_with_the_tlr_method_reports_accuracy_and_error(tmp_path, capsys):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x": rng.uniform(size=300), "y": rng.uniform(size=300)})
    frame["z"] = np.sin(6 * frame.x) + 0.1 * rng.normal(size=300)
    path, out = tmp_path / "data.csv", tmp_path / "result.json"
    frame.to_csv(path, index=False)
    argv = ["fit", str(path), "--coords", "x,y", "--value", "z", "--kernel", "exponential", "--method", "tlr",
            "--accuracy", "1e-9", "--tile-size", "64", "--output", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "method tlr (accuracy 1e-09)" in printed and "estimated TLR error" in printed
    result = json.loads(out.read_text())
    assert result["method"] == "tlr" and result["accuracy"] == 1e-9 and 0 <= result["loglik_error"] < 1e-3


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


@pytest.mark.parametrize("transform", ["log", "log10"])
def test_log_transform_of_non_positive_values_fails_naming_the_column(transform, sites, tmp_path, capsys):
    sites.loc[[4, 9], "z"] = [-1.0, 0.0]
    err = _fails(["fit", _write(sites, tmp_path), *ARGS, "--transform", transform], capsys)
    assert "'z'" in err and "2 value(s) <= 0" in err and "data row 5" in err and "--transform none" in err


def test_log_transform_keeps_missing_values_missing(sites, tmp_path, capsys):
    sites.loc[3, "z"] = np.nan
    out = tmp_path / "result.json"
    assert cli.main(["fit", _write(sites, tmp_path), *ARGS, "--transform", "log", "--output", str(out)]) == 0
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
            lambda tmp: Path("/proc/geostat-result.json"), "cannot be written",
            marks=pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)"),
        ),
    ],
    ids=["output-in-missing-folder", "output-is-a-folder", "unwritable-output"],
)
def test_bad_output_path_fails_before_fitting(output, match, sites, tmp_path, capsys, monkeypatch):
    def fit(*args, **kwargs):
        raise AssertionError("the fit ran before the output path was checked")

    monkeypatch.setattr(SpatialGP, "fit", fit)
    assert match in _fails(["fit", _write(sites, tmp_path), *ARGS, "--output", str(output(tmp_path))], capsys)


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
    ids=["all-nan-value", "two-usable-rows", "nan-coordinate", "accuracy-0", "accuracy-2", "tile-size-0",
         "negative-nugget", "negative-smoothness", "unknown-kernel", "unknown-distance", "unknown-method",
         "missing-coordinate-column"],
)
def test_bad_data_or_option_fails_with_one_named_line(change, options, match, sites, tmp_path, capsys):
    if change:
        change(sites)
    assert match in _fails(["fit", _write(sites, tmp_path), *ARGS, *options], capsys)


@pytest.mark.parametrize(
    "error, status, expected",
    [
        (np.linalg.LinAlgError("not positive definite"), 2, "geostat: not positive definite\n"),
        (MemoryError("needs 9 GB"), 2, "geostat: needs 9 GB\n"),
        (NotImplementedError("no such thing\non two lines"), 2, "geostat: no such thing on two lines\n"),
        (KeyboardInterrupt(), 130, "geostat: interrupted\n"),
        (KeyError("oops"), 1, "geostat: internal error: KeyError: 'oops' (please report this)\n"),
    ],
    ids=["linalg-error", "memory-error", "multi-line-message", "interrupt", "unexpected-error"],
)
def test_main_turns_every_exception_into_one_line(error, status, expected, capsys, monkeypatch):
    def fail(args):
        raise error

    monkeypatch.setattr(cli, "_fit", fail)
    assert cli.main(["fit"]) == status
    assert capsys.readouterr().err == expected


@pytest.mark.parametrize(
    "content, match", [(b"x,y,z\n1,2\n1,2,3,4\n", "cannot read"), (b"x,y,z\n1,2,-1\n", "--transform none")],
    ids=["ragged-csv", "log-of-negative"],
)
def test_command_line_prints_no_traceback(content, match, tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    command = [sys.executable, "-c", "from geostat.cli import main; import sys; sys.exit(main())"]
    run = subprocess.run([*command, "fit", str(path), *ARGS, "--transform", "log"], capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.startswith("geostat: ") and run.stderr.count("\n") == 1 and match in run.stderr


def test_datasets_command_lists_bundled_data(capsys):
    assert cli.main(["datasets"]) == 0
    printed = capsys.readouterr().out
    for name in datasets.names():
        assert name in printed
