"""Our default fit against GPBoost's Vecchia fit, side by side in one run.

GPBoost (``pip install gpboost``, a benchmark-only dependency) fits a Gaussian process by
the Vecchia approximation with its own optimizer; it is what a Python user would pick
instead of us at 10^4-10^5 sites. Both fit a Matern 1.5 covariance with a nugget and a
constant mean:

* ours: ``SpatialGP(smoothness=1.5)`` with its defaults (the method chosen by size);
* GPBoost: ``GPModel(cov_function="matern", cov_fct_shape=1.5, gp_approx="vecchia",
  num_neighbors=30)`` (and its default neighbour count with ``--default-neighbors``).

GPBoost's range ``rho`` scales the distance by ``sqrt(2 nu)``: our range is
``rho / sqrt(3)`` (checked at small n against its exact likelihood). Each fit is timed
``--repeats`` times (median), both with 2 threads, in rotated round robin (each run is
printed too). The log-likelihood of each estimate is then evaluated by one reference:
exact (dense Cholesky) up to :data:`EXACT_LIMIT` sites, TLR at accuracy 1e-10 beyond,
with the constant mean by GLS for both (which can only raise GPBoost's value over the
one at its own mean).

Data: ``sim16k`` and ``sim65k`` (a simulated field: variance 1, range 0.1, nugget 0.05,
mean 2, uniform sites of the unit square) and ``co2`` (8,192 cells of the bundled co2
grid drawn at random, on the sphere as 3-D coordinates in km, so chordal distance for
both).

Run: ``python benchmarks/peers.py [--cases sim16k co2 sim65k] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

import geostat as gs

TRUTH = {"variance": 1.0, "range": 0.1, "smoothness": 1.5, "nugget": 0.05}
MEAN = 2.0
#: Largest n whose reference log-likelihood is exact (dense); TLR at 1e-10 beyond.
EXACT_LIMIT = 16384
EARTH_RADIUS_KM = 6371.0
THREADS = 2


def simulated(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = MEAN + gs.simulate(X, TRUTH, random_state=seed + 1, method="tlr", accuracy=1e-10)
    return X, y


def co2_cells(n=8192, seed=0):
    frame = gs.datasets.load("co2")
    rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=n, replace=False))
    lon, lat = np.radians(frame["lon"].to_numpy()[rows]), np.radians(frame["lat"].to_numpy()[rows])
    X = EARTH_RADIUS_KM * np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    return X, frame["co2"].to_numpy()[rows]


CASES = {"sim16k": lambda: simulated(16384), "sim65k": lambda: simulated(65536), "co2": co2_cells}


def fit_ours(X, y):
    est = gs.SpatialGP(smoothness=1.5, distance="euclidean").fit(X, y)
    return {k: est.params_[k] for k in ("variance", "range", "nugget")}, est


def fit_gpboost(X, y, neighbors):
    import gpboost as gpb

    model = gpb.GPModel(gp_coords=X, cov_function="matern", cov_fct_shape=1.5, gp_approx="vecchia",
                        num_neighbors=neighbors, num_parallel_threads=THREADS, seed=0)
    model.fit(y=y, X=np.ones((len(y), 1)), params={"trace": False})
    nugget, variance, rho = np.asarray(model.get_cov_pars()).ravel()[:3]
    return {"variance": float(variance), "range": float(rho) / np.sqrt(3.0), "nugget": float(nugget)}, model


def timed_side_by_side(functions, repeats):
    """Times and last result of each function, run in rotated round robin: round ``r``
    starts with function ``r mod k``, so a machine that drifts, or a first run that is
    slower, weighs on every side alike."""
    times = [[] for _ in functions]
    results = [None] * len(functions)
    for round_ in range(repeats):
        for j in range(len(functions)):
            i = (round_ + j) % len(functions)
            start = time.perf_counter()
            results[i] = functions[i]()
            times[i].append(time.perf_counter() - start)
    return times, results


def reference_loglik(X, y, params):
    method = {"method": "exact"} if len(y) <= EXACT_LIMIT else {"method": "tlr", "accuracy": 1e-10}
    return gs.log_likelihood(X, y, {**params, "smoothness": 1.5}, distance="euclidean", **method)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["sim16k", "co2", "sim65k"], choices=sorted(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--default-neighbors", action="store_true",
                        help="also time GPBoost with its default number of neighbours")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", gs.GeostatWarning)
    from threadpoolctl import threadpool_limits

    print("| data | n | ours (s) | GPBoost 30 (s) | ratio ours/GPBoost | evaluations | "
          "loglik at ours | at GPBoost 30 | difference |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.cases:
        X, y = CASES[name]()
        with threadpool_limits(THREADS):
            sides = [lambda: fit_ours(X, y), lambda: fit_gpboost(X, y, 30)]
            if args.default_neighbors:
                sides.append(lambda: fit_gpboost(X, y, None))
            times, results = timed_side_by_side(sides, args.repeats)
            ours_time, peer_time = statistics.median(times[0]), statistics.median(times[1])
            (ours, est), (peer, _) = results[:2]
            ours_ll, peer_ll = reference_loglik(X, y, ours), reference_loglik(X, y, peer)
            line = (f"| {name} | {len(y):,} | {ours_time:.1f} | {peer_time:.1f} | {ours_time / peer_time:.2f} | "
                    f"{est.result_.n_evaluations} ({est.method_}) | {ours_ll:.3f} | {peer_ll:.3f} | "
                    f"{ours_ll - peer_ll:+.3f} |")
            print(line, flush=True)
            if args.default_neighbors:
                default_time, (default, _) = statistics.median(times[2]), results[2]
                print(f"|   GPBoost default neighbours | | | {default_time:.1f} | {ours_time / default_time:.2f} | | | "
                      f"{reference_loglik(X, y, default):.3f} | |", flush=True)
        print(f"    {name} runs (s): ours " + " ".join(f"{t:.1f}" for t in times[0])
              + ", GPBoost 30 " + " ".join(f"{t:.1f}" for t in times[1]))
        for label, params in (("ours", ours), ("GPBoost 30", peer)):
            print(f"    {name} {label}: " + ", ".join(f"{k} {v:.5g}" for k, v in params.items()))


if __name__ == "__main__":
    main()
