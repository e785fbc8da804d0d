"""Model files of anisotropic and space-time models: a round trip predicts bit for bit,
files of format version 1 still load, and a hostile file (kernels nested too deeply, an
unknown family inside a space-time kernel, estimates outside the range a fit reports
them in) is refused with :class:`geostat.errors.ModelFileError` naming the file."""

import copy
import json
import math
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from model_files import rewrite_header, saved_model

import geostat as gs
from geostat.data.model_file import MAX_KERNEL_DEPTH, VERSION
from geostat.errors import ModelFileError

EXPONENTIAL = {"variance": 1.0, "range": 0.3, "nugget": 0.1}


def _quiet_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)  # estimates on a bound, at this small n
        return model.fit(X, y)


@pytest.fixture(scope="module")
def anisotropic():
    """A geometrically anisotropic exponential fit on 120 sites, and sites to predict at."""
    rng = np.random.default_rng(71)
    X = rng.uniform(size=(120, 2))
    y = gs.simulate(X * [1.0, 3.0], EXPONENTIAL, kernel="exponential", random_state=72).ravel()
    model = gs.SpatialGP(kernel="exponential", anisotropy="geometric", method="exact", n_starts=1)
    return _quiet_fit(model, X, y), rng.uniform(size=(7, 2))


@pytest.fixture(scope="module")
def space_time():
    """A non-separable space-time fit, ``SpaceTime(space=Anisotropic(Matern(1.5)))`` with
    custom bounds at every level, on 20 sites at 8 times."""
    rng = np.random.default_rng(73)
    sites = rng.uniform(size=(20, 2))
    X = np.column_stack([np.repeat(sites, 8, axis=0), np.tile(np.arange(8.0), 20)])
    y = gs.simulate(X, EXPONENTIAL, kernel="exponential", random_state=74).ravel()
    space = gs.Anisotropic(
        gs.Matern(smoothness=1.5, bounds={"smoothness": (0.2, 3.0)}),
        bounds={"anisotropy_ratio": (0.1, 1.0)},
    )
    kernel = gs.SpaceTime(space=space, time="exponential", bounds={"time_range": (0.05, 50.0)})
    model = _quiet_fit(gs.SpatialGP(kernel=kernel, method="exact", n_starts=1), X, y)
    new = np.column_stack([rng.uniform(size=(6, 2)), rng.uniform(0, 8, size=6)])
    return model, new


def _same_predictions(model, other, X):
    a, b = model.predict(X, return_std=True), other.predict(X, return_std=True)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    draws = [m.sample_y(X, n_samples=2, random_state=1) for m in (model, other)]
    assert np.array_equal(*draws)


@pytest.mark.parametrize("which", ["anisotropic", "space_time"])
def test_a_loaded_lag_kernel_model_predicts_bit_for_bit(which, request, tmp_path):
    model, X = request.getfixturevalue(which)
    model.save(tmp_path / "model.npz")
    loaded = gs.load(tmp_path / "model.npz")
    assert loaded.kernel_ == model.kernel_ and repr(loaded.kernel_) == repr(model.kernel_)
    assert loaded.params_ == model.params_ and loaded.result_.estimated == model.result_.estimated
    assert loaded.get_params() == model.get_params()
    assert getattr(loaded, "time_unit_", None) == getattr(model, "time_unit_", None)
    _same_predictions(model, loaded, X)


def test_a_nested_kernel_is_stored_by_family_names_and_arguments(space_time, tmp_path):
    space_time[0].save(tmp_path / "model.npz")
    header = _header(tmp_path / "model.npz")
    assert header["version"] == VERSION == 4
    kernel = header["fitted"]["kernel_"]["$kernel"]
    space = kernel["arguments"]["space"]["$kernel"]
    family = space["arguments"]["kernel"]["$kernel"]
    assert (kernel["name"], space["name"], family["name"]) == (
        "space_time",
        "anisotropic",
        "matern",
    )
    assert family["arguments"] == {
        "smoothness": 1.5,
        "bounds": {"smoothness": {"$tuple": [0.2, 3.0]}},
    }
    assert kernel["arguments"]["bounds"] == {"time_range": {"$tuple": [0.05, 50.0]}}


def test_a_fixed_separability_of_zero_and_a_time_unit_round_trip(tmp_path):
    rng = np.random.default_rng(75)
    X = np.column_stack(
        [np.repeat(rng.uniform(size=(15, 2)), 6, axis=0), np.tile(np.arange(6.0), 15)]
    )
    y = gs.simulate(X, EXPONENTIAL, kernel="exponential", random_state=76).ravel()
    model = _quiet_fit(
        gs.SpatialGP(
            kernel=gs.SpaceTime(space="exponential", separability=0.0), method="exact", n_starts=1
        ),
        X,
        y,
    )
    model.save(tmp_path / "model.npz")
    loaded = gs.load(tmp_path / "model.npz")
    assert loaded.params_["separability"] == 0.0
    _same_predictions(model, loaded, X[:9] + 0.25)
    dated = copy.deepcopy(model)
    dated.time_unit_ = "days since 1970-01-01"  # as a fit on dates sets it
    dated.save(tmp_path / "dated.npz")
    assert gs.load(tmp_path / "dated.npz").time_unit_ == "days since 1970-01-01"


