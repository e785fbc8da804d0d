"""tlrcore._threads.one_blas_thread_block: BLAS on one thread inside a block, nested blocks
of a thread leaving the setting to the outermost, which restores it, and the BLAS libraries
found once."""

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from tlrcore import _threads
from tlrcore._threads import one_blas_thread, one_blas_thread_block


def blas_threads():
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    if not blas_threads():
        pytest.skip("no BLAS library that threadpoolctl controls")
    with threadpool_limits(2, "blas"):
        if set(blas_threads()) != {2}:  # one core, or OPENBLAS_NUM_THREADS=1: nothing to restore
            pytest.skip("BLAS cannot run on two threads here")
        yield


def test_nested_blocks_keep_one_thread_until_the_outermost_closes(two_blas_threads):
    with one_blas_thread_block():
        with one_blas_thread_block():
            assert set(blas_threads()) == {1}
            assert _threads._open_blocks.depth == 2
        assert set(blas_threads()) == {1}
    assert set(blas_threads()) == {2}
    assert _threads._open_blocks.depth == 0


def test_a_raising_block_restores_the_setting(two_blas_threads):
    @one_blas_thread
    def fails():
        assert set(blas_threads()) == {1}
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        fails()
    assert set(blas_threads()) == {2}
    assert _threads._open_blocks.depth == 0


def test_the_libraries_are_found_once(monkeypatch, two_blas_threads):
    made = []

    class Counting(_threads.ThreadpoolController):
        def __init__(self):
            made.append(1)
            super().__init__()

    monkeypatch.setattr(_threads, "ThreadpoolController", Counting)
    monkeypatch.setattr(_threads, "_controller", None)
    for _ in range(3):
        with one_blas_thread_block():
            pass
    assert len(made) == 1
