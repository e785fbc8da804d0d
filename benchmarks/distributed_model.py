"""A model of the distributed TLR log-likelihood, calibrated on measured runs, that
predicts its time and memory at other sizes and worker counts.

The runs of ``benchmarks/distributed.py --save FILE`` record, for one tile size ``b``,
the compute time of every task of the factorization (from the Dask task stream) and the
factor's ranks. The model is the graph of :mod:`tlrcore.distributed.factorize` itself,
with task durations fitted on those runs:

* ``A(i, k)``, building an off-diagonal tile: a constant ``a_A`` (its cost depends on
  ``b`` and its rank, not on ``k``);
* ``R(i, k)``, the sampled update of ``L(i, k)``, ``a_R + c_R k``: its products with the
  stacked factors ``[U(i, 0) | ... ]`` and ``[U(k, 0) | ... ]`` grow with the ``k``
  tiles on the left;
* ``D(k)``, the diagonal update and Cholesky, ``a_D + c_D k`` (the ``dsyrk`` of ``W``
  with ``k`` rank blocks, then a ``b^3 / 3`` Cholesky);
* ``C(k)``, the column header, a constant ``a_C``; it is sent to the other ``P - 1``
  workers: ``[U(k, 0) | ... ]``, the ``V(k, j)`` and ``L(k, k)``, ``8 b (b + 2 rbar k)``
  bytes for the mean rank ``rbar``, at ``bandwidth``.

Least squares over every task of the calibration runs gives the coefficients. A list
scheduler then plays the graph on ``P`` single-threaded workers with the rows placed
cyclically and the priorities of the real graph (the chain ``R(k + 1, k) -> D(k + 1) ->
C(k + 1)`` first, then earlier columns), a header's transfer delaying the tiles of other
workers that read it. Its makespan, plus the serial set-up measured on the client (the
diagonal tiles and the norm sample, scaled by ``n``), is the predicted time.

Memory per worker: its rows of ``L`` (``16 b rbar`` bytes per tile, ``8 b^2`` per diagonal
tile), and a working set fitted on the runs (the most the measured peaks held beyond the
rows and the worker's resident base: tiles of ``A`` in flight, received headers).

Run ``python benchmarks/distributed_model.py runs16k.json runs32k.json --check runs65k.json``
to fit on the first files and compare the prediction with the last, and ``--predict
1048576 --workers 16 32 64`` for a projection.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math

import numpy as np

#: Loopback on the calibration machine is far faster than a network: a 10 Gb/s link.
BANDWIDTH = 1.25e9


class Calibration:
    """Task-cost coefficients fitted on measured runs (dicts written by
    ``benchmarks/distributed.py --save``)."""

    def __init__(self, runs):
        self.tile = runs[0]["tile"]
        if any(run["tile"] != self.tile for run in runs):
            raise SystemExit("calibrate on runs with one tile size (benchmarks/distributed.py --tile)")
        self.build = float(np.mean([d for run in runs for d in run["durations"]["tile"].values()]))
        self.update = _linear(runs, "row")
        self.diagonal = _linear(runs, "diagonal-factor")
        self.header = float(np.mean([d for run in runs for d in run["durations"]["column"].values()]))
        self.rank = float(np.mean([run["mean_rank"] for run in runs]))
        self.serial_per_site = float(np.mean([run["serial_seconds"] / run["n"] for run in runs]))
        self.base_mb = float(np.mean([run["worker_base_mb"] for run in runs]))
        self.working_mb = float(np.max([run["worker_peak_mb"] - run["worker_base_mb"] - _row_mb(run["n"], self.tile,
                                        run["mean_rank"], run["workers"]) for run in runs]))

    def predict(self, n, workers, bandwidth=BANDWIDTH):
        """``(seconds, peak MB per worker, tasks, GB sent)`` of one log-likelihood."""
        n_t = math.ceil(n / self.tile)
        makespan, sent = _simulate(self, n_t, workers, bandwidth)
        seconds = makespan + self.serial_per_site * n
        memory = self.base_mb + _row_mb(n, self.tile, self.rank, workers) + self.working_mb
        tasks = n_t * (n_t - 1) + 3 * n_t
        return seconds, memory, tasks, sent / 1e9


def _linear(runs, kind):
    """``(a, c)`` of the least-squares fit ``duration = a + c k`` over the tasks ``kind``."""
    ks, ds = [], []
    for run in runs:
        for key, duration in run["durations"][kind].items():
            ks.append(int(key.split(",")[-1]))
            ds.append(duration)
    design = np.column_stack([np.ones(len(ks)), ks])
    coef, *_ = np.linalg.lstsq(design, np.asarray(ds), rcond=None)
    return float(coef[0]), float(coef[1])


def _row_mb(n, tile, rank, workers):
    """Megabytes of the factor's rows one worker holds: ``L`` is ``n_t (n_t - 1) / 2`` tiles
    ``U, V`` of ``b x rbar`` and ``n_t`` dense ``b x b`` diagonal tiles."""
    n_t = math.ceil(n / tile)
    return 8 * (n_t * (n_t - 1) * tile * rank + n_t * tile * tile) / workers / 2**20


def _simulate(cal, n_t, workers, bandwidth):
    """Makespan of the factorization graph on `workers` single-threaded workers, and the
    bytes of the headers sent."""
    owner = [i % workers for i in range(n_t)]
    a_R, c_R = cal.update
    a_D, c_D = cal.diagonal
    cost = {"A": lambda k: cal.build, "R": lambda k: a_R + c_R * k, "D": lambda k: a_D + c_D * k,
            "C": lambda k: cal.header}

    def priority(task):
        kind, i, k = task
        critical = kind in ("D", "C") or (kind in ("R", "A") and i == k + 1)
        return (0, k) if critical else (1, k, i)

    needs = {}
    for k in range(n_t):
        needs["D", k, k] = [("R", k, k - 1)] if k else []
        needs["C", k, k] = [("D", k, k)]
        for i in range(k + 1, n_t):
            needs["A", i, k] = []
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
    idle, running = set(range(workers)), []
    now, sent = 0.0, 0.0
    while any(queues) or running:
        for w in sorted(idle):
            task = _pop_ready(queues[w], arrival, now)
            if task is not None:
                idle.discard(w)
                heapq.heappush(running, (now + cost[task[0]](task[2]), w, task))
                if task[0] == "C":
                    sent += _header_bytes(cal, task[2]) * (workers - 1)
        next_finish = running[0][0] if running else math.inf
        next_arrival = min((arrival[t] for w in idle for _, t in queues[w] if arrival[t] > now), default=math.inf)
        if next_arrival < next_finish:
            now = next_arrival
            continue
        now = next_finish
        while running and running[0][0] <= now:
            finish, w, task = heapq.heappop(running)
            idle.add(w)
            for user in users[task]:
                delay = _header_bytes(cal, task[2]) / bandwidth if task[0] == "C" and owner[user[1]] != w else 0.0
                arrival[user] = max(arrival[user], finish + delay)
                waiting[user] -= 1
                if waiting[user] == 0:
                    heapq.heappush(queues[owner[user[1]]], (priority(user), user))
    return now, sent


def _pop_ready(queue, arrival, now):
    """The highest-priority task of `queue` whose inputs have arrived by `now` (removed),
    or None."""
    held, task = [], None
    while queue:
        entry = heapq.heappop(queue)
        if arrival[entry[1]] <= now:
            task = entry[1]
            break
        held.append(entry)
    for entry in held:
        heapq.heappush(queue, entry)
    return task


def _header_bytes(cal, k):
    return 8.0 * cal.tile * (cal.tile + 2 * cal.rank * k)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="JSON files of benchmarks/distributed.py --save (calibration)")
    parser.add_argument("--check", help="a measured run to predict (not used in the fit)")
    parser.add_argument("--predict", type=int, nargs="*", default=[])
    parser.add_argument("--workers", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--bandwidth", type=float, default=BANDWIDTH, help="bytes/s between workers")
    args = parser.parse_args()
    runs = [json.load(open(path)) for path in args.runs]
    cal = Calibration(runs)
    print(f"tile {cal.tile}: A tile {cal.build:.3f} s, R(i, k) {cal.update[0]:.3f} + {cal.update[1]:.5f} k s, "
          f"D(k) {cal.diagonal[0]:.3f} + {cal.diagonal[1]:.5f} k s, mean rank {cal.rank:.1f}, "
          f"serial {cal.serial_per_site * 1e6:.2f} us/site, worker base {cal.base_mb:.0f} MB, "
          f"working set {cal.working_mb:.0f} MB")
    if args.check:
        run = json.load(open(args.check))
        seconds, memory, *_ = cal.predict(run["n"], run["workers"], bandwidth=float("inf"))
        print(f"check n={run['n']} on {run['workers']} workers: predicted {seconds:.1f} s, measured "
              f"{run['seconds']:.1f} s ({seconds / run['seconds'] - 1:+.0%}); peak per worker predicted "
              f"{memory:.0f} MB, measured {run['worker_peak_mb']:.0f} MB ({memory / run['worker_peak_mb'] - 1:+.0%})")
    for n in args.predict:
        for workers in args.workers:
            seconds, memory, tasks, sent = cal.predict(n, workers, args.bandwidth)
            print(f"n={n} on {workers} workers: {seconds:.0f} s, {memory / 1024:.1f} GB per worker, "
                  f"{tasks} tasks, {sent:.0f} GB sent")


if __name__ == "__main__":
    main()
