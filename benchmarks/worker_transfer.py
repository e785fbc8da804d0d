"""Tile factors from forked worker processes to the caller: through the pool's pipe
(pickled, the baseline) against the spool, a memory file shared with the workers
(:mod:`tlrcore.concurrency.spool`).

Each of `--columns` tasks makes the factors of one tile column, `--tiles` pairs ``(U, V)``
of shape ``(--rows, --rank)`` (:class:`tlrcore.compress.LowRank`), in one of
two forked workers, and returns them either pickled or spooled. The caller receives them
as :mod:`tlrcore.compress.in_processes` does in a build (two threads, each sending a
column and waiting for it: ``future.result()``, then
:func:`~tlrcore.concurrency.spool.unspool`, which maps the column's region), and keeps
every column until the last has come. A third way, ``spool+copy``, copies each mapped
array into a new one (the cost of a spool read into fresh arrays instead of mapped in
place). The ways alternate, each `--repeats` times. Printed: the wall time and the
caller's CPU time (user and system) of each way (medians), and their ratios to the pipe.
The defaults send 64 columns of 21 MB, about the 1.3 GB of a 131,072-site build.

Run: ``python benchmarks/worker_transfer.py`` (or ``--columns 32 --repeats 5``).

Output: a few lines on standard output, one per way; nothing is written to disk (the
spool is a memory file, released at exit).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np

from tlrcore.compress import LowRank
from tlrcore.concurrency.spool import Spool, unspool

#: Made before the workers are forked, which inherit it.
SPOOL = Spool.open(2)


def factors(seed, tiles, rows, rank):
    rng = np.random.default_rng(seed)
    return [
        LowRank(rng.standard_normal((rows, rank)), rng.standard_normal((rows, rank)), 1e-9, 1e-9)
        for _ in range(tiles)
    ]


def made(seed, tiles, rows, rank, spooling=None):
    """In a worker: the column's factors, written to the spool when `spooling` (``(region,
    size)``) is given."""
    sent = factors(seed, tiles, rows, rank)
    return sent if spooling is None else SPOOL.write(sent, *spooling)


def receive(pool, way, args):
    """Wall and caller CPU seconds to receive every column the `way` named."""
    size = 2 * args.tiles * (args.rows * args.rank * 8 + 64)

    def column(seed):
        region = None if way == "pipe" else SPOOL.region(size)
        try:
            spooling = None if region is None else (region, size)
            got = unspool(SPOOL, pool.submit(made, seed, *args.shape, spooling).result())
        finally:
            if region is not None:
                SPOOL.done(region)
        return [LowRank(np.array(U), np.array(V)) for U, V in got] if way == "spool+copy" else got

    wall, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(2) as threads:
        received = list(threads.map(column, range(args.columns)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(received) == args.columns and all(
        len(column) == args.shape[0] for column in received
    )
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
    if SPOOL is None:
        parser.exit(1, "no memory files on this system: nothing to compare\n")
    times = {"pipe": [], "spool": [], "spool+copy": []}
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        receive(
            pool,
            "pipe",
            argparse.Namespace(
                columns=2, tiles=args.tiles, rows=args.rows, rank=args.rank, shape=args.shape
            ),
        )  # fork and warm up
        for _ in range(args.repeats):
            for way in times:
                times[way].append(receive(pool, way, args))
    print(
        f"{args.columns} columns of {args.tiles} tiles, U and V {args.rows} x {args.rank}: "
        f"{gigabytes:.2f} GB; medians of {args.repeats}"
    )
    medians = {
        way: [statistics.median(t[i] for t in runs) for i in range(2)]
        for way, runs in times.items()
    }
    for way, (wall, cpu) in medians.items():
        print(
            f"  {way:10s} wall {wall:6.2f} s   caller CPU {cpu:6.2f} s   "
            f"/ pipe: wall {wall / medians['pipe'][0]:.2f}, "
            f"caller CPU {cpu / medians['pipe'][1]:.2f}"
        )


if __name__ == "__main__":
    main()
