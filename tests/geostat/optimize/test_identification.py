"""Weakly identified parameters: the rules of ``weakly_identified`` on given numbers, a real
fit whose range far exceeds its domain, and the flags in the ``geostat fit`` table."""

import math

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat import cli
from geostat.optimize.identification import (
    RELATIVE_ERROR,
    REMEDIES,
    SPAN_FACTOR,
    WeakIdentification,
    identification_of,
    weakly_identified,
)

#: A well identified Matern fit: relative standard errors 0.1, 0.2, 0.05, 0.3.
PARAMS = {"variance": 1.0, "range": 0.2, "smoothness": 1.0, "nugget": 0.1}
STDERR = {"variance": 0.1, "range": 0.04, "smoothness": 0.05, "nugget": 0.03}
BOUNDS = {
    "variance": (1e-8, 1e4),
    "range": (1e-4, 100.0),
    "smoothness": (0.05, 10.0),
    "nugget": (0.0, 1e3),
}


def test_a_well_identified_fit_is_not_flagged():
    intervals = {
        "variance": (0.8, 1.25),
        "range": (0.13, 0.3),
        "smoothness": (0.9, 1.1),
        "nugget": (0.05, 0.17),
    }
    assert weakly_identified(PARAMS, STDERR, intervals, BOUNDS, max_distance=1.4) == {}


def test_relative_standard_error_above_the_threshold():
    just_below = {**STDERR, "range": RELATIVE_ERROR * PARAMS["range"]}
    assert weakly_identified(PARAMS, just_below) == {}
    above = {**STDERR, "range": 0.51 * PARAMS["range"], "smoothness": 2.0}
    flags = weakly_identified(PARAMS, above)
    assert list(flags) == ["range", "smoothness"]
    assert flags["range"].reasons == ("relative standard error 0.51 > 0.5",)
    # the smoothness trades off with the range; REML and a profile interval help both
    assert flags["range"].remedies == ("fix_smoothness", "fix_range", "reml", "profile")
    assert flags["smoothness"].remedies == ("fix_smoothness", "profile")
    assert flags["smoothness"].remedy == f"{REMEDIES['fix_smoothness']}; {REMEDIES['profile']}"


def test_an_infinite_standard_error_is_not_identified():
    flags = weakly_identified(PARAMS, {**STDERR, "nugget": math.inf})
    assert list(flags) == ["nugget"] and "not identified" in flags["nugget"].reason
    assert flags["nugget"].remedies == ("fix_nugget", "profile")


def test_profile_intervals_unbounded_too_wide_or_at_the_search_bound():
    intervals = {
        "variance": (0.1, 12.0),
        "range": (0.05, math.inf),
        "smoothness": (0.5, 10.0),
        "nugget": (0.0, 0.2),
    }
    flags = weakly_identified(PARAMS, STDERR, intervals, BOUNDS)
    assert flags["variance"].reasons == (
        f"profile interval spans a factor 120 (> {SPAN_FACTOR:g})",
    )
    assert flags["range"].reasons == ("profile interval unbounded",)
    assert flags["smoothness"].reasons == ("profile interval reaches the search bound 10",)
    assert (
        "nugget" not in flags
    )  # an interval down to 0 says the nugget may be 0, not that it is weak
    assert all("profile" not in flag.remedies for flag in flags.values())  # already computed


def test_a_wald_interval_is_not_confined_to_the_box_and_asks_for_a_profile():
    frame = pd.DataFrame(
        {"estimate": [1.0], "lower": [1e-9], "upper": [1.3], "one_sided": [False]},
        index=["variance"],
    )
    frame.attrs["method"] = "wald"
    flags = weakly_identified(
        {"variance": 1.0}, {"variance": 0.5}, frame, {"variance": (1e-8, 1e4)}
    )
    assert flags["variance"].reasons == (f"interval spans a factor 1.3e+09 (> {SPAN_FACTOR:g})",)
    assert flags["variance"].remedies[-1] == "profile"


