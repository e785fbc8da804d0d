"""Results handed from a worker process to the caller through a shared memory file.

Through the pool's pipe a result is copied three times, on a caller thread holding the
GIL. Instead, the caller makes memory files (``memfd_create``) that the workers inherit,
the :class:`Spool`. Each result gets a fresh region (:meth:`Spool.region`) in a file no
other result on its way uses; the worker writes the arrays there (``pwrite``) and only
their layouts cross the pipe (:class:`Spooled`); the caller's arrays are views of the
mapped region, and when the last is gone the region is cut out of the file
(``FALLOC_FL_PUNCH_HOLE``), its memory returned. The spool carries lists of records,
instances of a subclass of :class:`tuple` of NumPy arrays rebuilt as ``cls(*arrays,
**vars(record))``, equal bit for bit and in the same memory order as through the pipe,
each array at a multiple of :data:`ALIGNMENT` bytes. Anything else, or where no memory
file can be made, every file is in use, or a write fails, takes the pipe."""

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
    """What crosses the pipe in place of a list of records: the region (`file`, `offset`,
    `length` bytes written) and per record its class, its arrays' layouts (shape, dtype,
    Fortran order, offset in the region) and its other attributes."""

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
        The files' descriptors; each is closed when the spool and every result read from it
        are gone.
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
        """Here: ``(file, offset)`` of a new region of `size` bytes in a file no other result on its
        way is written to (in use until :meth:`done`), or None when every file is in use or the
        file's offsets are used up."""
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
        """In a worker: `records` written to `region` (``(file, offset)``), as a :class:`Spooled`;
        `records` itself where they are not :func:`spoolable`, exceed `size` bytes, or cannot be
        written (what was written is then cut out)."""
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
        """Here: the records of `spooled`, their arrays views of its region mapped from the file.

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
        """Cut the region at `offset` out of `file`, giving its memory back (where the system
        allows; else it is freed with the file)."""
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
    """Whether `result` is a list of records the spool carries (instances of strict subclasses of
    :class:`tuple` whose items are NumPy arrays)."""
    return isinstance(result, list) and all(
        isinstance(record, tuple)
        and type(record) is not tuple
        and hasattr(record, "__dict__")
        and all(isinstance(item, np.ndarray) for item in record)
        for record in result
    )


def unspool(spool, result):
    """Here: the records of `result` read from `spool` when it is a :class:`Spooled`, else
    `result` itself."""
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
