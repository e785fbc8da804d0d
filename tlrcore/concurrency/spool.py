"""Results handed from a worker process to the caller through a shared memory file.

A tile column's factors that return through the process pool's pipe are pickled into one
bytes object in the worker, written to the pipe, read back here in pieces of the pipe's
buffer into another bytes object and unpickled into new arrays: three copies and about
16,000 reads a gigabyte, on a thread of the caller that holds the GIL while it
unpickles. A build of 131,072 sites sends about a gigabyte.

Instead, the caller makes memory files (``memfd_create``) before it forks the workers,
which inherit their descriptors: the :class:`Spool`. Each result is given a region of
one of them that no other result ever gets (:meth:`Spool.region`, of the size the caller
asks for), in a file that no other result on its way is written to (a write holds its
file's lock: two workers writing to one file each spent 1.3-1.5 % of a 131,072-site
evaluation's samples spinning on it); the worker writes the arrays there (``pwrite``,
one copy), and only their layouts cross the pipe. The caller maps the region and the
arrays are views of the mapping: no copy here, and no new page to be zeroed. When the
last of a region's arrays is gone, the region is cut out of the file
(``fallocate(FALLOC_FL_PUNCH_HOLE)``) and the memory goes back to the system.

What the spool carries: a list of records, each an instance of a subclass of
:class:`tuple` whose items are NumPy arrays and whose class rebuilds it as
``cls(*arrays, **vars(record))`` (its other attributes passed by name), such as the
low-rank pairs of :class:`tlrcore.compress._recompress.LowRank`. Any other result (a
plain tuple among the records, an item that is not an array) takes the pipe.

Measured at 131,072 sites (2-D exponential kernel, accuracy 1e-8, tiles of 2048, two
cores; ``benchmarks/worker_transfer.py`` compares the three ways on synthetic columns):

- pickled through the pipe: the caller's CPU 8.2-8.8 s, the build 15.6-15.9 s (a 2-core
  Intel machine);
- written to a file in ``/dev/shm`` and read here into new arrays (the previous way): on
  that machine 6.5-7.0 s and 13.9-14.0 s; on a 2-core AMD machine the caller's system
  time in the build was 2.4-3.5 s, most of it zeroing the pages of the new arrays
  (``perf``: ``clear_page_erms`` under the reads);
- mapped: on the AMD machine the caller's system time 0.6-0.8 s against 2.4-3.4 s, the
  build 7.3-7.4 s against 7.9-8.4 s (alternating runs). The workers' system time rose by
  about 1 s: the pages they write are now new ones, not those of the file read and
  removed before.

A memory file is not ``/dev/shm``: Docker gives containers a ``/dev/shm`` of 64 MB,
which a file there would fill for the matrix's life. It is freed with the processes (no
file is left behind by a killed caller), and its pages count as the caller's memory
once mapped, as a matrix's arrays would.

The arrays are equal bit for bit to those the pipe gives, in the same memory order
(Fortran order for an array that is Fortran- but not C-contiguous, C order otherwise),
so later products take the same paths; each starts at a multiple of
:data:`ALIGNMENT` bytes. Where no memory file can be made (not Linux), where every
file is in use (more results on their way than workers), where the result is not a list
of records, or where a write fails, it takes the pipe.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["ALIGNMENT", "Spool", "Spooled", "spoolable", "unspool"]

logger = logging.getLogger(__name__)

#: Each array of a spooled result starts at a multiple of this many bytes.
ALIGNMENT = 64
#: Regions are handed out below this offset (tmpfs files may reach ``2**63 - 1`` bytes).
LAST_OFFSET = 1 << 62
_PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
#: Shared, and mapped at once (``MAP_POPULATE``): the pages, already there, are then the
#: caller's resident memory from the start, as read arrays were (peak-memory figures
#: from ``getrusage`` stay true), and are entered in one call rather than fault by fault.
_MAP_FLAGS = getattr(mmap, "MAP_SHARED", 0) | getattr(
    mmap, "MAP_POPULATE", 0
)  # (no flags on Windows)


def _fallocate():
    """The C library's ``fallocate``, or None."""
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError, TypeError):  # TypeError: no CDLL(None) on Windows
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _fallocate()


class Spooled:
    """What crosses the pipe in place of a list of records (see the module docstring):
    the result's region of the spool (`file`, `offset`, `length` bytes written) and, per
    record, its class, the layouts of its arrays (shape, dtype, Fortran order, offset in
    the region) and its other attributes."""

    def __init__(self, file, offset, length, records):
        self.file = file
        self.offset = offset
        self.length = length
        self.records = records


