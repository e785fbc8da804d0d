"""Our default fit against GPBoost's Vecchia fit, side by side in one run.

The baseline, GPBoost (F. Sigrist, "Gaussian process boosting", Journal of Machine
Learning Research, 2022; ``pip install gpboost``, a benchmark-only dependency), fits a
Gaussian process by the Vecchia approximation (A. V. Vecchia, "Estimation and model
identification for continuous spatial processes", Journal of the Royal Statistical
Society B, 1988) with its own optimizer; it is what a Python user would pick instead of
geostat at 10^4-10^5 sites. Both fit a Matern covariance of smoothness ``nu`` (1.5,
or 2.5 for the smooth ``co2_true`` field) with a nugget and a constant mean:

* ours: ``SpatialGP(smoothness=nu)`` with its defaults (the method chosen by size);
* GPBoost: ``GPModel(cov_function="matern", cov_fct_shape=nu, gp_approx="vecchia",
  num_neighbors=30)`` (and its default neighbour count with ``--default-neighbors``).

GPBoost's range ``rho`` scales the distance by ``sqrt(2 nu)``: our range is
``rho / sqrt(2 nu)`` (checked against its exact likelihood at 300 sites for 1.5 and
2.5). Each fit is timed ``--repeats`` times (median), both with 2 threads, in rotated
round robin (each run is printed too). The log-likelihood of each estimate is then
evaluated by one reference: exact (dense Cholesky) up to :data:`EXACT_LIMIT` sites, TLR
at accuracy 1e-10 beyond, with the constant mean by GLS for both (which can only raise
GPBoost's value over the one at its own mean).

Data: ``sim16k`` and ``sim65k`` (a simulated field: variance 1, range 0.1, nugget 0.05,
mean 2, uniform sites of the unit square), ``co2`` (8,192 cells of the bundled co2 grid
drawn at random, on the sphere as 3-D coordinates in km, so chordal distance for both),
and real fields with small nuggets: ``co2true8k`` and ``co2true16k`` (8,192 and 16,384
cells of the smooth co2 field ``co2_true``, Matern 2.5: its fitted nugget is about 1e-3 of
the variance at 2,000 cells; ``co2true8k-matern15``, the same 8,192 cells with Matern 1.5,
whose nugget is zero: the ill-conditioned case) and ``tas`` (the 2,080 land cells
of the south-east US grid, January to March 1999 side by side as 6,240 sites: the months
1,000 km apart in a third coordinate, so each month is its own field with shared
parameters; nugget about 1e-2 of the variance).

With ``--gap`` (up to :data:`GAP_LIMIT` sites) the exact maximum is found too: L-BFGS-B
with analytic gradients on the exact likelihood from the better estimate, and each
estimate's distance below it is printed (geostat's aim: at most 0.005 below), next to the
bound on it that ours reports.

With ``--equivalents`` our fit's median time is also given in one-evaluation equivalents:
over the median of 3 TLR log-likelihoods at the estimate at accuracy 1e-8, each a new
build and factorization (``benchmarks/fit_tlr.py``'s baseline).

With ``--seeds K`` (and ``--gap``) ours is fitted again with ``random_state`` 1 to K, which
also seeds the probes of Fisher scoring: the distance below the maximum is a random draw
of their Monte Carlo error, and its distribution over seeds is what that aim is about.

Run: ``python benchmarks/peers.py [--cases sim16k co2 sim65k co2true8k tas] [--repeats 3]
[--gap] [--seeds 5] [--equivalents]``

Output: a Markdown table on standard output, one row per case, each followed by its
runs, estimates and (``--gap``) distances below the exact maximum; nothing is written to
disk.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np
from fit_tlr import evaluation_time

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


def co2_cells(n=8192, seed=0, column="co2"):
    frame = gs.datasets.load("co2")
    rows = np.sort(np.random.default_rng(seed).choice(len(frame), size=n, replace=False))
    lon, lat = np.radians(frame["lon"].to_numpy()[rows]), np.radians(frame["lat"].to_numpy()[rows])
    X = EARTH_RADIUS_KM * np.column_stack(
        [np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)]
    )
    return X, frame[column].to_numpy()[rows]


def southeast_months(months=3, apart_km=1000.0):
    """The south-east US temperatures of the first `months` months side by side: the land
    cells in km (an equirectangular projection at the grid's mean latitude), each month
    `apart_km` away from the previous in a third coordinate."""
    frame = gs.datasets.load("southeast_us_monthly").dropna(subset=["tas"])
    times = np.sort(frame["time"].unique())[:months]
    parts = []
    for k, t in enumerate(times):
        month = frame[frame["time"] == t]
        lat0 = np.radians(frame["lat"].mean())
        x = EARTH_RADIUS_KM * np.radians(month["lon"].to_numpy()) * np.cos(lat0)
        y = EARTH_RADIUS_KM * np.radians(month["lat"].to_numpy())
        parts.append(
            (np.column_stack([x, y, np.full(len(x), k * apart_km)]), month["tas"].to_numpy())
        )
    return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


CASES = {
    "sim16k": lambda: simulated(16384),
    "sim65k": lambda: simulated(65536),
    "co2": co2_cells,
    "co2true8k": lambda: co2_cells(8192, column="co2_true"),
    "co2true16k": lambda: co2_cells(16384, column="co2_true"),
    "co2true8k-matern15": lambda: co2_cells(8192, column="co2_true"),
    "tas": southeast_months,
}


#: Matern smoothness of each case (1.5 where not named).
SMOOTHNESS = {"co2true8k": 2.5, "co2true16k": 2.5}
#: Largest n whose exact maximum ``--gap`` finds (about 15 dense evaluations with gradients).
GAP_LIMIT = 8192


def fit_ours(X, y, nu, seed=0):
    est = gs.SpatialGP(smoothness=nu, distance="euclidean", random_state=seed).fit(X, y)
    return {k: est.params_[k] for k in ("variance", "range", "nugget")}, est


def fit_gpboost(X, y, neighbors, nu):
    import gpboost as gpb

    model = gpb.GPModel(
        gp_coords=X,
        cov_function="matern",
        cov_fct_shape=nu,
        gp_approx="vecchia",
        num_neighbors=neighbors,
        num_parallel_threads=THREADS,
        seed=0,
    )
    model.fit(y=y, X=np.ones((len(y), 1)), params={"trace": False})
    nugget, variance, rho = np.asarray(model.get_cov_pars()).ravel()[:3]
    return {
        "variance": float(variance),
        "range": float(rho) / np.sqrt(2 * nu),
        "nugget": float(nugget),
    }, model


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


def reference_loglik(X, y, params, nu):
    method = {"method": "exact"} if len(y) <= EXACT_LIMIT else {"method": "tlr", "accuracy": 1e-10}
    return gs.log_likelihood(X, y, {**params, "smoothness": nu}, distance="euclidean", **method)


def exact_maximum(X, y, estimates, nu):
    """The exact maximum of the log-likelihood (Matern `nu`, nugget, constant mean): L-BFGS-B
    with analytic gradients from the best of `estimates` until an iteration gains less than
    about 1e-7, and its value (at least the best estimate's)."""
    from geostat.distance import get_distance
    from geostat.kernels import get_kernel
    from geostat.likelihood import ExactLikelihood
    from geostat.optimize import ParameterSpace
    from geostat.optimize.objective import Objective, run_lbfgsb

    likelihood = ExactLikelihood(
        X, y[:, None], np.ones((len(y), 1)), get_kernel("matern", nu), get_distance("euclidean")
    )
    space = ParameterSpace(
        likelihood.kernel, data_variance=float(np.var(y)), max_distance=likelihood.max_distance
    )
    values = [likelihood.log_likelihood({**p, "smoothness": nu}) for p in estimates]
    best = estimates[int(np.argmax(values))]
    low = space.natural_bounds["ratio"][0]
    z0 = space.to_z(
        {"range": best["range"], "ratio": max(best["nugget"] / best["variance"], 1.001 * low)}
    )
    result = run_lbfgsb(
        Objective(likelihood, space),
        z0,
        space.z_bounds(),
        {"ftol": 1e-7 / likelihood.n_obs, "gtol": 1e-9, "maxls": 40, "maxiter": 25},
    )
    return max(-result.fun * likelihood.n_obs, max(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", nargs="+", default=["sim16k", "co2", "sim65k"], choices=sorted(CASES)
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--gap",
        action="store_true",
        help="also find the exact maximum and print each estimate's "
        f"distance below it (up to {GAP_LIMIT:,} sites)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=0,
        metavar="K",
        help="with --gap, also fit ours with random_state 1..K (which seeds the probes too) and "
        "print each fit's time, distance below the exact maximum and bound",
    )
    parser.add_argument(
        "--equivalents",
        action="store_true",
        help="also print our fit's time in one-evaluation equivalents (one TLR evaluation "
        "at the estimate at accuracy 1e-8, median of 3)",
    )
    parser.add_argument(
        "--default-neighbors",
        action="store_true",
        help="also time GPBoost with its default number of neighbours",
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", gs.GeostatWarning)
    from threadpoolctl import threadpool_limits

    print(
        "| data | n | ours (s) | GPBoost 30 (s) | ratio ours/GPBoost | evaluations | "
        "loglik at ours | at GPBoost 30 | difference |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.cases:
        X, y = CASES[name]()
        nu = SMOOTHNESS.get(name, 1.5)
        with threadpool_limits(THREADS):
            sides = [
                lambda X=X, y=y, nu=nu: fit_ours(X, y, nu),
                lambda X=X, y=y, nu=nu: fit_gpboost(X, y, 30, nu),
            ]
            if args.default_neighbors:
                sides.append(lambda X=X, y=y, nu=nu: fit_gpboost(X, y, None, nu))
            times, results = timed_side_by_side(sides, args.repeats)
            ours_time, peer_time = statistics.median(times[0]), statistics.median(times[1])
            (ours, est), (peer, _) = results[:2]
            ours_ll, peer_ll = reference_loglik(X, y, ours, nu), reference_loglik(X, y, peer, nu)
            line = (
                f"| {name} | {len(y):,} | {ours_time:.1f} | {peer_time:.1f} | "
                f"{ours_time / peer_time:.2f} | {est.result_.n_evaluations} ({est.method_}) | "
                f"{ours_ll:.3f} | {peer_ll:.3f} | {ours_ll - peer_ll:+.3f} |"
            )
            print(line, flush=True)
            if args.equivalents and est.method_ == "tlr":
                one = evaluation_time(est)
                print(
                    f"    {name} ours: {ours_time / one:.1f} evaluation equivalents "
                    f"(one evaluation {one:.2f} s)",
                    flush=True,
                )
            if args.default_neighbors:
                default_time, (default, _) = statistics.median(times[2]), results[2]
                print(
                    f"|   GPBoost default neighbours | | | {default_time:.1f} | "
                    f"{ours_time / default_time:.2f} | | | "
                    f"{reference_loglik(X, y, default, nu):.3f} | |",
                    flush=True,
                )
        if args.gap and len(y) <= GAP_LIMIT:
            with threadpool_limits(THREADS):
                best = exact_maximum(X, y, [ours, peer], nu)
            r = est.result_
            print(
                f"    {name} exact maximum {best:.4f}: ours {best - ours_ll:.4f} below "
                f"(bound {r.gap_bound:.3g}), "
                f"GPBoost 30 {best - peer_ll:.4f} below; ours: accuracy {est.accuracy_:g}, "
                f"loglik_error_ {est.loglik_error_:.2g}, {r.message}",
                flush=True,
            )
            for seed in range(1, args.seeds + 1):
                with threadpool_limits(THREADS):
                    start = time.perf_counter()
                    params, other = fit_ours(X, y, nu, seed)
                    elapsed = time.perf_counter() - start
                gap, bound = best - reference_loglik(X, y, params, nu), other.result_.gap_bound
                print(
                    f"    {name} seed {seed}: {elapsed:.1f} s, "
                    f"{other.result_.n_evaluations} evaluations, {gap:.4f} below "
                    f"(bound {bound:.3g}){' ABOVE THE BOUND' if gap > bound else ''}",
                    flush=True,
                )
        print(
            f"    {name} runs (s): ours "
            + " ".join(f"{t:.1f}" for t in times[0])
            + ", GPBoost 30 "
            + " ".join(f"{t:.1f}" for t in times[1])
        )
        for label, params in (("ours", ours), ("GPBoost 30", peer)):
            print(f"    {name} {label}: " + ", ".join(f"{k} {v:.5g}" for k, v in params.items()))


if __name__ == "__main__":
    main()
