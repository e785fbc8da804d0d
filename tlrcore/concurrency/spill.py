"""Finished parts of a factor moved out of memory into files, read back through memory maps.

A left-looking Cholesky factorization never reads a finished tile row of ``L`` again, so the
row can leave the process's anonymous memory while the rest is factored. :class:`Spill`
writes a group of arrays to one unnamed temporary file (``tempfile.TemporaryFile``, deleted
when its last mapping closes) and hands back read-only arrays of the same shapes, dtypes,
memory orders and values, bit for bit, that view one memory map of the file, mapped through
the C library so that no file descriptor stays open (Python's :mod:`mmap` keeps one per
map, and a million-site factor has hundreds of rows). Their pages
belong to the operating system's file cache: clean pages that it can drop under memory
pressure and read again on access, where anonymous pages would have to stay [1]_. One map
per group keeps the number of maps (bounded by ``vm.max_map_count`` on Linux) at one per
tile row. A reader that has finished with a group hands its pages back
(:meth:`Spill.release`, ``madvise(MADV_DONTNEED)``): the process's resident memory then
holds the groups being read, not every group read so far, and a later read faults the pages
in again from the file cache or the file, unchanged because nothing writes them.

References
----------
.. [1] Toledo, S. (1999). A survey of out-of-core algorithms in numerical linear algebra. In
   External Memory Algorithms, DIMACS Series in Discrete Mathematics and Theoretical
   Computer Science 50, 161-179.
"""

from __future__ import annotations

import ctypes
import mmap
import tempfile
import threading
import weakref
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = ["ALIGNMENT", "Spill"]

#: Byte alignment of each array in a spill file.
ALIGNMENT = 64


def _c_library_maps():
    """The C library's ``(mmap, munmap, madvise)`` with their argument types (``madvise``
    None where ``MADV_DONTNEED`` is unknown), or None (Windows: Python's :mod:`mmap` then)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        c_map, c_unmap, c_advise = libc.mmap, libc.munmap, libc.madvise
    except (OSError, TypeError, AttributeError):
        return None
    c_map.restype = ctypes.c_void_p
    c_map.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    c_unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    c_advise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return c_map, c_unmap, (c_advise if hasattr(mmap, "MADV_DONTNEED") else None)


_C_MAPS = _c_library_maps()


class Spill:
    """Groups of arrays moved to files in `directory` (the system's temporary directory by
    default); :attr:`nbytes` counts the bytes moved."""

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory
        self.nbytes = 0
        self._lock = threading.Lock()
        self._maps: dict[Hashable, list[weakref.ref]] = {}

    def move(self, arrays: Sequence[np.ndarray], group: Hashable = None) -> list[np.ndarray]:
        """Read-only copies of the C- or Fortran-contiguous `arrays`, each viewing the one
        memory map of a new file holding them all (OSError where the file cannot be
        written: the caller keeps its arrays); the map belongs to `group`
        (:meth:`release`)."""
        offsets, end = [], 0
        for array in arrays:
            if not (array.flags.c_contiguous or array.flags.f_contiguous):
                raise ValueError("arrays to spill must be C- or Fortran-contiguous.")
            offsets.append(end)
            end += -(-array.nbytes // ALIGNMENT) * ALIGNMENT
        if end == 0:
            return [_read_only(np.array(array)) for array in arrays]
        with tempfile.TemporaryFile(dir=self.directory) as file:
            for array, offset in zip(arrays, offsets, strict=True):
                if array.size:
                    file.seek(offset)
                    file.write(_raw(array))
            file.truncate(end)
            file.flush()
            mapped, block = _map(file.fileno(), end)
        with self._lock:
            self.nbytes += end
            if block is not None:
                self._maps.setdefault(group, []).append(weakref.ref(block))
        moved = []
        for array, offset in zip(arrays, offsets, strict=True):
            fortran = array.flags.f_contiguous and not array.flags.c_contiguous
            moved.append(
                np.ndarray(
                    array.shape,
                    array.dtype,
                    buffer=mapped,
                    offset=offset,
                    order="F" if fortran else "C",
                )
            )
        return moved

    def __reduce__(self):
        # arrays pickled from its maps come back in memory: a copy has moved nothing
        return (Spill, (self.directory,))

    def release(self, group: Hashable) -> None:
        """Hand the resident pages of `group`'s maps back to the operating system; the arrays
        stay valid and read the same values (their pages come back from the file on the next
        read). Nothing where the group has no map or the system has no ``madvise``."""
        advise = None if _C_MAPS is None else _C_MAPS[2]
        if advise is None:
            return
        for reference in self._maps.get(group, ()):
            block = reference()  # held while advised: the map stays until it is collected
            if block is not None:
                advise(ctypes.addressof(block), ctypes.sizeof(block), mmap.MADV_DONTNEED)


def _map(descriptor, length):
    """``(buffer, block)``: a read-only buffer on a private memory map of the first `length`
    bytes of the open file `descriptor`, through the C library's ``mmap``, which keeps no
    descriptor, and the ctypes array `block` on the map, which the buffer keeps alive and
    whose collection unmaps it (Python's :mod:`mmap` and None where there is no C
    library)."""
    if _C_MAPS is None:
        return memoryview(mmap.mmap(descriptor, length, access=mmap.ACCESS_READ)), None
    c_map, c_unmap, _ = _C_MAPS
    # private and writeable: pages stay the file's (clean, reclaimable) until written, and a
    # write, which the read-only arrays refuse unless their flag is forced, copies a page
    protection = mmap.PROT_READ | mmap.PROT_WRITE
    address = c_map(None, length, protection, mmap.MAP_PRIVATE, descriptor, 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap of the spill file failed")
    block = (ctypes.c_char * length).from_address(address)
    weakref.finalize(block, c_unmap, address, length)
    return memoryview(block).toreadonly(), block


def _raw(array):
    """The bytes of `array` in its memory order, without a copy."""
    fortran = array.flags.f_contiguous and not array.flags.c_contiguous
    return memoryview(array.T if fortran else array).cast("B")


def _read_only(array):
    array.flags.writeable = False
    return array