def test_a_version_1_file_loads_without_a_time_unit():
    model = gs.load(Path(__file__).resolve().parents[1] / "reference" / "model_format_1.npz")
    assert model.time_unit_ is None


def test_a_version_1_file_cannot_hold_an_anisotropic_kernel(anisotropic, tmp_path):
    path = saved_model(anisotropic, tmp_path)
    rewrite_header(
        path,
        lambda header: (
            header.update(version=1),
            header["fitted"].pop("time_unit_", None),
            header["fitted"].pop("transform_", None),
        ),
    )
    _refused(path, r"kernel \('anisotropic'\) is not one of the built-in families")


def test_saving_a_kernel_nested_in_itself_is_refused(anisotropic, tmp_path, monkeypatch):
    model = copy.deepcopy(anisotropic[0])
    kernel = model.kernel_
    monkeypatch.setattr(
        kernel,
        "init_arguments",
        lambda: {"kernel": kernel, "ratio": None, "angle": None, "vertical": False, "bounds": None},
    )
    with pytest.raises(
        ValueError, match=rf"nests kernels more than {MAX_KERNEL_DEPTH} deep \(or in a cycle\)"
    ):
        model.save(tmp_path / "model.npz")
    assert not (tmp_path / "model.npz").exists()


# ---------------------------------------------------------------------------- hostile files
def _header(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("model.json"))


def _refused(path, match):
    with pytest.raises(
        ModelFileError, match=re.escape(str(path)) + r" is a damaged geostat model file.*" + match
    ):
        gs.load(path)


def _kernel(name, **arguments):
    return {"$kernel": {"name": name, "arguments": arguments}}


def _set_kernel(kernel):
    def change(header):
        header["fitted"]["kernel_"] = kernel

    return change


def _anisotropic_of(inner):
    return _kernel("anisotropic", kernel=inner, ratio=None, angle=None, vertical=False, bounds=None)


_MATERN = _kernel("matern", smoothness=1.5, bounds=None)


@pytest.mark.parametrize(
    "kernel, match",
    [
        (
            _kernel(
                "space_time",
                space=_anisotropic_of(_anisotropic_of(_MATERN)),
                time=_kernel("exponential"),
                separability=None,
                bounds=None,
            ),
            f"nests kernels more than {MAX_KERNEL_DEPTH} deep",
        ),
        (
            _kernel(
                "space_time",
                space=_kernel("evil", code="import os"),
                time=_kernel("exponential"),
                separability=None,
                bounds=None,
            ),
            r"kernel \('evil'\) is not one of the built-in families",
        ),
        (
            _kernel(
                "space_time",
                space=_kernel(
                    "space_time",
                    space=_MATERN,
                    time=_kernel("exponential"),
                    separability=None,
                    bounds=None,
                ),
                time=_kernel("exponential"),
                separability=None,
                bounds=None,
            ),
            "SpaceTime kernel cannot be built from its arguments.*space must be a spatial kernel",
        ),
        (
            _anisotropic_of(_anisotropic_of(_MATERN)),
            "Anisotropic kernel cannot be built.*isotropic Kernel",
        ),
        (
            _kernel(
                "anisotropic", kernel=_MATERN, ratio=5.0, angle=None, vertical=False, bounds=None
            ),
            "Anisotropic kernel cannot be built.*anisotropy_ratio",
        ),
        (
            _kernel(
                "anisotropic",
                kernel=_MATERN,
                ratio=None,
                angle=None,
                vertical=False,
                bounds=None,
                evil=1,
            ),
            r"Anisotropic kernel has the argument\(s\) \['evil'\]",
        ),
        (
            _kernel(
                "anisotropic", kernel="matern", ratio=None, angle=None, vertical=False, bounds=None
            ),
            "Anisotropic kernel cannot be built.*isotropic Kernel",
        ),
    ],
    ids=[
        "four-deep",
        "unknown-family-inside-space-time",
        "space-time-of-space-time",
        "anisotropic-of-anisotropic",
        "ratio-argument-5",
        "unknown-argument",
        "family-as-text",
    ],
)
def test_a_hostile_kernel_is_refused(anisotropic, tmp_path, kernel, match):
    path = saved_model(anisotropic, tmp_path)
    rewrite_header(path, _set_kernel(kernel))
    _refused(path, match)


def test_kernels_nested_far_deeper_are_refused(anisotropic, tmp_path):
    kernel = _MATERN
    for _ in range(40):
        kernel = _anisotropic_of(kernel)
    path = saved_model(anisotropic, tmp_path)
    rewrite_header(path, _set_kernel(kernel))
    _refused(path, "nests")


