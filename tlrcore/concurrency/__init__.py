"""Where tlrcore runs its work: thread pools, worker processes and the C heap.

Results never depend on it: every tile has its own seed and its result is stored by tile
index, so a factor is bit-identical from run to run, for any number of threads, and
whether its tiles were compressed in threads or in worker processes.

Modules
-------
threads
    The tile pool (:func:`tile_pool`: a thread pool of :func:`workers` threads, BLAS on
    one thread each, new arrays on small pages), BLAS pinned to one thread
    (:func:`one_blas_thread`, :func:`one_blas_thread_block`), per-tile and per-column
    seeds, work started in descending order of cost, and the tile-column counters of
    :func:`progress`.
heap
    The glibc allocator tuned for short-lived tiles: the mmap threshold pinned
    (:func:`pin_mmap_threshold`), transparent huge pages off around tile work
    (:func:`small_pages`), free heap pages handed back (:func:`trim_heap`).
processes
    Worker processes forked for work that holds the GIL (:func:`hold`, :class:`Shared`,
    :func:`call`); what a worker computes for a tile column is
    :mod:`tlrcore.compress.in_processes`.
spool
    Memory files shared with the worker processes, through which their results come back
    without a copy (:class:`Spool`).

Environment
-----------
``TLRCORE_NUM_THREADS``
    Threads of the tile pool (default: the CPU count, at most 8).
``TLRCORE_PROCESSES``
    ``1``: worker processes for every CPU build; ``0``: never; unset: see
    :mod:`tlrcore.concurrency.processes`.
``TLRCORE_MALLOC_TUNING``
    ``0`` leaves the C allocator and NumPy's huge-page advice alone.
"""

from tlrcore.concurrency import heap, processes, spool, threads
from tlrcore.concurrency.heap import (
    numpy_allocated_bytes,
    pin_mmap_threshold,
    small_pages,
    trim_heap,
)
from tlrcore.concurrency.processes import Shared, hold
from tlrcore.concurrency.threads import (
    column_progress,
    column_seeds,
    one_blas_thread,
    one_blas_thread_block,
    progress,
    runner,
    tile_pool,
    tile_seeds,
    tile_work,
    workers,
)

__all__ = [
    "Shared",
    "column_progress",
    "column_seeds",
    "heap",
    "hold",
    "numpy_allocated_bytes",
    "one_blas_thread",
    "one_blas_thread_block",
    "pin_mmap_threshold",
    "processes",
    "progress",
    "runner",
    "small_pages",
    "spool",
    "threads",
    "tile_pool",
    "tile_seeds",
    "tile_work",
    "trim_heap",
    "workers",
]
