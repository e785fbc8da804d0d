"""tlrcore.compress.in_processes and tlrcore.concurrency.processes: the ACA tile columns
of a CPU build compressed in forked workers give the threads' matrix bit for bit; by
default the workers serve tiles of at most 1024 while a fit holds them and builds of many
tile columns; after the last fit they drop what they keep and wait idle for the next one,
then stop;
``TLRCORE_PROCESSES=1`` sends every build to them; every case the processes cannot serve
falls back to the threads."""

import gc
import logging
import os
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest
import scipy.linalg
from problems import covariance, grid_sorted_sites
from threadpoolctl import threadpool_info

import tlrcore as tlr
from tlrcore.compress import in_processes
from tlrcore.concurrency import heap as _malloc
from tlrcore.concurrency import processes as worker_processes
from tlrcore.concurrency import spool as spooling

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the workers are forked on Linux only"
)

N, TILE = 1200, 200


class Exponential:
    """A picklable generator of ``exp(-|x_i - x_j| / 0.2) + 0.01 [i == j]`` that leaves the
    id of the process of every call in `folder` (the workers' calls included), with NaN in
    row `poisoned` of the first tile column when asked."""

    def __init__(self, X, folder=None, poisoned=None):
        self.X, self.folder, self.poisoned = X, folder, poisoned

    def __call__(self, rows, cols):
        if self.folder is not None:
            (self.folder / f"pid-{os.getpid()}").touch()
        C = covariance(self.X[rows], self.X[cols], range_=0.2)
        C[rows[:, None] == cols[None, :]] += 0.01
        if self.poisoned is not None:
            C[(rows == self.poisoned)[:, None] & (cols < TILE)[None, :]] = np.nan
        return C


class Watched(Exponential):
    """:class:`Exponential` that notes, at each call in the process that made it, whether
    the workers were running then."""

    def __init__(self, X, folder=None):
        super().__init__(X, folder)
        self.parent, self.forked_first = os.getpid(), []

    def __call__(self, rows, cols):
        if os.getpid() == self.parent:
            self.forked_first.append(worker_processes._pool is not None)
        return super().__call__(rows, cols)


@pytest.fixture
def sites():
    return grid_sorted_sites(N)


@pytest.fixture
def processes(monkeypatch):
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(worker_processes, "_broken", False)
    yield
    worker_processes.shutdown()


def build(block):
    return tlr.TLRMatrix.from_generator(block, N, TILE, accuracy=1e-9, method="aca")


def assert_same_matrix(A, B):
    assert A.U.keys() == B.U.keys()
    for key in A.U:
        assert np.array_equal(A.U[key], B.U[key]) and np.array_equal(A.V[key], B.V[key]), key
    for D, E in zip(A.diagonal, B.diagonal, strict=True):
        assert np.array_equal(D, E)


def test_workers_give_the_threads_matrix_bit_for_bit(sites, processes, tmp_path, monkeypatch):
    in_workers = build(Exponential(sites, tmp_path))
    pids = {int(p.name.split("-")[1]) for p in tmp_path.iterdir()}
    assert len(pids - {os.getpid()}) >= 1  # the columns were compressed elsewhere
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    assert not worker_processes.enabled()
    assert_same_matrix(in_workers, build(Exponential(sites)))
    dense = Exponential(sites)(np.arange(N), np.arange(N))
    assert np.linalg.norm(in_workers.to_dense() - dense) <= 1e-9 * np.linalg.norm(dense)


def test_deferred_columns_compressed_by_the_workers_as_a_factorization_reads_them(
    sites, processes, tmp_path, monkeypatch
):
    """The workers compress a deferred matrix's columns while the factorization runs, to the
    threads' tiles, and stop once the last column is compressed."""
    deferred = tlr.TLRMatrix.from_generator(
        Exponential(sites, tmp_path), N, TILE, accuracy=1e-9, method="aca", deferred=True
    )
    assert worker_processes._pool is not None  # held while columns are pending
    factor = tlr.cholesky(deferred, overwrite_a=True)
    assert worker_processes._pool is None
    pids = {int(p.name.split("-")[1]) for p in tmp_path.iterdir()}
    assert len(pids - {os.getpid()}) >= 1
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    threads = tlr.TLRMatrix.from_generator(
        Exponential(sites), N, TILE, accuracy=1e-9, method="aca", deferred=True
    )
    assert_same_matrix(
        build(Exponential(sites)),
        tlr.TLRMatrix.from_generator(
            Exponential(sites), N, TILE, accuracy=1e-9, method="aca", deferred=True
        ),
    )
    assert np.array_equal(factor.to_dense(), tlr.cholesky(threads, overwrite_a=True).to_dense())


