"""Left-looking versus right-looking TLR Cholesky, and the left-looking tile scheduling.

For the 2-D exponential covariance (range 0.1, nugget 1e-2, uniform sites in the unit
square, KD-tree ordering through ``geostat.solvers.tlr_covariance``, as in
``benchmarks/loglik.py``) the same TLR matrix is factored by

* ``left, index order``: left-looking, the tiles of a column handed to the thread pool in
  index order (the baseline of the scheduling: the library's work estimate is patched to
  a constant, which leaves the order unsorted);
* ``left, sorted``: left-looking as the library schedules it, largest estimated work
  first;
* ``right``: ``tlr.cholesky(A, variant="right")``.

Reported: factor time (median of ``--repeats`` runs, one run above ``--repeat-max``; the
variants take turns so that machine load hits all of them alike), mean off-diagonal rank
of ``L``, factor bytes, and ``|logdet - logdet(left, sorted)|``. Threads: the library
default (``TLRCORE_NUM_THREADS`` or the CPU count).

On a shared machine the wall-clock difference between the two schedules drowns in noise,
so a second table models it: the left-looking factorization runs on one thread with each
tile's ARA timed, and each column's tiles are list-scheduled on ``w`` simulated threads
(each takes the next tile when free) in index order and in the library's sorted order.
The sum over columns of the makespans is compared with the bound ``max(total / w,
longest tile)`` per column.

Run: ``python benchmarks/cholesky_variants.py`` (n = 8,192, 16,384 and 32,768) or e.g.
``python benchmarks/cholesky_variants.py --n 8192 --repeats 5``.

Output: Markdown tables on standard output (factor times, their ratios, the scheduling
model); nothing is written to disk.
"""

from __future__ import annotations

import argparse
import heapq
import importlib
import os
import statistics
import time
from contextlib import nullcontext
from unittest import mock

import numpy as np

import tlrcore as tlr
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.solvers import tlr_covariance
from tlrcore.concurrency.threads import workers as library_threads

#: The left-looking module, whose work estimate and scheduler are patched below
#: (``tlrcore.cholesky`` is also the name of the function, hence import_module).
LEFT_LOOKING = importlib.import_module("tlrcore.cholesky.left")
RANGE, NUGGET = 0.1, 1e-2
VARIANTS = {
    "left, index order": ("left", True),
    "left, sorted": ("left", False),
    "right": ("right", False),
}


def build(n, accuracy):
    """The TLR covariance of `n` uniform sites in the unit square, and its build time."""
    kernel = get_kernel("exponential", None)
    X = np.random.default_rng(n).uniform(size=(n, 2))
    params = {"variance": 1.0, "range": RANGE, "nugget": NUGGET, **kernel.fixed_shape}
    start = time.perf_counter()
    A, _ = tlr_covariance(X, kernel, params, get_distance("euclidean"), accuracy=accuracy)
    return A, time.perf_counter() - start


def factor(A, variant, index_order):
    """Factor `A`; ``index_order`` hands the left-looking tiles over unsorted."""
    unsorted = mock.patch.object(LEFT_LOOKING, "ara_work", lambda *args: 0)
    with unsorted if index_order else nullcontext():
        start = time.perf_counter()
        F = tlr.cholesky(A, variant=variant)
        return F, time.perf_counter() - start


def measure(A, repeats):
    """Per variant: factor times and the last factor."""
    times = {name: [] for name in VARIANTS}
    factors = {}
    for _ in range(repeats):
        for name, (variant, index_order) in VARIANTS.items():
            factors[name], seconds = factor(A, variant, index_order)
            times[name].append(seconds)
    return times, factors


