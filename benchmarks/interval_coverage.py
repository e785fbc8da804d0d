"""Coverage of Wald, log-Wald and profile-likelihood confidence intervals by simulation.

The three methods of ``SpatialGP.confidence_intervals`` are compared with each other and
with the nominal level, which is the baseline.

Each replication draws ``--n`` sites uniformly in the unit square and one field of the
exponential model with the true parameters below (constant mean 0, estimated by GLS),
fits ``SpatialGP(kernel="exponential")`` (variance, range and nugget estimated) and
computes the three intervals of every parameter at ``--level``. The table gives, per
parameter and method, the share of replications whose interval contains the truth (with
its Monte Carlo standard error ``sqrt(p (1 - p) / reps)``), the median width, and for the
profile the number of intervals open at a bound (a nugget reaching 0, a range reaching
its bound). A log-Wald interval of a nugget estimated at exactly 0 is undefined (upper
end NaN) and counts as a miss.

Truth: variance 1, range 0.1 (a tenth of the square's side; correlation 0.37 at that
distance), nugget 0.1.

``--reml`` fits by restricted maximum likelihood instead (the profile is then of the
restricted likelihood); ``--jobs`` runs replications in that many processes.

Run: ``python benchmarks/interval_coverage.py [--reps 200] [--n 250] [--level 0.95]
[--seed 0] [--reml] [--jobs 2]``

Output: a table on standard output, one row per parameter and method; nothing is
written to disk.
"""

from __future__ import annotations

import argparse
import functools
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import geostat as gs

TRUTH = {"variance": 1.0, "range": 0.1, "nugget": 0.1}
METHODS = ("wald", "log-wald", "profile")


def replicate(rep, n, level, seed, reml):
    """Intervals of one simulated data set: {method: DataFrame}."""
    warnings.simplefilter("ignore", gs.GeostatWarning)
    rng = np.random.default_rng([seed, rep])
    X = rng.uniform(size=(n, 2))
    y = gs.simulate(X, TRUTH, kernel="exponential", random_state=rng)
    est = gs.SpatialGP(kernel="exponential", reml=reml).fit(X, y)
    return {method: est.confidence_intervals(level=level, method=method) for method in METHODS}


def summarize(results, level):
    """Print coverage, its standard error, median width and open intervals."""
    reps = len(results)
    header = (
        f"{'parameter':<10}{'method':<10}{'coverage':>9}{'± se':>7}{'median width':>14}{'open':>6}"
    )
    print(f"\nnominal level {level:g}, {reps} replications")
    print(header)
    print("-" * len(header))
    for name, truth in TRUTH.items():
        for method in METHODS:
            frames = [r[method].loc[name] for r in results]
            lower = np.array([f["lower"] for f in frames])
            upper = np.array([f["upper"] for f in frames])
            covered = (lower <= truth) & (truth <= upper)
            p = covered.mean()
            se = np.sqrt(p * (1 - p) / reps)
            width = np.nanmedian(upper - lower)
            opened = str(int(sum(f["at_bound"] for f in frames))) if method == "profile" else "-"
            print(f"{name:<10}{method:<10}{p:>9.3f}{se:>7.3f}{width:>14.4f}{opened:>6}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="replications (default 200)")
    parser.add_argument("--n", type=int, default=250, help="sites per replication (default 250)")
    parser.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument("--reml", action="store_true", help="restricted maximum likelihood")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    run = functools.partial(replicate, n=args.n, level=args.level, seed=args.seed, reml=args.reml)
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run, range(args.reps)))
    elapsed = time.perf_counter() - start
    fit = "REML" if args.reml else "ML"
    print(f"exponential model {TRUTH}, n = {args.n} sites uniform in the unit square, {fit} fits")
    summarize(results, args.level)
    print(
        f"\n{elapsed:.1f} s in all, {elapsed / args.reps:.2f} s per replication "
        f"(fit and three intervals, {args.jobs} process(es))"
    )


if __name__ == "__main__":
    main()
