"""Worker processes forked from the caller, for work that holds the GIL: the tile columns
of a CPU TLR build (:mod:`tlrcore.compress.in_processes`) and the calls of a
:class:`Shared` object (geostat's block Vecchia likelihood).

A task (:func:`call`) is a module-level function and its arguments, run in one worker;
it may unpickle a payload once per build and worker (:func:`unpickled_once`) and write
its result to the memory files shared with the caller (:func:`spooled`,
:mod:`tlrcore.concurrency.spool`). Pages of the caller that exist when the workers are
forked are copied on its first writes (0.6 s more for the first factorization at 32,768
sites when the fork came in the middle of its build), and stay held by the workers while
they live, even once the caller frees them.

When the workers serve a build, set by ``TLRCORE_PROCESSES``:

* unset or empty (the default): inside a :func:`hold` (a geostat fit opens one around
  its optimization), for tiles of at most 1024 (:data:`AUTO_MAX_TILE`); and with any
  tile size, in a hold or not, for builds of at least :data:`AUTO_MIN_COLUMNS` tile
  columns (outside a hold, the build opens one of its own, and the workers stop
  with it);
* ``1``: every build, with any tile size, in a hold or not;
* ``0``: never.

The same setting decides where the calls of a :class:`Shared` object run, with no tile
size: by default in any hold (forking the workers at the first call if the hold's
tiles were too large for them), always with ``1``, never with ``0``. There are workers
only with more than one worker thread (:func:`tlrcore.concurrency.threads.workers`), on
Linux, in a process that may have children (not a daemonic one, such as a Dask
worker's), and as long as the pool has not broken; otherwise the work runs in the
caller.

The workers are forked: a fork server or spawned processes would import the caller's
main script again (running a script without a ``__main__`` guard twice) and take about
3 s to import NumPy, SciPy and geostat; a fork and its warm-up take 25 ms, the shutdown
11 ms. They are forked from a thread with no other work running: when the first hold
opens (before the fit's large arrays exist), or, for a build they serve outside a hold,
before its first tile, while the tile pool's threads wait, or at a
:class:`Shared` object's first calls (in a fit with tiles above 1024: the block Vecchia
likelihood, before the first build).

By default, when the last hold closes (unless it was a build's own), each worker
drops the generator and the :class:`Shared` objects it keeps and trims its heap; the
workers then wait :data:`IDLE_TIMEOUT` seconds (a minute) for the next hold, which
uses them without a fork, and stop if none comes. Forking anew for every fit cost more
than the fork: the caller's pages become copy-on-write, and its first write to each (in
a fit, mostly to the free memory of its heaps) is a page fault. A co2 fit of 8,192 cells
after others in the same process took 4.5-4.8 s with idle workers against 5.0-5.3 s with
workers forked for it (system time 0.3-0.5 s against 1.0-1.3 s). While idle, the workers
hold little of their own, but keep the caller's pages as they were at the fork: what the
caller frees meanwhile stays allocated until they stop (:func:`shutdown` stops them at
once).

The workers end with the caller, however it ends. When it exits or is interrupted
(Ctrl-C), they stop as they always did. A caller killed (``SIGKILL``, ``SIGTERM``,
``timeout``, a batch scheduler's time limit, the OOM killer) stops nothing, and the
workers, waiting on the pool's queue, would wait for good, holding their copies of its
pages. So each worker,
as it starts (:func:`_end_with_the_caller`), asks the kernel for ``SIGKILL`` when its
parent ends (``prctl(PR_SET_PDEATHSIG)`` [1]_), then exits at once if the caller has
already ended (its parent is then another process). That signal follows the *thread*
that forked the worker, not the process: a worker forked from another thread than the
caller's main thread (a fit run on a thread pool's thread) would be killed when that
thread ends, with the caller alive and the pool broken. Such a worker, and one whose
kernel refuses the request, instead watches on a daemon thread of its own the pipe by
which :mod:`multiprocessing` tells a child that its parent has ended
(:func:`multiprocessing.parent_process`), blocked in ``poll`` until the caller's end
closes it, and then exits. The pipe of each worker is also held open by the workers
forked after it (which end in turn, the last first) and by any child that the caller
forks without ``exec`` while the worker lives (a :mod:`subprocess` child does not hold
it): a watching worker outlives the caller as long as such a child does.

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
#: size, in a hold or not (outside one, for that build alone). Measured on a 2-core
#: Intel machine (2-D exponential kernel, accuracy 1e-8, tiles of 2048, builds outside a
#: hold, two runs each): 16 columns (32,768 sites) 2.05-2.13 s against 2.21-2.28 s on
#: threads, 32 columns 5.2-5.5 s against 6.0-6.1 s, 64 columns 12.0-13.9 s against
#: 15.1-16.9 s (ACA's Python holds the GIL, and two threads fault pages in one address
#: space: the build's system time doubled).
AUTO_MIN_COLUMNS = 16
#: Seconds the workers wait, idle, after the last hold closes, for the next hold of
#: the process (the next fit of a notebook, a benchmark's repeats) to use them instead of
#: forking new ones; then they stop. ``0`` stops them when the hold closes.
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
    """``TLRCORE_PROCESSES``: ``"auto"`` (unset or empty), ``"always"`` (1) or ``"never"`` (0).

    Raises
    ------
    ValueError
        For any other value.
    """
    value = os.environ.get("TLRCORE_PROCESSES", "")
    if value not in ("", "0", "1"):
        raise ValueError(
            f"TLRCORE_PROCESSES={value!r} must be 1 (worker processes for every CPU build), "
            "0 (none) or unset (for tiles of at most 1024 during a fit, and for builds of at least "
            f"{AUTO_MIN_COLUMNS} tile columns)."
        )
    return {"": "auto", "0": "never", "1": "always"}[value]


def enabled(tile_size=None, n_tiles=0):
    """Whether the tile columns of a build with `n_tiles` tiles of `tile_size` go to worker
    processes (``None``: whether the calls of a :class:`Shared` object do): by
    :func:`setting`, with more than one worker, on Linux, in a process allowed children,
    and no pool broken before."""
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
    """A hold on worker processes for the builds inside the block (with tiles of
    `tile_size`): they are forked when it opens unless running, and kept while any hold is
    open.

    Open it from a thread that holds no lock, with no other thread of the caller's working
    (a fork copies the locks of every thread as they are). Holds nest and may be open
    in several threads at once. When the last one closes, the workers drop what they keep
    and wait :data:`IDLE_TIMEOUT` seconds for the next hold before they stop
    (:func:`_rest`), or, if that hold was opened with ``linger=False``, stop at once.
    """
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
    """Fork the pool's workers now, unless they are running.

    Call it from a thread that holds no lock, with no other thread of the caller's
    working: a fork copies the locks of every thread as they are.
    """
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
    """After the last hold: the workers drop what they keep (a build's generator, the
    :class:`Shared` objects) and trim their heaps (:func:`_release`), then stay idle for
    :data:`IDLE_TIMEOUT` seconds unless a hold opens (see the module's notes).

    They are stopped at once when not to `linger`, with no timeout, when some could not
    be reached, or with ``TLRCORE_PROCESSES`` set: only by default does every use of the
    pool happen in a hold (``1`` sends :class:`Shared` calls to it outside holds
    too, which the idle timer could meet as it stops the pool).
    """
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
    """Run :func:`_release` once in every worker (each waits at the barrier for the others,
    so none takes two); whether all did."""
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
    """A key of its own for a build or a :class:`Shared` object (the caller's process id
    and a count), under which a worker keeps what it unpickled for it."""
    return (os.getpid(), next(_builds))


def pickled(obj):
    """`obj` pickled, or None where it does not pickle (the caller then does the work)."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # whatever keeps it from pickling
        return None


def call(task, args, size=None):
    """Here, in a :func:`hold` with the workers started: ``task(*args, spooling)`` run in
    a worker process, and its result.

    `task` is a function of a module (pickled by reference). `spooling` is the ``(region,
    size)`` of the spool where the task may write a result of at most `size` bytes
    (:func:`spooled`), or None (no `size`, no spool, or every file of it in use); a
    spooled result comes back as views of its region.

    Raises
    ------
    concurrent.futures.process.BrokenProcessPool
        The pool broke (a worker died): the workers are not used again (:func:`broken`).
    Unpicklable
        The worker could not unpickle a payload of the task (:func:`unpickled_once`).
    ResultLost
        The result's region of the spool could not be mapped (it is cut out of the file).
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
                futures = [
                    _get_pool().submit(
                        _call_remote, self.key, self._payload, method, args, released
                    )
                    for args in calls
                ]
        except BrokenProcessPool:
            futures = []
        results = []
        for future, here in zip(futures, local):
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
    """In a worker: ``getattr(obj, method)(*args)`` for the :class:`Shared` object `key`
    (after dropping the objects `released`)."""
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
    """The keys of :data:`_released`, from a copy: a garbage collection during the
    iteration could run a finalizer that adds to the set."""
    return tuple(_released.copy())


def _drop(released):
    """In a worker: forget the :class:`Shared` objects `released` by the caller, and give
    their memory back to the system."""
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
    """Before each fork of this process: note whether its main thread makes it (the
    child keeps the note, :data:`_forked_from_main_thread`)."""
    global _forked_from_main_thread
    _forked_from_main_thread = threading.current_thread() is threading.main_thread()


os.register_at_fork(before=_note_the_forking_thread)


def _end_with_the_caller():
    """In a worker, as it starts: arrange that it ends when the caller does, however the
    caller ends (see the module's notes).

    Forked from the caller's main thread, the worker asks the kernel for ``SIGKILL`` at
    the caller's end (:func:`_ask_for_parent_death_signal`); forked from another thread,
    or refused, it watches the caller from a daemon thread (:func:`_exit_with`). Either
    way, it exits at once if the caller ended before the request: the worker's parent is
    then another process.
    """
    caller = multiprocessing.parent_process()
    if not (_forked_from_main_thread and _ask_for_parent_death_signal()):
        threading.Thread(
            target=_exit_with, args=(caller,), name="tlrcore-caller-watch", daemon=True
        ).start()
    if os.getppid() != caller.pid:
        os._exit(1)


def _ask_for_parent_death_signal():
    """Ask the kernel to send this process ``SIGKILL`` when the thread that forked it
    ends: ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` [1]_. Whether it agreed.

    The request is this process's alone: a fork's child does not inherit it.

    References
    ----------
    .. [1] prctl(2), Linux man-pages, ``PR_SET_PDEATHSIG``:
       https://man7.org/linux/man-pages/man2/prctl.2.html
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no C library to ask, or no prctl in it
        return False
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0


def _exit_with(caller):
    """In a worker's watch thread: wait, blocked, for the end of `caller` (the
    :func:`multiprocessing.parent_process`: its pipe closes), then exit the worker."""
    caller.join()
    os._exit(1)


def _release():
    """In a worker: drop what it keeps (the object of :func:`unpickled_once`, the
    :class:`Shared` objects), give the memory back to the system, and wait for the other
    workers to do the same."""
    global _worker_build
    _worker_build = (None, None)
    _worker_shared.clear()
    trim_heap()
    _barrier.wait(_RELEASE_WAIT)


def _warm_up():
    """The worker's process id (the first task makes the pool fork its workers)."""
    return os.getpid()


def _run(task, args, released, spooling):
    """In a worker: ``task(*args, spooling)`` (after dropping the :class:`Shared` objects
    `released`)."""
    _drop(released)
    return task(*args, spooling)


def unpickled_once(key, payload, wrap=None):
    """In a worker: the object pickled in `payload`, unpickled (and passed through
    `wrap`) at the first task of `key` (:func:`new_key`), and kept for the next ones until
    a task of another key unpickles its own or the last hold closes.

    Raises
    ------
    Unpicklable
        Where `payload` does not unpickle in the worker.
    """
    global _worker_build
    if _worker_build[0] != key:
        try:
            obj = pickle.loads(payload)
        except Exception as exc:
            raise Unpicklable(f"{type(exc).__name__}: {exc}") from None
        _worker_build = (key, obj if wrap is None else wrap(obj))
    return _worker_build[1]


def spooled(result, spooling):
    """In a worker: `result` written to the spool where it can be (`spooling`: ``(region,
    size)`` from :func:`call`, or None), as :meth:`~tlrcore.concurrency.spool.Spool.write`;
    else `result` itself, which then takes the pipe."""
    return result if spooling is None or _spool is None else _spool.write(result, *spooling)
