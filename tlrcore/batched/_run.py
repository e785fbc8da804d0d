"""Running a plan: work units, host threads, and collecting the results in the caller's form.

On back ends whose kernels compute on the calling host thread (:data:`HOST_THREADS`),
the stacks are cut into about ``workers`` parts each and run on a thread pool of
``TLRCORE_NUM_THREADS`` threads (default: the CPU count, at most 8), BLAS on one thread
each, as elsewhere in tlrcore. Measured on the 2-core CPU with
``PYTHONPATH=. python benchmarks/gpu.py --parts 1``: about 2x for 1,000 matrices of
orders 16-512 when the machine was otherwise idle, and neither gain nor loss when other
processes kept both cores busy. Device back ends queue their work asynchronously, so their
stacks stay whole (one call each) and run on the calling thread.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tlrcore.matrix import _workers

#: Back ends whose kernels compute on the calling host thread.
HOST_THREADS = ("numpy",)


def units(backend, groups):
    """The ``(indices, shape)`` work units of the buckets `groups`: whole on a device back
    end, else each cut into at most ``workers`` contiguous parts."""
    workers = _workers() if backend.name in HOST_THREADS else 1
    if workers == 1:
        return list(groups)
    return [(part, shape) for indices, shape in groups for part in np.array_split(indices, min(workers, len(indices)))]


def run(backend, work, task):
    """``(unit, task(*unit))`` for each unit of `work`, in order; on a thread pool where
    :func:`units` cut the work for host threads."""
    workers = min(_workers(), len(work)) if backend.name in HOST_THREADS else 1
    if workers <= 1:
        return [(unit, task(*unit)) for unit in work]
    with ThreadPoolExecutor(workers, thread_name_prefix="tlrcore-batched") as pool:
        return list(zip(work, pool.map(lambda unit: task(*unit), work)))


class Results:
    """Results of a batch, gathered stack by stack into the caller's form.

    Parameters
    ----------
    backend : Backend
    fixed : bool
        The batch is one array: :meth:`value` is one array ``(count, *shape)``.
    shapes : list of tuple
        The shape of each result.
    """

    def __init__(self, backend, fixed, shapes, fixed_shape=None):
        self.backend, self.fixed, self.shapes = backend, fixed, shapes
        self.fixed_shape = fixed_shape
        self._parts = []
        self._items = None if fixed else [None] * len(shapes)

    def put(self, indices, stack):
        """Record `stack`, the padded results of the matrices `indices`."""
        if self.fixed:
            shape = self.fixed_shape
            block = stack if stack.shape[1:] == shape else stack[(slice(None), *(slice(0, d) for d in shape))]
            self._parts.append((int(indices[0]), block))
            return
        for j, i in enumerate(indices):
            self._items[i] = stack[(j, *(slice(0, d) for d in self.shapes[i]))]

    def value(self):
        """An array for a fixed batch (no copy when it was one stack), else a list."""
        if not self.fixed:
            return self._items
        if len(self._parts) == 1:
            return self._parts[0][1]
        out = self.backend.xp.empty((len(self.shapes), *self.fixed_shape))
        for start, block in self._parts:
            out[start : start + len(block)] = block
        return out