def _set_estimate(name, value):
    def change(header):
        for params in (
            header["fitted"]["params_"],
            header["fitted"]["result_"]["$record"][1]["params"],
        ):
            params[name] = value

    return change


@pytest.mark.parametrize(
    "name, value, match",
    [
        ("anisotropy_ratio", 5.0, r"anisotropy_ratio'\] is 5.0, outside \(0, 1\]"),
        ("anisotropy_ratio", 0.0, r"anisotropy_ratio'\] is 0.0, outside \(0, 1\]"),
        ("anisotropy_ratio", float("nan"), r"anisotropy_ratio'\] is nan, not a finite number"),
        ("anisotropy_angle", math.pi, r"anisotropy_angle'\] is 3.14159\d*, outside \[0, 3.14159\)"),
        ("anisotropy_angle", -0.1, r"anisotropy_angle'\] is -0.1, outside \[0, 3.14159\)"),
        ("anisotropy_angle", float("inf"), r"anisotropy_angle'\] is inf, not a finite number"),
        ("anisotropy_ratio", "0.5", r"anisotropy_ratio'\] is '0.5', not a finite number"),
        ("anisotropy_ratio", True, r"anisotropy_ratio'\] is True, not a finite number"),
        ("smoothness", 0.7, r"smoothness'\] is 0.7 but the kernel fixes it at 0.5"),
    ],
    ids=[
        "ratio-5",
        "ratio-0",
        "ratio-nan",
        "angle-pi",
        "angle-negative",
        "angle-inf",
        "ratio-text",
        "ratio-bool",
        "fixed-smoothness",
    ],
)
def test_an_anisotropy_estimate_outside_its_range_is_refused(
    anisotropic, tmp_path, name, value, match
):
    path = saved_model(anisotropic, tmp_path)
    rewrite_header(path, _set_estimate(name, value))
    _refused(path, match)


@pytest.mark.parametrize(
    "name, value, match",
    [
        ("separability", 1.5, r"separability'\] is 1.5, outside \[0, 1\]"),
        ("separability", -0.1, r"separability'\] is -0.1, outside \[0, 1\]"),
        ("separability", float("nan"), r"separability'\] is nan, not a finite number"),
        ("time_range", 0.0, r"time_range'\] is 0.0, outside \(0, inf\)"),
        ("time_range", -2.0, r"time_range'\] is -2.0, outside \(0, inf\)"),
        ("time_range", float("inf"), r"time_range'\] is inf, not a finite number"),
        ("time_smoothness", 0.7, r"time_smoothness'\] is 0.7 but the kernel fixes it at 0.5"),
        ("anisotropy_ratio", 1.01, r"anisotropy_ratio'\] is 1.01, outside \(0, 1\]"),
    ],
    ids=[
        "separability-1.5",
        "separability-negative",
        "separability-nan",
        "time-range-0",
        "time-range-negative",
        "time-range-inf",
        "fixed-time-smoothness",
        "ratio-above-1",
    ],
)
def test_a_space_time_estimate_outside_its_range_is_refused(
    space_time, tmp_path, name, value, match
):
    path = saved_model(space_time, tmp_path)
    rewrite_header(path, _set_estimate(name, value))
    _refused(path, match)


def test_an_unknown_or_missing_estimate_is_refused(space_time, tmp_path):
    path = saved_model(space_time, tmp_path)
    rewrite_header(path, lambda header: header["fitted"]["params_"].pop("separability"))
    _refused(path, r"params_ has the keys")


@pytest.mark.parametrize(
    "value", [5, ["days"], {"$tuple": ["days"]}], ids=["number", "list", "tuple"]
)
def test_a_time_unit_that_is_not_text_is_refused(space_time, tmp_path, value):
    path = saved_model(space_time, tmp_path)
    rewrite_header(path, lambda header: header["fitted"].update(time_unit_=value))
    _refused(path, "time_unit_ is .*, not a text or None")


def test_a_space_time_kernel_on_too_few_columns_is_refused(anisotropic, tmp_path):
    """An anisotropic kernel needs two (or three) coordinates: a file claiming one on the
    training data of another model is refused at loading, not at the first prediction."""
    path = saved_model(anisotropic, tmp_path)
    kernel = _kernel(
        "anisotropic",
        kernel=_kernel("exponential"),
        ratio=None,
        angle=None,
        vertical=True,
        bounds=None,
    )

    def change(header):
        _set_kernel(kernel)(header)
        for params in (
            header["fitted"]["params_"],
            header["fitted"]["result_"]["$record"][1]["params"],
        ):
            params["vertical_range"] = 1.0
        header["fitted"]["stderr_"]["vertical_range"] = 0.0
        header["fitted"]["result_"]["$record"][1]["stderr"]["vertical_range"] = 0.0

    rewrite_header(path, change)
    _refused(path, "applies to 3 coordinate columns, got 2")
