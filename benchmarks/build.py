"""Phases of the TLR covariance build: generator versus compression, against dense NumPy.

One build of the likelihood's covariance (uniform sites in the unit square, k-d tree
order, ``Sites(...).covariance_block`` handed to ``geostat.solvers.tlr_matrix``, as
:meth:`geostat.likelihood.tlr.TLRLikelihood.factors` does) with the generator wrapped
to time and count its calls (``block`` and ``block.entries``). Reported, medians of 3:
build time, generator time and calls, the rest (compression: ACA bookkeeping and
recompression, norm and symmetry samples), time per off-diagonal tile, and the ratio of
the generator time to the baseline, a dense evaluation of the same number of entries in
the same run (``scipy.spatial.distance.cdist`` + ``numpy.exp`` on 1024 x 1024 blocks:
the cost of the entries themselves, without per-call overhead).

The build runs on one tile thread (``TLRCORE_NUM_THREADS=1``, set before tlrcore is
imported) so that the generator time is not shared between threads.

Run: ``python benchmarks/build.py`` (32,768 sites, exponential and Matern 1.5, range
0.1, accuracy 1e-8) or e.g. ``python benchmarks/build.py --n 131072 --kernels exp``.

Output: a table on standard output, one row per kernel and n; nothing is written to disk.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TLRCORE_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.spatial.distance import cdist  # noqa: E402

from geostat.covariance import Sites  # noqa: E402
from geostat.distance import get_distance  # noqa: E402
from geostat.kernels import get_kernel  # noqa: E402
from geostat.solvers import NUMPY, site_order, tlr_matrix  # noqa: E402

KERNELS = {"exp": ("exponential", None), "matern15": ("matern", 1.5)}


class Timed:
    """A block generator that times and counts its calls and entries."""

    def __init__(self, block):
        self.block = block
        self.seconds = 0.0
        self.calls = 0
        self.entries_read = 0

    def _timed(self, func, *args):
        start = time.perf_counter()
        values = func(*args)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        self.entries_read += values.size
        return values

    def __call__(self, rows, cols):
        return self._timed(self.block, rows, cols)

    def entries(self, i, j):
        return self._timed(self.block.entries, i, j)


def dense_seconds_per_entry(points, range_):
    """Seconds per entry of ``exp(-cdist / range)`` on 1024 x 1024 blocks (median of 3)."""
    a, b = points[:1024], points[-1024:]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        np.exp(-cdist(a, b) / range_)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / (a.shape[0] * b.shape[0])


def one_build(sites, kernel, params, n, tile_size, accuracy):
    timed = Timed(sites.covariance_block(kernel, params))
    start = time.perf_counter()
    A = tlr_matrix(timed, n, tile_size, accuracy)
    total = time.perf_counter() - start
    return total, timed, A.n_tiles, A.mean_rank


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[32768])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--accuracy", type=float, default=1e-8)
    parser.add_argument("--range", type=float, default=0.1)
    args = parser.parse_args()
    distance = get_distance("euclidean")
    print(
        f"{'kernel':>9} {'n':>7} {'tiles':>5} {'rank':>5} {'build s':>8} {'gen s':>7} "
        f"{'rest s':>7} {'calls':>7} {'ms/tile':>7} {'gen/dense':>9}"
    )
    for n in args.n:
        X = np.random.default_rng(n).uniform(size=(n, 2))
        per_entry = dense_seconds_per_entry(X, args.range)
        for key in args.kernels:
            name, smoothness = KERNELS[key]
            kernel = get_kernel(name, smoothness)
            perm, tile_size = site_order(X, distance, kernel, "kdtree", None)
            sites = Sites(X[perm], distance, NUMPY)
            params = {"variance": 1.0, "range": args.range, "nugget": 1e-2, **kernel.fixed_shape}
            runs = [one_build(sites, kernel, params, n, tile_size, args.accuracy) for _ in range(3)]
            total = statistics.median(r[0] for r in runs)
            gen = statistics.median(r[1].seconds for r in runs)
            timed, n_tiles, rank = runs[0][1], runs[0][2], runs[0][3]
            off_tiles = n_tiles * (n_tiles - 1) // 2
            dense = timed.entries_read * per_entry
            print(
                f"{key:>9} {n:>7} {n_tiles:>5} {rank:>5.1f} {total:>8.2f} {gen:>7.2f} "
                f"{total - gen:>7.2f} {timed.calls:>7} "
                f"{1e3 * (total - gen) / max(off_tiles, 1):>7.2f} {gen / dense:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
