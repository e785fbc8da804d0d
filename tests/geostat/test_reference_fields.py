"""Agreement with R fields (spatialProcess / mKrig) on the bundled datasets.

The reference values were computed by ``tests/geostat/reference/fields_reference.R`` (R
fields, chordal distances through 3-D coordinates in km); CI has no R, so they are stored
in ``fields_reference.json``.
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import geostat as gs

CASES = json.loads((Path(__file__).parent / "reference" / "fields_reference.json").read_text())
SLOW_DATASETS = {"north_american_rainfall", "rm_precip"}


def case_data(case):
    frame = gs.datasets.load(case["dataset"])
    y = frame[case["y"]["column"]].to_numpy(dtype=float)
    if case["y"]["transform"] == "log":
        y = np.log(y)
    elif case["y"]["transform"] == "log10":
        y = np.log10(y)
    covariates = case["trend"]["covariates"]
    keep = np.isfinite(y)
    if covariates == ["lon", "lat"]:  # fields' Z = cbind(lon, lat): our linear trend
        return frame.loc[keep, ["lon", "lat"]], y[keep], "linear"
    return frame.loc[keep, ["lon", "lat", *covariates]], y[keep], covariates or "constant"


def case_id(case):
    return f"{case['case']}-{case['dataset']}-nu{case['smoothness']}" + (
        "-reml" if case["reml"] else ""
    )


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_loglik_at_fixed_parameters_matches_fields(case):
    X, y, trend = case_data(case)
    assert len(y) == case["n"]
    for point in case["at_fixed"]:
        params = {k: point[k] for k in ("variance", "range", "nugget")}
        params["smoothness"] = point["smoothness"]
        got = gs.log_likelihood(X, y, params, kernel="matern", trend=trend, distance="chordal")
        assert got == pytest.approx(point["loglik"], rel=1e-9, abs=1e-8)
        if case["reml"]:
            # Textbook REML, profiled at variance q / (n - p); fields stores q / n.
            n, p = case["n"], 1 + len(case["trend"]["covariates"])
            variance = point["variance"] * n / (n - p)
            reml_params = {**params, "variance": variance, "nugget": point["lambda"] * variance}
            got = gs.log_likelihood(
                X, y, reml_params, kernel="matern", trend=trend, distance="chordal", reml=True
            )
            assert got == pytest.approx(point["textbook_reml"], rel=1e-9, abs=1e-8)


def test_reml_maximum_matches_textbook_reml_fit():
    case = next(c for c in CASES if c["reml"])
    ref = case["textbook_reml_fit"]
    X, y, trend = case_data(case)
    est = gs.SpatialGP(
        smoothness=case["smoothness"], trend=trend, distance="chordal", reml=True
    ).fit(X, y)
    assert est.loglik_ >= ref["criterion"] - 1e-6 * abs(ref["criterion"])
    assert est.loglik_ == pytest.approx(ref["criterion"], abs=1e-6)
    for name in ("variance", "range", "nugget"):
        assert est.params_[name] == pytest.approx(ref[name], rel=1e-4), name


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.slow)
        if c["dataset"] in SLOW_DATASETS and c["case"] != 1
        else c
        for c in CASES
        if not c["reml"]
    ],
    ids=case_id,
)
def test_maximized_loglik_matches_fields(case):
    X, y, trend = case_data(case)
    est = gs.SpatialGP(smoothness=case["smoothness"], trend=trend, distance="chordal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)
        est.fit(X, y)
    # The R maxima were polished beyond spatialProcess (whose default tolerance is 1e-4).
    assert est.loglik_ >= case["loglik"] - 1e-6 * abs(case["loglik"])
    assert est.loglik_ == pytest.approx(case["loglik"], abs=1e-6)
    for name in ("variance", "range", "nugget"):
        assert est.params_[name] == pytest.approx(case[name], rel=1e-4), name
    np.testing.assert_allclose(
        est.coef_, case["beta"], rtol=1e-4, atol=1e-6 * np.abs(case["beta"]).max()
    )
