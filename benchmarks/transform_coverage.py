"""Coverage of prediction intervals in the units of y for lognormal fields.

Each replicate draws a field ``y = exp(1 + Z)`` (Z: exponential covariance, variance 1,
range 0.2, nugget 0.05 of independent noise on the log scale) at ``--train + --test``
uniform sites, fits ``SpatialGP(kernel="exponential", target_transform="log")`` on the
training sites and predicts the held-out ones with ``predict_quantiles(...,
include_nugget=True)``; the fraction of held-out values inside the central ``--level``
interval, over all replicates, with its binomial standard error (the held-out values of
one field are correlated, so the error is somewhat larger); and the mean error of the
back-transformed mean (``predict``: of the latent field ``exp(1 + Z)``, below the mean of
a new observation by the factor ``exp(nugget / 2)``) and of the median.

The baselines are the nominal level (for the coverage) and zero (for the mean errors).

Run: ``python benchmarks/transform_coverage.py`` (50 fields of 400 + 200 sites, 90 %) or
e.g. ``python benchmarks/transform_coverage.py --fields 10 --level 0.95``.

Output: three lines on standard output; nothing is written to disk.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.spatial.distance import cdist

import geostat as gs


def field(n, rng):
    X = rng.random((n, 2))
    C = np.exp(-cdist(X, X) / 0.2) + 0.05 * np.eye(n)
    return X, np.exp(1.0 + np.linalg.cholesky(C) @ rng.standard_normal(n))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=50)
    parser.add_argument("--train", type=int, default=400)
    parser.add_argument("--test", type=int, default=200)
    parser.add_argument("--level", type=float, default=0.9)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    tail = (1 - args.level) / 2
    hits = total = 0
    mean_error, median_error = [], []
    for _ in range(args.fields):
        X, y = field(args.train + args.test, rng)
        train, test = slice(0, args.train), slice(args.train, None)
        model = gs.SpatialGP(kernel="exponential", target_transform="log").fit(X[train], y[train])
        low, median, high = model.predict_quantiles(
            X[test], (tail, 0.5, 1 - tail), include_nugget=True
        ).T
        hits += int(np.sum((y[test] >= low) & (y[test] <= high)))
        total += y[test].size
        mean_error.append(np.mean(model.predict(X[test]) - y[test]))
        median_error.append(np.mean(median - y[test]))
    coverage = hits / total
    print(
        f"{args.fields} lognormal fields, {args.train} training + {args.test} held-out sites each"
    )
    print(
        f"  {args.level:.0%} intervals in the units of y cover {coverage:.3f} "
        f"(binomial standard error {np.sqrt(coverage * (1 - coverage) / total):.3f})"
    )
    print(
        f"  mean error against the held-out y: back-transformed mean of the latent field "
        f"{np.mean(mean_error):+.3f}, median {np.mean(median_error):+.3f}"
    )


if __name__ == "__main__":
    main()
