"""What one Fisher-scoring iteration of a TLR fit costs, part by part, on a real field.

At the parameters of a fit (``SpatialGP(smoothness=NU, distance="euclidean")`` on the
case's data), times (medians of ``--repeats``) the parts an iteration of
:func:`geostat.optimize.scoring.fisher_scoring` pays for: the TLR build of the covariance
``K`` and its factorization (one evaluation), the compressed derivative ``dR / d range``
of the probe traces (:meth:`geostat.likelihood.TLRLikelihood.gradient_matrices`), and a
block of 64 probes: the backward solve, the product with ``dR``, and the forward solves
of the information's products. Baseline: one evaluation of the same likelihood, in the
same run.

Cases: those of ``benchmarks/peers.py`` (default ``co2true8k``: 8,192 co2_true cells,
Matérn 2.5, a nugget of about 2e-5 of the variance).

Run: ``python benchmarks/scoring_costs.py [--case co2true8k] [--repeats 3]``.
Output: a table on standard output.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from peers import CASES, SMOOTHNESS

import geostat as gs
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import TLRLikelihood

BLOCK = 64


def median_time(function, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="co2true8k", choices=sorted(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy", type=float, default=1e-8)
    args = parser.parse_args(argv)
    X, y = CASES[args.case]()
    nu = SMOOTHNESS.get(args.case, 1.5)
    est = gs.SpatialGP(smoothness=nu, distance="euclidean").fit(X, y)
    params = est.params_
    likelihood = TLRLikelihood(
        X,
        y[:, None],
        np.ones((len(y), 1)),
        get_kernel("matern", nu),
        get_distance("euclidean"),
        accuracy=args.accuracy,
    )
    theta = {"range": params["range"], "smoothness": nu}
    eta = params["nugget"] / params["variance"]

    def evaluate():
        likelihood.release_factors()
        return likelihood.factors(theta, eta)

    def derivative():
        return likelihood.gradient_matrices(0, theta, ["range"])["range"]

    factor = evaluate()[0]
    dR = derivative()
    Z = np.random.default_rng(0).choice([-1.0, 1.0], size=(factor.n, BLOCK))
    X_solved = factor.solve_upper(Z)
    DX = dR @ X_solved
    rows = [
        ("evaluation (build + factorization)", median_time(evaluate, args.repeats)),
        ("dR compressed", median_time(derivative, args.repeats)),
        (f"{BLOCK} probes: backward solve", median_time(lambda: factor.solve_upper(Z), 3)),
        (f"{BLOCK} probes: dR @ X", median_time(lambda: dR @ X_solved, 3)),
        (f"{BLOCK} probes: one forward solve", median_time(lambda: factor.solve_lower(DX), 3)),
    ]
    baseline = rows[0][1]
    print(
        f"{args.case}: n = {len(y):,}, accuracy {args.accuracy:g}, "
        f"range {params['range']:.4g}, nugget / variance {eta:.3g}"
    )
    for name, seconds in rows:
        print(f"  {name:<38} {seconds:8.3f} s  {seconds / baseline:6.2f} evaluations")


if __name__ == "__main__":
    main()
