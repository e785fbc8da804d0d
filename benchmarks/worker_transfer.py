"""Tile factors from forked worker processes to the caller: through the pool's pipe
(pickled, as before) against spool files in ``/dev/shm`` (:mod:`tlrcore.compress._spool`).

Each of `--columns` tasks makes the factors of one tile column, `--tiles` pairs ``(U, V)``
of shape ``(--rows, --rank)`` (:class:`tlrcore.compress._recompress.LowRank`), in one of
two forked workers, and returns them either pickled or spooled. The caller receives them
as :mod:`tlrcore.compress.worker_processes` does (``future.result()``, then
:func:`~tlrcore.compress._spool.unspool`), the two ways alternating, each `--repeats`
times. Printed: the wall time and the caller's CPU time of each way (medians), and their
ratios. The defaults send 64 columns of 21 MB, about the 1.3 GB of a 131,072-site build.

Run: ``python benchmarks/worker_transfer.py`` (or ``--columns 32 --repeats 5``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from tlrcore.compress._recompress import LowRank
from tlrcore.compress._spool import remove_spools, spool, unspool

PREFIX = "tlrcore-benchmark-"


def factors(seed, tiles, rows, rank):
    rng = np.random.default_rng(seed)
    return [LowRank(rng.standard_normal((rows, rank)), rng.standard_normal((rows, rank)), 1e-9, 1e-9)
            for _ in range(tiles)]


def pickled(seed, tiles, rows, rank):
    return factors(seed, tiles, rows, rank)


def spooled(seed, tiles, rows, rank):
    return spool(factors(seed, tiles, rows, rank), PREFIX)


def receive(pool, task, args):
    """Wall and caller CPU seconds to receive every column of `task`."""
    wall, cpu = time.perf_counter(), time.process_time()
    futures = [pool.submit(task, column, *args.shape) for column in range(args.columns)]
    received = [unspool(future.result()) for future in futures]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(received) == args.columns and all(len(column) == args.shape[0] for column in received)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", type=int, default=64)
    parser.add_argument("--tiles", type=int, default=32)
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--rank", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.shape = (args.tiles, args.rows, args.rank)
    gigabytes = args.columns * args.tiles * 2 * args.rows * args.rank * 8 / 1e9
    times = {"pipe": [], "spool": []}
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        try:
            receive(pool, pickled, argparse.Namespace(columns=2, shape=args.shape))  # fork and warm up
            for _ in range(args.repeats):
                times["pipe"].append(receive(pool, pickled, args))
                times["spool"].append(receive(pool, spooled, args))
        finally:
            remove_spools(PREFIX)
    print(f"{args.columns} columns of {args.tiles} tiles, U and V {args.rows} x {args.rank}: "
          f"{gigabytes:.2f} GB; medians of {args.repeats}")
    medians = {way: [statistics.median(t[i] for t in runs) for i in range(2)] for way, runs in times.items()}
    for way, (wall, cpu) in medians.items():
        print(f"  {way:6s} wall {wall:6.2f} s   caller CPU {cpu:6.2f} s")
    print(f"  spool / pipe: wall {medians['spool'][0] / medians['pipe'][0]:.2f}, "
          f"caller CPU {medians['spool'][1] / medians['pipe'][1]:.2f}")


if __name__ == "__main__":
    main()
