"""tlrcore.concurrency.spool: tile factors written to a region of the spool (a memory file)
come back as views of the mapped region, equal to what the pipe (pickle) would give, bit
for bit and in the same memory order; the region's memory goes back to the system when
the last of its factors is gone, and at once when the factors cannot be written or
mapped; regions never overlap, and a file serves one column on its way at a time; where
no spool can be made, or the factors are not low-rank pairs or do not fit, they take
the pipe. (The spool in a build:
``test_worker_processes.py``.)"""

import errno
import gc
import mmap
import os
import pickle
import sys

import numpy as np
import pytest

from tlrcore.compress._recompress import LowRank
from tlrcore.concurrency import spool as _spool

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="memory files are Linux's")

SIZE = 1 << 16


@pytest.fixture
def spool():
    made = _spool.Spool.open(2)
    assert made is not None
    return made


def factors():
    rng = np.random.default_rng(3)
    U = rng.standard_normal((50, 4))
    return [
        LowRank(U, rng.standard_normal((40, 4)), 1e-9, 2e-9),
        LowRank(
            np.asfortranarray(rng.standard_normal((30, 3))),
            rng.standard_normal((3, 40)).T,
            0.5,
            0.75,
        ),
        LowRank(np.zeros((50, 0)), np.zeros((40, 0))),
        LowRank(
            U[:, ::2], rng.standard_normal((40, 7))[:, 1:3], 0.0, 0.0
        ),  # neither C- nor F-contiguous
        LowRank(
            rng.standard_normal((1, 1)).astype(np.float32), rng.standard_normal((1, 1)), 0.25, 0.25
        ),
    ]


