"""Keep freed tile memory from piling up in the C heap (glibc only).

glibc's mmap threshold *rises* to the size of every mmap-ed block freed, so after the first
dense diagonal tile the factorization's short-lived arrays come from the heap, whose
freed pages are rarely returned: :func:`pin_mmap_threshold` pins it at
:data:`MMAP_THRESHOLD` (process-wide, harmless for other code), with a heap pad of
:data:`TOP_PAD` bytes against shrinking and regrowing the heap. A Dask worker is the
opposite case: each task allocates its tile-sized arrays anew, and every one above the
threshold is a fresh mapping whose pages the kernel faults in and zeroes, so
:func:`reuse_task_memory` raises its threshold to :data:`TASK_MMAP_THRESHOLD` and keeps
freed pages up to :data:`TASK_TRIM_THRESHOLD` for the next task. NumPy advises the kernel
to back arrays of 4 MiB or more with transparent huge pages, whose first touch waits for
the kernel to compact and zero them: :func:`small_pages` turns that off around tile work.
:func:`trim_heap` hands back heap pages freed by ``cholesky(A, overwrite_a=True)``.
``TLRCORE_MALLOC_TUNING=0`` leaves the allocator and the advice alone."""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import sys
import threading
from contextlib import contextmanager

import numpy as np

__all__ = [
    "numpy_allocated_bytes",
    "pin_mmap_threshold",
    "reuse_task_memory",
    "small_pages",
    "trim_heap",
]


def _huge_page_switch():
    """NumPy's run-time switch of its huge-page advice, ``_set_madvise_hugepage`` of
    ``numpy._core.multiarray`` (``numpy.core`` before NumPy 2), or None."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(name), "_set_madvise_hugepage", None)
        except ImportError:
            continue
    return None


_set_madvise_hugepage = _huge_page_switch()
logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
TOP_PAD = 64 << 20
#: A task process's mmap threshold: above the dense tiles of the default tile sizes.
TASK_MMAP_THRESHOLD = 128 << 20
#: Free heap memory a task process keeps for its next tasks.
TASK_TRIM_THRESHOLD = 64 << 20
_pinned = None
_task_heap = None
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
    """Pin glibc's mmap threshold at :data:`MMAP_THRESHOLD` and its heap pad at :data:`TOP_PAD`
    (once per process); whether the threshold is pinned (False off glibc or when disabled)."""
    global _pinned
    if _pinned is None:
        _pinned = _pin()
        logger.debug("glibc mmap threshold pinned at %d bytes: %s", MMAP_THRESHOLD, _pinned)
    return _pinned


def _pin():
    return _mallopt(
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (_M_TOP_PAD, TOP_PAD),
    )


def reuse_task_memory():
    """In a process that runs tile tasks one after another (a Dask worker's), set glibc's mmap
    threshold to :data:`TASK_MMAP_THRESHOLD`, its trim threshold to
    :data:`TASK_TRIM_THRESHOLD` and its heap pad to :data:`TOP_PAD` (once per process);
    whether they were set (False off glibc or when disabled).

    The freed arrays of one task then serve the next from the heap instead of new mappings,
    whose first touch costs a page fault and a zeroed page per 4 KiB: the price is up to
    :data:`TASK_TRIM_THRESHOLD` of free memory kept by the process."""
    global _task_heap
    if _task_heap is None:
        _task_heap = _mallopt(
            (_M_MMAP_THRESHOLD, TASK_MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, TASK_TRIM_THRESHOLD),
            (_M_TOP_PAD, TOP_PAD),
        )
        logger.debug("task heap: mmap threshold %d bytes: %s", TASK_MMAP_THRESHOLD, _task_heap)
    return _task_heap


def _mallopt(*settings):
    """Apply glibc ``mallopt`` `settings` (``(parameter, value)`` pairs); whether all took."""
    if not _tuning_enabled():
        return False
    try:
        libc = ctypes.CDLL(None)
        return all([bool(libc.mallopt(parameter, value)) for parameter, value in settings])
    except (OSError, AttributeError):  # a C library without mallopt (musl)
        return False


def _tuning_enabled():
    return sys.platform.startswith("linux") and os.environ.get("TLRCORE_MALLOC_TUNING", "1") != "0"


@contextmanager
def small_pages():
    """Context manager: new NumPy arrays are not advised onto transparent huge pages inside it.

    Process-wide: the first block to open (in any thread) turns the advice off, the last to
    close restores NumPy's previous setting. A no-op off Linux, with
    ``TLRCORE_MALLOC_TUNING=0``, or with a NumPy without the switch."""
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
    """``array.nbytes`` if NumPy allocated its memory (what :func:`trim_heap` may hand back once
    freed), else 0 (a view of other memory, such as a spool mapping)."""
    owner = array
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    return array.nbytes if isinstance(owner, np.ndarray) else 0


def trim_heap():
    """Return the free pages of the C heap to the system (glibc ``malloc_trim(0)``); whether any
    was returned. A no-op off glibc or with ``TLRCORE_MALLOC_TUNING=0``."""
    global _libc
    if not _tuning_enabled():
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        return bool(_libc.malloc_trim(0))
    except (OSError, AttributeError):  # a C library without malloc_trim (musl)
        return False
