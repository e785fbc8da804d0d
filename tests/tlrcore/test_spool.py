"""tlrcore.compress._spool: tile factors written to a spool file come back as the pipe
(pickle) would give them, bit for bit and in the same memory order; where the file cannot
be written the factors themselves are returned; a file that ends early is an error and is
removed; a build leaves no spool file behind, and a worker that cannot spool still serves
the build."""

import os
import pickle
import sys

import numpy as np
import pytest

from tlrcore.compress import _spool, worker_processes
from tlrcore.compress._recompress import LowRank

PREFIX = "tlrcore-test-spool-"


@pytest.fixture
def directory(tmp_path, monkeypatch):
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(tmp_path))
    return tmp_path


def factors():
    rng = np.random.default_rng(3)
    U = rng.standard_normal((50, 4))
    return [
        LowRank(U, rng.standard_normal((40, 4)), 1e-9, 2e-9),
        LowRank(np.asfortranarray(rng.standard_normal((30, 3))), rng.standard_normal((3, 40)).T, 0.5, 0.75),
        LowRank(np.zeros((50, 0)), np.zeros((40, 0))),
        LowRank(U[:, ::2], rng.standard_normal((40, 7))[:, 1:3], 0.0, 0.0),  # neither C- nor F-contiguous
        LowRank(rng.standard_normal((1, 1)).astype(np.float32), rng.standard_normal((1, 1)), 0.25, 0.25),
    ]


def assert_same_factors(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert isinstance(a, LowRank)
        assert (a.dropped, a.dropped_frobenius) == (b.dropped, b.dropped_frobenius)
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
            assert (x.flags.c_contiguous, x.flags.f_contiguous) == (y.flags.c_contiguous, y.flags.f_contiguous)


def test_spooled_factors_come_back_as_the_pipe_gives_them(directory):
    sent = factors()
    spooled = _spool.spool(sent, PREFIX)
    assert isinstance(spooled, _spool.Spooled)
    assert os.path.dirname(spooled.path) == str(directory) and os.path.basename(spooled.path).startswith(PREFIX)
    assert len(pickle.dumps(spooled)) < 2000  # what crosses the pipe: the layouts alone
    through_pipe = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
    assert_same_factors(_spool.unspool(pickle.loads(pickle.dumps(spooled))), through_pipe)
    assert not list(directory.iterdir())  # read, then removed


def test_factors_that_are_not_spooled_pass_through():
    sent = factors()
    assert _spool.unspool(sent) is sent


def test_factors_other_than_low_rank_pairs_take_the_pipe(directory):
    sent = [*factors(), (np.ones((3, 1)), np.ones((2, 1)))]
    assert _spool.spool(sent, PREFIX) is sent
    assert not list(directory.iterdir())


def test_without_a_spool_directory_the_factors_take_the_pipe(tmp_path, monkeypatch):
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(tmp_path / "absent"))
    sent = factors()
    assert _spool.spool(sent, PREFIX) is sent


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, a device that is always full")
def test_a_full_spool_directory_leaves_no_file_and_the_factors_take_the_pipe(directory, monkeypatch):
    made = []

    def full(prefix, dir):
        path = os.path.join(dir, prefix + "full")
        open(path, "wb").close()
        made.append(path)
        return os.open("/dev/full", os.O_WRONLY), path  # every write fails with ENOSPC

    monkeypatch.setattr(_spool.tempfile, "mkstemp", full)
    sent = factors()
    assert _spool.spool(sent, PREFIX) is sent
    assert made and not os.path.exists(made[0])


def test_a_spool_file_that_ends_early_is_an_error_and_is_removed(directory):
    spooled = _spool.spool(factors(), PREFIX)
    with open(spooled.path, "r+b") as file:
        file.truncate(os.path.getsize(spooled.path) - 8)
    with pytest.raises(OSError, match="ends early"):
        _spool.unspool(spooled)
    assert not os.path.exists(spooled.path)


def test_remove_spools_removes_the_prefix_alone(directory):
    for name in (PREFIX + "a", PREFIX + "b", "tlrcore-other-c"):
        (directory / name).write_bytes(b"x")
    _spool.remove_spools(PREFIX)
    assert sorted(p.name for p in directory.iterdir()) == ["tlrcore-other-c"]


