"""tlrcore.compress._spool: tile factors written to a spool file come back as the pipe
(pickle) would give them, bit for bit and in the same memory order; where the file cannot
be written, or would leave less than a quarter of the directory free, the factors
themselves are returned; a file that ends early is an error and is
removed; leftover files are removed by prefix, and those of stopped processes. (The spool
files in a build: ``test_worker_processes.py``.)"""

import os
import pickle
import sys

import numpy as np
import pytest

from tlrcore.compress import _spool
from tlrcore.compress._recompress import LowRank

PREFIX = "tlrcore-test-spool-"


@pytest.fixture
def directory(tmp_path, monkeypatch):
    """A spool directory on the temporary file system, however full that is otherwise."""
    monkeypatch.setattr(_spool, "SPOOL_DIRECTORY", str(tmp_path))
    monkeypatch.setattr(_spool, "RESERVE", 0.0)
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


@pytest.mark.parametrize("spare_blocks", [1, -1])
def test_a_spool_file_leaves_a_quarter_of_the_directory_free(directory, monkeypatch, spare_blocks):
    sent = factors()
    size = sum(array.nbytes for pair in sent for array in pair)

    class Space:  # a directory of 4,000 blocks of 4 KiB, with room for the file and a quarter, give or take a block
        f_frsize, f_blocks = 4096, 4000
        f_bavail = 1000 + -(-size // 4096) + spare_blocks

    monkeypatch.setattr(_spool.os, "statvfs", lambda path: Space)
    monkeypatch.setattr(_spool, "RESERVE", 0.25)
    spooled = _spool.spool(sent, PREFIX)
    assert (spooled is sent) == (spare_blocks < 0)
    assert bool(list(directory.iterdir())) == (spare_blocks > 0)
    _spool.unspool(spooled)


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
