"""Thread pools, per-tile seeds, BLAS pinning and tile-column progress for every tile
algorithm of tlrcore.

Tiles of one column run on a thread pool with BLAS on one thread each (small products do
not amortize BLAS's threads); each has its own seed and its result is stored by tile
index, so a factor is bit-identical for any number of threads. Inside ``with
tlrcore.progress():`` build and factorization loops show a tile-column counter after
:data:`PROGRESS_DELAY` seconds; the setting is a context variable, per thread."""

from __future__ import annotations

import contextvars
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import ParamSpec, TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from tlrcore.concurrency.heap import small_pages

__all__ = [
    "PROGRESS_DELAY",
    "RHS_CHUNK",
    "by_column_chunks",
    "by_rows",
    "column_progress",
    "column_seeds",
    "map_by_work",
    "one_blas_thread",
    "one_blas_thread_block",
    "progress",
    "runner",
    "serial_thread",
    "start_by_work",
    "submit",
    "terminal_width",
    "tile_pool",
    "tile_seeds",
    "tile_work",
    "workers",
]

_controller = None
#: ``depth``: the :func:`one_blas_thread_block` blocks open in this thread.
_open_blocks = threading.local()


def _no_blocks_open_after_fork():
    """A child forked inside a block has none open (it keeps the BLAS setting it got)."""
    global _open_blocks
    _open_blocks = threading.local()


os.register_at_fork(after_in_child=_no_blocks_open_after_fork)


def workers():
    """Tile threads: ``TLRCORE_NUM_THREADS`` (ValueError unless a positive integer) or the CPU
    count, at most 8; with one, tiles run in the calling thread."""
    value = os.environ.get("TLRCORE_NUM_THREADS")
    if value is not None:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"TLRCORE_NUM_THREADS={value!r} must be a positive integer.")
        return int(value)
    return max(1, min(os.cpu_count() or 1, 8))


@contextmanager
def tile_pool(count):
    """BLAS pinned to one thread, new arrays on small pages, and a thread pool of `count`
    workers: yields the pool, or None when ``count <= 1`` (the work then runs in the calling
    thread)."""
    with tile_work(), _executor(count) if count > 1 else nullcontext() as pool:
        yield pool


@contextmanager
def tile_work():
    """Context manager for tile work outside a :func:`tile_pool` (in a worker process): BLAS on
    one thread and new arrays on small pages, as in the pool."""
    with one_blas_thread_block(), small_pages():
        yield


@contextmanager
def _executor(count):
    """A thread pool of `count` workers that drops the queued calls when the block raises, then
    waits for those running."""
    pool = ThreadPoolExecutor(count)
    try:
        yield pool
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise
    pool.shutdown()


def runner(pool):
    """``pool.map``, or the built-in ``map`` without a pool."""
    return pool.map if pool is not None else map


def tile_seeds(random_state, n_tiles):
    """``(n_tiles, n_tiles)`` seeds, one per tile, drawn from `random_state`."""
    return np.random.default_rng(random_state).integers(0, 2**63 - 1, size=(n_tiles, n_tiles))


def column_seeds(random_state, n_tiles):
    """``(n_tiles,)`` seeds, one per tile column, drawn from `random_state`."""
    return np.random.default_rng(random_state).integers(0, 2**62, size=n_tiles)


