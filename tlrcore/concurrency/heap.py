"""Keep freed tile memory from piling up in the C heap (glibc only).

glibc serves an allocation from ``mmap`` when it is above a threshold that, by default,
*rises* to the size of every mmap-ed block freed (up to 32 MiB). After the first dense
diagonal tile (8-32 MiB) is freed, the stacked factors and samples of the factorization,
1-30 MiB each and short-lived, come from the heap instead, whose freed pages are rarely
returned to the system. Measured at n = 65,536: peak resident memory 1.99 GB with the
default, 1.73 GB with the threshold pinned at 1 MiB (the matrix and its factor are 1.42
and 1.38 GB). Pinning the threshold (``mallopt(M_MMAP_THRESHOLD)``) is process-wide and
harmless for other code; set ``TLRCORE_MALLOC_TUNING=0`` to leave the allocator alone.

Pinning the threshold also fixes glibc's trim threshold at its default, 128 KiB: the heap
was then shrunk (``brk``) as soon as its top held that much free memory, and grown again
by the next allocation, every page of which the kernel zeroes and maps once more (a
minor fault each; in a virtual machine one of these costs several microseconds). A pad
of :data:`TOP_PAD` bytes, kept at the top of the heap when it grows or shrinks
(``M_TOP_PAD``), stops that churn. Measured in the build of 131,072 sites (exponential
kernel, accuracy 1e-8, two threads): 1.08 million minor faults and 6.5-9.7 s of system
time without the pad, 0.41 million and 4.2-5.0 s with it, the build 1.5-2 s faster, and
the same peak resident memory (3.52 and 3.53 GB).

NumPy advises the kernel to back every new array of 4 MiB or more with transparent huge
pages (``madvise(MADV_HUGEPAGE)``). With the system's huge pages in ``madvise`` mode (the
usual default), the first touch of such an array then waits for the kernel to find,
compact and zero 2 MiB pages, and the time that takes varies widely: touching 2 GiB took
0.36-4.7 s on the development machine (a virtual machine), against 0.74 s every time
without the advice. The tile algorithms make and drop such arrays all the time (dense
diagonal tiles, stacked factors, samples, blocks of right-hand sides), so inside their
thread pools (:func:`tlrcore.concurrency.threads.tile_pool`) :func:`small_pages` turns the
advice off; a caller may hold it open across the steps between them (geostat's TLR fits
do). The build's worker processes, forked before its pool opens, turn it off around their
own tile work (:func:`tlrcore.concurrency.threads.tile_work`), and the factorization makes
its row panels of ``L`` inside its pool: at 131,072 sites these 0.6 GB, filled over the whole
factorization, had been faulted in as huge pages (0.9 CPU-s zeroing them in a virtual
machine; the factorization's system time 1.9 s against 1.0-1.3 s on small pages).
Measured (NumPy 2.4, two cores, with and without, alternating runs): the build of 131,072
sites (exponential kernel, accuracy 1e-8) 12.6-12.7 s against 14.1-14.9 s, its
factorization 16.7-16.9 s against 17.3 s; a Fisher-scoring fit of 16,384 sites 12.7-13.1 s
against 13.2-13.7 s; the build of 262,144 sites unchanged (51.8-52.6 s against
50.8-52.5 s). Dense code outside the tile algorithms keeps NumPy's default: SciPy's dense
Cholesky of 16,384 sites was 13 % slower without huge pages.

The tiles below the threshold (low-rank factors of a few hundred KiB) live in the heap.
When ``cholesky(A, overwrite_a=True)`` frees a tile column of ``A``, glibc keeps the freed
pages resident, while the factor's tile columns (one wide array each) come from ``mmap``:
the process then holds both. :func:`trim_heap` (``malloc_trim``) hands the free heap
pages back once the released tiles in the heap add up to
:data:`tlrcore.cholesky.left.TRIM_BYTES`. Measured (trimming after every column) at
n = 131,072 (exponential kernel, accuracy 1e-8; ``A`` 3.10 GiB, ``L`` 2.94 GiB), before
the build's worker processes handed their tiles back through memory files: peak
resident memory of the factorization 3.79 GiB without, 3.45 GiB with it (the build's own
peak being 3.35 GiB). Tiles read from a memory file (:mod:`tlrcore.concurrency.spool`)
give their memory back themselves when released, and are not counted
(:func:`numpy_allocated_bytes`).
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import sys
import threading
from contextlib import contextmanager

import numpy as np

__all__ = ["numpy_allocated_bytes", "pin_mmap_threshold", "small_pages", "trim_heap"]


def _huge_page_switch():
    """NumPy's run-time switch of its huge-page advice (``NUMPY_MADVISE_HUGEPAGE`` sets it
    at import): ``numpy._core.multiarray._set_madvise_hugepage`` (``numpy.core`` before
    NumPy 2), or None where this NumPy has none."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(name), "_set_madvise_hugepage", None)
        except ImportError:
            continue
    return None


