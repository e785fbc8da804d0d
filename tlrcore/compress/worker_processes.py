"""Worker processes for the ACA compression of a CPU TLR build, and for other work of a
caller that holds the GIL (:class:`Shared`: geostat's block Vecchia likelihood).

ACA runs in Python between its BLAS calls, so on tiles of 1024 it holds the GIL much of the
time and the tile pool's threads overlap poorly. When ACA advanced one pivot row and
column at a time, the off-diagonal compression of 8,192 co2 cells (28 tiles) took 1.66 s
on one thread, 1.34 s on two (1.24x) and 0.94 s in two processes (1.77x) on a 2-core AMD
machine, and a whole co2 8K fit (five builds) 13.1 s instead of 15.8 s (medians of 6).
With ACA in block steps (:mod:`tlrcore.compress.aca`) far less of it is Python: on a
2-core Intel machine a whole build of those cells took 0.45-0.49 s in processes against
0.56 s on threads (medians of 5), and whole co2 8K fits took the same time either way
(6.9-7.3 s, 4 pairs). On tiles of 2048 the processes gain with the build's size: 5 %
at 32,768 sites, 20 % at 131,072 (:data:`AUTO_MIN_COLUMNS`). Pages of the caller
that exist when the workers are forked are copied on its first writes (0.6 s more for
the first factorization at 32,768 sites when the fork came in the middle of its build),
and stay held by the workers while they live, even once the caller frees them.

When the workers serve a build, set by ``TLRCORE_PROCESSES``:

* unset or empty (the default): inside a :func:`session` (a geostat fit opens one around
  its optimization), for tiles of at most 1024 (:data:`AUTO_MAX_TILE`); and with any
  tile size, in a session or not, for builds of at least :data:`AUTO_MIN_COLUMNS` tile
  columns (outside a session, the workers are forked for that build and stop with it);
* ``1``: every build, with any tile size, in a session or not;
* ``0``: never.

The same setting decides where the calls of a :class:`Shared` object run, with no tile
size: by default in any session (forking the workers at the first call if the session's
tiles were too large for them), always with ``1``, never with ``0``.

With more than one worker (:func:`tlrcore._threads.workers`) each tile column of
:meth:`tlrcore.TLRMatrix.from_generator` (``method="aca"``) is then compressed in a
process of a pool: the block generator is pickled once per build and sent with each
column; the factors come back pickled. The tiles are those the threads would make, bit
for bit (the same operations on the same entries). The generator runs in the workers, so
its side effects (counters, caches) stay there. A generator that does not pickle (a
closure) or that the workers cannot unpickle (a class defined after they were forked), a
process that may not have children (a daemonic one, such as a Dask worker's), a platform
other than Linux, or a pool that broke or could not start falls back to the threads.

The workers are forked: a fork server or spawned processes would import the caller's
main script again (running a script without a ``__main__`` guard twice) and take about
3 s to import NumPy, SciPy and geostat; a fork and its warm-up take 25 ms, the shutdown
11 ms. They are forked from a thread with no other work running: when the first session
opens (before the fit's large arrays exist), or, for a build they serve outside a session,
before its first tile, while the tile pool's threads wait, or at a
:class:`Shared` object's first calls (in a fit with tiles above 1024: the block Vecchia
likelihood, before the first build). The last
session to close stops them, so that they hold none of the caller's memory after a fit.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import multiprocessing
import os
import pickle
import sys
import threading
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from tlrcore._malloc import trim_heap
from tlrcore._threads import one_blas_thread_block, workers
from tlrcore.compress.generated import CheckedBlock, compress_column

__all__ = ["AUTO_MAX_TILE", "AUTO_MIN_COLUMNS", "Shared", "column_compressor", "enabled", "session", "setting",
           "shutdown", "start"]

logger = logging.getLogger(__name__)

#: Largest tile that the workers serve by default in a session, whatever the build's size.
AUTO_MAX_TILE = 1024
#: Fewest tile columns of a build that the workers serve by default with tiles of any
#: size, in a session or not (outside one, for that build alone). Measured on a 2-core
#: Intel machine (2-D exponential kernel, accuracy 1e-8, tiles of 2048, builds outside a
#: session, two runs each): 16 columns (32,768 sites) 2.05-2.13 s against 2.21-2.28 s on
#: threads, 32 columns 5.2-5.5 s against 6.0-6.1 s, 64 columns 12.0-13.9 s against
#: 15.1-16.9 s (ACA's Python holds the GIL, and two threads fault pages in one address
#: space: the build's system time doubled).
AUTO_MIN_COLUMNS = 16

_pool = None
_broken = False
_sessions = 0
_sessions_lock = threading.Lock()
#: Numbers the builds, so that a worker unpickles each build's generator once.
_builds = itertools.count()
#: In a worker: ``(build, generator)`` of the build it served last.
_worker_build = (None, None)
#: In a worker: the :class:`Shared` objects it used last, by key (at most :data:`_KEPT`).
_worker_shared: dict[tuple[int, int], object] = {}
_KEPT = 4
#: Keys of the :class:`Shared` objects gone here: every task tells the workers to drop them.
_released: set[tuple[int, int]] = set()


def setting():
    """``TLRCORE_PROCESSES``: ``"auto"`` (unset or empty), ``"always"`` (1) or ``"never"`` (0).

    Raises
    ------
    ValueError
        For any other value.
    """
    value = os.environ.get("TLRCORE_PROCESSES", "")
    if value not in ("", "0", "1"):
        raise ValueError(f"TLRCORE_PROCESSES={value!r} must be 1 (worker processes for every CPU build), "
                         "0 (none) or unset (for tiles of at most 1024 during a fit, and for builds of at least "
                         f"{AUTO_MIN_COLUMNS} tile columns).")
    return {"": "auto", "0": "never", "1": "always"}[value]


def enabled(tile_size=None, n_tiles=0):
    """Whether the tile columns of a build with `n_tiles` tiles of `tile_size` go to worker
    processes (``None``: whether the calls of a :class:`Shared` object do): by
    :func:`setting`, with more than one worker, on Linux, in a process allowed children,
    and no pool broken before."""
    chosen = setting()
    auto = (_sessions and (tile_size or 0) <= AUTO_MAX_TILE) or n_tiles >= AUTO_MIN_COLUMNS
    if chosen == "never" or (chosen == "auto" and not auto):
        return False
    return workers() > 1 and sys.platform == "linux" and not _broken and not multiprocessing.current_process().daemon


@contextlib.contextmanager
def session(tile_size):
    """Worker processes for the builds of the block (with tiles of `tile_size`), forked
    when it opens unless running; the last session to close stops them.

    Open it from a thread that holds no lock, with no other thread of the caller's working
    (a fork copies the locks of every thread as they are). Sessions nest and may be open
    in several threads at once.
    """
    global _sessions
    with _sessions_lock:
        _sessions += 1
    try:
        if enabled(tile_size):
            start()
        yield
    finally:
        with _sessions_lock:
            _sessions -= 1
            if not _sessions:
                shutdown()


def start():
    """Fork the pool's workers now, unless they are running.

    Call it from a thread that holds no lock, with no other thread of the caller's
    working: a fork copies the locks of every thread as they are.
    """
    global _broken
    if _pool is not None:  # running: a dead worker shows at the next submission
        return
    try:
        _get_pool().submit(_warm_up).result()
    except (OSError, BrokenProcessPool) as exc:  # no fork, no semaphores (/dev/shm), a dead worker
        _broken = True
        logger.warning("tlrcore: no worker processes (%s); compressing on threads", exc)


def shutdown():
    """Stop the workers (the next use forks new ones)."""
    global _pool
    _released.clear()
    if _pool is not None:
        _pool.shutdown()
        _pool = None


@contextlib.contextmanager
def column_compressor(block, offsets, max_rank, local):
    """A context for one build, giving ``compress(j, tolerance)``: the factors of tile
    column `j` (tiles start at `offsets`), from a worker process when :func:`enabled` and
    `block` pickles, else (or once the pool broke) ``local(j, tolerance)``.

    Open it before the build's first tile: it forks the workers if they are not running,
    and a fork then copies no page of the build. (The caller's later writes to pages that
    exist when the workers are forked are copies: a factorization with ``overwrite_a``
    writes its diagonal factors into the tiles, and at 131,072 sites took 27.6-28.1 s
    instead of 20-21.5 s when the workers had been forked after the diagonal tiles.) It
    is a :func:`session` of its own, so that workers forked for a build outside any
    session stop with it.
    """
    tile_size = int(np.max(np.diff(offsets)))
    payload = _pickled(block) if enabled(tile_size, len(offsets) - 1) else None
    if payload is None:
        yield local
        return
    with session(tile_size):
        start()  # before the tiles: the tile pool's threads are idle
        yield local if _broken else _remote_compressor(payload, offsets, max_rank, local)


def _pickled(obj):
    """`obj` pickled, or None where it does not pickle (the caller then does the work)."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # whatever keeps it from pickling
        return None


