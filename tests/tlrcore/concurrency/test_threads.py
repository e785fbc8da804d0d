"""tlrcore.concurrency.threads.one_blas_thread_block: BLAS on one thread inside a block,
nested blocks of a thread leaving the setting to the outermost, which restores it, and the
BLAS libraries found once; the tile pools' small pages
(tlrcore.concurrency.heap.small_pages), also for the arrays the factorization makes before
its pool's work starts."""

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import tlrcore as tlr
from tlrcore.cholesky import _steps, left
from tlrcore.concurrency import heap as _malloc
from tlrcore.concurrency import threads as _threads
from tlrcore.concurrency.heap import small_pages
from tlrcore.concurrency.threads import one_blas_thread, one_blas_thread_block


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


@pytest.fixture
def huge_page_advice():
    """NumPy's switch of the huge-page advice, on at the start (restored after)."""
    multiarray = pytest.importorskip("numpy._core.multiarray")
    if not hasattr(multiarray, "_get_madvise_hugepage") or _malloc._set_madvise_hugepage is None:
        pytest.skip("this NumPy has no huge-page switch")
    if not _malloc._tuning_enabled():
        pytest.skip("allocator tuning is off here (not Linux, or TLRCORE_MALLOC_TUNING=0)")
    before = multiarray._set_madvise_hugepage(True)
    yield multiarray._get_madvise_hugepage
    multiarray._set_madvise_hugepage(before)


def test_tile_pools_keep_new_arrays_off_huge_pages_until_the_last_closes(huge_page_advice):
    """The advice is off while any block is open, in any thread, and back on only when the
    last one closes (here another thread's, after the first thread's), also after a block
    that raises."""
    opened, release = threading.Event(), threading.Event()

    def other_thread():
        with _threads.tile_pool(1):
            opened.set()
            release.wait(10)

    with _threads.tile_pool(2) as pool:
        assert not huge_page_advice()
        with small_pages():
            assert not huge_page_advice()
        assert not huge_page_advice()
        thread = threading.Thread(target=other_thread)
        thread.start()
        assert opened.wait(10)
        assert pool.submit(huge_page_advice).result() is False
    assert not huge_page_advice()  # the other thread's block is still open
    release.set()
    thread.join(10)
    assert huge_page_advice()
    with pytest.raises(RuntimeError), small_pages():
        raise RuntimeError
    assert huge_page_advice()


def test_small_pages_can_be_turned_off(huge_page_advice, monkeypatch):
    monkeypatch.setenv("TLRCORE_MALLOC_TUNING", "0")
    with small_pages():
        assert huge_page_advice()


def test_the_left_looking_factorization_makes_its_row_panels_on_small_pages(
    huge_page_advice, monkeypatch
):
    """The row panels of L (a few MiB each, filled tile by tile over the whole
    factorization) are made inside the tile pool's block, off huge pages."""
    made_with_advice = []

    class Spied(_steps.RowPanels):
        def __init__(self, *args):
            made_with_advice.append(huge_page_advice())
            super().__init__(*args)

    monkeypatch.setattr(left, "RowPanels", Spied)
    x = np.linspace(0, 1, 400)
    A = tlr.TLRMatrix.from_dense(np.exp(-abs(x[:, None] - x[None]) / 0.3) + 0.01 * np.eye(400), 100)
    tlr.cholesky(A)
    assert made_with_advice == [False]
    assert huge_page_advice()


def test_a_block_sets_nothing_where_blas_is_on_one_thread_already(monkeypatch):
    """Setting it would start OpenBLAS's threads in a process forked without them (the
    build's workers), each spinning 0.1 s of CPU time."""
    with one_blas_thread_block():
        pass  # the libraries are found
    calls = []
    real = _threads._controller.limit
    monkeypatch.setattr(
        _threads._controller, "limit", lambda **kwargs: calls.append(kwargs) or real(**kwargs)
    )
    with threadpool_limits(1, "blas"), one_blas_thread_block():
        assert not calls
    if blas_threads() and max(blas_threads()) > 1:
        with one_blas_thread_block():
            assert calls == [{"limits": 1, "user_api": "blas"}] and set(blas_threads()) == {1}