class Spool:
    """Memory files shared with the worker processes forked after they are made.

    Parameters
    ----------
    descriptors : list of int
        The files' descriptors; each is closed when the spool and every result read
        from it are gone.
    """

    def __init__(self, descriptors):
        self.descriptors = list(descriptors)
        self._next = [0] * len(self.descriptors)
        self._free = list(range(len(self.descriptors)))
        self._lock = threading.Lock()
        for descriptor in self.descriptors:
            weakref.finalize(self, os.close, descriptor).atexit = False

    @classmethod
    def open(cls, files):
        """A new spool of `files` files, or None where the system makes no memory files."""
        descriptors = []
        try:
            for _ in range(files):
                descriptors.append(os.memfd_create("tlrcore-spool", os.MFD_CLOEXEC))
        except (AttributeError, OSError) as exc:  # not Linux, or too old
            for descriptor in descriptors:
                os.close(descriptor)
            logger.debug(
                "tlrcore: no memory file for the workers' results (%s); they take the pipe", exc
            )
            return None
        return cls(descriptors)

    def region(self, size):
        """Here: ``(file, offset)`` of a new region of `size` bytes (never handed out
        before) in a file that no other result on its way is written to, or None when
        every file is in use or the file's offsets are used up. The file is in use until
        :meth:`done`."""
        with self._lock:
            if not self._free:
                return None
            file = self._free[-1]
            offset = self._next[file]
            end = offset + _round_up(max(size, 1), mmap.PAGESIZE)
            if end > LAST_OFFSET:
                return None
            self._free.pop()
            self._next[file] = end
            return file, offset

    def done(self, region):
        """Here: the file of `region` (from :meth:`region`) is free for another result."""
        with self._lock:
            self._free.append(region[0])

    def write(self, records, region, size):
        """In a worker: `records` (a list of records, see the module docstring) written to
        `region` (``(file, offset)``), as a :class:`Spooled`; the list itself where it is
        not a list of records (:func:`spoolable`), would not fit in the region's `size`
        bytes, or cannot be written (what was written is then cut out)."""
        if not spoolable(records):
            return records
        pieces, layouts, at = [], [], 0
        for record in records:
            arrays = []
            for array in record:
                fortran = array.flags.f_contiguous and not array.flags.c_contiguous
                at = _round_up(at, ALIGNMENT)
                if array.size:
                    pieces.append((at, array.T if fortran else np.ascontiguousarray(array)))
                arrays.append((array.shape, array.dtype.str, fortran, at))
                at += array.nbytes
            layouts.append((type(record), arrays, vars(record)))
        if at > size:
            return records
        file, offset = region
        try:
            for start, data in pieces:
                _write_all(self.descriptors[file], memoryview(data).cast("B"), offset + start)
        except OSError as exc:
            logger.debug("tlrcore: result not written to the spool (%s); it takes the pipe", exc)
            self.discard(file, offset, at)
            return records
        return Spooled(file, offset, at, layouts)

    def read(self, spooled):
        """Here: the records of `spooled`, their arrays views of its region mapped from the
        file.

        Raises
        ------
        OSError
            When the region cannot be mapped (it is then cut out of the file).
        """
        file, offset, length = spooled.file, spooled.offset, spooled.length
        if length:
            descriptor = self.descriptors[file]
            try:
                if os.fstat(descriptor).st_size < offset + length:
                    raise OSError(f"spool region at {offset} of file {file} ends early")
                mapped = mmap.mmap(descriptor, length, flags=_MAP_FLAGS, offset=offset)
            except (OSError, ValueError) as exc:
                self.discard(file, offset, length)
                raise OSError(f"spool region at {offset} of file {file} not mapped: {exc}") from exc
            memory = np.frombuffer(mapped, dtype=np.uint8)
            weakref.finalize(memory, self.discard, file, offset, length).atexit = False
        else:
            memory = np.empty(0, dtype=np.uint8)

        def view(shape, dtype, fortran, start):
            order = "F" if fortran else "C"
            if 0 in shape:
                return np.empty(shape, dtype=dtype, order=order)
            return np.ndarray(shape, dtype=dtype, buffer=memory, offset=start, order=order)

        return [
            cls(*(view(*layout) for layout in arrays), **attributes)
            for cls, arrays, attributes in spooled.records
        ]

    def discard(self, file, offset, length):
        """Cut the region at `offset` out of `file`, giving its memory back (where the
        system allows; else it is freed with the file)."""
        if _FALLOCATE is None or not length:
            return
        length = _round_up(length, mmap.PAGESIZE)  # the region's last page is its own
        if _FALLOCATE(self.descriptors[file], _PUNCH_HOLE_KEEP_SIZE, offset, length) != 0:
            logger.debug(
                "tlrcore: spool region at %d of file %d not freed (%s)",
                offset,
                file,
                os.strerror(ctypes.get_errno()),
            )

    def allocated(self):
        """Bytes of the files that hold memory (written and not yet cut out)."""
        return sum(os.fstat(descriptor).st_blocks for descriptor in self.descriptors) * 512


def spoolable(result):
    """Whether `result` is a list of records that the spool carries: instances of
    subclasses of :class:`tuple` (not tuples themselves) whose items are NumPy arrays
    (see the module docstring)."""
    return isinstance(result, list) and all(
        isinstance(record, tuple)
        and type(record) is not tuple
        and hasattr(record, "__dict__")
        and all(isinstance(item, np.ndarray) for item in record)
        for record in result
    )


def unspool(spool, result):
    """Here: the records of `result`, read from `spool` when it is a :class:`Spooled`,
    else `result` itself (see :meth:`Spool.read`)."""
    return spool.read(result) if isinstance(result, Spooled) else result


def _round_up(size, unit):
    """The least multiple of `unit` that is ``>= size``."""
    return -(-size // unit) * unit


def _write_all(descriptor, data, offset):
    """``pwrite`` all of `data` at `offset`."""
    while data:
        written = os.pwrite(descriptor, data, offset)
        if written <= 0:
            raise OSError(f"pwrite wrote nothing at offset {offset}")
        data, offset = data[written:], offset + written