def assert_same_factors(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert isinstance(a, LowRank)
        assert (a.dropped, a.dropped_frobenius) == (b.dropped, b.dropped_frobenius)
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
            assert (x.flags.c_contiguous, x.flags.f_contiguous) == (
                y.flags.c_contiguous,
                y.flags.f_contiguous,
            )


def test_spooled_factors_come_back_as_the_pipe_gives_them(spool):
    sent = factors()
    spooled = spool.write(sent, spool.region(SIZE), SIZE)
    assert isinstance(spooled, _spool.Spooled)
    assert len(pickle.dumps(spooled)) < 2000  # what crosses the pipe: the layouts alone
    through_pipe = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
    got = _spool.unspool(spool, pickle.loads(pickle.dumps(spooled)))
    assert_same_factors(got, through_pipe)
    for pair in got:
        for array in pair:
            assert array.flags.writeable
            if array.size:
                assert array.ctypes.data % _spool.ALIGNMENT == 0


def test_the_memory_goes_back_when_the_last_factor_of_the_column_is_gone(spool):
    offset = spool.region(SIZE)
    got = _spool.unspool(spool, spool.write(factors(), offset, SIZE))
    assert spool.allocated() >= sum(array.nbytes for pair in got for array in pair)
    kept = got[1][0]
    del got
    gc.collect()
    assert spool.allocated() > 0 and np.isfinite(kept).all()  # a view keeps its column's region
    del kept
    gc.collect()
    assert spool.allocated() == 0


def test_regions_are_pages_of_their_own_and_never_given_twice(spool, monkeypatch):
    regions = []
    for size in (1, mmap.PAGESIZE, mmap.PAGESIZE + 1, 0, 5):
        regions.append(spool.region(size))
        spool.done(regions[-1])
    assert [offset for _, offset in regions] == [k * mmap.PAGESIZE for k in (0, 1, 2, 4, 5)]
    assert {file for file, _ in regions} == {1}  # the file given back last is given first
    monkeypatch.setattr(_spool, "LAST_OFFSET", 7 * mmap.PAGESIZE)
    assert spool.region(mmap.PAGESIZE) == (1, 6 * mmap.PAGESIZE)
    assert spool.region(1) == (0, 0)  # the other file
    assert spool.region(1) is None  # every file in use: the column takes the pipe
    spool.done((1, None))
    assert spool.region(1) is None  # that file's offsets used up


def test_a_file_serves_one_column_on_its_way_at_a_time(spool):
    first, second = spool.region(SIZE), spool.region(SIZE)
    assert first[0] != second[0] and spool.region(SIZE) is None
    spool.done(first)
    third = spool.region(SIZE)
    assert third[0] == first[0] and third[1] >= first[1] + SIZE


def test_factors_that_are_not_spooled_pass_through(spool):
    sent = factors()
    assert _spool.unspool(spool, sent) is sent


def test_factors_other_than_low_rank_pairs_take_the_pipe(spool):
    sent = [*factors(), (np.ones((3, 1)), np.ones((2, 1)))]
    assert spool.write(sent, spool.region(SIZE), SIZE) is sent
    assert spool.allocated() == 0


def test_factors_larger_than_their_region_take_the_pipe(spool):
    sent = factors()
    size = sum(array.nbytes for pair in sent for array in pair)
    assert spool.write(sent, spool.region(size // 2), size // 2) is sent
    assert spool.allocated() == 0


def test_a_failed_write_gives_back_what_was_written_and_the_factors_take_the_pipe(
    spool, monkeypatch
):
    written, real_pwrite = [], os.pwrite

    def fails_second(descriptor, data, offset):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(offset)
        return real_pwrite(descriptor, data, offset)

    monkeypatch.setattr(_spool.os, "pwrite", fails_second)
    sent = factors()
    assert spool.write(sent, spool.region(SIZE), SIZE) is sent
    assert written and spool.allocated() == 0


def test_a_short_write_is_completed(spool, monkeypatch):
    real_pwrite = os.pwrite
    monkeypatch.setattr(
        _spool.os, "pwrite", lambda fd, data, offset: real_pwrite(fd, data[:5], offset)
    )
    sent = factors()
    spooled = spool.write(sent, spool.region(SIZE), SIZE)
    monkeypatch.undo()
    assert_same_factors(_spool.unspool(spool, spooled), pickle.loads(pickle.dumps(sent)))


def test_a_write_that_makes_no_progress_is_an_error_not_a_loop(spool, monkeypatch):
    monkeypatch.setattr(_spool.os, "pwrite", lambda fd, data, offset: 0)
    sent = factors()
    assert spool.write(sent, spool.region(SIZE), SIZE) is sent
    assert spool.allocated() == 0


def test_a_region_that_ends_early_is_an_error_and_is_given_back(spool):
    spooled = spool.write(factors(), spool.region(SIZE), SIZE)
    assert spool.allocated() > 0
    spooled.length = SIZE * 4  # beyond the end of the file: mapped, it would fault (SIGBUS)
    with pytest.raises(OSError, match="ends early"):
        _spool.unspool(spool, spooled)
    assert spool.allocated() == 0


def test_the_file_is_closed_when_the_spool_and_its_columns_are_gone():
    spool = _spool.Spool.open(2)
    descriptors = spool.descriptors
    got = _spool.unspool(spool, spool.write(factors(), spool.region(SIZE), SIZE))
    del spool
    gc.collect()
    for descriptor in descriptors:
        os.fstat(descriptor)  # open: the columns read from the spool keep its files
    assert_same_factors(got, pickle.loads(pickle.dumps(factors())))
    del got
    gc.collect()
    for descriptor in descriptors:
        with pytest.raises(OSError):
            os.fstat(descriptor)


def test_without_memory_files_there_is_no_spool_and_no_file_left_open(monkeypatch):
    made, real_memfd_create = [], os.memfd_create

    def second_refused(name, flags=0):
        if made:
            raise OSError(errno.EMFILE, "Too many open files")
        made.append(real_memfd_create(name, flags))
        return made[-1]

    monkeypatch.setattr(_spool.os, "memfd_create", second_refused)
    assert _spool.Spool.open(2) is None
    with pytest.raises(OSError):
        os.fstat(made[0])
    monkeypatch.delattr(_spool.os, "memfd_create")  # not Linux
    assert _spool.Spool.open(2) is None