def test_the_end_of_a_one_sided_interval_at_its_own_bound_is_no_sign():
    """A range on its upper search bound is flagged for being there, not again for its
    interval ending there (its one-sided interval ends there by construction)."""
    params = {**PARAMS, "range": 100.0}
    frame = pd.DataFrame({"lower": [40.0], "upper": [100.0], "one_sided": [True]}, index=["range"])
    frame.attrs["method"] = "profile"
    flags = weakly_identified(params, {**STDERR, "range": 10.0}, frame, BOUNDS, at_bounds=["range"])
    assert flags["range"].reasons == ("estimate 100 on its search bound",)
    assert flags["range"].remedies == ("fix_smoothness", "fix_range", "reml", "widen_bounds")
    assert "widen bounds['range']" in flags["range"].remedy


def test_a_zero_nugget_and_model_edges_are_answers_not_weakness():
    params = {"variance": 1.0, "range": 0.2, "anisotropy_ratio": 1.0, "nugget": 0.0}
    stderr = {"variance": 0.1, "range": 0.02, "anisotropy_ratio": 0.05, "nugget": 1e-3}
    assert weakly_identified(params, stderr, at_bounds=["anisotropy_ratio", "nugget"]) == {}
    flags = weakly_identified(
        {**params, "anisotropy_ratio": 0.02}, stderr, at_bounds=["anisotropy_ratio"]
    )
    assert list(flags) == ["anisotropy_ratio"] and flags["anisotropy_ratio"].remedies == (
        "fix_shape",
        "widen_bounds",
        "profile",
    )


def test_a_range_comparable_to_the_largest_separation():
    flags = weakly_identified(PARAMS, STDERR, max_distance=0.4)  # range 0.2: half of it
    assert list(flags) == ["range"] and "largest site separation 0.4" in flags["range"].reason
    assert weakly_identified(PARAMS, STDERR, max_distance=0.41) == {}


def test_fixed_parameters_are_skipped_and_reml_is_not_suggested_twice():
    stderr = {**STDERR, "range": 0.2, "smoothness": 0.0}  # smoothness fixed (standard error 0)
    flags = weakly_identified(PARAMS, stderr, reml=True)
    assert list(flags) == ["range"] and flags["range"].remedies == ("fix_range", "profile")
    assert (
        list(
            weakly_identified(
                PARAMS, {**STDERR, "smoothness": 9.0}, estimated=["variance", "range"]
            )
        )
        == []
    )


def test_remedies_in_other_words():
    flag = WeakIdentification("power", ("a", "b"), ("fix_shape", "profile"))
    assert flag.reason == "a; b"
    assert (
        flag.remedy_text({"fix_shape": "fix {name}!", "profile": "--ci profile"})
        == "fix power!; --ci profile"
    )


@pytest.fixture(scope="module")
def long_range():
    """300 sites of the unit square (largest separation about 1.4), exponential range 5."""
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(300, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 5.0, "nugget": 0.01}, kernel="exponential", random_state=3
    )
    return X, y


def test_a_fit_whose_range_exceeds_its_domain_flags_the_range(long_range):
    est = gs.SpatialGP(kernel="exponential").fit(*long_range)
    flags = identification_of(est)
    assert "range" in flags
    assert "largest site separation" in flags["range"].reason
    assert flags["range"].remedies[:2] == (
        "fix_range",
        "reml",
    )  # the exponential's smoothness is fixed
    assert est.params_["range"] > 0.5 * np.ptp(long_range[0], axis=0).max()


def test_the_cli_marks_the_weak_row_and_explains_it_below_the_table(long_range, tmp_path, capsys):
    X, y = long_range
    path = tmp_path / "sites.csv"
    pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "z": y}).to_csv(path, index=False)
    assert cli.main(["fit", str(path), "--value", "z", "--kernel", "exponential", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines if line.split()}
    assert rows["range"].endswith("  weak")
    explained = [line for line in lines if line.startswith("weak: range: ")]
    assert len(explained) == 1 and "largest site separation" in explained[0]
    assert (
        "Try: fix the range" in explained[0]
        and "--reml" in explained[0]
        and "--ci profile" in explained[0]
    )
