"""Where the TLR likelihood overtakes the dense one: the choice behind ``method="auto"``.

For each n, times (median of ``--repeats``) the dense baseline, one log-likelihood value
and one value with its gradient (what each L-BFGS-B step of an exact fit costs), and one
TLR value (what each derivative-free step of a TLR fit costs), through the likelihood
classes the estimator uses, with the error of the TLR value. An exact fit takes about 10-25 gradient
evaluations and a TLR fit about 15 value evaluations, so the fit crossover is near the n
where ``tlr s`` falls below ``dense+grad s``: the size from which ``method="auto"`` picks
TLR on the CPU is :data:`geostat.likelihood.TLR_FROM`.

Run: ``python benchmarks/crossover.py`` (2-D exponential and Matern 1.5, n from 1,024 to
16,384, accuracy 1e-8) or e.g. ``python benchmarks/crossover.py --n 2048 --kernels exp2d``.

Output: a Markdown table on standard output, one row per kernel and n; nothing is
written to disk.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood, TLRLikelihood

KERNELS = {"exp2d": ("exponential", None), "matern15_2d": ("matern", 1.5)}


def median_time(func, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--accuracy", type=float, default=1e-8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print("| kernel | n | dense s | dense+grad s | tlr s | dense+grad / tlr | abs. error of tlr |")
    print("|---|---|---|---|---|---|---|")
    for key in args.kernels:
        kernel = get_kernel(*KERNELS[key])
        for n in args.n:
            rng = np.random.default_rng(n)
            X = rng.uniform(size=(n, 2))
            y = rng.normal(size=(n, 1))
            design = np.ones((n, 1))
            distance = get_distance("euclidean")
            theta, eta = {"range": 0.1}, 0.01
            exact = ExactLikelihood(X, y, design, kernel, distance)
            tlr = TLRLikelihood(X, y, design, kernel, distance, accuracy=args.accuracy)

            def tlr_value(tlr=tlr, theta=theta, eta=eta):
                tlr.release_factors()  # time a fresh factorization every repeat
                return tlr.terms(theta, eta).profiled_value()

            def dense_value(exact=exact, theta=theta, eta=eta):
                return exact.terms(theta, eta).profiled_value()

            def dense_gradient(exact=exact, theta=theta, eta=eta):
                return exact.terms(theta, eta, gradient=True)

            dense_s, dense_value_ = median_time(dense_value, args.repeats)
            grad_s, _ = median_time(dense_gradient, args.repeats)
            tlr_s, tlr_value_ = median_time(tlr_value, args.repeats)
            print(
                f"| {key} | {n} | {dense_s:.3f} | {grad_s:.3f} | {tlr_s:.3f} | "
                f"{grad_s / tlr_s:.2f} | {abs(tlr_value_ - dense_value_):.1e} |",
                flush=True,
            )
    print(
        f"\naccuracy {args.accuracy:g}; range 0.1, nugget ratio 0.01, "
        "uniform sites in the unit square; medians of",
        args.repeats,
    )


if __name__ == "__main__":
    main()
