"""Worker processes forked from the caller, for work that holds the GIL: the tile columns of
a CPU TLR build (:mod:`tlrcore.compress.in_processes`) and the calls of a :class:`Shared`
object.

A task (:func:`call`) is a module-level function run in one worker, which may unpickle a
payload once per build (:func:`unpickled_once`) and return its result through the shared
memory files (:func:`spooled`). ``TLRCORE_PROCESSES`` decides where the work runs: unset
or empty, builds with tiles of at most :data:`AUTO_MAX_TILE` inside a :func:`hold`, builds
of at least :data:`AUTO_MIN_COLUMNS` tile columns anywhere, and :class:`Shared` calls in
any hold; ``1``: all of them, always; ``0``: none. There are workers only with more than
one worker thread, on Linux, outside daemonic processes (a Dask worker), until the pool
breaks; otherwise the work runs in the caller.

The workers are forked (spawned ones would import the caller's main script again) from a
thread with no other work running; the caller's pages at the fork are copied on its first
writes and held by the workers while they live. After the last hold (unless a build's
own) they drop what they keep, trim their heaps and wait :data:`IDLE_TIMEOUT` seconds for
the next hold; :func:`shutdown` stops them. They end with the caller however it ends: each
asks for ``SIGKILL`` at its parent's end (``prctl(PR_SET_PDEATHSIG)`` [1]_, which follows
the forking *thread*), or else watches the pipe by which :mod:`multiprocessing` signals it.

References
----------
.. [1] prctl(2), Linux man-pages, ``PR_SET_PDEATHSIG``:
   https://man7.org/linux/man-pages/man2/prctl.2.html
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from tlrcore.concurrency.heap import trim_heap
from tlrcore.concurrency.spool import Spool, unspool
from tlrcore.concurrency.threads import one_blas_thread_block, tile_work, workers

__all__ = [
    "AUTO_MAX_TILE",
    "AUTO_MIN_COLUMNS",
    "IDLE_TIMEOUT",
    "ResultLost",
    "Shared",
    "Unpicklable",
    "broken",
    "call",
    "enabled",
    "hold",
    "new_key",
    "pickled",
    "setting",
    "shutdown",
    "spooled",
    "start",
    "unpickled_once",
]

logger = logging.getLogger(__name__)

#: Largest tile that the workers serve by default in a hold, whatever the build's size.
AUTO_MAX_TILE = 1024
#: Fewest tile columns of a build that the workers serve by default with tiles of any
#: size, in a hold or not (outside one, for that build alone): from about this size the
#: processes beat the threads, whose ACA holds the GIL and faults pages in one address space.
AUTO_MIN_COLUMNS = 16
#: Seconds the workers wait, idle, after the last hold closes, for the next hold of the
#: process to use them instead of forking new ones; then they stop. ``0`` stops them when
#: the hold closes.
IDLE_TIMEOUT = 60.0
#: Seconds a worker waits for the others at the release of :func:`_rest`.
_RELEASE_WAIT = 10.0

_pool = None
#: The memory files through which the pool's workers hand back results (inherited at the fork).
_spool = None
#: The pool's workers meet at this barrier in :func:`_release`, so that each takes one task.
_barrier = None
#: Stops the idle workers :data:`IDLE_TIMEOUT` seconds after the last hold closed.
_idle_timer = None
_broken = False
_holds = 0
_holds_lock = threading.Lock()
#: Numbers the builds and :class:`Shared` objects (:func:`new_key`), so that a worker
#: unpickles each one's payload once.
_builds = itertools.count()
#: In a worker: ``(key, object)`` that the tasks of the build it served last unpickled
#: (:func:`unpickled_once`).
_worker_build = (None, None)
#: In a worker: the :class:`Shared` objects it used last, by key (at most :data:`_KEPT`).
_worker_shared: dict[tuple[int, int], object] = {}
_KEPT = 4
#: Keys of the :class:`Shared` objects gone here: every task tells the workers to drop them.
_released: set[tuple[int, int]] = set()
#: Whether the last fork of this process was made from its main thread (in a worker:
#: whether the caller forked it from its main thread), noted just before each fork.
_forked_from_main_thread = False
#: ``option`` of ``prctl`` that sets the signal sent at the parent's end (``<linux/prctl.h>``).
_PR_SET_PDEATHSIG = 1


def setting():
    """``TLRCORE_PROCESSES``: ``"auto"`` (unset or empty), ``"always"`` (1) or ``"never"`` (0);
    ValueError for any other value."""
    value = os.environ.get("TLRCORE_PROCESSES", "")
    if value not in ("", "0", "1"):
        raise ValueError(
            f"TLRCORE_PROCESSES={value!r} must be 1 (worker processes for every CPU build), "
            "0 (none) or unset (for tiles of at most 1024 during a fit, and for builds of at least "
            f"{AUTO_MIN_COLUMNS} tile columns)."
        )
    return {"": "auto", "0": "never", "1": "always"}[value]


def enabled(tile_size=None, n_tiles=0):
    """Whether the tile columns of a build of `n_tiles` tiles of `tile_size` go to the workers
    (None: whether :class:`Shared` calls do): by :func:`setting`, with more than one worker,
    on Linux, in a process allowed children, no pool broken before."""
    chosen = setting()
    auto = (_holds and (tile_size or 0) <= AUTO_MAX_TILE) or n_tiles >= AUTO_MIN_COLUMNS
    if chosen == "never" or (chosen == "auto" and not auto):
        return False
    return (
        workers() > 1
        and sys.platform == "linux"
        and not _broken
        and not multiprocessing.current_process().daemon
    )


@contextlib.contextmanager
def hold(tile_size, linger=True):
    """A hold on the workers for the builds inside the block (tiles of `tile_size`), forking them
    unless running; holds nest, in several threads too.

    Open it from a thread that holds no lock, with no other thread of the caller working (a
    fork copies every thread's locks). After the last hold the workers idle
    :data:`IDLE_TIMEOUT` seconds, or stop at once for ``linger=False``."""
    global _holds
    size = workers()
    with _holds_lock:
        _holds += 1
        _cancel_idle_stop()
        if _holds == 1 and _pool is not None and _barrier.parties != size:
            shutdown()  # idle workers of another number than now asked for
    try:
        if enabled(tile_size):
            start()
        yield
    finally:
        with _holds_lock:
            _holds -= 1
            if not _holds:
                _rest(linger)


def start():
    """Fork the pool's workers now, unless they are running (from a thread that holds no lock,
    with no other thread of the caller working)."""
    global _broken
    if _pool is not None:  # running: a dead worker shows at the next submission
        return
    try:
        # forked with BLAS on one thread, the workers keep it so and never start BLAS's threads
        with one_blas_thread_block():
            _get_pool().submit(_warm_up).result()
    except (OSError, BrokenProcessPool) as exc:  # no fork, no semaphores (/dev/shm), a dead worker
        _broken = True
        logger.warning("tlrcore: no worker processes (%s); working on threads", exc)


def shutdown():
    """Stop the workers (the next use forks new ones)."""
    global _pool, _spool
    _cancel_idle_stop()
    _released.clear()
    if _pool is not None:
        _pool.shutdown()
        _pool = None
        _spool = None  # its files live on while tiles read from them do


def _rest(linger):
    """After the last hold: the workers drop what they keep and idle :data:`IDLE_TIMEOUT`
    seconds; they stop at once when not to `linger`, with no timeout, when some could not be
    reached, or with ``TLRCORE_PROCESSES`` set."""
    global _idle_timer
    if _pool is None:
        return
    try:
        by_default = setting() == "auto"
    except ValueError:  # set to a bad value since the hold opened: stop the workers
        by_default = False
    if not (linger and by_default) or IDLE_TIMEOUT <= 0 or not _released_everywhere():
        shutdown()
        return
    _idle_timer = threading.Timer(IDLE_TIMEOUT, _stop_if_idle)
    _idle_timer.daemon = True
    _idle_timer.start()


def _released_everywhere():
    """Run :func:`_release` once in every worker (each waits at the barrier, so none takes two);
    whether all did."""
    try:
        futures = [_pool.submit(_release) for _ in range(_barrier.parties)]
        for future in futures:
            future.result(timeout=2 * _RELEASE_WAIT)
    except Exception:  # a broken pool or barrier, a worker that did not answer
        return False
    _released.clear()
    return True


def _stop_if_idle():
    """The idle timer's end: stop the workers unless a hold opened meanwhile."""
    with _holds_lock:
        if not _holds:
            shutdown()


