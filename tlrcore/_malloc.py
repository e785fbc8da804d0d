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

The tiles below the threshold (low-rank factors of a few hundred KiB) live in the heap.
When ``cholesky(A, overwrite_a=True)`` frees a tile column of ``A``, glibc keeps the freed
pages resident, while the factor's tile columns (one wide array each) come from ``mmap``:
the process then holds both. :func:`trim_heap` (``malloc_trim``) hands the free heap
pages back once the released tiles add up to
:data:`tlrcore.cholesky.left.TRIM_BYTES`. Measured (trimming after every column) at n = 131,072 (exponential kernel,
accuracy 1e-8; ``A`` 3.10 GiB, ``L`` 2.94 GiB): peak resident memory of the factorization
3.79 GiB without, 3.45 GiB with it (the build's own peak being 3.35 GiB).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

__all__ = ["pin_mmap_threshold", "trim_heap"]

logger = logging.getLogger(__name__)

_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
TOP_PAD = 64 << 20
_pinned = None
_libc = None


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
    if not sys.platform.startswith("linux") or os.environ.get("TLRCORE_MALLOC_TUNING", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TOP_PAD, TOP_PAD))
    except (OSError, AttributeError):  # a C library without mallopt (musl)
        return False


def trim_heap():
    """Return the free pages of the C heap to the system (glibc ``malloc_trim(0)``).

    A no-op off glibc or with ``TLRCORE_MALLOC_TUNING=0``.

    Returns
    -------
    bool
        Whether any memory was returned.
    """
    global _libc
    if not sys.platform.startswith("linux") or os.environ.get("TLRCORE_MALLOC_TUNING", "1") == "0":
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None)
        return bool(_libc.malloc_trim(0))
    except (OSError, AttributeError):  # a C library without malloc_trim (musl)
        return False