class AdviceWatched(Exponential):
    """:class:`Exponential` that leaves, at each call, a file in `folder` naming the
    process and whether NumPy's huge-page advice was on."""

    def __call__(self, rows, cols):
        multiarray = pytest.importorskip("numpy._core.multiarray")
        (self.folder / f"{os.getpid()}-{multiarray._get_madvise_hugepage()}").touch()
        return Exponential(self.X)(rows, cols)

    @staticmethod
    def advice(_):
        return os.getpid(), pytest.importorskip("numpy._core.multiarray")._get_madvise_hugepage()


def test_the_workers_tile_work_is_off_huge_pages_though_forked_with_the_advice_on(
    sites, processes, tmp_path
):
    """A build forks the workers before its tile pool turns NumPy's huge-page advice off
    (tlrcore.concurrency.heap.small_pages); the workers turn it off for their own work."""
    multiarray = pytest.importorskip("numpy._core.multiarray")
    if not hasattr(multiarray, "_get_madvise_hugepage") or not _malloc._tuning_enabled():
        pytest.skip("no huge-page switch in this NumPy, or allocator tuning off here")
    before = multiarray._set_madvise_hugepage(True)
    try:
        build(AdviceWatched(sites, tmp_path))
        shared = worker_processes.Shared(AdviceWatched(sites)).map("advice", [(0,), (1,)])
    finally:
        multiarray._set_madvise_hugepage(before)
    calls = {tuple(p.name.split("-")) for p in tmp_path.iterdir()}
    assert {pid for pid, _ in calls} - {str(os.getpid())}  # the workers made tiles
    assert {advice for _, advice in calls} == {"False"}
    assert {pid for pid, _ in shared} - {os.getpid()} and {advice for _, advice in shared} == {
        False
    }


def test_a_generator_that_does_not_pickle_stays_on_the_threads(sites, processes):
    inner = Exponential(sites)
    closure = lambda rows, cols: inner(rows, cols)  # noqa: E731  (a lambda does not pickle)
    assert_same_matrix(build(closure), build(inner))


def test_a_generator_the_workers_cannot_unpickle_stays_on_the_threads(sites, processes, caplog):
    caplog.set_level(logging.DEBUG, logger=in_processes.__name__)
    worker_processes.start()  # forked now: a class made after this is unknown to them

    class Late(Exponential):
        pass

    Late.__module__, Late.__qualname__ = __name__, "Late"
    globals()["Late"] = Late  # picklable here, by reference; not in the forked workers
    try:
        assert_same_matrix(build(Late(sites)), build(Exponential(sites)))
        assert "cannot unpickle" in caplog.text
    finally:
        del globals()["Late"]


def test_a_generator_error_in_a_worker_names_the_tile(sites, processes):
    with pytest.raises(tlr.GeneratorError, match=r"\(5, 0\)|column 0"):
        # (row 1028: one that the parent's norm and symmetry samples, seeded, do not read)
        build(Exponential(sites, poisoned=1028))


class FailingInWorkers(Exponential):
    """:class:`Exponential` whose calls outside the process that made it raise an OSError
    (a file the generator reads, gone in the workers)."""

    def __init__(self, X):
        super().__init__(X)
        self.parent = os.getpid()

    def __call__(self, rows, cols):
        if os.getpid() != self.parent:
            raise OSError("data file gone")
        return super().__call__(rows, cols)


def test_an_os_error_of_the_generator_in_a_worker_is_raised_not_taken_for_a_lost_column(
    sites, processes, caplog
):
    with pytest.raises(OSError, match="data file gone"):
        build(FailingInWorkers(sites))
    assert "lost on its way" not in caplog.text


def test_a_broken_pool_falls_back_to_the_threads_for_good(sites, processes, monkeypatch, caplog):
    expected = build(Exponential(sites))

    class Broken:
        def submit(self, *args):
            raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(worker_processes, "_get_pool", lambda: Broken())
    monkeypatch.setattr(worker_processes, "start", lambda: None)
    assert_same_matrix(build(Exponential(sites)), expected)
    assert worker_processes._broken and not worker_processes.enabled()
    assert "stopped" in caplog.text


