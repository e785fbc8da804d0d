"""``geostat fit --noise-variance`` / ``--noise-sd``: known measurement-error variances of a
table, end to end. The command's fit is the estimator's ``fit(X, y, noise_variance=v)``;
the report and the JSON name the column; the model file keeps the variances for ``geostat
cv`` and ``geostat predict``; every misuse is one line naming the option, exit status 2,
before any fitting.
"""

import json

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat import cli
from geostat.estimator import SpatialGP

N = 200
ARGS = ["--value", "z", "--kernel", "exponential", "-q"]


def _frame(n=N, seed=1):
    """`n` sites in the unit square: an exponential field plus noise of known variance
    ``v`` (from 0.02 to 0.2, ten times apart), its standard deviation ``sd``."""
    rng = np.random.default_rng(seed)
    sites = rng.uniform(size=(n, 2))
    field = gs.simulate(
        sites, {"variance": 1.0, "range": 0.2}, kernel="exponential", random_state=seed + 1
    )
    v = 0.02 * 10 ** rng.uniform(0, 1, n)
    frame = pd.DataFrame({"x": sites[:, 0], "y": sites[:, 1], "v": v, "sd": np.sqrt(v)})
    frame["z"] = field + rng.normal(size=n) * frame["sd"]
    return frame


def _fails(argv, capsys):
    """Run the command: exit status 2, nothing on standard output, one line on standard
    error (no traceback). Returns that line."""
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("geostat: "), captured
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    return captured.err


def _never(*args, **kwargs):
    raise AssertionError("the fit began before the arguments were checked")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """The table, its file, the command's JSON, report and model file, and the estimator
    fitted in Python with the same settings."""
    folder = tmp_path_factory.mktemp("noise")
    frame = _frame()
    data, out, model = folder / "data.csv", folder / "fit.json", folder / "model.npz"
    frame.to_csv(data, index=False)
    argv = ["fit", str(data), *ARGS, "--noise-variance", "v"]
    argv += ["--output", str(out), "--save-model", str(model)]
    assert cli.main(argv) == 0
    est = SpatialGP(kernel="exponential", random_state=0, verbose=0)
    est.fit(frame[["x", "y"]], frame["z"], noise_variance=frame["v"])
    return {
        "frame": frame,
        "data": data,
        "result": json.loads(out.read_text(encoding="utf-8")),
        "model": model,
        "est": est,
        "folder": folder,
    }