def _cancel_idle_stop():
    global _idle_timer
    if _idle_timer is not None:
        _idle_timer.cancel()
        _idle_timer = None


def broken():
    """Whether the pool broke (or could not start): the work then stays in the caller."""
    return _broken


def new_key():
    """A key for a build or a :class:`Shared` object (process id and a count), under which a
    worker keeps what it unpickled for it."""
    return (os.getpid(), next(_builds))


def pickled(obj):
    """`obj` pickled, or None where it does not pickle (the caller then does the work)."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # whatever keeps it from pickling
        return None


def call(task, args, size=None):
    """``task(*args, spooling)`` run in a worker (in a :func:`hold`, workers started), and its
    result; `spooling` is ``(region, size)`` of the spool for a result of at most `size` bytes
    (:func:`spooled`), or None.

    Raises
    ------
    concurrent.futures.process.BrokenProcessPool
        A worker died; the workers are not used again (:func:`broken`).
    Unpicklable
        The worker could not unpickle a payload of the task.
    ResultLost
        The result's spool region could not be mapped.
    """
    global _broken
    pool, spool = _get_pool(), _spool
    region = None if spool is None or size is None else spool.region(size)
    try:
        result = pool.submit(
            _run, task, args, _released_keys(), None if region is None else (region, size)
        ).result()
    except BrokenProcessPool:
        _broken = True
        if region is not None:
            spool.discard(*region, size)  # the worker may have written the result before it died
        raise
    else:
        try:
            return unspool(spool, result)
        except OSError as exc:  # its spool region not mapped
            raise ResultLost(str(exc)) from exc
    finally:
        if region is not None:
            spool.done(region)


class Shared:
    """An object `obj` whose methods run in the worker processes, one call each.

    Pickled once, at the first :meth:`map` the workers serve; a worker keeps its copy (with
    the last few others) until the object is gone here. Where the workers are not
    :func:`enabled`, the object does not pickle, or the pool breaks, the calls run here; a call
    that raises in a worker runs here again, so the exception is the object's own. Results are
    the same either way, provided the methods do not depend on state the calls change."""

    def __init__(self, obj):
        self.obj = obj
        self.key = new_key()
        self._payload = None
        self._local_only = False
        weakref.finalize(self, _released.add, self.key)

    def _pickled(self):
        """The pickled object, or None (then the calls run here)."""
        if self._payload is None and not self._local_only:
            self._payload = pickled(self.obj)
            self._local_only = self._payload is None
        return self._payload

    def map(self, method, calls):
        """``[getattr(obj, method)(*args) for args in calls]``, spread over the workers when
        they are enabled."""
        global _broken
        local = [functools.partial(getattr(self.obj, method), *args) for args in calls]
        if len(calls) < 2 or not enabled() or self._pickled() is None:
            return [here() for here in local]
        start()
        futures = []
        try:
            if not _broken:
                released = _released_keys()
                futures = [
                    _get_pool().submit(
                        _call_remote, self.key, self._payload, method, args, released
                    )
                    for args in calls
                ]
        except BrokenProcessPool:
            futures = []
        results = []
        for future, here in zip(futures, local, strict=False):
            try:
                results.append(future.result())
            except BrokenProcessPool:
                break
            except Unpicklable as exc:
                logger.debug(
                    "tlrcore: the workers cannot unpickle %s (%s); it runs here",
                    type(self.obj),
                    exc,
                )
                self._payload, self._local_only = None, True
                results.append(here())
            except Exception:  # raised there: here, the object's own exception (or result)
                results.append(here())
        if len(results) < len(local):  # the pool broke (or could not start)
            if not _broken:
                logger.warning("tlrcore: the worker processes stopped; running here from now on")
            _broken = True
            results += [here() for here in local[len(results) :]]
        return results

    def __getstate__(self):
        # Pickled as the object alone (for joblib or Dask): the payload is made again.
        return {"obj": self.obj}

    def __setstate__(self, state):
        self.__init__(state["obj"])


def _call_remote(key, payload, method, args, released):
    """In a worker: ``getattr(obj, method)(*args)`` for the :class:`Shared` object `key`, after
    dropping the objects `released`."""
    _drop(released)
    obj = _worker_shared.pop(key, None)
    if obj is None:
        try:
            obj = pickle.loads(payload)
        except Exception as exc:
            raise Unpicklable(f"{type(exc).__name__}: {exc}") from None
        while len(_worker_shared) >= _KEPT:
            _worker_shared.pop(next(iter(_worker_shared)))
    _worker_shared[key] = obj  # most recently used last
    with tile_work():
        return getattr(obj, method)(*args)


def _released_keys():
    """The keys of :data:`_released`, from a copy (a finalizer may add to the set meanwhile)."""
    return tuple(_released.copy())


def _drop(released):
    """In a worker: forget the :class:`Shared` objects `released`, and trim the heap."""
    dropped = sum(_worker_shared.pop(key, None) is not None for key in released)
    if dropped:
        trim_heap()


class Unpicklable(Exception):
    """A worker could not unpickle a payload (a class defined after the fork, say)."""


class ResultLost(OSError):
    """A worker's result could not be read back from the spool (its region not mapped)."""


