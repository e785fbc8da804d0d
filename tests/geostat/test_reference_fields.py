"""Agreement with R fields (spatialProcess / mKrig) on the bundled datasets.

The reference values were computed by ``tests/geostat/reference/fields_reference.R`` (R
fields, chordal distances through 3-D coordinates in km); CI has no R, so they are stored
in ``fields_reference.json``.
"""

import json
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
    return frame.loc[keep, ["lon", "lat", *covariates]], y[keep], covariates or "constant"


def case_id(case):
    return f"{case['case']}-{case['dataset']}-nu{case['smoothness']}" + ("-reml" if case["reml"] else "")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_loglik_at_fixed_parameters_matches_fields(case):
    if case["reml"]:
        pytest.skip("fields' REML criterion uses another constant; the ML values are compared")
    X, y, trend = case_data(case)
    assert len(y) == case["n"]
    for point in case["at_fixed"]:
        params = {k: point[k] for k in ("variance", "range", "nugget")}
        params["smoothness"] = point["smoothness"]
        got = gs.log_likelihood(X, y, params, kernel="matern", trend=trend, distance="chordal")
        assert got == pytest.approx(point["loglik"], rel=1e-9, abs=1e-8)


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.slow) if c["dataset"] in SLOW_DATASETS and c["case"] != 1 else c for c in CASES if not c["reml"]],
    ids=case_id,
)
def test_maximized_loglik_matches_fields(case):
    X, y, trend = case_data(case)
    est = gs.SpatialGP(smoothness=case["smoothness"], trend=trend, distance="chordal")
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore", gs.GeostatWarning)
        est.fit(X, y)
    # Our maximum may be higher than fields' (its optimizer stops earlier), never lower.
    assert est.loglik_ >= case["loglik"] - 1e-6 * abs(case["loglik"])
    assert est.loglik_ == pytest.approx(case["loglik"], abs=2e-3)
    for name in ("variance", "range", "nugget"):
        assert est.params_[name] == pytest.approx(case[name], rel=2e-2), name
    np.testing.assert_allclose(est.coef_, case["beta"], rtol=1e-2, atol=1e-3 * np.abs(case["beta"]).max())
