"""Finished factor rows moved to files (tlrcore.concurrency.spill): the arrays read back are
the arrays written, bit for bit, and a factorization that spills its rows equals one that
does not."""

import logging
import os
import pickle

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import tlrcore
from tlrcore.cholesky import left
from tlrcore.concurrency.spill import ALIGNMENT, Spill


def test_moved_arrays_keep_shape_order_dtype_and_values_in_one_map(tmp_path):
    rng = np.random.default_rng(0)
    arrays = [
        np.asfortranarray(rng.standard_normal((7, 3))),
        rng.standard_normal((5, 4)).astype(np.float32),
        np.empty((6, 0)),
        rng.standard_normal(9),
    ]
    spill = Spill(str(tmp_path))
    moved = spill.move(arrays)
    for before, after in zip(arrays, moved, strict=True):
        assert after.shape == before.shape and after.dtype == before.dtype
        assert after.flags.f_contiguous == before.flags.f_contiguous
        assert after.flags.c_contiguous == before.flags.c_contiguous
        np.testing.assert_array_equal(after, before)
        assert not after.flags.writeable
    maps = {id(a.base) for a in moved if a.size}
    assert len(maps) == 1 and not moved[0].flags.owndata
    assert spill.nbytes == sum(-(-a.nbytes // ALIGNMENT) * ALIGNMENT for a in arrays)
    assert list(tmp_path.iterdir()) == []  # an unnamed file: nothing left behind
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(moved[0])), arrays[0])


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_moved_arrays_hold_no_file_descriptor():
    """Python's mmap keeps a descriptor per map; hundreds of factor rows would exhaust a limit
    of 1,024 open files."""
    before = len(os.listdir("/proc/self/fd"))
    moved = [Spill().move([np.arange(1000.0)])[0] for _ in range(50)]
    assert len(os.listdir("/proc/self/fd")) == before
    forced = moved[0]
    forced.flags.writeable = True  # forced: the write copies a private page, the file keeps its
    forced[0] = -1.0
    np.testing.assert_array_equal(moved[1], np.arange(1000.0))


def _resident_file_bytes():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("RssFile:"))
    return int(line.split()[1]) * 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status")
def test_a_released_group_leaves_resident_memory_and_reads_the_same_values(tmp_path):
    size = 32 * 2**20
    array = np.random.default_rng(3).standard_normal(size // 8)
    spill = Spill(str(tmp_path))
    (moved,) = spill.move([array], group=7)
    (other,) = spill.move([array[:1000].copy()], group=8)
    np.testing.assert_array_equal(moved, array)  # reads every page of the map
    before = _resident_file_bytes()
    spill.release(7)
    # the map's pages leave the process (the system may keep them in its file cache)
    assert before - _resident_file_bytes() > size // 2
    np.testing.assert_array_equal(moved, array)  # read again from the file
    np.testing.assert_array_equal(other, array[:1000])
    spill.release(99)  # a group without maps: nothing


def test_a_collected_group_is_not_released_again():
    spill = Spill()
    moved = spill.move([np.arange(1000.0)], group=0)
    del moved
    spill.release(0)  # the map is gone; its address is not advised
    kept = spill.move([np.arange(10.0)], group=0)
    spill.release(0)
    np.testing.assert_array_equal(kept[0], np.arange(10.0))
    assert pickle.loads(pickle.dumps(spill)).nbytes == 0


def test_a_strided_array_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        Spill().move([np.ones((4, 4))[:, ::2]])


def _matrix(n=2000, tile=256):
    X = np.random.default_rng(1).uniform(size=(n, 2))
    K = np.exp(-cdist(X, X) / 0.1) + 1e-2 * np.eye(n)
    return tlrcore.TLRMatrix.from_dense(K, tile_size=tile, accuracy=1e-8)


def test_a_factorization_that_spills_its_rows_equals_one_that_does_not(monkeypatch, tmp_path):
    A = _matrix()
    kept = tlrcore.cholesky(A)
    monkeypatch.setattr(left, "SPILL_BYTES", 0)
    monkeypatch.setenv("TLRCORE_SPILL_DIR", str(tmp_path))
    spilled = tlrcore.cholesky(A)
    np.testing.assert_array_equal(spilled.to_dense(), kept.to_dense())
    b = np.random.default_rng(2).standard_normal((A.n, 3))
    np.testing.assert_array_equal(spilled.solve(b), kept.solve(b))
    np.testing.assert_array_equal(spilled.multiply_lower(b), kept.multiply_lower(b))
    assert spilled.spill is not None and kept.spill is None
    assert spilled.logdet() == kept.logdet()
    last = A.n_tiles - 1
    parts = [*spilled.U.parts((last, 0)), *spilled.V.parts((last, 0))]
    parts = [part for part in parts if part is not None]
    assert parts and not any(part.flags.owndata or part.flags.writeable for part in parts)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(spilled)).solve(b), kept.solve(b))


def test_a_spill_that_cannot_be_written_keeps_the_rows_in_memory(monkeypatch, tmp_path, caplog):
    A = _matrix(1000)
    kept = tlrcore.cholesky(A)
    monkeypatch.setattr(left, "SPILL_BYTES", 0)
    monkeypatch.setenv("TLRCORE_SPILL_DIR", str(tmp_path / "missing"))
    with caplog.at_level(logging.WARNING, logger=left.__name__):
        factor = tlrcore.cholesky(A)
    assert "spill file failed" in caplog.text
    np.testing.assert_array_equal(factor.to_dense(), kept.to_dense())