def test_a_pool_that_cannot_start_leaves_the_threads(sites, processes, monkeypatch, caplog):
    expected = build(Exponential(sites))
    worker_processes.shutdown()  # no pool running: the next build must start one

    def no_semaphores():
        raise OSError("[Errno 38] Function not implemented")  # what a sandbox without /dev/shm says

    monkeypatch.setattr(worker_processes, "_get_pool", no_semaphores)
    assert_same_matrix(build(Exponential(sites)), expected)
    assert worker_processes._broken and "no worker processes" in caplog.text


def test_off_with_one_worker_or_inside_a_daemonic_process(processes, monkeypatch):
    assert worker_processes.enabled()
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    assert not worker_processes.enabled()
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(
        worker_processes.multiprocessing.current_process(), "daemon", True, raising=False
    )
    assert not worker_processes.enabled()


@pytest.fixture
def auto(monkeypatch):
    """The default setting, with workers that stop as the last hold closes (no idle
    wait: :func:`test_idle_workers_serve_the_next_hold_then_stop` tests that)."""
    monkeypatch.delenv("TLRCORE_PROCESSES", raising=False)
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(worker_processes, "_broken", False)
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 0.0)
    yield
    worker_processes.shutdown()


def every_worker():
    """What each worker of the running pool keeps, one answer per worker (they meet at a
    barrier, as in the release): ``(pid, keys of its Shared objects, whether it keeps a
    build's generator)``."""
    pool, parties = worker_processes._get_pool(), worker_processes._barrier.parties
    return [
        future.result(timeout=30)
        for future in [pool.submit(_kept_at_barrier) for _ in range(parties)]
    ]


def _kept_at_barrier():
    worker_processes._barrier.wait(10)
    return Summer.cached()


def worker_pids():
    return {pid for pid, _, _ in every_worker()}


def test_idle_workers_serve_the_next_hold_then_stop(auto, monkeypatch):
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 0.5)
    with worker_processes.hold(1024):
        pool, pids = worker_processes._pool, worker_pids()
    assert worker_processes._pool is pool and worker_processes._holds == 0  # idle, not stopped
    assert not worker_processes.enabled(1024)  # outside a hold, small tiles stay on the threads
    with worker_processes.hold(1024):
        assert worker_processes._pool is pool and worker_pids() == pids  # no new fork
    deadline = time.monotonic() + 10
    while worker_processes._pool is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker_processes._pool is None  # stopped once idle for IDLE_TIMEOUT


def test_a_hold_asking_for_another_number_of_workers_replaces_idle_ones(auto, monkeypatch):
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 30.0)
    with worker_processes.hold(1024):
        idle = worker_processes._pool
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "3")
    with worker_processes.hold(1024):
        assert worker_processes._pool is not idle and len(worker_pids()) == 3


def test_the_workers_drop_what_they_keep_when_the_last_hold_closes(sites, auto, monkeypatch):
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 30.0)
    kept = worker_processes.Shared(Summer(np.arange(100.0)))  # still alive here
    with worker_processes.hold(TILE):
        build(Exponential(sites))
        kept.map("part", [(i, 4) for i in range(4)])
        during = every_worker()
    assert any(kept.key in keys for _, keys, _ in during) and any(built for _, _, built in during)
    assert worker_processes._pool is not None  # idle
    after = every_worker()
    assert {pid for pid, _, _ in after} == {pid for pid, _, _ in during}
    assert not any(kept.key in keys or built for _, keys, built in after)


def test_with_the_workers_forced_on_they_stop_with_the_last_hold(processes, monkeypatch):
    """``TLRCORE_PROCESSES=1`` also sends Shared calls made outside any hold to the
    workers, which an idle timer could stop under them: the workers do not wait idle."""
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 30.0)
    with worker_processes.hold(1024):
        assert worker_processes._pool is not None
    assert worker_processes._pool is None and worker_processes._idle_timer is None


def test_a_setting_made_bad_during_the_hold_stops_the_workers_at_its_close(auto, monkeypatch):
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 30.0)
    with worker_processes.hold(1024):
        assert worker_processes._pool is not None
        monkeypatch.setenv("TLRCORE_PROCESSES", "yes")
    assert worker_processes._pool is None and worker_processes._idle_timer is None


def test_workers_that_miss_the_release_are_stopped(auto, monkeypatch):
    """A worker that does not reach the release (here: the barrier waits for one more
    worker than there is) makes the last hold's close stop the pool at once."""
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 30.0)
    monkeypatch.setattr(worker_processes, "_RELEASE_WAIT", 0.2)  # before the fork: the workers' own
    with worker_processes.hold(1024):
        monkeypatch.setattr(
            worker_processes, "_barrier", threading.Barrier(worker_processes._barrier.parties + 1)
        )
    assert worker_processes._pool is None and worker_processes._idle_timer is None