def _get_pool():
    global _pool, _barrier, _spool
    if _pool is None:
        context = multiprocessing.get_context("fork")
        _barrier = context.Barrier(workers())  # the workers inherit it when forked
        _spool = Spool.open(workers())  # and these
        _pool = ProcessPoolExecutor(workers(), mp_context=context, initializer=_end_with_the_caller)
    return _pool


def _note_the_forking_thread():
    """Before each fork: note whether the main thread makes it
    (:data:`_forked_from_main_thread`)."""
    global _forked_from_main_thread
    _forked_from_main_thread = threading.current_thread() is threading.main_thread()


os.register_at_fork(before=_note_the_forking_thread)


def _end_with_the_caller():
    """In a worker, as it starts: ask for ``SIGKILL`` at the caller's end when forked from its
    main thread, else (or if refused) watch the caller from a daemon thread; exit at once if
    the caller already ended."""
    caller = multiprocessing.parent_process()
    if not (_forked_from_main_thread and _ask_for_parent_death_signal()):
        threading.Thread(
            target=_exit_with, args=(caller,), name="tlrcore-caller-watch", daemon=True
        ).start()
    if os.getppid() != caller.pid:
        os._exit(1)


def _ask_for_parent_death_signal():
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (not inherited by a fork's child); whether the kernel
    agreed."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no C library to ask, or no prctl in it
        return False
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


def _exit_with(caller):
    """In a worker's watch thread: wait, blocked, for the end of `caller`, then exit."""
    caller.join()
    os._exit(1)


def _release():
    """In a worker: drop what it keeps, trim the heap, and wait for the other workers at the
    barrier."""
    global _worker_build
    _worker_build = (None, None)
    _worker_shared.clear()
    trim_heap()
    _barrier.wait(_RELEASE_WAIT)


def _warm_up():
    """The worker's process id (the first task makes the pool fork its workers)."""
    return os.getpid()


def _run(task, args, released, spooling):
    """In a worker: ``task(*args, spooling)``, after dropping the :class:`Shared` objects
    `released`."""
    _drop(released)
    return task(*args, spooling)


def unpickled_once(key, payload, wrap=None):
    """In a worker: the object in `payload` (through `wrap`), unpickled at the first task of
    `key` and kept until another key's task or the last hold's close; raises
    :class:`Unpicklable` where it does not unpickle."""
    global _worker_build
    if _worker_build[0] != key:
        try:
            obj = pickle.loads(payload)
        except Exception as exc:
            raise Unpicklable(f"{type(exc).__name__}: {exc}") from None
        _worker_build = (key, obj if wrap is None else wrap(obj))
    return _worker_build[1]


def spooled(result, spooling):
    """In a worker: `result` written to the spool where it can be (`spooling` from :func:`call`),
    else `result` itself, which then takes the pipe."""
    return result if spooling is None or _spool is None else _spool.write(result, *spooling)