def test_orphans_of_processes_that_stopped_are_removed_and_no_other_file(directory):
    import subprocess

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead = int(gone.stdout)
    names = [_spool.build_prefix(dead, 3) + "x", _spool.build_prefix(os.getpid(), 1) + "y",
             _spool.build_prefix(1, 0) + "z", "tlrcore-benchmark-w", "other-v"]
    for name in names:
        (directory / name).write_bytes(b"x")
    _spool.remove_orphans()
    # the process that ran is gone (its id unused since, as the process ids wrap slowly);
    # this process and process 1 run, and the other names are not a build's
    assert sorted(p.name for p in directory.iterdir()) == sorted(names[1:])


# ------------------------------------------------------------------ in a build
N, TILE = 1200, 200


class Exponential:
    """A picklable generator of ``exp(-|x_i - x_j| / 0.2) + 0.01 [i == j]``."""

    def __init__(self, X):
        self.X = X

    def __call__(self, rows, cols):
        C = np.exp(-np.linalg.norm(self.X[rows][:, None] - self.X[cols][None], axis=2) / 0.2)
        C[rows[:, None] == cols[None, :]] += 0.01
        return C


@pytest.fixture
def processes(monkeypatch):
    if sys.platform != "linux":
        pytest.skip("the workers are forked on Linux only")
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(worker_processes, "_broken", False)
    yield
    worker_processes.shutdown()


def build(X):
    import tlrcore as tlr

    return tlr.TLRMatrix.from_generator(Exponential(X), N, TILE, accuracy=1e-9, method="aca")


def assert_same_matrix(A, B):
    assert A.U.keys() == B.U.keys()
    for key in A.U:
        assert np.array_equal(A.U[key], B.U[key]) and np.array_equal(A.V[key], B.V[key]), key


@pytest.mark.parametrize("spool_directory", ["tmp", "absent"])
def test_a_build_in_the_workers_spools_or_not_and_leaves_no_file(processes, tmp_path, monkeypatch,
                                                                  spool_directory):
    X = np.random.default_rng(0).uniform(size=(N, 2))
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(X)
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    directory = tmp_path / spool_directory
    if spool_directory == "tmp":
        directory.mkdir()
    spooled = []
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(directory))  # before the fork: the workers see it
    monkeypatch.setattr(worker_processes, "unspool", lambda result: spooled.append(
        isinstance(result, _spool.Spooled)) or _spool.unspool(result))
    assert_same_matrix(build(X), expected)
    assert spooled and all(spooled) == (spool_directory == "tmp") and any(spooled) == all(spooled)
    assert not directory.exists() or not list(directory.iterdir())


def test_a_column_lost_on_its_way_is_compressed_here(processes, tmp_path, monkeypatch, caplog):
    X = np.random.default_rng(0).uniform(size=(N, 2))
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(X)
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(tmp_path))

    def lost(result):
        os.unlink(result.path)
        return _spool.unspool(result)

    monkeypatch.setattr(worker_processes, "unspool", lost)
    assert_same_matrix(build(X), expected)
    assert "compressing it here" in caplog.text and not list(tmp_path.iterdir())


def test_spool_files_of_results_lost_with_a_broken_pool_are_removed_at_the_end_of_the_build(
        processes, tmp_path, monkeypatch):
    X = np.random.default_rng(0).uniform(size=(N, 2))
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    expected = build(X)
    monkeypatch.setenv("TLRCORE_PROCESSES", "1")
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(tmp_path))
    left = []

    def broken(result):  # the pool broke with this result written and not read
        left.append(result.path)
        raise worker_processes.BrokenProcessPool("a worker died")

    monkeypatch.setattr(worker_processes, "unspool", broken)
    assert_same_matrix(build(X), expected)
    assert left and not list(tmp_path.iterdir())


def test_stopping_the_workers_removes_the_spool_files_of_every_build_of_this_process(processes, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(tmp_path))
    worker_processes.start()
    mine = [_spool.build_prefix(os.getpid(), b) + "x" for b in (7, 8)]  # interrupted builds' columns
    other = _spool.build_prefix(1, 7) + "x"
    for name in (*mine, other):
        (tmp_path / name).write_bytes(b"x")
    worker_processes.shutdown()
    assert [p.name for p in tmp_path.iterdir()] == [other]