def test_by_default_the_workers_serve_small_tiles_inside_a_hold_and_stop_with_it(auto):
    assert worker_processes.setting() == "auto"
    assert not worker_processes.enabled(1024)  # no hold open
    with worker_processes.hold(1024):
        assert worker_processes._pool is not None  # forked when the hold opened
        assert worker_processes.enabled(1024) and worker_processes.enabled(256)
        assert not worker_processes.enabled(worker_processes.AUTO_MAX_TILE + 1)
        with worker_processes.hold(1024):
            pass
        assert worker_processes._pool is not None  # an inner hold's close keeps them
    assert worker_processes._pool is None and not worker_processes.enabled(1024)


def test_a_hold_with_large_tiles_forks_nothing(auto):
    with worker_processes.hold(2048):
        assert worker_processes._pool is None
    assert worker_processes._holds == 0


def test_by_default_a_build_of_many_columns_uses_the_workers_for_itself_alone(
    sites, auto, tmp_path, monkeypatch
):
    """Outside any hold, a build of AUTO_MIN_COLUMNS tile columns or more (of any tile
    size) forks the workers before its first tile and stops them when it ends (they do not
    wait idle for another hold); a smaller build stays on the threads."""
    monkeypatch.setattr(worker_processes, "IDLE_TIMEOUT", 30.0)
    columns = worker_processes.AUTO_MIN_COLUMNS
    assert worker_processes.enabled(4096, columns) and not worker_processes.enabled(
        4096, columns - 1
    )
    n, tile = columns * 50, 50
    watched = Watched(sites[:n], tmp_path)
    many = tlr.TLRMatrix.from_generator(watched, n, tile, accuracy=1e-9, method="aca")
    assert watched.forked_first and all(watched.forked_first)  # the fork copied no tile
    pids = {int(p.name.split("-")[1]) for p in tmp_path.iterdir()}
    assert len(pids - {os.getpid()}) >= 1
    assert worker_processes._pool is None and worker_processes._holds == 0
    for p in tmp_path.iterdir():
        p.unlink()
    few = tlr.TLRMatrix.from_generator(
        Exponential(sites[:n], tmp_path), n, 2 * tile, accuracy=1e-9, method="aca"
    )
    assert {int(p.name.split("-")[1]) for p in tmp_path.iterdir()} == {os.getpid()}
    assert few.n_tiles == columns // 2 and worker_processes._pool is None
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    assert_same_matrix(
        many, tlr.TLRMatrix.from_generator(Exponential(sites[:n]), n, tile, accuracy=1e-9)
    )


def test_a_hold_closes_when_its_block_raises(auto):
    with pytest.raises(KeyError), worker_processes.hold(512):
        raise KeyError("x")
    assert worker_processes._pool is None and worker_processes._holds == 0


def test_a_hold_build_uses_the_workers(sites, auto, tmp_path):
    with worker_processes.hold(TILE):
        in_workers = build(Exponential(sites, tmp_path))
    pids = {int(p.name.split("-")[1]) for p in tmp_path.iterdir()}
    assert len(pids - {os.getpid()}) >= 1
    assert_same_matrix(in_workers, build(Exponential(sites)))


@pytest.mark.parametrize("value", ["yes", "2", "true"])
def test_a_bad_setting_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("TLRCORE_PROCESSES", value)
    with pytest.raises(ValueError, match="TLRCORE_PROCESSES"):
        worker_processes.enabled(512)


class Summer:
    """A picklable object whose method sums part of its data, tells the process it ran in,
    counts its unpicklings (in the process that unpickles it) and raises on request."""

    unpickled = 0

    def __init__(self, data):
        self.data = data

    def __setstate__(self, state):
        Summer.unpickled += 1
        self.__dict__.update(state)

    @staticmethod
    def cached():
        """The process, the keys of the Shared objects it keeps and whether it keeps a
        build's generator."""
        return (
            os.getpid(),
            set(worker_processes._worker_shared),
            worker_processes._worker_build[0] is not None,
        )

    def part(self, index, count):
        if index < 0:
            raise ValueError(f"part {index} does not exist")
        return float(np.sum(self.data[index::count])), os.getpid(), Summer.unpickled


