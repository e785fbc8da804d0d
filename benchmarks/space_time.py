"""Space-time TLR: one log-likelihood against dense, a fit, its optimum against exact.

Three measurements of the space-time TLR method at scale, each against its baseline: one
log-likelihood against the dense one, a full fit in evaluation equivalents (against one
TLR log-likelihood), and the TLR optimum against the exact one on a subset.

The field: ``sites`` uniform sites of the unit square observed at the integer times
``0 .. times - 1``, a Gneiting space-time covariance (:class:`geostat.SpaceTime`) with
exponential spatial and temporal families (variance 1, range 0.1, time range 3,
separability 0.5, nugget 0.05, mean 2), simulated through a TLR factor at accuracy 1e-10.

Three parts, each optional:

``--loglik N ...``
    One TLR log-likelihood at accuracy 1e-8 at each size (``N`` space-time points, ``N /
    times`` sites), each in a fresh process (peak resident memory of the process), and
    the dense exact one side by side up to ``--dense-max`` points: time, memory and their
    ratios.
``--fit``
    ``SpatialGP(kernel=SpaceTime(...), method="tlr")`` on ``--fit-sites`` x ``--times``
    points: fit time, full-data evaluations, the fit in one-evaluation equivalents (fit
    time over the median of 3 log-likelihoods at 1e-8 at the estimate), estimates and
    standard errors against the truth.
``--subset SITES``
    The same model fitted exactly and by TLR on ``SITES x times`` points: the exact
    log-likelihood at the TLR estimate below the exact maximum.

Run: ``python benchmarks/space_time.py --loglik 10000 20000 50000 --fit --subset 200``
(from the repository root: the ``--loglik`` processes import ``benchmarks/space_time.py``
by that path).

Output: a table (``--loglik``) and lines (``--fit``, ``--subset``) on standard output;
nothing is written to disk.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
from fit_tlr import EQUIVALENT_ACCURACY, evaluation_time

import geostat as gs
from geostat.distance import EUCLIDEAN, SpaceTimeDistance
from geostat.solvers import tlr_covariance, tlr_factor

TRUTH = {
    "variance": 1.0,
    "range": 0.1,
    "smoothness": 0.5,
    "time_smoothness": 0.5,
    "time_range": 3.0,
    "separability": 0.5,
    "nugget": 0.05,
}
MEAN = 2.0
KERNEL = gs.SpaceTime(space="exponential", time="exponential")


def sites_and_times(n_sites, n_times, seed):
    """Coordinates ``(x, y, t)``: `n_sites` uniform sites, each at the times
    ``0 .. n_times - 1``."""
    rng = np.random.default_rng(seed)
    sites = rng.uniform(size=(n_sites, 2))
    return np.column_stack(
        [np.repeat(sites, n_times, axis=0), np.tile(np.arange(n_times, dtype=float), n_sites)]
    )


def simulate(X, seed):
    """A draw of the field at `X` through a TLR factor at accuracy 1e-10."""
    unit = {**TRUTH, "nugget": TRUTH["nugget"] / TRUTH["variance"], "variance": 1.0}
    A, perm = tlr_covariance(X, KERNEL, unit, SpaceTimeDistance(EUCLIDEAN), accuracy=1e-10)
    factor = tlr_factor(lambda: A, perm)[0]
    z = np.random.default_rng(seed + 1).standard_normal((X.shape[0], 1))
    return MEAN + np.sqrt(TRUTH["variance"]) * factor.multiply_lower(z)[:, 0]


def one_loglik(method, n, times):
    """Time and peak memory of one log-likelihood (run in a fresh process by :func:`measured`)."""
    X = sites_and_times(n // times, times, 0)
    y = np.random.default_rng(1).standard_normal(X.shape[0])
    start = time.perf_counter()
    value = gs.log_likelihood(
        X, y, TRUTH, kernel=KERNEL, method=method, accuracy=EQUIVALENT_ACCURACY, time=True
    )
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {
        "n": X.shape[0],
        "method": method,
        "seconds": elapsed,
        "peak_gib": peak,
        "loglik": value,
    }


def measured(method, n, times):
    """:func:`one_loglik` in a fresh Python process."""
    code = (
        f"import json, sys; sys.path.insert(0, 'benchmarks'); import space_time as b; "
        f"print(json.dumps(b.one_loglik({method!r}, {n}, {times})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fit(X, y, method):
    start = time.perf_counter()
    est = gs.SpatialGP(kernel=KERNEL, method=method).fit(X, y)
    return est, time.perf_counter() - start


def report_fit(est, seconds, equivalent):
    print(
        f"fit: {seconds:.1f} s, {est.n_evaluations_} full-data evaluations, "
        f"one evaluation {equivalent:.2f} s, "
        f"{seconds / equivalent:.1f} equivalents; loglik {est.loglik_:.4f}"
    )
    for name, value in est.params_.items():
        se = est.stderr_.get(name, 0.0)
        print(
            f"  {name:>16} {value:10.4g} +- {se:8.2g}   (truth {TRUTH.get(name, float('nan')):g})"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--loglik", type=int, nargs="*", default=[])
    parser.add_argument("--dense-max", type=int, default=10_000)
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--fit-sites", type=int, default=2_500)
    parser.add_argument("--subset", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.loglik:
        print(
            f"{'n':>8} {'tlr s':>8} {'tlr GiB':>8} {'dense s':>8} {'dense GiB':>9} "
            f"{'time ratio':>10} {'|diff|':>9}"
        )
        for n in args.loglik:
            tlr = measured("tlr", n, args.times)
            dense = measured("exact", n, args.times) if n <= args.dense_max else None
            line = f"{tlr['n']:>8} {tlr['seconds']:>8.2f} {tlr['peak_gib']:>8.2f}"
            if dense:
                line += (
                    f" {dense['seconds']:>8.2f} {dense['peak_gib']:>9.2f} "
                    f"{dense['seconds'] / tlr['seconds']:>10.2f} "
                    f"{abs(dense['loglik'] - tlr['loglik']):>9.2g}"
                )
            print(line, flush=True)
    if args.fit:
        X = sites_and_times(args.fit_sites, args.times, args.seed)
        y = simulate(X, args.seed)
        est, seconds = fit(X, y, "tlr")
        report_fit(est, seconds, evaluation_time(est))
    if args.subset:
        X = sites_and_times(args.subset, args.times, args.seed)
        y = simulate(X, args.seed)
        exact, exact_seconds = fit(X, y, "exact")
        tlr, tlr_seconds = fit(X, y, "tlr")
        at_tlr = exact.log_likelihood(tlr.params_)
        print(
            f"subset of {X.shape[0]} points: exact fit {exact_seconds:.1f} s "
            f"(loglik {exact.loglik_:.4f}), TLR fit {tlr_seconds:.1f} s; "
            f"exact loglik at the TLR estimate {exact.loglik_ - at_tlr:.4f} below "
            f"the exact maximum"
        )


if __name__ == "__main__":
    main()
