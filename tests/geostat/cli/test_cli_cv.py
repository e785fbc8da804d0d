"""``geostat cv``: cross-validation of a saved model from the command line, end to end."""

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat import cli
from geostat.validation import SCORES, cross_validate


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A model fitted by ``geostat fit`` on a small CSV table and saved."""
    folder = tmp_path_factory.mktemp("cv")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(size=50), "y": rng.uniform(size=50)})
    frame["z"] = np.sin(6 * frame.x) + 0.2 * rng.normal(size=50)
    data, model = folder / "data.csv", folder / "model.npz"
    frame.to_csv(data, index=False)
    assert (
        cli.main(
            [
                "fit",
                str(data),
                "--coords",
                "x,y",
                "--value",
                "z",
                "--kernel",
                "exponential",
                "--trend",
                "linear",
                "--save-model",
                str(model),
                "-q",
            ]
        )
        == 0
    )
    return model


def one_line_error(capsys, argv, status=2):
    assert cli.main(argv) == status
    captured = capsys.readouterr()
    assert (
        captured.out == ""
        and captured.err.startswith("geostat: ")
        and captured.err.count("\n") == 1
    )
    assert "Traceback" not in captured.err
    return captured.err


def test_k_fold_prints_the_scores_and_writes_the_table(model_file, tmp_path, capsys):
    out = tmp_path / "cv.csv"
    assert (
        cli.main(
            ["cv", str(model_file), "--cv", "5", "--seed", "3", "--level", "0.8", "-o", str(out)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    expected = cross_validate(gs.load(model_file), cv=5, level=0.8, random_state=3)
    assert "5 folds; 50 observations at 50 sites; method exact" in printed
    for name in SCORES:
        label = "coverage (80%)" if name == "coverage" else name
        assert f"{label:<20}{expected.attrs['scores'][name]:>14.6g}" in printed
    assert f"results of 50 observations written to {out}" in printed
    written = pd.read_csv(out)
    assert list(written.columns) == [
        "site",
        "x",
        "y",
        "fold",
        "observed",
        "mean",
        "std",
        "standardized",
    ]
    pd.testing.assert_frame_equal(written, expected, check_exact=False, rtol=1e-14)


def test_leave_one_out_is_the_default(model_file, capsys):
    assert cli.main(["cv", str(model_file)]) == 0
    printed = capsys.readouterr().out
    scores = cross_validate(gs.load(model_file)).attrs["scores"]
    assert "(leave-one-out; 50 observations" in printed and f"{scores['crps']:>14.6g}" in printed


def test_refit_fits_each_training_fold(model_file, capsys):
    assert cli.main(["cv", str(model_file), "--cv", "2", "--refit", "-q"]) == 0
    printed = capsys.readouterr().out
    scores = cross_validate(gs.load(model_file), cv=2, refit=True).attrs["scores"]
    assert "2 folds, refitted on each" in printed and f"{scores['rmse']:>14.6g}" in printed


def test_an_existing_output_is_replaced_only_with_force_and_whole(
    model_file, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "cv.csv"
    out.write_text("previous\n")
    assert "exists; add --force" in one_line_error(capsys, ["cv", str(model_file), "-o", str(out)])
    assert out.read_text() == "previous\n"

    def fail(*args, **kwargs):
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(pd.DataFrame, "to_csv", fail)
        assert "disk full" in one_line_error(
            capsys, ["cv", str(model_file), "-o", str(out), "--force"]
        )
    assert out.read_text() == "previous\n" and [p.name for p in tmp_path.iterdir()] == ["cv.csv"]
    assert cli.main(["cv", str(model_file), "-o", str(out), "--force"]) == 0
    assert len(pd.read_csv(out)) == 50


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--refit"], "--refit refits the model on each training fold"),
        (["--cv", "51"], "number of folds from 2 to 50"),
        (["--level", "1.5"], "level must be a number strictly between 0 and 1"),
        (["-o", "cv.txt"], "ending in .csv"),
    ],
)
def test_bad_options_stop_with_one_line(model_file, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    assert message in one_line_error(capsys, ["cv", str(model_file), *extra])


def test_bad_files_stop_with_one_line(model_file, tmp_path, capsys):
    assert "no such file" in one_line_error(capsys, ["cv", str(tmp_path / "missing.npz")])
    table = tmp_path / "data.csv"
    table.write_text("x,y,z\n0,0,1\n")
    assert "not a" in one_line_error(capsys, ["cv", str(table)])
    assert "would replace the input" in one_line_error(
        capsys, ["cv", str(model_file), "-o", str(model_file)]
    )


@pytest.mark.parametrize("text", ["abc", "1", "2.5"])
def test_a_bad_number_of_folds_is_a_usage_error(model_file, capsys, text):
    with pytest.raises(SystemExit) as stop:
        cli.main(["cv", str(model_file), "--cv", text])
    assert stop.value.code == 2 and "expected 'loo' or a number of folds" in capsys.readouterr().err


def test_a_model_fitted_on_a_netcdf_field_is_cross_validated_as_a_table(tmp_path, capsys):
    """A field model's file keeps its grid, on which the estimator's cross-validation is a
    Dataset; the command writes the table, the same observations and values."""
    xr = pytest.importorskip("xarray")
    lon, lat = np.linspace(-100, -90, 6), np.linspace(35, 40, 5)
    values = np.random.default_rng(0).normal(size=(3, 5, 6)) + np.linspace(0, 3, 30).reshape(
        1, 5, 6
    )
    path, model, out = tmp_path / "f.nc", tmp_path / "m.npz", tmp_path / "cv.csv"
    xr.Dataset(
        {"tas": (("month", "lat", "lon"), values)},
        coords={"month": [1, 2, 3], "lat": lat, "lon": lon},
    ).to_netcdf(path)
    argv = ["fit", str(path), "--var", "tas", "--kernel", "exponential", "-q"]
    assert cli.main([*argv, "--save-model", str(model)]) == 0
    assert cli.main(["cv", str(model), "--cv", "5", "--output", str(out)]) == 0
    assert "90 observations at 30 sites" in capsys.readouterr().out
    loaded = gs.load(model)
    assert isinstance(loaded.cross_validate(cv=5), xr.Dataset)
    expected = loaded.cross_validate(cv=5, as_table=True)
    written = pd.read_csv(out)
    np.testing.assert_allclose(written["mean"], expected["mean"], rtol=1e-12)
    np.testing.assert_array_equal(written["site"], expected["site"])