def test_shared_calls_run_in_the_workers_and_give_the_local_results(processes):
    data = np.random.default_rng(1).standard_normal(10_001)
    shared = worker_processes.Shared(Summer(data))
    calls = [(i, 4) for i in range(4)]
    first, second = shared.map("part", calls), shared.map("part", calls)
    assert {pid for _, pid, _ in first + second} - {os.getpid()}  # run elsewhere
    for values in (first, second):
        assert [v for v, _, _ in values] == [
            float(np.sum(data[i::4])) for i in range(4)
        ]  # same operations
    # each worker unpickled the object once: the second calls found it kept
    assert max(count for _, _, count in second) <= Summer.unpickled + 1


class ThreadCounter:
    """A picklable object whose method does BLAS work (in the worker's tile-work block,
    :func:`_call_remote`) and returns the process and its number of threads."""

    @staticmethod
    def blas_work(seed):
        M = np.random.default_rng(seed).standard_normal((300, 300))
        scipy.linalg.qr(M @ M.T)
        return os.getpid(), len(os.listdir("/proc/self/task"))


def test_the_workers_do_their_blas_work_without_starting_blas_threads(processes):
    """Forked with BLAS on one thread, the workers never set it: setting it would start
    OpenBLAS's threads (which a fork stops), and each spins 0.1 s of CPU time. A worker
    keeps its one thread."""
    libraries = threadpool_info()
    if not any(lib["user_api"] == "blas" and lib["num_threads"] > 1 for lib in libraries) or any(
        lib["user_api"] == "blas" and lib["internal_api"] != "openblas" for lib in libraries
    ):
        pytest.skip("needs OpenBLAS on more than one thread")
    counts = worker_processes.Shared(ThreadCounter()).map(
        "blas_work", [(seed,) for seed in range(4)]
    )
    assert {pid for pid, _ in counts} - {os.getpid()}
    assert {threads for _, threads in counts} == {1}, counts


def test_shared_calls_run_here_when_the_workers_are_off_or_the_object_does_not_pickle(
    processes, monkeypatch
):
    data = np.arange(10.0)
    unpicklable = Summer(data)
    unpicklable.hook = lambda: None  # a lambda does not pickle
    assert {
        pid for _, pid, _ in worker_processes.Shared(unpicklable).map("part", [(0, 2), (1, 2)])
    } == {os.getpid()}
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    values = worker_processes.Shared(Summer(data)).map("part", [(0, 2), (1, 2)])
    assert values == [(20.0, os.getpid(), 0), (25.0, os.getpid(), 0)]


def test_a_shared_call_that_raises_in_a_worker_raises_its_own_error_here(processes):
    shared = worker_processes.Shared(Summer(np.arange(10.0)))
    with pytest.raises(ValueError, match="part -1 does not exist"):
        shared.map("part", [(0, 2), (-1, 2)])


def test_shared_calls_after_the_pool_broke_run_here(processes, monkeypatch, caplog):
    class Broken:
        def submit(self, *args):
            raise BrokenProcessPool("a worker died")

    monkeypatch.setattr(worker_processes, "_get_pool", lambda: Broken())
    monkeypatch.setattr(worker_processes, "start", lambda: None)
    values = worker_processes.Shared(Summer(np.arange(10.0))).map("part", [(0, 2), (1, 2)])
    assert [v for v, _, _ in values] == [20.0, 25.0] and {pid for _, pid, _ in values} == {
        os.getpid()
    }
    assert worker_processes._broken and "stopped" in caplog.text


def test_a_shared_object_pickles_as_its_object():
    import pickle

    copy = pickle.loads(pickle.dumps(worker_processes.Shared(Summer(np.arange(4.0)))))
    assert np.array_equal(copy.obj.data, np.arange(4.0)) and copy.map("part", [(1, 2)])[0][0] == 4.0


def test_the_workers_drop_a_shared_object_gone_here_at_their_next_task(processes):
    data = np.arange(100.0)
    first = worker_processes.Shared(Summer(data))
    first.map("part", [(i, 4) for i in range(4)])
    key = first.key
    del first
    gc.collect()
    assert key in worker_processes._released
    answers = worker_processes.Shared(Summer(data)).map("cached", [()] * 4)
    assert {pid for pid, _, _ in answers} - {os.getpid()}
    assert all(key not in keys for _, keys, _ in answers)


