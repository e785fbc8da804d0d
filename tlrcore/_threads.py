"""Threads, per-tile seeds and BLAS pinning, shared by every tile algorithm of tlrcore.

Tiles of one column are independent and run on a thread pool with BLAS on one thread
each: parallelism is across tiles. Measured on the 2-core development machine (shared,
OpenBLAS): at n = 2000 every dense factorization of :mod:`tlrcore.dense` ran 4-7 times
faster on one BLAS thread than on two, because the per-column matrix-vector products are
too small to amortize thread synchronization.

Every tile has its own seed and its result is stored by tile index, so a factor is
bit-identical from run to run and for any number of threads.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits

__all__ = [
    "column_seeds",
    "map_by_work",
    "one_blas_thread",
    "runner",
    "start_by_work",
    "tile_pool",
    "tile_seeds",
    "workers",
]

_controller = None


def workers():
    """Threads that compress tiles: ``TLRCORE_NUM_THREADS`` or the CPU count (at most 8).

    Each tile's BLAS calls run on one thread; parallelism is across tiles. With one
    thread the tiles are compressed in the calling thread (profilers then see the work).
    """
    value = os.environ.get("TLRCORE_NUM_THREADS")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"TLRCORE_NUM_THREADS={value!r} must be a positive integer.")
        return int(value)
    return max(1, min(os.cpu_count() or 1, 8))


@contextmanager
def tile_pool(count):
    """BLAS pinned to one thread, and a thread pool of `count` workers (None for one).

    Yields
    ------
    concurrent.futures.ThreadPoolExecutor or None
        None when ``count <= 1``: the work then runs in the calling thread.
    """
    with threadpool_limits(1, "blas"), (ThreadPoolExecutor(count) if count > 1 else nullcontext()) as pool:
        yield pool


def runner(pool):
    """``pool.map``, or the built-in ``map`` without a pool."""
    return pool.map if pool is not None else map


def tile_seeds(random_state, n_tiles):
    """``(n_tiles, n_tiles)`` seeds, one per tile, drawn from `random_state`."""
    return np.random.default_rng(random_state).integers(0, 2**63 - 1, size=(n_tiles, n_tiles))


def column_seeds(random_state, n_tiles):
    """``(n_tiles,)`` seeds, one per tile column (the batched factorization samples a
    whole column at once), drawn from `random_state`."""
    return np.random.default_rng(random_state).integers(0, 2**62, size=n_tiles)


def one_blas_thread(func):
    """Decorator: run `func` with BLAS limited to one thread."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        global _controller
        if _controller is None:
            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return wrapper


def start_by_work(pool, func, items, work):
    """Start ``func(x)`` for every item, most `work` first; return a collector.

    With a thread pool the calls are queued in that order and each thread takes the next
    as it becomes free (the calling thread is free meanwhile); without one they run when
    the collector is called. The collector returns the results in the order of `items`.
    """
    if pool is None:
        return lambda: [func(item) for item in items]
    futures = {pos: pool.submit(func, items[pos]) for pos in sorted(range(len(items)), key=lambda pos: -work[pos])}
    return lambda: [futures[pos].result() for pos in range(len(items))]


def map_by_work(run, func, items, work):
    """``[func(x) for x in items]``, started in descending order of `work`.

    `run` is ``map`` or a thread pool's ``map``: the pool queues the calls in that order
    and each thread takes the next one as it becomes free, so the most expensive calls
    start first and the cheap ones fill the gaps. Ties keep the order of `items`.
    """
    order = sorted(range(len(items)), key=lambda pos: -work[pos])
    results = dict(zip(order, run(lambda pos: func(items[pos]), order)))
    return [results[pos] for pos in range(len(items))]