def tile_times(A):
    """Per column of the left-looking factorization: work estimates and ARA seconds of its
    tiles, timed one by one on one thread."""
    columns = []

    def timed(pool, func, items, work):
        seconds, results = [], []
        for item in items:
            start = time.perf_counter()
            results.append(func(item))
            seconds.append(time.perf_counter() - start)
        columns.append((np.asarray(work, dtype=float), np.asarray(seconds)))
        return lambda: results

    with (
        mock.patch.dict(os.environ, {"TLRCORE_NUM_THREADS": "1"}),
        mock.patch.object(LEFT_LOOKING, "start_by_work", timed),
    ):
        tlr.cholesky(A)
    return columns


def makespan(seconds, workers):
    """Finish time of tasks of the given durations, each started by the first free worker."""
    free = [0.0] * workers
    for duration in seconds:
        heapq.heappush(free, heapq.heappop(free) + duration)
    return max(free)


def scheduling_model(columns, workers):
    """Summed column makespans: index order, sorted by estimated work, lower bound."""
    index = sum(makespan(seconds, workers) for _, seconds in columns)
    ranked = sum(
        makespan(seconds[np.argsort(-work, kind="stable")], workers) for work, seconds in columns
    )
    bound = sum(
        max(seconds.sum() / workers, seconds.max()) for _, seconds in columns if seconds.size
    )
    return index, ranked, bound


def mean_rank(F):
    ranks = [U.shape[1] for U in F.U.values()]
    return float(np.mean(ranks)) if ranks else 0.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[8192, 16384, 32768])
    parser.add_argument("--accuracy", type=float, default=1e-8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--repeat-max", type=int, default=16384, help="larger n run once")
    parser.add_argument("--model-threads", type=int, nargs="+", default=[2, 4, 8])
    args = parser.parse_args(argv)

    print(
        f"2-D exponential, range {RANGE}, nugget {NUGGET}, accuracy {args.accuracy:g}, "
        f"{library_threads()} threads\n"
    )
    print(
        "| n | tile | rank A | variant | runs | factor s (median) | min s | rank L | MB "
        "| |dlogdet| |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios, models = [], []
    for n in args.n:
        A, _ = build(n, args.accuracy)
        repeats = args.repeats if n <= args.repeat_max else 1
        times, factors = measure(A, repeats)
        reference = factors["left, sorted"].logdet()
        for name, F in factors.items():
            print(
                f"| {n} | {A.tile_size} | {A.mean_rank:.1f} | {name} | {repeats} | "
                f"{statistics.median(times[name]):.2f} | {min(times[name]):.2f} | "
                f"{mean_rank(F):.1f} | {F.nbytes / 1e6:.0f} | {abs(F.logdet() - reference):.1e} |",
                flush=True,
            )
        median = {name: statistics.median(t) for name, t in times.items()}
        ratios.append(
            (
                n,
                median["left, index order"] / median["left, sorted"],
                median["right"] / median["left, sorted"],
            )
        )
        del factors
        models.append((n, tile_times(A)))
    print("\n| n | index order / sorted (left) | right / left (sorted) |")
    print("|---|---|---|")
    for n, sorting, right in ratios:
        print(f"| {n} | {sorting:.2f} | {right:.2f} |")
    print(
        "\n|dlogdet| = |logdet - logdet(left, sorted)|; MB = factor nbytes / 1e6; "
        "ratios of median factor times (> 1: the second is faster)."
    )

    print(
        "\nScheduling model (left-looking; per-tile ARA times on one thread, "
        "list-scheduled per column)\n"
    )
    print(
        "| n | tiles s (serial) | corr(estimate, s) | threads | index order s | sorted s | bound s "
        "| index / sorted |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n, columns in models:
        total = sum(seconds.sum() for _, seconds in columns)
        work, seconds = (np.concatenate(part) for part in zip(*columns, strict=True))
        corr = np.corrcoef(work, seconds)[0, 1]
        for workers in args.model_threads:
            index, ranked, bound = scheduling_model(columns, workers)
            print(
                f"| {n} | {total:.2f} | {corr:.2f} | {workers} | {index:.3f} | {ranked:.3f} "
                f"| {bound:.3f} | {index / ranked:.3f} |"
            )


if __name__ == "__main__":
    main()