# ---------------------------------------------------------- the spool (tlrcore.concurrency.spool)
class SpoolWatch:
    """Records, for each column the workers send, whether it came through the spool, and
    the spool itself (which the pool drops when it stops)."""

    def __init__(self, monkeypatch, lose=False):
        self.spooled, self.spools, self.lose = [], [], lose
        monkeypatch.setattr(worker_processes, "unspool", self)

    def __call__(self, spool, result):
        self.spooled.append(isinstance(result, spooling.Spooled))
        self.spools.append(spool)
        if self.lose and self.spooled[-1]:
            result.length *= 1 << 20  # past the end of the file: not mapped
        return spooling.unspool(spool, result)

    def allocated(self):
        return self.spools[0].allocated()


@pytest.mark.parametrize("with_spool", [True, False])
def test_a_build_in_the_workers_spools_or_not_and_gives_the_memory_back(
    sites, processes, monkeypatch, with_spool
):
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(Exponential(sites))
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    if not with_spool:
        monkeypatch.setattr(spooling.Spool, "open", classmethod(lambda cls, files: None))
    watch = SpoolWatch(monkeypatch)
    A = build(Exponential(sites))
    assert worker_processes._pool is None  # the build's own hold: the workers stopped with it
    assert_same_matrix(A, expected)
    assert watch.spooled and all(watch.spooled) == with_spool and any(watch.spooled) == with_spool
    if with_spool:
        assert watch.allocated() >= A.U.nbytes + A.V.nbytes
        del A
        gc.collect()
        assert watch.allocated() == 0


def test_a_column_lost_on_its_way_is_compressed_here_and_its_region_given_back(
    sites, processes, monkeypatch, caplog
):
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(Exponential(sites))
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    watch = SpoolWatch(monkeypatch, lose=True)
    assert_same_matrix(build(Exponential(sites)), expected)
    assert all(watch.spooled) and "compressing it here" in caplog.text
    assert watch.allocated() == 0


_COMPRESS_REMOTE = in_processes._compress_remote


def _spool_then_die(*args):
    """In a worker: write the column to the spool, then die before returning it."""
    _COMPRESS_REMOTE(*args)
    os._exit(1)


def test_the_regions_of_results_lost_with_a_broken_pool_are_given_back(
    sites, processes, monkeypatch
):
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(Exponential(sites))
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    monkeypatch.setattr(in_processes, "_compress_remote", _spool_then_die)  # before the fork
    spools, real_open = [], spooling.Spool.open

    def kept(cls, files):
        spools.append(real_open(files))
        return spools[-1]

    monkeypatch.setattr(spooling.Spool, "open", classmethod(kept))
    with worker_processes.hold(TILE):
        assert_same_matrix(build(Exponential(sites)), expected)
        assert worker_processes._broken
    assert (
        len(spools) == 1 and spools[0].allocated() == 0
    )  # written by the dying workers, cut out here


def test_tiles_read_from_the_spool_are_not_counted_towards_a_heap_trim(
    sites, processes, monkeypatch
):
    """Their memory goes back to the system when released (tlrcore.concurrency.heap): with every
    released byte of the heap asking for a trim, the factorization trims after the columns
    with a tile that came through the pipe (or from the threads) and once at the end."""
    left = sys.modules["tlrcore.cholesky.left"]
    monkeypatch.setattr(left, "TRIM_BYTES", 1)
    n_tiles = N // TILE
    for setting in ("1", "0"):
        monkeypatch.setenv("TLRCORE_PROCESSES", setting)
        calls = []
        monkeypatch.setattr(left, "trim_heap", lambda calls=calls: calls.append(1))
        watch = SpoolWatch(monkeypatch)
        A = build(Exponential(sites))
        in_heap = [
            any(_malloc.numpy_allocated_bytes(A.U.parts((i, k))[0]) for i in range(k + 1, n_tiles))
            for k in range(n_tiles - 1)
        ]
        if setting == "1":
            assert any(watch.spooled) and not all(in_heap)
        else:
            assert not watch.spooled and all(in_heap)
        tlr.cholesky(A, overwrite_a=True)
        assert len(calls) == sum(in_heap) + 1, setting


def test_tiles_from_the_spool_outlive_the_workers(sites, processes, monkeypatch):
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(Exponential(sites))
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    watch = SpoolWatch(monkeypatch)
    with worker_processes.hold(TILE):
        A = build(Exponential(sites))
    worker_processes.shutdown()
    assert worker_processes._pool is None and worker_processes._spool is None
    assert all(watch.spooled)
    assert_same_matrix(A, expected)
    del A
    gc.collect()
    assert watch.allocated() == 0