def _remote_compressor(payload, offsets, max_rank, local):
    """:func:`column_compressor`'s ``compress``, in a session, for the pickled generator
    `payload`."""
    build = (os.getpid(), next(_builds))
    unpicklable = []

    def compress(j, tolerance):
        global _broken
        if not (_broken or unpicklable):
            try:
                return _get_pool().submit(_compress_remote, build, payload, offsets, j, tolerance, max_rank,
                                          _released_keys()).result()
            except BrokenProcessPool:
                _broken = True
                logger.warning("tlrcore: the worker processes stopped; compressing on threads from now on")
            except _Unpicklable as exc:
                unpicklable.append(exc)
                logger.debug("tlrcore: the workers cannot unpickle the generator (%s); this build uses threads", exc)
        return local(j, tolerance)

    return compress


class Shared:
    """An object whose methods run in the worker processes, each call in one of them.

    The object is pickled here once, at the first :meth:`map` that the workers serve; a
    worker unpickles it at its first call and keeps it (with the last few others), so
    what it builds lazily (say, distances) stays there. Once the :class:`Shared` object
    is gone here, each worker drops its copy at its next task (of any kind), and gives
    the memory back: the block Vecchia sets of the 26,633 co2 cells (smoothness free, with
    their distances and interpolation weights) had held 350 MB in each worker for the
    rest of the fit. A worker with no further task keeps its copy until the pool stops.
    When the workers are not :func:`enabled`, the object does not pickle, or the pool
    breaks, the calls run here; a call that raises in a worker runs here again, so that
    its exception is the object's own. The results are the same either way (the same
    operations on the same data), provided the object's methods do not depend on state
    that the calls change.

    Parameters
    ----------
    obj : object
        Its methods are what :meth:`map` calls.
    """

    def __init__(self, obj):
        self.obj = obj
        self.key = (os.getpid(), next(_builds))
        self._payload = None
        self._local_only = False
        weakref.finalize(self, _released.add, self.key)

    def _pickled(self):
        """The pickled object, or None (then the calls run here)."""
        if self._payload is None and not self._local_only:
            self._payload = _pickled(self.obj)
            self._local_only = self._payload is None
        return self._payload

    def map(self, method, calls):
        """``[getattr(obj, method)(*args) for args in calls]``, the calls spread over the
        workers when they are enabled."""
        global _broken
        local = [functools.partial(getattr(self.obj, method), *args) for args in calls]
        if len(calls) < 2 or not enabled() or self._pickled() is None:
            return [here() for here in local]
        start()
        futures = []
        try:
            if not _broken:
                released = _released_keys()
                futures = [_get_pool().submit(_call_remote, self.key, self._payload, method, args, released)
                           for args in calls]
        except BrokenProcessPool:
            futures = []
        results = []
        for future, here in zip(futures, local):
            try:
                results.append(future.result())
            except BrokenProcessPool:
                break
            except _Unpicklable as exc:
                logger.debug("tlrcore: the workers cannot unpickle %s (%s); it runs here", type(self.obj), exc)
                self._payload, self._local_only = None, True
                results.append(here())
            except Exception:  # raised there: here, the object's own exception (or result)
                results.append(here())
        if len(results) < len(local):  # the pool broke (or could not start)
            if not _broken:
                logger.warning("tlrcore: the worker processes stopped; running here from now on")
            _broken = True
            results += [here() for here in local[len(results):]]
        return results

    def __getstate__(self):
        # Pickled as the object alone (for joblib or Dask): the payload is made again.
        return {"obj": self.obj}

    def __setstate__(self, state):
        self.__init__(state["obj"])


