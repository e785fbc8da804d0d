"""Where tlrcore runs its work: thread pools, worker processes, the C heap and spill files.

Results never depend on it: every tile has its own seed and its result is stored by tile
index, so a factor is bit-identical for any number of threads, whether its tiles were
compressed in threads or in worker processes. :mod:`~tlrcore.concurrency.threads`: the
tile pool, BLAS pinned to one thread, seeds, progress counters;
:mod:`~tlrcore.concurrency.heap`: the glibc allocator tuned for short-lived tiles;
:mod:`~tlrcore.concurrency.processes`: worker processes for work that holds the GIL;
:mod:`~tlrcore.concurrency.spool`: memory files for their results;
:mod:`~tlrcore.concurrency.spill`: finished factor rows moved to files.

Environment
-----------
``TLRCORE_NUM_THREADS``
    Threads of the tile pool (default: the CPU count, at most 8).
``TLRCORE_PROCESSES``
    ``1``: worker processes for every CPU build; ``0``: never; unset: see
    :mod:`tlrcore.concurrency.processes`.
``TLRCORE_MALLOC_TUNING``
    ``0`` leaves the C allocator and NumPy's huge-page advice alone.
``TLRCORE_SPILL_DIR``
    Directory of the files into which a large factorization moves its finished rows
    (default: the system's temporary directory; :data:`tlrcore.cholesky.left.SPILL_BYTES`).
"""

from tlrcore.concurrency import heap, processes, spill, spool, threads
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
    "spill",
    "spool",
    "threads",
    "tile_pool",
    "tile_seeds",
    "tile_work",
    "trim_heap",
    "workers",
]
