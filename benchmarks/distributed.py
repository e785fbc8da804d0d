"""One TLR log-likelihood on a 2-worker Dask cluster against the same in one process.

One Gaussian log-likelihood through the TLR Cholesky, on a 2-worker Dask LocalCluster
(:mod:`tlrcore.distributed`) and, as the baseline, in one process, side by side. For
each n: the time of one log-likelihood (build the TLR covariance from its generator,
factor with ``overwrite_a=True``, ``log det`` and ``||L^{-1} z||^2``), the peak resident
memory of the in-process run and of each worker, the tasks the workers ran, the bytes
they sent each other, and the relative difference of the two log-likelihoods.

The in-process run is a fresh subprocess (its peak memory is its own); the distributed
run starts a fresh ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``
for each repeat (the workers' peaks are their own) and is timed from the first task
submission, without the cluster start-up. Ratios are distributed over in-process, each
side the median of ``--repeats`` runs in this invocation.

Kernel: exponential, range 0.1, variance 1, nugget 1e-2, on uniform sites in the unit
square ordered by a k-d tree (geostat.ordering); tile size
``geostat.ordering.auto_tile_size`` unless ``--tile``.

The distributed run builds the matrix with ``from_generator(..., wait=False)``, so the
tiles are generated just before the factorization consumes them.

Run: ``python benchmarks/distributed.py --n 16384 32768 --tile 2048 --repeats 1 --save
runs`` and ``python benchmarks/distributed.py --n 65536 --repeats 3 --save runs``.

Output: a table on standard output, one row per n. With ``--save PREFIX``, each n's
first distributed run is also written as JSON to ``PREFIX{n}.json`` (e.g.
``runs65536.json``): times, peak and base memory, tasks, bytes sent, mean rank, the
client's serial set-up time and every task's duration, which
``benchmarks/distributed_model.py`` calibrates on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy.spatial.distance import cdist

# This file's name would shadow the `distributed` package: drop its folder from the path.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

RANGE, NUGGET, ACCURACY = 0.1, 1e-2, 1e-8
#: The environment at start: a LocalCluster sets OMP_NUM_THREADS=1 (and more) for its
#: workers in this process's environment and leaves it there, which would make every
#: later in-process run use one BLAS thread.
ENVIRONMENT = dict(os.environ)


class Exponential:
    """``exp(-|x - y| / range) + nugget [x == y]`` on fixed sites (picklable)."""

    def __init__(self, sites):
        self.sites = sites

    def __call__(self, rows, cols):
        block = np.exp(-cdist(self.sites[rows], self.sites[cols]) / RANGE)
        block[rows[:, None] == cols[None, :]] += NUGGET
        return block


def problem(n):
    """Ordered sites, the generator, the tile size and the observations of size `n`."""
    from geostat.ordering import auto_tile_size, order_points

    rng = np.random.default_rng(0)
    sites = rng.random((n, 2))
    tile = auto_tile_size(n)
    sites = sites[order_points(sites, "kdtree", tile)]
    return Exponential(sites), tile, rng.standard_normal(n)


def loglik(L, z):
    """``-(z^T (L L^T)^{-1} z + log det(L L^T) + n log 2 pi) / 2``."""
    y = L.solve_lower(z)
    return -0.5 * (float(y @ y) + L.logdet() + z.size * math.log(2 * math.pi))


def in_process(n, tile=None):
    import tlrcore

    block, auto_tile, z = problem(n)
    tile = tile or auto_tile
    start = time.perf_counter()
    A = tlrcore.TLRMatrix.from_generator(block, n, tile, accuracy=ACCURACY)
    value = loglik(tlrcore.cholesky(A, overwrite_a=True), z)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "peak_mb": peak, "value": value}


def worker_stats(dask_worker):
    return {
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tasks": dask_worker.state.executed_count,
        "sent_mb": dask_worker.transfer_outgoing_bytes_total / 1e6,
    }


def distributed(n, tile=None):
    """One distributed log-likelihood on a fresh 2-worker LocalCluster, with what
    ``benchmarks/distributed_model.py`` calibrates on: each task's compute time (Dask task
    stream), the factor's mean off-diagonal rank, the serial set-up on the client, and the
    workers' resident base before the run."""
    from distributed import Client, LocalCluster, get_task_stream

    import tlrcore.distributed as td

    block, auto_tile, z = problem(n)
    tile = tile or auto_tile
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        base = max(s["peak_mb"] for s in client.run(worker_stats).values())
        with get_task_stream(client) as stream:
            start = time.perf_counter()
            A = td.DistributedTLRMatrix.from_generator(
                client, block, n, tile, accuracy=ACCURACY, wait=False
            )
            serial = time.perf_counter() - start
            L = td.cholesky(A, overwrite_a=True)
            value = loglik(L, z)
            seconds = time.perf_counter() - start
        stats = list(client.run(worker_stats).values())
        ranks = L.ranks
    off = ranks[np.tril_indices(ranks.shape[0], -1)]
    return {
        "n": n,
        "tile": tile,
        "workers": 2,
        "seconds": seconds,
        "serial_seconds": serial,
        "value": value,
        "peak_mb": max(s["peak_mb"] for s in stats),
        "worker_base_mb": base,
        "tasks": sum(s["tasks"] for s in stats),
        "sent_mb": sum(s["sent_mb"] for s in stats),
        "mean_rank": float(off.mean()) if off.size else 0.0,
        "durations": task_durations(stream.data),
    }


