"""Running a plan: work units, host threads, and collecting the results in the caller's form.

On back ends that compute on the calling host thread (``backend.host_threads``), every
bucket is cut into parts of at most :data:`UNIT_BYTES` (and at least ``workers`` parts),
run on a thread pool of ``TLRCORE_NUM_THREADS`` threads with BLAS on one thread each;
small parts keep stacks in memory the allocator reuses. Device back ends queue work
asynchronously: their buckets stay whole and run on the calling thread."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tlrcore.batched._checks import nonfinite_error
from tlrcore.concurrency.threads import workers

#: Largest part of a bucket (its operands and results) on host-thread back ends.
UNIT_BYTES = 16 * 2**20


def units(backend, groups, item_bytes):
    """The ``(indices, shape)`` work units of the buckets `groups`; ``item_bytes(shape)`` is one
    matrix's memory."""
    if not backend.host_threads:
        return list(groups)
    threads = workers()
    work = []
    for indices, shape in groups:
        parts = min(
            len(indices), max(threads, math.ceil(len(indices) * item_bytes(shape) / UNIT_BYTES))
        )
        work.extend((part, shape) for part in np.array_split(indices, parts))
    return work


def run(backend, work, task):
    """Yield ``(unit, task(*unit))`` for each unit of `work`, in order (on a thread pool on
    host-thread back ends)."""
    threads = min(workers(), len(work)) if backend.host_threads else 1
    if threads <= 1:
        for unit in work:
            yield unit, task(*unit)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="tlrcore-batched") as pool:
        yield from zip(work, pool.map(lambda unit: task(*unit), work), strict=True)


class Results:
    """Results of a batch, gathered stack by stack: one array ``(count, *fixed_shape)`` for a
    `fixed` batch, else a list of arrays of `shapes`."""

    def __init__(self, backend, fixed, shapes, fixed_shape=None):
        self.backend, self.fixed, self.shapes = backend, fixed, shapes
        self.fixed_shape = fixed_shape
        self._array = None
        self._items = None if fixed else [None] * len(shapes)

    def put(self, indices, stack):
        """Record `stack`, the padded results of the matrices `indices`."""
        if not self.fixed:
            for j, i in enumerate(indices):
                self._items[i] = stack[(j, *(slice(0, d) for d in self.shapes[i]))]
            return
        shape = self.fixed_shape
        block = (
            stack
            if stack.shape[1:] == shape
            else stack[(slice(None), *(slice(0, d) for d in shape))]
        )
        if len(block) == len(self.shapes):
            self._array = block
            return
        if self._array is None:
            self._array = self.backend.xp.empty((len(self.shapes), *shape))
        start = int(indices[0])
        self._array[start : start + len(block)] = block

    def value(self):
        """An array for a fixed batch (not copied when it was one stack), else a list."""
        if not self.fixed:
            return self._items
        if self._array is None:
            return self.backend.xp.empty((len(self.shapes), *self.fixed_shape))
        return self._array


def assemble(backend, work, func, fixed, shapes, item_shape):
    """Run `func` over the `work` parts and put the results together; a part with non-finite
    input raises, naming the first."""
    results = Results(backend, fixed, shapes, item_shape)
    nonfinite = []
    for (indices, _), (out, bad) in run(backend, work, func):
        if bad is not None:
            nonfinite.append(bad)
        else:
            results.put(indices, out)
    if nonfinite:
        index, name = min(nonfinite)
        raise nonfinite_error(name, index)
    return results.value()
