"""Tile factors handed from a worker process to the caller through a file in shared memory.

A tile column's factors that return through the process pool's pipe are pickled into one
bytes object in the worker, written to the pipe, read back here in pieces of the pipe's
buffer into another bytes object and unpickled into new arrays: three copies and about
16,000 reads a gigabyte, on a thread of the caller that holds the GIL while it
unpickles, beside the tile pool's threads. A build of 131,072 sites sends about a
gigabyte. A *spool* file in ``/dev/shm`` (memory, not disk) is written once in the worker
and read once here, straight into the arrays, then removed
(``benchmarks/worker_transfer.py`` compares the two ways; in the 131,072-site build the
caller's CPU went from 8.2-8.8 s to 6.5-7.0 s and the build from 15.6-15.9 s to
13.9-14.0 s, on a 2-core Intel machine).

Mapping the file here instead of reading it would spare the copy (at 131,072 sites the
caller's CPU in the build was 4.7 s mapped against 6.5-7.1 s read, the build 0-1 s
shorter), but the tiles would then hold ``/dev/shm`` for the matrix's life (1.1 GB at that
size), where the semaphores of :mod:`multiprocessing` and other programs need room. Read
and removed, a file holds it only while one tile column is on its way.

The arrays come back equal bit for bit, with the memory order the pipe gives them
(Fortran order for an array that is Fortran- but not C-contiguous, C order otherwise), so
that later products take the same paths. Where no file can be written (no ``/dev/shm``,
or one too small: Docker gives containers 64 MB), or where it would leave less than a
quarter of ``/dev/shm`` free (a file system filled even for a moment fails the other
programs that use it), :func:`spool` returns the factors themselves and they take the
pipe, column by column. (At 131,072 sites the columns are 18.6 MB on average, 29.3 MB at
most.) The spool files of one build share a prefix (:func:`build_prefix`);
:func:`remove_spools` clears what a broken pool left behind, and :func:`remove_orphans`
what a caller killed with a column on its way left.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import tempfile

import numpy as np

from tlrcore.compress._recompress import LowRank

__all__ = ["RESERVE", "SPOOL_DIRECTORY", "Spooled", "build_prefix", "remove_orphans", "remove_spools", "spool",
           "unspool"]

logger = logging.getLogger(__name__)

#: Where the spool files are written: memory on Linux.
SPOOL_DIRECTORY = "/dev/shm"
#: Share of :data:`SPOOL_DIRECTORY`'s size that a spool file leaves free, for other users.
RESERVE = 0.25
_BUILD_FILES = re.compile(r"tlrcore-(\d+)-\d+-")


def build_prefix(pid, build=None):
    """The start of the names of the spool files of build number `build` of process `pid`
    (of all its builds when `build` is None)."""
    return f"tlrcore-{pid}-" if build is None else f"tlrcore-{pid}-{build}-"


class Spooled:
    """What crosses the pipe in place of a list of :class:`LowRank` factors: the spool
    file's `path` and, per tile, the layouts of ``U`` and ``V`` (shape, dtype, Fortran
    order) and the two dropped norms."""

    def __init__(self, path, tiles):
        self.path = path
        self.tiles = tiles


def spool(factors, prefix):
    """In a worker: `factors` (a list of :class:`LowRank`) written to a new spool file
    whose name starts with `prefix`, as a :class:`Spooled`; the list itself where the
    file cannot be written (removed then), would leave less than :data:`RESERVE` of the
    directory's size free, or where the factors are not all :class:`LowRank`."""
    if not all(isinstance(pair, LowRank) for pair in factors):
        return factors
    size = sum(array.nbytes for pair in factors for array in pair)
    try:
        space = os.statvfs(SPOOL_DIRECTORY)
        if (space.f_bavail - RESERVE * space.f_blocks) * space.f_frsize < size:
            logger.debug("tlrcore: %s too full for a spool file of %d bytes; the factors take the pipe",
                         SPOOL_DIRECTORY, size)
            return factors
        descriptor, path = tempfile.mkstemp(prefix=prefix, dir=SPOOL_DIRECTORY)
    except OSError as exc:
        logger.debug("tlrcore: no spool file in %s (%s); the factors take the pipe", SPOOL_DIRECTORY, exc)
        return factors
    tiles = []
    try:
        with os.fdopen(descriptor, "wb") as file:
            for pair in factors:
                layouts = []
                for array in pair:
                    fortran = array.flags.f_contiguous and not array.flags.c_contiguous
                    data = array.T if fortran else np.ascontiguousarray(array)
                    if data.size:
                        file.write(memoryview(data).cast("B"))
                    layouts.append((array.shape, array.dtype.str, fortran))
                tiles.append((*layouts, pair.dropped, pair.dropped_frobenius))
    except OSError as exc:  # the file system is full
        logger.debug("tlrcore: spool file %s not written (%s); the factors take the pipe", path, exc)
        os.unlink(path)
        return factors
    return Spooled(path, tiles)


def unspool(result):
    """Here: the factors of `result`, read from its spool file (then removed) when it is a
    :class:`Spooled`, else `result` itself.

    Raises
    ------
    OSError
        When the spool file cannot be read in full.
    """
    if not isinstance(result, Spooled):
        return result
    try:
        with open(result.path, "rb") as file:
            return [LowRank(_read(file, *u), _read(file, *v), dropped, dropped_frobenius)
                    for u, v, dropped, dropped_frobenius in result.tiles]
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(result.path)


def _read(file, shape, dtype, fortran):
    array = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    if array.size and file.readinto(memoryview(array.T if fortran else array).cast("B")) != array.nbytes:
        raise OSError(f"spool file {file.name} ends early")
    return array


def remove_spools(prefix):
    """Remove the spool files whose names start with `prefix` (those of results lost with
    a broken pool)."""
    for path in glob.glob(os.path.join(SPOOL_DIRECTORY, glob.escape(prefix) + "*")):
        with contextlib.suppress(OSError):
            os.unlink(path)


def remove_orphans():
    """Remove the spool files of builds (:func:`build_prefix`) whose process no longer runs."""
    for path in glob.glob(os.path.join(SPOOL_DIRECTORY, "tlrcore-*")):
        match = _BUILD_FILES.match(os.path.basename(path))
        if match and not _running(int(match.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, say
        return True
    return True