def test_fit_equals_the_estimator_with_noise_variance(fitted):
    result, est = fitted["result"], fitted["est"]
    assert result["params"].keys() == est.params_.keys()
    for name, value in est.params_.items():
        assert result["params"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    assert result["loglik"] == pytest.approx(est.loglik_, rel=1e-12)
    assert result["coef"]["intercept"] == pytest.approx(est.coef_[0], rel=1e-10)
    without = SpatialGP(kernel="exponential", random_state=0, verbose=0)
    without.fit(fitted["frame"][["x", "y"]], fitted["frame"]["z"])
    assert result["loglik"] != pytest.approx(without.loglik_, rel=1e-6)  # they were used


def test_json_and_report_name_the_known_errors(fitted, capsys):
    v = fitted["frame"]["v"]
    known = fitted["result"]["known_errors"]
    assert known["option"] == "--noise-variance" and known["column"] == "v"
    assert known["n"] == N
    assert known["median"] == pytest.approx(np.median(v), rel=1e-12)
    assert [known["min"], known["max"]] == pytest.approx([v.min(), v.max()], rel=1e-12)
    assert cli.main(["fit", str(fitted["data"]), *ARGS, "--noise-variance", "v"]) == 0
    printed = capsys.readouterr().out
    line = next(row for row in printed.splitlines() if row.startswith("known error variances"))
    assert "column v" in line and f"median {np.median(v):.4g}" in line
    assert f"range {v.min():.4g} to {v.max():.4g}" in line


def test_fit_without_known_errors_reports_none(fitted, tmp_path, capsys):
    out = tmp_path / "plain.json"
    assert cli.main(["fit", str(fitted["data"]), *ARGS, "--output", str(out)]) == 0
    assert "known error" not in capsys.readouterr().out
    assert json.loads(out.read_text(encoding="utf-8"))["known_errors"] is None


def test_noise_sd_is_squared(fitted, tmp_path, capsys):
    out = tmp_path / "sd.json"
    argv = ["fit", str(fitted["data"]), *ARGS, "--noise-sd", "sd", "--output", str(out)]
    assert cli.main(argv) == 0
    assert "column sd (--noise-sd, squared)" in capsys.readouterr().out
    result = json.loads(out.read_text(encoding="utf-8"))
    for name, value in fitted["est"].params_.items():
        assert result["params"][name] == pytest.approx(value, rel=1e-8, abs=1e-12)
    assert result["known_errors"]["option"] == "--noise-sd"


def test_rows_without_a_value_are_not_used(fitted, tmp_path):
    frame = fitted["frame"].copy()
    frame.loc[[3, 50], ["z", "v"]] = np.nan  # a missing value with a missing variance
    frame.loc[7, "z"], frame.loc[7, "v"] = np.nan, -1.0  # ... and with an unused bad one
    data, out = tmp_path / "gaps.csv", tmp_path / "gaps.json"
    frame.to_csv(data, index=False)
    argv = ["fit", str(data), *ARGS, "--noise-variance", "v", "--output", str(out)]
    assert cli.main(argv) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    kept = frame.dropna(subset=["z"])
    est = SpatialGP(kernel="exponential", random_state=0, verbose=0)
    est.fit(kept[["x", "y"]], kept["z"], noise_variance=kept["v"])
    for name, value in est.params_.items():
        assert result["params"][name] == pytest.approx(value, rel=1e-8, abs=1e-12)
    assert result["known_errors"]["n"] == N - 3 and result["n_observations"] == N - 3


def test_model_file_keeps_the_variances_for_cv_and_predict(fitted, tmp_path, capsys):
    est, model = fitted["est"], fitted["model"]
    loaded = gs.load(model)
    np.testing.assert_allclose(loaded.noise_variance_, fitted["frame"]["v"], rtol=1e-12)
    out = tmp_path / "cv.csv"
    assert cli.main(["cv", str(model), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "with the known error variances" in printed.splitlines()[0]
    expected = est.cross_validate()
    rows = {row[:20].split(" (")[0].strip(): row[20:34] for row in printed.splitlines()}
    for name, value in expected.attrs["scores"].items():
        assert float(rows[name]) == pytest.approx(value, rel=1e-5, abs=1e-12), name
    table = pd.read_csv(out)
    np.testing.assert_allclose(table["mean"], expected["mean"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(table["std"], expected["std"], rtol=1e-9, atol=1e-12)
    sites = fitted["frame"][["x", "y"]].iloc[:20] + 0.01
    sites_file, predicted = tmp_path / "sites.csv", tmp_path / "pred.csv"
    sites.to_csv(sites_file, index=False)
    assert cli.main(["predict", str(model), str(sites_file), "-o", str(predicted), "--std"]) == 0
    mean, std = est.predict(sites, return_std=True)
    table = pd.read_csv(predicted)
    np.testing.assert_allclose(table["mean"], mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(table["std"], std, rtol=1e-9, atol=1e-12)


def test_help_describes_the_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--noise-variance COLUMN" in text and "--noise-sd COLUMN" in text
    assert "measurement-error variance" in text


@pytest.mark.parametrize(
    ("column", "extra", "expected"),
    [
        ("w", [], "has no such column; it has ['x', 'y', 'v', 'sd', 'z']"),
        ("z", [], "['z'] is both a value (--value) and a known error"),
        ("x", [], "['x'] is both a coordinate"),
        ("v", ["--covariates", "v"], "['v'] is both a covariate (--covariates) and a known error"),
        ("v", ["--transform", "log"], "--transform log fits log(value)"),
        ("v", ["--transform", "boxcox"], "--transform boxcox fits a Box-Cox transform"),
    ],
    ids=["missing", "value", "coordinate", "covariate", "log", "boxcox"],
)
def test_misuse_is_refused_before_fitting(column, extra, expected, fitted, capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    argv = ["fit", str(fitted["data"]), *ARGS, "--noise-variance", column, *extra]
    err = _fails(argv, capsys)
    assert "--noise-variance" in err and expected in err


@pytest.mark.parametrize(
    ("bad", "shown"),
    [(-0.5, "-0.5"), (np.inf, "inf"), (np.nan, "missing"), ("big", "'big'")],
    ids=["negative", "infinite", "missing", "text"],
)
def test_bad_variances_are_refused_naming_the_rows(bad, shown, fitted, tmp_path, capsys):
    frame = fitted["frame"].copy()
    frame["v"] = frame["v"].astype(object)
    frame.loc[[4, 9], "v"] = bad
    data = tmp_path / "bad.csv"
    frame.to_csv(data, index=False)
    err = _fails(["fit", str(data), *ARGS, "--noise-variance", "v"], capsys)
    assert "--noise-variance column 'v' must hold finite, non-negative variances" in err
    assert f"2 row(s) do not (data row 5: {shown}; data row 10: {shown})" in err


def test_negative_standard_deviation_is_refused(fitted, tmp_path, capsys):
    frame = fitted["frame"].copy()
    frame.loc[0, "sd"] = -0.1
    data = tmp_path / "bad_sd.csv"
    frame.to_csv(data, index=False)
    err = _fails(["fit", str(data), *ARGS, "--noise-sd", "sd"], capsys)
    assert "--noise-sd column 'sd' must hold finite, non-negative standard deviations" in err
    assert "data row 1: -0.1" in err


def test_bundled_dataset_with_its_default_log_transform_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    err = _fails(["fit", "--noise-variance", "precipitation", "-q"], capsys)
    assert err.startswith("geostat: --noise-variance gives errors in the units of the value")
    assert "the dataset's default --transform log" in err and "--transform none" in err


def _netcdf(tmp_path, err=None):
    """A 4 x 5 lon/lat field over three months with a cell never observed, and its error
    standard deviations on the grid (`err`, default 0.3 everywhere)."""
    xr = pytest.importorskip("xarray")
    lon, lat = np.linspace(-100, -90, 5), np.linspace(35, 40, 4)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(3, 4, 5)) + np.linspace(0, 3, 20).reshape(1, 4, 5)
    values[:, 0, 0] = np.nan
    sd = np.full((4, 5), 0.3) if err is None else err
    path = tmp_path / "field.nc"
    dataset = xr.Dataset(
        {"tas": (("month", "lat", "lon"), values), "sd": (("lat", "lon"), sd)},
        coords={"month": [1, 2, 3], "lat": lat, "lon": lon},
    )
    dataset.to_netcdf(path)
    return path, dataset


def test_a_netcdf_field_takes_its_known_errors_from_a_variable(tmp_path, capsys):
    path, dataset = _netcdf(tmp_path)
    out = tmp_path / "fit.json"
    argv = ["fit", str(path), "--var", "tas", "--kernel", "exponential", "--noise-sd", "sd"]
    assert cli.main([*argv, "-q", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    expected = SpatialGP(kernel="exponential").fit(
        dataset, y="tas", noise_variance=dataset["sd"] ** 2
    )
    assert report["known_errors"]["column"] == "sd" and report["known_errors"]["n"] == 19
    assert report["known_errors"]["median"] == pytest.approx(0.09)
    assert report["loglik"] == pytest.approx(expected.loglik_, rel=1e-12)


def test_a_netcdf_field_with_a_missing_or_nan_error_is_refused_naming_it(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(SpatialGP, "fit", _never)
    path, _ = _netcdf(tmp_path)
    err = _fails(["fit", str(path), "--var", "tas", "--noise-variance", "err", "-q"], capsys)
    assert err.startswith("geostat: --noise-variance err: ") and "no such data variable" in err
    sd = np.full((4, 5), 0.3)
    sd[2, 3] = np.nan
    path, _ = _netcdf(tmp_path, sd)
    err = _fails(["fit", str(path), "--var", "tas", "--noise-sd", "sd", "-q"], capsys)
    assert err.startswith("geostat: --noise-sd sd is NaN at 3 observed value(s)")


def test_both_options_together_are_refused(fitted, capsys):
    with pytest.raises(SystemExit) as stopped:
        cli.main(["fit", str(fitted["data"]), *ARGS, "--noise-variance", "v", "--noise-sd", "sd"])
    assert stopped.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
