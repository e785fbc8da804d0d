"""TLR construction from a kernel generator versus building the dense matrix, side by side.

For each kernel, n, ordering and accuracy: time to order the sites and compress the
covariance into a TLRMatrix (ACA by default), its memory, mean/max off-diagonal rank, and
the achieved relative Frobenius error estimated from probed tiles; and, in the same run,
the baseline: the time and memory to build the dense covariance (row block by row block
into one preallocated array, the least a dense method must do), up to ``--dense-max``.

Kernels: 2-D exponential (range 0.1, unit square), 2-D Matern 1.5 (range 0.1), 3-D
exponential (range 0.2, unit cube); uniform random sites.

Run: ``python benchmarks/compress.py`` (full grid, long) or e.g.
``python benchmarks/compress.py --n 32768 --accuracy 1e-8 --kernels exp2d --orderings
kdtree``. ``--profile`` prints where the time of the first TLR build goes (rebuilt on one
thread, ``TLRCORE_NUM_THREADS=1``, so that cProfile sees the tile work).

Output: a table on standard output, one row per kernel, n, ordering and accuracy (and the
profile with ``--profile``); nothing is written to disk.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import numpy as np

import tlrcore as tlr
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.ordering import auto_tile_size, order_points
from geostat.solvers import covariance_block

KERNELS = {
    "exp2d": ("exponential", None, 2, 0.1),
    "matern15_2d": ("matern", 1.5, 2, 0.1),
    "exp3d": ("exponential", None, 3, 0.2),
}


def dense_build(block, n, rows_per_step=2048):
    """Seconds to fill the dense n x n covariance (None when it does not fit)."""
    start = time.perf_counter()
    C = np.empty((n, n))
    cols = np.arange(n)
    for first in range(0, n, rows_per_step):
        rows = np.arange(first, min(first + rows_per_step, n))
        C[rows] = block(rows, cols)
    return time.perf_counter() - start, C.nbytes


def profile_one_thread(block, n, tile, accuracy, method):
    """cProfile table of a TLR build on one thread (tile work is invisible from the pool)."""
    previous = os.environ.get("TLRCORE_NUM_THREADS")
    os.environ["TLRCORE_NUM_THREADS"] = "1"
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    tlr.TLRMatrix.from_generator(block, n, tile, accuracy=accuracy, method=method)
    profiler.disable()
    elapsed = time.perf_counter() - start
    if previous is None:
        del os.environ["TLRCORE_NUM_THREADS"]
    else:
        os.environ["TLRCORE_NUM_THREADS"] = previous
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(14)
    return f"\none-thread profile ({elapsed:.2f} s under cProfile):\n{stream.getvalue()}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[16384, 32768, 65536])
    parser.add_argument("--accuracy", type=float, nargs="+", default=[1e-4, 1e-6, 1e-8])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--orderings", nargs="+", default=["kdtree", "morton"])
    parser.add_argument("--method", default="aca", choices=["aca", "ara", "svd"])
    parser.add_argument("--tile-size", type=int, default=None)
    parser.add_argument(
        "--dense-max", type=int, default=32768, help="largest n for the dense baseline"
    )
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)

    header = (
        f"{'kernel':<12}{'n':>7} {'order':<7}{'acc':>7}{'tile':>6}{'order s':>8}{'build s':>8}"
        f"{'dense s':>8}{'speedup':>8}{'TLR MB':>9}{'dense MB':>9}{'mem frac':>9}"
        f"{'mean rk':>8}{'max rk':>7}{'est err':>9}"
    )
    print(header)
    print("-" * len(header))
    profiled = False
    for name in args.kernels:
        kernel_name, smoothness, dim, range_ = KERNELS[name]
        kernel = get_kernel(kernel_name, smoothness)
        params = {"variance": 1.0, "range": range_, **kernel.fixed_shape}
        for n in args.n:
            X = np.random.default_rng(n).uniform(size=(n, dim))
            tile = args.tile_size or auto_tile_size(n)
            dense_time = dense_bytes = None
            if n <= args.dense_max:
                dense_time, dense_bytes = dense_build(
                    covariance_block(X, kernel, params, get_distance("euclidean")), n
                )
            for ordering in args.orderings:
                start = time.perf_counter()
                perm = order_points(X, ordering, tile)
                order_time = time.perf_counter() - start
                block = covariance_block(X[perm], kernel, params, get_distance("euclidean"))
                for accuracy in args.accuracy:
                    start = time.perf_counter()
                    A = tlr.TLRMatrix.from_generator(
                        block, n, tile, accuracy=accuracy, method=args.method
                    )
                    build = time.perf_counter() - start
                    info = tlr.summary(A, block, n_probe_tiles=24)
                    speedup = (
                        f"{dense_time / (build + order_time):8.1f}" if dense_time else f"{'-':>8}"
                    )
                    dense_s = f"{dense_time:8.2f}" if dense_time else f"{'-':>8}"
                    print(
                        f"{name:<12}{n:>7} {ordering:<7}{accuracy:>7.0e}{tile:>6}"
                        f"{order_time:>8.2f}{build:>8.2f}"
                        f"{dense_s}{speedup}{A.nbytes / 1e6:>9.1f}{8 * n * n / 1e6:>9.0f}"
                        f"{A.nbytes / (8 * n * n):>9.4f}{info['mean_rank']:>8.1f}"
                        f"{info['max_rank']:>7}{info['estimated_error']:>9.1e}",
                        flush=True,
                    )
                    if args.profile and not profiled:
                        profiled = True
                        print(profile_one_thread(block, n, tile, accuracy, args.method))
    print(
        "\nspeedup = dense build time / (ordering + TLR build time); "
        "est err = relative Frobenius error"
    )
    print("estimated from 24 probed off-diagonal tiles; dense MB = 8 n^2 / 1e6.")


if __name__ == "__main__":
    main()
