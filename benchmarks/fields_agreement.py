"""Maximized log-likelihoods of geostat next to R fields on the bundled datasets.

The baseline is the R package fields (Nychka, Furrer, Paige and Sain, "fields: Tools for
spatial data", CRAN): its maxima are in ``tests/geostat/reference/fields_reference.json``
(computed by ``tests/geostat/reference/fields_reference.R``: fields 14.1, polished MLEs,
chordal km). For each case geostat fits the same model (``SpatialGP``, chordal distance,
ML or REML) and the benchmark compares both maxima, their difference, the largest
relative parameter difference, and geostat's fit time.

Run: ``python benchmarks/fields_agreement.py`` (no options).

Output: a table on standard output, one row per case; nothing is written to disk.
"""

import json
import time
import warnings
from pathlib import Path

import numpy as np

import geostat as gs

REFERENCE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "geostat"
    / "reference"
    / "fields_reference.json"
)


def case_data(case):
    frame = gs.datasets.load(case["dataset"])
    y = frame[case["y"]["column"]].to_numpy(dtype=float)
    if case["y"]["transform"] == "log":
        y = np.log(y)
    covariates = case["trend"]["covariates"]
    if covariates == ["lon", "lat"]:
        return frame[["lon", "lat"]], y, "linear"
    return frame[["lon", "lat", *covariates]], y, covariates or "constant"


def main():
    warnings.simplefilter("ignore", gs.GeostatWarning)
    print(
        f"{'case':<44}{'n':>6}{'loglik fields':>16}{'loglik geostat':>16}{'diff':>11}"
        f"{'max rel par':>12}{'fit s':>7}"
    )
    for case in json.loads(REFERENCE.read_text()):
        ref = case["textbook_reml_fit"] if case["reml"] else case
        target = ref["criterion"] if case["reml"] else ref["loglik"]
        X, y, trend = case_data(case)
        start = time.perf_counter()
        est = gs.SpatialGP(
            smoothness=case["smoothness"], trend=trend, distance="chordal", reml=case["reml"]
        ).fit(X, y)
        elapsed = time.perf_counter() - start
        rel = max(abs(est.params_[k] / ref[k] - 1) for k in ("variance", "range", "nugget"))
        trend_name = trend if isinstance(trend, str) else "+".join(trend)
        label = f"{case['case']} {case['dataset']} nu={case['smoothness']} {trend_name}" + (
            " REML" if case["reml"] else ""
        )
        print(
            f"{label:<44}{case['n']:>6}{target:>16.6f}{est.loglik_:>16.6f}"
            f"{est.loglik_ - target:>11.2e}{rel:>12.2e}{elapsed:>7.2f}"
        )


if __name__ == "__main__":
    main()