_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextmanager
def one_blas_thread_block():
    """Context manager: BLAS limited to one thread inside the block.

    A thread's outermost block sets the limit and restores the previous setting; nested
    blocks only count. BLAS libraries are found at the first call (one loaded later is not
    limited). Where every BLAS is on one thread already nothing is set (in a forked worker
    that would restart OpenBLAS's threads)."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController().select(user_api="blas")
    depth = getattr(_open_blocks, "depth", 0)
    _open_blocks.depth = depth + 1
    try:
        if depth or all(lib.get_num_threads() == 1 for lib in _controller.lib_controllers):
            yield
        else:
            with _controller.limit(limits=1, user_api="blas"):
                yield
    finally:
        _open_blocks.depth = depth


def one_blas_thread(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: run `func` with BLAS limited to one thread (:func:`one_blas_thread_block`)."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with one_blas_thread_block():
            return func(*args, **kwargs)

    return wrapper


def submit(executor, func, *args):
    """``executor.submit(func, *args)``, or without an executor ``func(*args)`` called now (an
    exception propagates at once), its result in a completed future."""
    if executor is not None:
        return executor.submit(func, *args)
    future = Future()
    future.set_result(func(*args))
    return future


@contextmanager
def serial_thread(pool):
    """A single-thread executor for a chain of calls that must run in order beside `pool`'s
    work; None (calls made at once) when `pool` is None."""
    with _executor(1) if pool is not None else nullcontext() as executor:
        yield executor


#: Columns per task of :func:`by_column_chunks`.
RHS_CHUNK = 32


def by_column_chunks(func, X):
    """``func`` applied to C-ordered copies (which it may overwrite and return) of the columns of
    `X` in chunks of :data:`RHS_CHUNK`, on the tile pool; the results side by side.

    The chunks, and so the result, are the same for any number of threads. A vector or a
    matrix of at most :data:`RHS_CHUNK` columns is one chunk, in the calling thread."""
    if X.ndim == 1 or X.shape[1] <= RHS_CHUNK:
        return func(np.array(X, order="C"))
    chunks = [
        np.array(X[:, first : first + RHS_CHUNK], order="C")
        for first in range(0, X.shape[1], RHS_CHUNK)
    ]
    with tile_pool(workers()) as pool:
        return np.hstack(list(runner(pool)(func, chunks)))


def start_by_work(pool, func, items, work):
    """Start ``func(x)`` for every item, most `work` first, and return a collector of the results
    in the order of `items` (without a pool, the calls run when it is called)."""
    if pool is None:
        return lambda: [func(item) for item in items]
    futures = {
        pos: pool.submit(func, items[pos])
        for pos in sorted(range(len(items)), key=lambda pos: -work[pos])
    }
    return lambda: [futures[pos].result() for pos in range(len(items))]


def map_by_work(run, func, items, work):
    """``[func(x) for x in items]``, started in descending order of `work` (ties in order) on
    ``run``, ``map`` or a thread pool's ``map``."""
    order = sorted(range(len(items)), key=lambda pos: -work[pos])
    results = dict(zip(order, run(lambda pos: func(items[pos]), order), strict=True))
    return [results[pos] for pos in range(len(items))]


#: Seconds a build or factorization runs before its tile-column counter appears.
PROGRESS_DELAY = 2.0

_PROGRESS = contextvars.ContextVar("tlrcore_progress", default=False)


@contextmanager
def progress(enabled=True):
    """Show tile-column progress of long builds and factorizations inside this block.

    :meth:`TLRMatrix.from_generator`, :func:`tlrcore.cholesky` and :func:`tlrcore.ldl` show a
    counter of tile columns on standard error (tqdm) once they have run
    :data:`PROGRESS_DELAY` seconds; no result changes. Off by default; per thread;
    ``progress(False)`` turns it off inside an enclosing block. TypeError unless `enabled` is
    a bool.

    Examples
    --------
    >>> import tlrcore as tlr
    >>> with tlr.progress():                      # doctest: +SKIP
    ...     F = tlr.cholesky(A)
    """
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"enabled must be True or False; got {enabled!r}.")
    token = _PROGRESS.set(bool(enabled))
    try:
        yield
    finally:
        _PROGRESS.reset(token)


class _NoProgress:
    """The counter outside :func:`progress`: does nothing."""

    def update(self, n=1):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_PROGRESS = _NoProgress()


def column_progress(total, description, unit="col"):
    """A counter of `total` tile columns (a context manager with ``update()``): inside
    :func:`progress` a tqdm bar shown after :data:`PROGRESS_DELAY` seconds and erased at the
    end; otherwise, or for fewer than two columns, a no-op."""
    if not _PROGRESS.get() or total < 2:
        return _NO_PROGRESS
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=description,
        unit=unit,
        delay=PROGRESS_DELAY,
        leave=False,
        file=sys.stderr,
        mininterval=0.5,
        **terminal_width(sys.stderr),
    )


def terminal_width(stream):
    """tqdm's size arguments for `stream`: the terminal's size, or 80 x 24 where it reports none."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # no file descriptor, or not a terminal
        columns = 0
    return {"dynamic_ncols": True} if columns > 0 else {"ncols": 80, "nrows": 24}


def by_rows(results, row_lengths, counter):
    """Iterate `results` (one per tile, row by row), updating `counter` once per row of
    `row_lengths`; outside :func:`progress`, `results` itself."""
    if counter is _NO_PROGRESS:
        return results

    def rows():
        iterator = iter(results)
        for length in row_lengths:
            for _ in range(length):
                yield next(iterator)
            counter.update()

    return rows()
