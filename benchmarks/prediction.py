"""Kriging on many targets at scale against dense cross-covariance blocks, side by side.

A 2-D exponential model (range 0.1, nugget 0.01, constant mean) on ``n`` uniform sites
with data drawn from it (``--data white``: white noise, the hardest case for the
compression), its TLR factor at accuracy 1e-8 (the factor's time is reported, not
counted), then the kriging mean, and the mean with the standard deviation, on ``m``
cells of a regular grid in the same run: at scale (what ``SpatialGP.predict`` does from
``predict.COMPRESSED_FROM`` target-site pairs: the cross-covariance product of
:func:`geostat.solvers.compressed_cross_product`, by the fast multipole method where it
applies, and local neighbourhoods for the variance), the mean through compressed tiles
alone (the product before the fast multipole method), and, as the baseline, through
dense cross-covariance blocks with a TLR solve per target. ``--lonlat``: the sites and
cells in a 20 x 10 degree region of longitude/latitude instead (chordal distances,
range 300 km, a sixth of the region's width). Where the dense path would take long
(more than ``--dense-max`` targets for the mean, a tenth of that for the standard
deviation) it is timed on that many cells and scaled by ``m``. The errors are those at
scale against the dense path on 1,000 random cells: of the mean relative to its largest
value there, of the standard deviation relative to each cell's. Medians of
``--repeats``.

Run: ``python benchmarks/prediction.py`` (n = 16,384, m = 262,144), or e.g.
``python benchmarks/prediction.py --n 131072 --m 1048576 --repeats 1``.

Output: a few lines on standard output (times, their ratios, the errors, peak memory);
nothing is written to disk.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np

from geostat import predict, solvers
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import make_likelihood


def region(unit):
    """Points of the unit square mapped to longitudes -100 to -80, latitudes 33 to 43."""
    return np.c_[-100 + 20 * unit[:, 0], 33 + 10 * unit[:, 1]]


def kriging(n, accuracy, data="model", lonlat=False, seed=0):
    """A kriging predictor on `n` uniform sites, with data drawn from the model (through
    its TLR factor, ``y = L z``) or white noise (``data="white"``: its weights are ten
    times larger than a draw's against the same mean, the hardest case for the
    compression's tolerance)."""
    rng = np.random.default_rng(seed)
    coords = rng.random((n, 2))
    y = rng.standard_normal((n, 1))
    kernel, distance = get_kernel("exponential"), get_distance("euclidean")
    params = {"variance": 1.0, "range": 0.1, "nugget": 0.01}
    if lonlat:
        coords, distance = region(coords), get_distance("chordal")
        params["range"] = 300.0
    lik = make_likelihood("tlr", coords, y, np.ones((n, 1)), kernel, distance, accuracy=accuracy)
    if data == "model":
        y = lik.factors_at(params)[0].multiply_lower(y)
        lik = make_likelihood(
            "tlr", coords, y, np.ones((n, 1)), kernel, distance, accuracy=accuracy
        )
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
    parser.add_argument("--data", choices=("model", "white"), default="model")
    parser.add_argument("--lonlat", action="store_true")
    args = parser.parse_args()
    krige, factor_time = kriging(args.n, args.accuracy, args.data, args.lonlat)
    targets = region(grid(args.m)) if args.lonlat else grid(args.m)
    design = np.ones((args.m, 1))
    previous = predict.COMPRESSED_FROM
    predict.COMPRESSED_FROM = 0
    mean_time, mean = timed(lambda: krige.predict(targets, design), args.repeats)
    both_time, (_, var) = timed(
        lambda: krige.predict(targets, design, return_var=True), args.repeats
    )
    orders, solvers.INTERPOLATION_ORDERS = solvers.INTERPOLATION_ORDERS, ()
    tiled_time, tiled = timed(lambda: krige.predict(targets, design), args.repeats)
    solvers.INTERPOLATION_ORDERS = orders
    predict.COMPRESSED_FROM = 2**62
    mean_rows, std_rows = min(args.m, args.dense_max), min(args.m, max(1, args.dense_max // 10))
    dense_mean_time, _ = timed(
        lambda: krige.predict(targets[:mean_rows], design[:mean_rows]), args.repeats
    )
    dense_both_time, _ = timed(
        lambda: krige.predict(targets[:std_rows], design[:std_rows], return_var=True), args.repeats
    )
    dense_mean_time *= args.m / mean_rows
    dense_both_time *= args.m / std_rows
    check = np.sort(np.random.default_rng(1).choice(args.m, min(1000, args.m), replace=False))
    reference, reference_var = krige.predict(targets[check], design[check], return_var=True)
    predict.COMPRESSED_FROM = previous
    mean_error = np.abs(mean[check] - reference).max() / np.abs(reference).max()
    tiled_error = np.abs(tiled[check] - reference).max() / np.abs(reference).max()
    std_error = np.abs(np.sqrt(var[check] / reference_var) - 1).max()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"n = {args.n:,} sites, m = {args.m:,} targets, accuracy {args.accuracy:g}, "
        f"{args.data} data{', longitude/latitude' if args.lonlat else ''}, "
        f"medians of {args.repeats}"
    )
    print(f"  TLR factor and weights         {factor_time:8.2f} s (not counted)")
    print(f"  mean at scale                  {mean_time:8.2f} s")
    print(f"  mean, compressed tiles         {tiled_time:8.2f} s")
    print(
        f"  mean, dense blocks             {dense_mean_time:8.2f} s "
        f"(scaled from {mean_rows:,} targets)"
    )
    print(f"  mean and std at scale          {both_time:8.2f} s")
    print(
        f"  mean and std, dense blocks     {dense_both_time:8.2f} s "
        f"(scaled from {std_rows:,} targets)"
    )
    print(
        f"  dense / at scale: mean {dense_mean_time / mean_time:.2f} x, "
        f"with std {dense_both_time / both_time:.2f} x; "
        f"compressed tiles / at scale: mean {tiled_time / mean_time:.2f} x"
    )
    print(
        f"  error on {check.size} cells: mean {mean_error:.2e} (relative to its largest; "
        f"compressed tiles {tiled_error:.2e}), std {std_error:.2e} (largest relative)"
    )
    print(f"  peak resident memory           {peak:8.2f} GiB")


if __name__ == "__main__":
    main()
