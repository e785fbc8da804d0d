"""Time and memory of the distributed TLR log-likelihood, predicted from measured runs.

A model of the distributed TLR log-likelihood, calibrated on measured runs, predicts its
time and memory at other sizes and worker counts; its baseline is a measured run left out
of the calibration (``--check``), whose time and peak memory it predicts.

The runs of ``benchmarks/distributed.py --save PREFIX`` record, for one tile size ``b``,
the compute time of every task of the factorization (from the Dask task stream) and the
factor's ranks. The model is the graph of :mod:`tlrcore.distributed.factorize` itself,
with task durations fitted on those runs:

* ``A(i, k)``, building an off-diagonal tile, ``c_A rbar`` (ACA reads ``rbar`` rows and
  columns of ``b`` entries: proportional to the rank, not dependent on ``k``), fitted on
  the tasks that compress several tiles of a column together, per tile; it waits for
  ``D(k - BUILD_AHEAD)``, as the factorization's graph has it;
* ``R(i, k)``, the sampled update of ``L(i, k)``, ``a_R + c_R k rbar``: its products with
  the stacked factors ``[U(i, 0) | ... ]`` and ``[U(k, 0) | ... ]`` grow with their
  width, ``k`` tiles of mean rank ``rbar``;
* ``Q(k)``, diagonal tile ``k`` generated and updated by the columns before ``k - 1``
  once row ``k`` has them, ``a_Q + c_Q (k - 2) rbar`` (the ``dsyrk`` of ``W``, ``b x (k -
  2) rbar``, after the tile's generation), off the critical chain;
* ``D(k)``, the last column's update and the ``b^3 / 3`` Cholesky, a constant ``a_D``;
* ``C(k)``, the column header, a constant ``a_C``; it is sent to the other ``P - 1``
  workers: ``[U(k, 0) | ... ]``, the ``V(k, j)`` and ``L(k, k)``, ``8 b (b + 2 rbar k)``
  bytes for the mean rank ``rbar``, at ``bandwidth``.

Least squares over every task of the calibration runs gives the coefficients. The mean
rank ``rbar`` of ``L`` at another ``n`` (tiles of a fixed size cover less of the domain
as ``n`` grows, and their ranks fall) comes from the ranks of ``A``: ACA of a random
sample of off-diagonal tiles of the same problem at that ``n`` (:func:`sampled_rank`,
cheap even at ``10^6``), times the ratio of ``L``'s mean rank to that sample's in the
calibration runs. A list scheduler then plays the graph on ``P`` single-threaded workers
with the rows placed cyclically and the priorities of the real graph (the chain
``R(k + 1, k) -> D(k + 1) -> C(k + 1)`` first, then earlier columns), a header's transfer
delaying the tiles of other workers that read it. Its makespan, plus the serial set-up
measured on the client (the diagonal tiles and the norm sample, scaled by ``n``), is the
predicted time.

Memory per worker: its rows of ``L`` (``16 b rbar`` bytes per tile, ``8 b^2`` per diagonal
tile), and a working set fitted on the runs (the most the measured peaks held beyond the
rows and the worker's resident base: tiles of ``A`` in flight, received headers).

Run: ``python benchmarks/distributed_model.py runs16384.json runs32768.json --check
runs65536.json`` (the files of ``benchmarks/distributed.py --save runs``) to fit on the
first files and compare the prediction with the last, and add ``--predict 1048576
--workers 16 32 64`` for a projection.

Output: the fitted coefficients, the check and the predictions on standard output; it
reads the JSON files named on the command line and writes nothing.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from pathlib import Path

import numpy as np

# this directory's distributed.py would shadow the dask.distributed package
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from tlrcore.distributed.factorize import BUILD_AHEAD  # noqa: E402
from tlrcore.distributed.matrix import COLUMN_TILES  # noqa: E402

#: Loopback on the calibration machine is far faster than a network: a 10 Gb/s link.
BANDWIDTH = 1.25e9


class Calibration:
    """Task-cost coefficients fitted on measured runs (dicts written by
    ``benchmarks/distributed.py --save``)."""

    def __init__(self, runs):
        self.tile = runs[0]["tile"]
        if any(run["tile"] != self.tile for run in runs):
            raise SystemExit(
                "calibrate on runs with one tile size (benchmarks/distributed.py --tile)"
            )
        self.build = (0.0, float(np.mean([_per_tile(run, "column-tiles") for run in runs])))
        self.update = _linear(runs, "row", lambda run, key: key[-1] * run["mean_rank"])
        self.prepared = _linear(
            runs, "diagonal-prepared", lambda run, key: key[-1] * run["mean_rank"]
        )
        self.diagonal = _mean(runs, "diagonal-task")
        self.header = _mean(runs, "column")
        self.rank_ratio = float(
            np.mean([run["mean_rank"] / sampled_rank(run["n"], self.tile) for run in runs])
        )
        self.serial_per_site = float(np.mean([run["serial_seconds"] / run["n"] for run in runs]))
        self.base_mb = float(np.mean([run["worker_base_mb"] for run in runs]))
        self.working_mb = float(
            np.max(
                [
                    run["peak_mb"]
                    - run["worker_base_mb"]
                    - _row_mb(run["n"], self.tile, run["mean_rank"], run["workers"])
                    for run in runs
                ]
            )
        )

    def mean_rank(self, n):
        """Predicted mean off-diagonal rank of ``L`` at size `n`."""
        return self.rank_ratio * sampled_rank(n, self.tile)

    def predict(self, n, workers, bandwidth=BANDWIDTH):
        """``(seconds, peak MB per worker, tasks, GB sent, mean rank)`` of one log-likelihood."""
        n_t = math.ceil(n / self.tile)
        rank = self.mean_rank(n)
        makespan, sent = _simulate(self, n_t, workers, bandwidth, rank)
        seconds = makespan + self.serial_per_site * n
        memory = self.base_mb + _row_mb(n, self.tile, rank, workers) + self.working_mb
        # a sampled update per tile, a compression per COLUMN_TILES tiles of a column and
        # per critical tile, and seven per diagonal tile (measure, prepare, factor and its
        # parts, log-determinant, header)
        pairs = n_t * (n_t - 1) // 2
        tasks = pairs + math.ceil(pairs / COLUMN_TILES) + n_t + 7 * n_t
        return seconds, memory, tasks, sent / 1e9, rank


def sampled_rank(n, tile, samples=32):
    """Mean ACA rank of `samples` random off-diagonal tiles of the benchmark's covariance
    at size `n` (its sites, order, kernel and tolerance ``accuracy ||A||_F / n_tiles``, with
    ``||A||_F`` from 10^6 random entries)."""
    from tlrcore.compress.aca import aca_compress

    block, _, _ = _benchmark().problem(n)
    rng = np.random.default_rng(1)
    i, j = rng.integers(0, n, size=(2, 10**6))
    squares = np.mean(
        np.concatenate(
            [block(i[k : k + 1000], j[k : k + 1000]).ravel() ** 2 for k in range(0, 10**6, 10**5)]
        )
    )
    n_t = math.ceil(n / tile)
    tolerance = _benchmark().ACCURACY * n * math.sqrt(squares) / n_t
    ranks = []
    for _ in range(samples):
        a, b = sorted(rng.choice(n_t, size=2, replace=False))
        rows = np.arange(b * tile, min((b + 1) * tile, n))
        cols = np.arange(a * tile, min((a + 1) * tile, n))
        U, _ = aca_compress(
            lambda idx, rows=rows, cols=cols: block(rows[idx], cols),
            lambda idx, rows=rows, cols=cols: block(rows, cols[idx]),
            (rows.size, cols.size),
            tolerance,
        )
        ranks.append(U.shape[1])
    return float(np.mean(ranks))


def _benchmark():
    """``benchmarks/distributed.py`` as a module (its name would shadow the package)."""
    import importlib.util
    import sys
    from pathlib import Path

    if "distributed_benchmark" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "distributed_benchmark", Path(__file__).with_name("distributed.py")
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["distributed_benchmark"] = module
    return sys.modules["distributed_benchmark"]


def _mean(runs, kind):
    """Mean compute seconds of the tasks ``kind`` of `runs`."""
    return float(np.mean([d for run in runs for d in run["durations"][kind].values()]))


def _per_tile(run, kind):
    """Compute seconds of the tasks ``kind`` of `run` per off-diagonal tile and unit of its
    mean rank."""
    n_t = math.ceil(run["n"] / run["tile"])
    total = sum(run["durations"][kind].values())
    return total / (n_t * (n_t - 1) / 2) / run["mean_rank"]


def _linear(runs, kind, feature, intercept=True):
    """``(a, c)`` of the least-squares fit ``duration = a + c feature(run, key)`` over the
    tasks ``kind`` (``key``: the task's tile indices); ``a = 0`` without `intercept`."""
    xs, ds = [], []
    for run in runs:
        for key, duration in run["durations"][kind].items():
            xs.append(feature(run, [int(part) for part in key.split(",")]))
            ds.append(duration)
    design = np.column_stack([np.ones(len(xs)) if intercept else np.zeros(len(xs)), xs])
    coef, *_ = np.linalg.lstsq(design, np.asarray(ds), rcond=None)
    return float(coef[0]), float(coef[1])


def _row_mb(n, tile, rank, workers):
    """Megabytes of the factor's rows one worker holds: ``L`` is ``n_t (n_t - 1) / 2`` tiles
    ``U, V`` of ``b x rbar`` and ``n_t`` diagonal tiles kept as triangles (``b (b + 3) / 2``
    entries with their diagonals)."""
    n_t = math.ceil(n / tile)
    return 8 * (n_t * (n_t - 1) * tile * rank + n_t * tile * (tile + 3) / 2) / workers / 2**20


def _simulate(cal, n_t, workers, bandwidth, rank):
    """Makespan of the factorization graph on `workers` single-threaded workers, and the
    bytes of the headers sent."""
    owner = [i % workers for i in range(n_t)]
    a_R, c_R = cal.update
    a_Q, c_Q = cal.prepared
    a_A, c_A = cal.build
    cost = {
        "A": lambda k: a_A + c_A * rank,
        "R": lambda k: a_R + c_R * k * rank,
        "Q": lambda k: a_Q + c_Q * k * rank,
        "D": lambda k: cal.diagonal,
        "C": lambda k: cal.header,
    }

    def priority(task):
        kind, i, k = task
        critical = kind in ("D", "C") or (kind in ("R", "A") and i == k + 1)
        return (0, k) if critical else (1, k, i)

    needs = {}
    for k in range(n_t):
        needs["D", k, k] = [("R", k, k - 1)] if k else []
        if k >= 2:
            needs["Q", k, k - 2] = [("R", k, k - 2)]
            needs["D", k, k].append(("Q", k, k - 2))
        needs["C", k, k] = [("D", k, k)]
        for i in range(k + 1, n_t):
            # column k is compressed once diagonal tile k - BUILD_AHEAD is factored
            needs["A", i, k] = [("D", k - BUILD_AHEAD, k - BUILD_AHEAD)] if k >= BUILD_AHEAD else []
            needs["R", i, k] = [("A", i, k), ("C", k, k)] + ([("R", i, k - 1)] if k else [])
    users = {task: [] for task in needs}
    for task, deps in needs.items():
        for dep in deps:
            users[dep].append(task)
    waiting = {task: len(deps) for task, deps in needs.items()}
    arrival = dict.fromkeys(needs, 0.0)
    queues = [[] for _ in range(workers)]
    for task, count in waiting.items():
        if count == 0:
            heapq.heappush(queues[owner[task[1]]], (priority(task), task))
    idle, running, incoming = set(range(workers)), [], []
    now, sent = 0.0, 0.0
    while any(queues) or running or incoming:
        for w in sorted(idle):
            if queues[w]:
                _, task = heapq.heappop(queues[w])
                idle.discard(w)
                heapq.heappush(running, (now + cost[task[0]](task[2]), w, task))
                if task[0] == "C":
                    sent += _header_bytes(cal.tile, rank, task[2]) * (workers - 1)
        now = min(running[0][0] if running else math.inf, incoming[0][0] if incoming else math.inf)
        while incoming and incoming[0][0] <= now:
            _, task = heapq.heappop(incoming)
            heapq.heappush(queues[owner[task[1]]], (priority(task), task))
        while running and running[0][0] <= now:
            finish, w, task = heapq.heappop(running)
            idle.add(w)
            for user in users[task]:
                delay = (
                    _header_bytes(cal.tile, rank, task[2]) / bandwidth
                    if task[0] == "C" and owner[user[1]] != w
                    else 0.0
                )
                arrival[user] = max(arrival[user], finish + delay)
                waiting[user] -= 1
                if waiting[user] == 0:
                    if arrival[user] <= now:
                        heapq.heappush(queues[owner[user[1]]], (priority(user), user))
                    else:
                        heapq.heappush(incoming, (arrival[user], user))
    return now, sent


def _header_bytes(tile, rank, k):
    return 8.0 * tile * (tile + 2 * rank * k)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs", nargs="+", help="JSON files of benchmarks/distributed.py --save (calibration)"
    )
    parser.add_argument("--check", help="a measured run to predict (not used in the fit)")
    parser.add_argument("--predict", type=int, nargs="*", default=[])
    parser.add_argument("--workers", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument(
        "--bandwidth", type=float, default=BANDWIDTH, help="bytes/s between workers"
    )
    args = parser.parse_args()
    runs = [json.load(open(path)) for path in args.runs]
    cal = Calibration(runs)
    print(
        f"tile {cal.tile}: A tile {cal.build[0]:.3f} + {cal.build[1]:.2e} rbar s, "
        f"R(i, k) {cal.update[0]:.3f} + {cal.update[1]:.2e} k rbar s, "
        f"Q(k) {cal.prepared[0]:.3f} + {cal.prepared[1]:.2e} (k - 2) rbar s, "
        f"D(k) {cal.diagonal:.3f} s, header "
        f"{cal.header:.3f} s, rank of L / sampled rank of A {cal.rank_ratio:.2f}, serial "
        f"{cal.serial_per_site * 1e6:.2f} us/site, worker base {cal.base_mb:.0f} MB, "
        f"working set {cal.working_mb:.0f} MB"
    )
    if args.check:
        run = json.load(open(args.check))
        seconds, memory, _, _, rank = cal.predict(run["n"], run["workers"], bandwidth=float("inf"))
        print(
            f"check n={run['n']} on {run['workers']} workers "
            f"(mean rank predicted {rank:.1f}, measured {run['mean_rank']:.1f}): "
            f"predicted {seconds:.1f} s, measured {run['seconds']:.1f} s "
            f"({seconds / run['seconds'] - 1:+.0%}); peak per worker predicted "
            f"{memory:.0f} MB, measured {run['peak_mb']:.0f} MB "
            f"({memory / run['peak_mb'] - 1:+.0%})"
        )
    for n in args.predict:
        for workers in args.workers:
            seconds, memory, tasks, sent, rank = cal.predict(n, workers, args.bandwidth)
            print(
                f"n={n} on {workers} workers (mean rank {rank:.1f}): {seconds:.0f} s, "
                f"{memory / 1024:.1f} GB per worker, {tasks} tasks, {sent:.0f} GB sent"
            )


if __name__ == "__main__":
    main()
