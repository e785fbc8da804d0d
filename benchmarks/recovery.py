"""Coverage of confidence intervals for anisotropic and space-time models by simulation.

The baseline is the nominal level ``--level``: the share of intervals that contain the
truth should match it.

Each replication simulates one Gaussian field of a case below (constant mean 0, estimated
by GLS), fits it with the exact likelihood and computes the intervals of every estimated
covariance parameter at ``--level`` (``SpatialGP.confidence_intervals``). The table gives,
per case and parameter, the share of replications whose interval contains the truth with
its binomial standard error ``sqrt(p (1 - p) / reps)``, the mean bias of the estimate and
its standard deviation, and the median interval width. The angle is identified modulo pi:
its bias is the shortest way round, and its interval covers the truth when it contains
the truth plus a multiple of pi.

Cases:

* ``aniso``: 400 sites uniform in the unit square, exponential with a geometric
  anisotropy (major range 0.25, ratio 0.3, angle 30 degrees), variance 1, nugget 0.1.
* ``st_sep``: 50 sites uniform in the unit square observed at times 0..19, separable
  exponential in space (range 0.2) and time (range 3), variance 1, nugget 0.1, fitted with
  ``separability`` fixed at 0.
* ``st_gneiting``: as ``st_sep`` with Gneiting's non-separable interaction
  ``separability = 0.5``, estimated.

The fields are simulated from the correlation matrices of ``geostat.covariance.Sites``
(a Cholesky factor of the dense covariance). ``--method wald`` (or ``log-wald``) replaces
the profile-likelihood intervals, which take tens of constrained fits each, by Wald ones.

Run: ``python benchmarks/recovery.py [--cases aniso st_sep st_gneiting] [--replications 200]
[--method profile] [--level 0.95] [--reml] [--seed 0] [--jobs 1]``

Output: a table per case on standard output (failed replications are reported there
too); nothing is written to disk.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import geostat as gs
from geostat.covariance import Sites
from geostat.distance import SpaceTimeDistance, get_distance
from geostat.solvers import NUMPY

ANGLE = "anisotropy_angle"

CASES = {
    "aniso": {
        "truth": {
            "variance": 1.0,
            "range": 0.25,
            "anisotropy_ratio": 0.3,
            ANGLE: math.pi / 6,
            "nugget": 0.1,
        },
        "kernel": lambda: gs.Anisotropic(gs.Exponential()),
        "fit_kernel": lambda: "exponential",
        "settings": {"anisotropy": "geometric"},
    },
    "st_sep": {
        "truth": {
            "variance": 1.0,
            "range": 0.2,
            "time_range": 3.0,
            "separability": 0.0,
            "nugget": 0.1,
        },
        "kernel": lambda: gs.SpaceTime(space="exponential", time="exponential", separability=0.0),
        "fit_kernel": lambda: gs.SpaceTime(
            space="exponential", time="exponential", separability=0.0
        ),
        "settings": {},
    },
    "st_gneiting": {
        "truth": {
            "variance": 1.0,
            "range": 0.2,
            "time_range": 3.0,
            "separability": 0.5,
            "nugget": 0.1,
        },
        "kernel": lambda: gs.SpaceTime(space="exponential", time="exponential"),
        "fit_kernel": lambda: gs.SpaceTime(space="exponential", time="exponential"),
        "settings": {},
    },
}


def sites_of(case, rng):
    """The coordinates of one replication of `case`, and their distance."""
    if case == "aniso":
        return rng.uniform(size=(400, 2)), get_distance("euclidean")
    S = rng.uniform(size=(50, 2))
    X = np.column_stack([np.repeat(S, 20, axis=0), np.tile(np.arange(20.0), 50)])
    return X, SpaceTimeDistance(get_distance("euclidean"))


def simulate(case, rng):
    """Sites and one field of the model of `case`.

    Parameters
    ----------
    case : str
        A key of :data:`CASES`.
    rng : numpy.random.Generator

    Returns
    -------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
    """
    spec = CASES[case]
    truth, kernel = spec["truth"], spec["kernel"]()
    X, distance = sites_of(case, rng)
    theta = {k: v for k, v in truth.items() if k == "range" or (k in kernel.free_shape)}
    R, _ = Sites(X, distance, NUMPY).correlation(kernel, theta)
    C = truth["variance"] * R + truth["nugget"] * np.eye(len(X))
    return X, np.linalg.cholesky(C) @ rng.normal(size=len(X))


def replicate(rep, case, method, level, seed, reml):
    """Estimates and intervals of one replication.

    Parameters
    ----------
    rep : int
        Replication number (with `seed`, it seeds the simulation).
    case, method, level, seed, reml
        As on the command line.

    Returns
    -------
    pandas.DataFrame or None
        ``SpatialGP.confidence_intervals`` (estimate, lower, upper per parameter); None if
        the fit or the intervals failed.
    """
    warnings.simplefilter("ignore")
    rng = np.random.default_rng([seed, list(CASES).index(case), rep])
    X, y = simulate(case, rng)
    spec = CASES[case]
    try:
        est = gs.SpatialGP(
            kernel=spec["fit_kernel"](), method="exact", reml=reml, **spec["settings"]
        ).fit(X, y)
        return est.confidence_intervals(level=level, method=method)
    except Exception as error:  # a failed replication is counted, not fatal
        print(f"{case} replication {rep}: {type(error).__name__}: {error}")
        return None


def covers(name, truth, lower, upper):
    """Whether the intervals contain the truth (for the angle, modulo pi)."""
    if name != ANGLE:
        return (lower <= truth) & (truth <= upper)
    shifts = np.array([-1.0, 0.0, 1.0])[:, None] * math.pi
    return np.any((lower <= truth + shifts) & (truth + shifts <= upper), axis=0)


def bias(name, truth, estimate):
    """Estimate minus truth (for the angle, the shortest way round modulo pi)."""
    error = estimate - truth
    return (error + math.pi / 2) % math.pi - math.pi / 2 if name == ANGLE else error


def summarize(case, results, level, elapsed):
    """Print coverage with its standard error, bias and width per parameter of `case`."""
    frames = [r for r in results if r is not None]
    reps = len(frames)
    truth = CASES[case]["truth"]
    print(
        f"\n{case}: truth {truth}; {reps} of {len(results)} replications fitted, "
        f"nominal level {level:g}, "
        f"{elapsed:.1f} s ({elapsed / max(1, len(results)):.1f} s per replication)"
    )
    header = (
        f"{'parameter':<18}{'coverage':>9}{'± se':>7}{'mean bias':>11}{'sd':>9}{'median width':>14}"
    )
    print(header)
    print("-" * len(header))
    if not reps:
        return
    for name in frames[0].index:
        lower = np.array([f.loc[name, "lower"] for f in frames], dtype=float)
        upper = np.array([f.loc[name, "upper"] for f in frames], dtype=float)
        estimate = np.array([f.loc[name, "estimate"] for f in frames], dtype=float)
        p = float(np.mean(covers(name, truth[name], lower, upper)))
        se = math.sqrt(p * (1 - p) / reps)
        errors = bias(name, truth[name], estimate)
        print(
            f"{name:<18}{p:>9.3f}{se:>7.3f}{np.mean(errors):>11.4f}{np.std(errors):>9.4f}"
            f"{np.nanmedian(upper - lower):>14.4f}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", nargs="+", choices=list(CASES), default=list(CASES), help="cases to run"
    )
    parser.add_argument(
        "--replications", type=int, default=200, help="replications per case (default 200)"
    )
    parser.add_argument(
        "--method",
        choices=["profile", "wald", "log-wald"],
        default="profile",
        help="interval method (default profile; wald when profiles are too slow)",
    )
    parser.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    parser.add_argument("--reml", action="store_true", help="restricted maximum likelihood")
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = parser.parse_args(argv)
    fit = "REML" if args.reml else "ML"
    print(
        f"{args.method} intervals, {fit} fits, exact likelihood, "
        f"{args.replications} replications per case"
    )
    total = time.perf_counter()
    for case in args.cases:
        start = time.perf_counter()
        run = functools.partial(
            replicate,
            case=case,
            method=args.method,
            level=args.level,
            seed=args.seed,
            reml=args.reml,
        )
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run, range(args.replications)))
        summarize(case, results, args.level, time.perf_counter() - start)
    print(f"\n{time.perf_counter() - total:.1f} s in all ({args.jobs} process(es))")


if __name__ == "__main__":
    main()