def _call_remote(key, payload, method, args, released):
    """In a worker: ``getattr(obj, method)(*args)`` for the :class:`Shared` object `key`
    (after dropping the objects `released`)."""
    _drop(released)
    obj = _worker_shared.pop(key, None)
    if obj is None:
        try:
            obj = pickle.loads(payload)
        except Exception as exc:
            raise _Unpicklable(f"{type(exc).__name__}: {exc}") from None
        while len(_worker_shared) >= _KEPT:
            _worker_shared.pop(next(iter(_worker_shared)))
    _worker_shared[key] = obj  # most recently used last
    with one_blas_thread_block():
        return getattr(obj, method)(*args)


def _released_keys():
    """The keys of :data:`_released`, from a copy: a garbage collection during the
    iteration could run a finalizer that adds to the set."""
    return tuple(_released.copy())


def _drop(released):
    """In a worker: forget the :class:`Shared` objects `released` by the caller, and give
    their memory back to the system."""
    dropped = sum(_worker_shared.pop(key, None) is not None for key in released)
    if dropped:
        trim_heap()


class _Unpicklable(Exception):
    """A worker could not unpickle the generator (a class defined after the fork, say)."""


def _get_pool():
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(workers(), mp_context=multiprocessing.get_context("fork"))
    return _pool


def _warm_up():
    """The worker's process id (the first task makes the pool fork its workers)."""
    return os.getpid()


def _compress_remote(build, payload, offsets, j, tolerance, max_rank, released):
    """In a worker: the factors of tile column `j`, as the threads compute them (after
    dropping the :class:`Shared` objects `released`)."""
    global _worker_build
    _drop(released)
    if _worker_build[0] != build:
        try:
            generator = pickle.loads(payload)
        except Exception as exc:
            raise _Unpicklable(f"{type(exc).__name__}: {exc}") from None
        _worker_build = (build, CheckedBlock(generator))
    tiles = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(offsets) - 1)]
    with one_blas_thread_block():
        return compress_column(_worker_build[1], tiles, j, tolerance, max_rank)
