"""The ACA compression of a CPU TLR build's tile columns in worker processes
(:mod:`tlrcore.concurrency.processes`).

ACA runs in Python between its BLAS calls, so on tiles of 1024 it holds the GIL much of the
time and the tile pool's threads overlap poorly. When ACA advanced one pivot row and
column at a time, the off-diagonal compression of 8,192 co2 cells (28 tiles) took 1.66 s
on one thread, 1.34 s on two (1.24x) and 0.94 s in two processes (1.77x) on a 2-core AMD
machine, and a whole co2 8K fit (five builds) 13.1 s instead of 15.8 s (medians of 6).
With ACA in block steps (:mod:`tlrcore.compress.aca`) far less of it is Python: on a
2-core Intel machine a whole build of those cells took 0.45-0.49 s in processes against
0.56 s on threads (medians of 5), and whole co2 8K fits took the same time either way
(6.9-7.3 s, 4 pairs). On tiles of 2048 the processes gain with the build's size: 5 %
at 32,768 sites, 20 % at 131,072
(:data:`~tlrcore.concurrency.processes.AUTO_MIN_COLUMNS`).

Where the workers serve the build (:func:`tlrcore.concurrency.processes.enabled`), each
tile column of :meth:`tlrcore.TLRMatrix.from_generator` (``method="aca"``) is compressed
in a process of the pool: the block generator is pickled once per build and sent with
each column; the factors come back through the memory files that the workers share with
the caller (:mod:`tlrcore.concurrency.spool`), or pickled where none can be made. The
tiles are those the threads would make, bit for bit (the same operations on the same
entries). The generator runs in the workers, so its side effects (counters, caches) stay
there. A generator that does not pickle (a closure) or that the workers cannot unpickle
(a class defined after they were forked), or a pool that broke or could not start falls
back to the threads.
"""

from __future__ import annotations

import contextlib
import logging
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from tlrcore.compress.generated import CheckedBlock, compress_column
from tlrcore.concurrency import processes
from tlrcore.concurrency.spool import ALIGNMENT
from tlrcore.concurrency.threads import tile_work

__all__ = ["column_compressor"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def column_compressor(block, offsets, max_rank, local):
    """A context for one build, giving ``compress(j, tolerance)``: the factors of tile
    column `j` (tiles start at `offsets`), from a worker process when the workers serve
    the build (:func:`~tlrcore.concurrency.processes.enabled`) and `block` pickles, else
    (or once the pool broke) ``local(j, tolerance)``.

    Open it before the build's first tile: it forks the workers if they are not running,
    and a fork then copies no page of the build. (The caller's later writes to pages that
    exist when the workers are forked are copies: a factorization with ``overwrite_a``
    writes its diagonal factors into the tiles, and at 131,072 sites took 27.6-28.1 s
    instead of 20-21.5 s when the workers had been forked after the diagonal tiles.) It
    is a :func:`~tlrcore.concurrency.processes.hold` of its own, not lingering: workers
    that served a build outside any hold stop with it (idle ones would hold about 125 MB
    beside the factorization that follows a 131,072-site build, and a fork costs little
    beside such a build).
    """
    tile_size = int(np.max(np.diff(offsets)))
    enabled = processes.enabled(tile_size, len(offsets) - 1)
    payload = processes.pickled(block) if enabled else None
    if payload is None:
        yield local
        return
    build = processes.new_key()
    with processes.hold(tile_size, linger=False):
        processes.start()  # before the tiles: the tile pool's threads are idle
        if processes.broken():
            yield local
        else:
            yield _remote_compressor(build, payload, offsets, max_rank, local)


def _remote_compressor(build, payload, offsets, max_rank, local):
    """:func:`column_compressor`'s ``compress``, in a hold, for the pickled generator
    `payload` of the build numbered `build`."""
    unpicklable = []

    def compress(j, tolerance):
        if not (processes.broken() or unpicklable):
            try:
                return processes.call(
                    _compress_remote,
                    (build, payload, offsets, j, tolerance, max_rank),
                    _column_bytes(offsets, j),
                )
            except BrokenProcessPool:
                logger.warning(
                    "tlrcore: the worker processes stopped; compressing on threads from now on"
                )
            except processes.Unpicklable as exc:
                unpicklable.append(exc)
                logger.debug(
                    "tlrcore: the workers cannot unpickle the generator (%s); "
                    "this build uses threads",
                    exc,
                )
            except processes.ResultLost as exc:
                logger.warning(
                    "tlrcore: tile column %d lost on its way from a worker (%s); "
                    "compressing it here",
                    j,
                    exc,
                )
        return local(j, tolerance)

    return compress


def _column_bytes(offsets, j):
    """Bytes in which any factors of tile column `j` fit: every tile at full rank, in
    complex numbers, each array aligned (:data:`~tlrcore.concurrency.spool.ALIGNMENT`)."""
    sizes = np.diff(np.asarray(offsets, dtype=np.int64))
    below, width = sizes[j + 1 :], sizes[j]
    return int(np.sum((below + width) * np.minimum(below, width))) * 16 + 2 * ALIGNMENT * below.size


def _compress_remote(build, payload, offsets, j, tolerance, max_rank, spooling):
    """In a worker: the factors of tile column `j`, as the threads compute them, written
    to the spool where they can be (`spooling`, see
    :func:`~tlrcore.concurrency.processes.call`)."""
    checked = processes.unpickled_once(build, payload, CheckedBlock)
    tiles = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(offsets) - 1)]
    with tile_work():
        factors = compress_column(checked, tiles, j, tolerance, max_rank)
    return processes.spooled(factors, spooling)
