"""The Box-Cox ``lambda`` of a fit: estimated on a subsample only, refined on the whole data,
and the brute-force joint maximum, on real data.

``SpatialGP(target_transform="boxcox")`` first profiles ``lambda`` by exact fits of at most
``geostat.estimator.BOX_COX_SITES`` sites; with more sites it then refines it on the whole
data (the profile over ``lambda`` at the fit's covariance parameters, by solves with the
fit's factors) between refits. This fits the bundled precipitation of the North American
stations (``north_american_rainfall``, 1,720 stations, lon/lat, Matérn 1.5 + nugget +
constant mean, the defaults) three ways, each timed once in this process: with the
refinement switched off (``BOX_COX_REFITS = 0``), with it (the default), and, with
``--brute-force``, the joint maximum found by profiling ``lambda`` over whole fits of the
transformed data (about 25 fits) and a fit at it.

Run: ``python benchmarks/box_cox.py [--brute-force]``.

Output: a Markdown table on standard output (``lambda``, the log-likelihood of ``y``,
full-data evaluations, seconds); nothing is written to disk.
"""

from __future__ import annotations

import argparse
import time
import warnings
from unittest import mock

import geostat as gs
import geostat.estimator as estimator_module
from geostat.transforms import BoxCox


def timed_fit(X, y, transform="boxcox"):
    start = time.perf_counter()
    model = gs.SpatialGP(target_transform=transform).fit(X, y)
    return model, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brute-force", action="store_true", help="also the joint maximum")
    args = parser.parse_args(argv)
    frame = gs.datasets.load("north_american_rainfall")
    X, y = frame[["lon", "lat"]], frame["precipitation"].to_numpy()
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)
        with mock.patch.object(estimator_module, "BOX_COX_REFITS", 0):
            rows.append(("subsample only", *timed_fit(X, y)))
        rows.append(("refined on the whole data", *timed_fit(X, y)))
        if args.brute_force:
            start = time.perf_counter()
            best = BoxCox.estimate(y, lambda z: gs.SpatialGP().fit(X, z).loglik_)
            model, _ = timed_fit(X, y, best)
            rows.append(("joint maximum, brute force", model, time.perf_counter() - start))
    print(f"north_american_rainfall: {len(y)} stations, lon/lat, Matérn 1.5 + nugget + mean")
    print("| how | lambda | log-likelihood of y | full-data evaluations | seconds |")
    print("|---|---|---|---|---|")
    for name, model, seconds in rows:
        print(
            f"| {name} | {model.transform_.lmbda:.5f} | {model.loglik_:.4f} | "
            f"{model.n_evaluations_} | {seconds:.1f} |"
        )


if __name__ == "__main__":
    main()
