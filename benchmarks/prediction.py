"""Kriging mean on many targets: compressed cross-covariance against dense blocks, side by side.

A 2-D exponential model (range 0.1, nugget 0.01, constant mean) on ``n`` uniform sites,
its TLR factor at accuracy 1e-8 (the factor's time is reported, not counted), then the
kriging mean on ``m`` cells of a regular grid two ways in the same run: through
compressed tiles (:func:`geostat.solvers.compressed_cross_product`, what
``SpatialGP.predict(X, return_std=False)`` does from ``predict.COMPRESSED_FROM``
entries) and through dense cross-covariance blocks (the path of the standard deviation).
Where the dense path would take long (more than ``--dense-max`` targets) it is timed on
that many cells and scaled by ``m``. The error is that of the compressed mean against
the dense product ``c_0^T alpha`` on 1,000 random cells (the same alpha), relative to
the largest value there. Medians of ``--repeats``.

Run: ``python benchmarks/prediction.py`` (n = 16,384, m = 262,144), or e.g.
``python benchmarks/prediction.py --n 131072 --m 1048576 --repeats 1``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

from geostat import predict
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import make_likelihood


def kriging(n, accuracy, seed=0):
    """A kriging predictor on `n` uniform sites with white-noise data (its weights are
    rougher than a draw of the model's, so the compression error shows at its largest)."""
    rng = np.random.default_rng(seed)
    coords = rng.random((n, 2))
    y = rng.standard_normal((n, 1))
    kernel, distance = get_kernel("exponential"), get_distance("euclidean")
    lik = make_likelihood("tlr", coords, y, np.ones((n, 1)), kernel, distance, accuracy=accuracy)
    params = {"variance": 1.0, "range": 0.1, "nugget": 0.01}
    start = time.perf_counter()
    coef, _ = lik.gls(params)
    krige = predict.Kriging(lik, params, coef)
    krige.groups  # noqa: B018  (factor and weights, outside the timings)
    return krige, time.perf_counter() - start


def grid(m):
    side = int(np.ceil(np.sqrt(m)))
    axis = (np.arange(side) + 0.5) / side
    x, y = np.meshgrid(axis, axis)
    return np.c_[x.ravel(), y.ravel()][:m]


def timed(function, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--m", type=int, default=262144)
    parser.add_argument("--accuracy", type=float, default=1e-8)
    parser.add_argument("--dense-max", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    krige, factor_time = kriging(args.n, args.accuracy)
    targets = grid(args.m)
    design = np.ones((args.m, 1))
    previous = predict.COMPRESSED_FROM
    predict.COMPRESSED_FROM = 0
    compressed_time, mean = timed(lambda: krige.predict(targets, design), args.repeats)
    predict.COMPRESSED_FROM = 2**62
    timed_rows = min(args.m, args.dense_max)
    dense_time, _ = timed(lambda: krige.predict(targets[:timed_rows], design[:timed_rows]), args.repeats)
    dense_time *= args.m / timed_rows
    predict.COMPRESSED_FROM = previous
    check = np.random.default_rng(1).choice(args.m, min(1000, args.m), replace=False)
    reference = krige.predict(targets[check], design[check])
    error = np.abs(mean[check] - reference).max() / np.abs(reference).max()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    scaled = " (scaled from %d targets)" % timed_rows if timed_rows < args.m else ""
    print(f"n = {args.n:,} sites, m = {args.m:,} targets, accuracy {args.accuracy:g}, medians of {args.repeats}")
    print(f"  TLR factor and weights       {factor_time:8.2f} s (not counted)")
    print(f"  mean, compressed tiles       {compressed_time:8.2f} s")
    print(f"  mean, dense blocks           {dense_time:8.2f} s{scaled}")
    print(f"  dense / compressed           {dense_time / compressed_time:8.2f} x")
    print(f"  error on {check.size} cells (relative) {error:.2e}")
    print(f"  peak resident memory         {peak:8.2f} GiB")


if __name__ == "__main__":
    main()