def task_durations(records):
    """``{kind: {"i,k": seconds}}`` of compute time per task, the kind from the key name
    ``tlr-{kind}-{hex}`` of :mod:`tlrcore.distributed` (tuple keys only)."""
    out = {}
    for record in records:
        key = record["key"]
        if not isinstance(key, tuple):
            continue
        kind = key[0].removeprefix("tlr-").rsplit("-", 1)[0]
        seconds = sum(
            s["stop"] - s["start"] for s in record["startstops"] if s["action"] == "compute"
        )
        out.setdefault(kind, {})[",".join(map(str, key[1:]))] = seconds
    return out


def child(n, tile=None):
    """The in-process run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(n)] + (["--tile", str(tile)] if tile else []),
        check=True,
        capture_output=True,
        text=True,
        env=ENVIRONMENT,
    )
    return json.loads(out.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[16384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--tile", type=int, help="tile size (default: geostat.ordering.auto_tile_size)"
    )
    parser.add_argument(
        "--save",
        metavar="PREFIX",
        help="write each n's first distributed run to PREFIX{n}.json (for distributed_model.py)",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(in_process(args.child, args.tile)))
        return
    print(
        f"{'n':>7} {'in-proc s':>9} {'dask s':>8} {'time x':>6} {'in-proc MB':>10} "
        f"{'worker MB':>9} {'mem x':>6} {'tasks':>6} {'sent MB':>8} {'|dloglik|/|loglik|':>18}"
    )
    for n in args.n:
        local = [child(n, args.tile) for _ in range(args.repeats)]
        remote = [distributed(n, args.tile) for _ in range(args.repeats)]
        if args.save:
            from geostat.data.atomic import atomic_write_text

            atomic_write_text(f"{args.save}{n}.json", json.dumps(remote[0], allow_nan=False))
        t_local = statistics.median(r["seconds"] for r in local)
        t_remote = statistics.median(r["seconds"] for r in remote)
        m_local = statistics.median(r["peak_mb"] for r in local)
        m_remote = statistics.median(r["peak_mb"] for r in remote)
        diff = abs(remote[0]["value"] - local[0]["value"]) / abs(local[0]["value"])
        print(
            f"{n:>7} {t_local:>9.2f} {t_remote:>8.2f} {t_remote / t_local:>6.2f} "
            f"{m_local:>10.0f} {m_remote:>9.0f} {m_remote / m_local:>6.2f} "
            f"{remote[0]['tasks']:>6} {remote[0]['sent_mb']:>8.1f} {diff:>18.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
