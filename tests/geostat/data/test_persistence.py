"""Model files (SpatialGP.save, geostat.load) and small pickles: predictions after a round
trip equal the fitted estimator's bit for bit; files are small, versioned, and read without
pickle; bad files fail with a message naming the file and the fix."""

import json
import pickle
import re
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from model_files import rewrite_header, saved_model
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from standin import StandIn

import geostat as gs
import geostat.estimator
from geostat.data.model_file import FORMAT, VERSION
from geostat.errors import ModelFileError
from tlrcore.backends import cupy_available

xr = pytest.importorskip("xarray")

EXPONENTIAL = {"variance": 1.0, "range": 0.2, "nugget": 0.05}


def _same(a, b):
    """Bitwise equality of two predictions (arrays, pandas objects or DataArrays)."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b, strict=True))
    if isinstance(a, xr.DataArray):
        return a.identical(b)
    if isinstance(a, (pd.Series, pd.DataFrame)):
        return (
            type(a) is type(b)
            and a.index.equals(b.index)
            and np.array_equal(a.to_numpy(), b.to_numpy())
        )
    return np.array_equal(a, b)


def _round_trip(est, tmp_path, name="model.npz"):
    path = tmp_path / name
    est.save(path)
    return gs.load(path)


def _check_predictions_equal(est, other, X):
    assert _same(est.predict(X, return_std=True), other.predict(X, return_std=True))
    assert _same(
        est.sample_y(X, n_samples=3, random_state=1), other.sample_y(X, n_samples=3, random_state=1)
    )


def _check_fitted_state_equal(est, other):
    assert other.get_params() == est.get_params()
    for name in (
        "params_",
        "stderr_",
        "coef_names_",
        "loglik_",
        "distance_",
        "method_",
        "kernel_",
        "n_features_in_",
        "converged_",
        "n_iter_",
        "accuracy_",
    ):
        assert getattr(other, name) == getattr(est, name), name
    assert np.array_equal(other.coef_, est.coef_) and np.array_equal(
        other.coef_stderr_, est.coef_stderr_
    )
    assert np.array_equal(other.result_.covariance, est.result_.covariance)
    assert other.result_.at_bounds == est.result_.at_bounds


@pytest.fixture(scope="module")
def rainfall():
    """The default model of ``geostat fit`` (Matérn, smoothness estimated, nugget, constant
    trend, chordal km) on every sixth station of the default dataset."""
    frame = gs.datasets.load(gs.datasets.DEFAULT).iloc[::6]
    X, y = frame[["lon", "lat"]], np.log(frame["precipitation"])
    return gs.SpatialGP(kernel="matern", nugget=True, trend="constant").fit(X, y), X


@pytest.fixture(scope="module")
def small():
    """An exponential fit on 150 random sites."""
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(150, 2))
    y = gs.simulate(X, EXPONENTIAL, kernel="exponential", random_state=4).ravel()
    return gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y), X, y


def test_default_model_round_trip_predicts_bit_for_bit(rainfall, tmp_path):
    est, X = rainfall
    loaded = _round_trip(est, tmp_path)
    _check_fitted_state_equal(est, loaded)
    assert list(loaded.feature_names_in_) == ["lon", "lat"]
    _check_predictions_equal(est, loaded, X.iloc[:40] + 0.5)
    assert loaded.log_likelihood(est.params_) == est.log_likelihood(est.params_)


def test_model_file_holds_no_matrix_of_the_sites(rainfall, tmp_path):
    est, X = rainfall
    path = tmp_path / "model.npz"
    est.save(path)
    n = len(X)
    assert (
        path.stat().st_size < 100 * n
    )  # the training data (n x 4 numbers), compressed; never n x n
    with np.load(path, allow_pickle=False) as archive:  # every array reads without pickle
        sizes = [archive[name].size for name in archive.files if name.startswith("arrays/")]
    assert max(sizes) <= 2 * n


def test_model_file_is_json_with_a_version_stamp(small, tmp_path):
    est = small[0]
    path = tmp_path / "model.npz"
    est.save(path)
    with zipfile.ZipFile(path) as archive:
        header = json.loads(archive.read("model.json"))
    assert header["format"] == FORMAT == "geostat-model" and header["version"] == VERSION == 4
    assert header["geostat"] == gs.__version__
    assert (
        header["params"]["kernel"] == "exponential" and header["fitted"]["distance_"] == "euclidean"
    )


def test_load_runs_no_pickle(small, tmp_path, monkeypatch):
    est, X, _ = small
    path = tmp_path / "model.npz"
    est.save(path)

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    assert _same(gs.load(path).predict(X[:5]), est.predict(X[:5]))


def test_tlr_model_round_trip_predicts_bit_for_bit(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(600, 2))
    y = gs.simulate(X, EXPONENTIAL, kernel="exponential", random_state=6).ravel()
    est = gs.SpatialGP(kernel="exponential", method="tlr", tile_size=128, n_starts=1).fit(X, y)
    loaded = _round_trip(est, tmp_path)
    assert loaded.method_ == "tlr" and loaded.accuracy_ == est.accuracy_
    _check_predictions_equal(est, loaded, rng.uniform(size=(30, 2)))


def test_replicates_with_missing_values_round_trip(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(120, 2))
    Y = gs.simulate(X, EXPONENTIAL, kernel="exponential", n_samples=3, random_state=8)
    Y[rng.choice(120, 20, replace=False), 1] = np.nan
    est = gs.SpatialGP(kernel="exponential", n_starts=1).fit(
        X, pd.DataFrame(Y, columns=["day1", "day2", "day3"])
    )
    loaded = _round_trip(est, tmp_path)
    assert loaded.coef_.shape == (3, 1)
    mean = loaded.predict(pd.DataFrame(X[:10]))
    assert list(mean.columns) == ["day1", "day2", "day3"]
    _check_predictions_equal(est, loaded, X[:10] + 0.01)


def test_covariate_trend_on_a_dataframe_keeps_feature_names(tmp_path):
    rng = np.random.default_rng(9)
    X = pd.DataFrame(rng.uniform(size=(120, 2)), columns=["easting", "northing"])
    X["elevation"] = rng.uniform(0, 2, size=120)
    y = (
        3.0 * X["elevation"]
        + gs.simulate(
            X[["easting", "northing"]].to_numpy(),
            EXPONENTIAL,
            kernel="exponential",
            random_state=10,
        ).ravel()
    )
    est = gs.SpatialGP(kernel="exponential", trend=["elevation"], n_starts=1).fit(
        X, y.rename("yield")
    )
    loaded = _round_trip(est, tmp_path)
    assert list(loaded.feature_names_in_) == ["easting", "northing", "elevation"]
    assert loaded.coef_names_ == ["intercept", "elevation"] and loaded.trend == ["elevation"]
    _check_predictions_equal(est, loaded, X.iloc[:15])
    assert loaded.predict(X.iloc[:3]).name == "yield"


def _field():
    """A lon/lat grid of 10 x 8 cells over three time steps, a few cells missing."""
    lon, lat = np.linspace(-100, -91, 10), np.linspace(35, 42, 8)
    grid = np.column_stack([a.ravel() for a in np.meshgrid(lon, lat)])
    values = gs.simulate(
        grid,
        {"variance": 1.0, "range": 300.0, "nugget": 0.05},
        kernel="exponential",
        n_samples=3,
        random_state=11,
    ).T.reshape(3, 8, 10)
    values[1, 2, 3] = values[2, 5, 5] = np.nan
    times = np.array(["2000-01-01", "2000-01-02", "2000-01-03"], dtype="datetime64[ns]")
    return xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": times, "lat": lat, "lon": lon},
        name="tas",
        attrs={"units": "K"},
    )


def test_dataarray_model_predicts_dataarrays_after_loading(tmp_path):
    field = _field()
    original = field.copy(deep=True)
    est = gs.SpatialGP(kernel="exponential", n_starts=1).fit(field)
    loaded = _round_trip(est, tmp_path)
    template = field.isel(time=0, drop=True)
    mean, std = loaded.predict(template, return_std=True)
    assert isinstance(mean, xr.DataArray) and mean.dims == ("lat", "lon", "time")
    assert np.array_equal(mean["time"].values, field["time"].values)
    _check_predictions_equal(est, loaded, template)
    assert field.identical(original)


@pytest.mark.skipif(
    cupy_available(), reason="CuPy and a GPU are available: the model would load on the GPU"
)
def test_gpu_fitted_model_loads_and_predicts_on_the_cpu(small, tmp_path, monkeypatch):
    _, X, y = small
    monkeypatch.setattr(geostat.estimator, "get_backend", lambda device: StandIn())
    est = gs.SpatialGP(kernel="exponential", n_starts=1, device="gpu").fit(X, y)
    assert est._likelihood.backend.name == "standin"
    est.save(tmp_path / "model.npz")
    monkeypatch.undo()
    loaded = gs.load(tmp_path / "model.npz")
    assert loaded.device == "gpu"
    np.testing.assert_allclose(loaded.predict(X[:10]), est.predict(X[:10]), rtol=1e-10)
    assert loaded._likelihood.backend.name == "numpy"


def test_pickle_drops_factors_and_predicts_bit_for_bit(rainfall):
    est, X = rainfall
    before = dict(vars(est))
    data = pickle.dumps(est)
    assert vars(est).keys() == before.keys()  # pickling does not touch the estimator
    assert len(data) < 200 * len(X) + 20_000  # no n x n factor or distance table
    twin = pickle.loads(data)
    assert "_solvers" not in vars(twin)
    _check_predictions_equal(est, twin, X.iloc[:20] - 0.3)
    assert clone(twin).get_params() == est.get_params()


def test_clone_of_a_loaded_model_is_unfitted(small, tmp_path):
    est, X, _ = small
    fresh = clone(_round_trip(est, tmp_path))
    assert fresh.get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        fresh.predict(X[:2])


def test_save_leaves_the_estimator_as_it_was(small, tmp_path):
    est, _, _ = small
    before = dict(vars(est))
    est.save(tmp_path / "model.npz")
    assert vars(est).keys() == before.keys() and all(vars(est)[k] is v for k, v in before.items())


def test_saving_an_unfitted_estimator_fails(tmp_path):
    with pytest.raises(NotFittedError):
        gs.SpatialGP().save(tmp_path / "model.npz")


def test_a_setting_that_needs_pickle_is_named_and_nothing_is_written(small, tmp_path):
    est, X, y = small
    est = clone(est).set_params(random_state=np.random.default_rng(0)).fit(X, y)
    with pytest.raises(ValueError, match="params.random_state is a Generator"):
        est.save(tmp_path / "model.npz")
    assert not (tmp_path / "model.npz").exists()


# ------------------------------------------------------------------------- bad files
def test_a_newer_format_version_asks_to_upgrade(small, tmp_path):
    path = saved_model(small, tmp_path)
    rewrite_header(path, lambda header: header.update(version=VERSION + 1, geostat="9.0"))
    expected = (
        rf"{re.escape(str(path))}.*format version {VERSION + 1}.*geostat 9\.0.*Upgrade geostat"
    )
    with pytest.raises(ModelFileError, match=expected):
        gs.load(path)


def test_a_setting_this_version_does_not_know_asks_to_upgrade(small, tmp_path):
    path = saved_model(small, tmp_path)
    rewrite_header(path, lambda header: header["params"].update(jitter=True))
    expected = r"sets \['jitter'\], which this geostat's SpatialGP does not have; upgrade"
    with pytest.raises(ModelFileError, match=expected):
        gs.load(path)


def _csv(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("x,y,z\n1,2,3\n")
    return path


def _npz(tmp_path):
    path = tmp_path / "arrays.npz"
    np.savez(path, a=np.arange(3))
    return path


def _other_format(tmp_path):
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("model.json", json.dumps({"format": "something-else", "version": 1}))
    return path


@pytest.mark.parametrize(
    "make", [_csv, _npz, _other_format], ids=["csv", "plain-npz", "other-json-format"]
)
def test_a_file_that_is_not_a_model_is_refused(make, tmp_path):
    path = make(tmp_path)
    expected = (
        rf"{re.escape(str(path))} is not a geostat model file; "
        "give a file written by SpatialGP.save"
    )
    with pytest.raises(ModelFileError, match=expected):
        gs.load(path)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt(path):
    data = bytearray(path.read_bytes())
    start = (
        data.index(b"arrays/fitted._training.coords.npy") + 200
    )  # inside that member's compressed bytes
    data[start : start + 16] = bytes(16)
    path.write_bytes(bytes(data))


def _unknown_record(path):
    rewrite_header(path, lambda header: header["fitted"].update(_scale={"$record": ["Evil", {}]}))


@pytest.mark.parametrize(
    "damage",
    [_truncate, _corrupt, _unknown_record],
    ids=["truncated", "corrupted", "unknown-record"],
)
def test_a_damaged_model_file_is_refused(damage, small, tmp_path):
    path = saved_model(small, tmp_path)
    damage(path)
    expected = rf"{re.escape(str(path))} is a damaged geostat model file.*save the model"
    with pytest.raises(ModelFileError, match=expected):
        gs.load(path)


def test_a_reference_file_of_format_version_1_still_loads_and_predicts():
    """``reference/model_format_1.npz``: a Matérn (smoothness 1.5) fit with an elevation
    trend and two replicates on 40 sites, in format version 1; loaded, it predicts what the
    fitted estimator predicted (the values below)."""
    model = gs.load(Path(__file__).resolve().parents[1] / "reference" / "model_format_1.npz")
    sites = pd.DataFrame(
        {"x": [0.25, 0.5, 0.75], "y": [0.5, 0.25, 0.75], "elevation": [0.1, 1.0, 1.9]}
    )
    mean, std = model.predict(sites, return_std=True)
    assert list(mean.columns) == ["day1", "day2"] and model.coef_names_ == [
        "intercept",
        "elevation",
    ]
    np.testing.assert_allclose(
        mean.to_numpy(),
        [
            [0.1693117670241967, -0.13552890428893694],
            [1.083561882924703, 1.532740716028941],
            [2.2068365602401503, 2.360125157370859],
        ],
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        std.to_numpy()[:, 0],
        [0.6392056709542705, 0.6590392986430256, 0.7129320331151979],
        rtol=1e-9,
    )


def test_a_missing_model_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        gs.load(tmp_path / "missing.npz")


# ------------------------------------------------------------------------- the main job's model
@pytest.mark.slow
def test_default_model_on_all_stations_is_small_and_loads_fast(tmp_path):
    frame = gs.datasets.load(gs.datasets.DEFAULT)
    X, y = frame[["lon", "lat"]], np.log(frame["precipitation"])
    est = gs.SpatialGP(kernel="matern", nugget=True, trend="constant").fit(X, y)
    path = tmp_path / "model.npz"
    est.save(path)
    assert path.stat().st_size <= 5 * 2**20
    start = time.perf_counter()
    loaded = gs.load(path)
    assert time.perf_counter() - start < 1.0
    _check_predictions_equal(est, loaded, X.iloc[:50] + 0.5)
    assert len(pickle.dumps(est)) <= 5 * 2**20
