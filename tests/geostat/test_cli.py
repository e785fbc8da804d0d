"""The geostat command: the main job on the default dataset, JSON output, errors."""

import json

import numpy as np
import pandas as pd
import pytest

from geostat import cli, datasets


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


@pytest.mark.parametrize(
    "argv, match",
    [
        (["fit", "--dataset", "nope"], "nope"),
        (["fit", "missing.csv"], "no such file"),
        (["fit", "--value", "rain"], "rain"),
        (["fit", "--kernel", "spherical"], "spherical"),
    ],
    ids=["unknown-dataset", "missing-file", "unknown-column", "unknown-kernel"],
)
def test_errors_exit_with_a_message(argv, match):
    with pytest.raises(SystemExit, match=match):
        cli.main(argv)


def test_datasets_command_lists_bundled_data(capsys):
    assert cli.main(["datasets"]) == 0
    printed = capsys.readouterr().out
    for name in datasets.names():
        assert name in printed
