"""The ACA compression of a CPU TLR build's tile columns in worker processes.

ACA runs Python between its BLAS calls, holding the GIL, so threads overlap poorly on
large builds. Where the workers serve the build
(:func:`tlrcore.concurrency.processes.enabled`), each tile column (``method="aca"``) is
compressed in a worker from the generator, pickled once per build; the factors come back
through the shared memory files, bit for bit those the threads would make. A generator
that does not pickle or unpickle there, or a broken pool, falls back to the threads."""

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
    """A context for one build giving ``compress(j, tolerance)``, the factors of tile column `j`
    (tiles at `offsets`), from a worker when the workers serve the build and `block` pickles,
    else ``local(j, tolerance)``. Open it before the build's first tile (the fork then copies
    none of it); a non-lingering :func:`~tlrcore.concurrency.processes.hold`."""
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
    """:func:`column_compressor`'s ``compress`` for the pickled generator `payload` of `build`."""
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
    """Bytes that hold any factors of tile column `j`: every tile at full rank, complex, each
    array aligned."""
    sizes = np.diff(np.asarray(offsets, dtype=np.int64))
    below, width = sizes[j + 1 :], sizes[j]
    return int(np.sum((below + width) * np.minimum(below, width))) * 16 + 2 * ALIGNMENT * below.size


def _compress_remote(build, payload, offsets, j, tolerance, max_rank, spooling):
    """In a worker: the factors of tile column `j`, spooled where they can be (`spooling`)."""
    checked = processes.unpickled_once(build, payload, CheckedBlock)
    tiles = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(offsets) - 1)]
    with tile_work():
        factors = compress_column(checked, tiles, j, tolerance, max_rank)
    return processes.spooled(factors, spooling)