_set_madvise_hugepage = _huge_page_switch()
logger = logging.getLogger(__name__)

_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
TOP_PAD = 64 << 20
_pinned = None
_libc = None
#: Guards the count of open :func:`small_pages` blocks and NumPy's setting before the first.
_pages_lock = threading.Lock()
_pages_blocks = 0
_pages_saved = True


def _no_pages_blocks_after_fork():
    """A child forked inside a block has none open (it keeps the setting it got)."""
    global _pages_lock, _pages_blocks
    _pages_lock, _pages_blocks = threading.Lock(), 0


os.register_at_fork(after_in_child=_no_pages_blocks_after_fork)


def pin_mmap_threshold():
    """Pin glibc's mmap threshold at :data:`MMAP_THRESHOLD` and its heap pad at
    :data:`TOP_PAD` (once per process).

    Returns
    -------
    bool
        Whether the threshold is pinned (False off glibc or when disabled).
    """
    global _pinned
    if _pinned is None:
        _pinned = _pin()
        logger.debug("glibc mmap threshold pinned at %d bytes: %s", MMAP_THRESHOLD, _pinned)
    return _pinned


def _pin():
    if not _tuning_enabled():
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TOP_PAD, TOP_PAD)
        )
    except (OSError, AttributeError):  # a C library without mallopt (musl)
        return False


def _tuning_enabled():
    return sys.platform.startswith("linux") and os.environ.get("TLRCORE_MALLOC_TUNING", "1") != "0"


@contextmanager
def small_pages():
    """Context manager: new NumPy arrays are not advised onto transparent huge pages
    inside the block (see the module docstring).

    The setting is process-wide: the first block to open (in any thread) turns the advice
    off and the last to close restores NumPy's previous setting. A no-op off Linux, with
    ``TLRCORE_MALLOC_TUNING=0`` or with a NumPy that has no such switch.
    """
    global _pages_blocks, _pages_saved
    if _set_madvise_hugepage is None or not _tuning_enabled():
        yield
        return
    with _pages_lock:
        if _pages_blocks == 0:
            _pages_saved = _set_madvise_hugepage(False)
        _pages_blocks += 1
    try:
        yield
    finally:
        with _pages_lock:
            _pages_blocks -= 1
            if _pages_blocks == 0:
                _set_madvise_hugepage(_pages_saved)


def numpy_allocated_bytes(array):
    """``array.nbytes`` if NumPy allocated its memory (through the C allocator: what
    :func:`trim_heap` may hand back once it is freed), else 0: a view of memory NumPy did
    not allocate, such as a tile read from a worker's memory file
    (:mod:`tlrcore.concurrency.spool`, which gives its memory back itself)."""
    owner = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    return array.nbytes if isinstance(owner, np.ndarray) else 0


def trim_heap():
    """Return the free pages of the C heap to the system (glibc ``malloc_trim(0)``).

    A no-op off glibc or with ``TLRCORE_MALLOC_TUNING=0``.

    Returns
    -------
    bool
        Whether any memory was returned.
    """
    global _libc
    if not _tuning_enabled():
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        return bool(_libc.malloc_trim(0))
    except (OSError, AttributeError):  # a C library without malloc_trim (musl)
        return False
