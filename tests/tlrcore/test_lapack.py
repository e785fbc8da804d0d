"""tlrcore._lapack: dpotrf, dtrsm, dsyrk, dtrmm and dgemm called without the GIL, against
SciPy and dense references, on whole arrays and on blocks of larger ones, with their
checks of layout and shape."""

import ctypes
import os
import threading
import time

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_limits

from tlrcore import _lapack
from tlrcore._lapack import (
    gemm_nt,
    potrf_lower,
    syrk_lower,
    trmm_lower,
    trmm_lower_transposed,
    trsm_lower,
)

EPS = np.finfo(float).eps


def spd(n, seed=0):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(n, 2 * n))
    return np.asfortranarray(G @ G.T / (2 * n) + np.eye(n))


def test_potrf_lower_factors_in_place_and_cleans_the_upper_triangle():
    M = spd(120)
    L = M.copy(order="F")
    assert potrf_lower(L) == 0
    assert np.all(np.triu(L, 1) == 0)
    # backward stable: ||L L^T - M|| <= c n eps ||M|| (c = 2 here is ample margin)
    assert np.linalg.norm(L @ L.T - M) <= 2 * 120 * EPS * np.linalg.norm(M)
    np.testing.assert_allclose(L, scipy.linalg.cholesky(M, lower=True), rtol=0, atol=1e3 * EPS)
    kept = M.copy(order="F")
    assert potrf_lower(kept, clean=False) == 0
    np.testing.assert_array_equal(np.triu(kept, 1), np.triu(M, 1))


def test_potrf_lower_reports_the_failing_minor():
    M = np.asfortranarray(np.diag([1.0, 2.0, -1.0, 4.0]))
    assert potrf_lower(M) == 3


@pytest.mark.parametrize("order", ["F", "C"])
@pytest.mark.parametrize("trans", [False, True])
def test_trsm_lower_solves_with_either_layout(order, trans):
    rng = np.random.default_rng(1)
    L = np.array(scipy.linalg.cholesky(spd(90, 1), lower=True), order=order)
    op = L.T if trans else L
    for B in (
        np.asfortranarray(rng.normal(size=(90, 7))),
        rng.normal(size=(90, 7)),
        rng.normal(size=90),
    ):
        X = B.copy(order="K")
        assert trsm_lower(L, X, trans=trans) is X
        # backward stable: the residual is at most c n eps |L| |X| entrywise
        bound = 2 * 90 * EPS * (np.abs(op) @ np.abs(X))
        assert np.all(np.abs(op @ X - B) <= bound)
    assert trsm_lower(L, np.empty((90, 0), order="F")).shape == (90, 0)


def test_trsm_lower_from_the_right_on_a_block_of_a_larger_array():
    rng = np.random.default_rng(4)
    L = scipy.linalg.cholesky(spd(40, 4), lower=True)
    for trans in (False, True):
        op = L.T if trans else L
        big = np.asfortranarray(rng.normal(size=(70, 90)))
        before = big.copy(order="F")
        block = big[10:35, 20:60]  # 25 x 40, leading dimension 70
        B = block.copy()
        assert trsm_lower(L, block, trans=trans, right=True) is block
        bound = 2 * 40 * EPS * (np.abs(block) @ np.abs(op))
        assert np.all(np.abs(block @ op - B) <= bound)
        outside = np.ones(big.shape, dtype=bool)
        outside[10:35, 20:60] = False
        np.testing.assert_array_equal(big[outside], before[outside])  # nothing else written


def test_trmm_and_gemm_on_blocks_match_numpy():
    rng = np.random.default_rng(5)
    big = np.asfortranarray(rng.normal(size=(80, 80)))
    L = big[5:35, 5:35]  # a lower triangle read in place; the upper part is ignored
    B = np.asfortranarray(rng.normal(size=(30, 6)))
    expected = np.tril(L).T @ B
    assert trmm_lower_transposed(L, B) is B
    np.testing.assert_allclose(
        B, expected, rtol=0, atol=2 * 30 * EPS * (np.abs(np.tril(L).T) @ np.abs(B)).max()
    )
    B = np.asfortranarray(rng.normal(size=(30, 6)))
    expected = np.tril(L) @ B
    assert trmm_lower(L, B) is B
    np.testing.assert_allclose(
        B, expected, rtol=0, atol=2 * 30 * EPS * (np.abs(np.tril(L)) @ np.abs(B)).max()
    )
    C = big[40:70, 40:52]
    A, W = big[40:70, :9], big[60:72, :9]
    expected = 2.0 * C - 0.5 * A @ W.T
    assert gemm_nt(-0.5, A, W, 2.0, C) is C
    np.testing.assert_allclose(
        C, expected, rtol=0, atol=4 * 9 * EPS * np.abs(expected).max() + 64 * EPS
    )


def test_syrk_lower_updates_the_lower_triangle_in_place():
    rng = np.random.default_rng(2)
    C = spd(60, 2)
    W = np.asfortranarray(rng.normal(size=(60, 9)))
    out = C.copy(order="F")
    assert syrk_lower(-0.5, W, 2.0, out) is out
    expected = 2.0 * C - 0.5 * W @ W.T
    lower = np.tril_indices(60)
    np.testing.assert_allclose(
        out[lower], expected[lower], rtol=0, atol=64 * EPS * np.abs(expected).max()
    )
    np.testing.assert_array_equal(out[np.triu_indices(60, 1)], C[np.triu_indices(60, 1)])
    assert syrk_lower(1.0, np.empty((60, 0), order="F"), 1.0, out) is out


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: potrf_lower(np.ones((3, 3))), "a must be a writeable Fortran-ordered"),
        (lambda: potrf_lower(np.ones((3, 2), order="F")), "a must be square"),
        (
            lambda: trsm_lower(np.eye(3), np.ones((6, 2))[::2]),
            "B must be a writeable Fortran-ordered",
        ),
        (lambda: trsm_lower(np.eye(3), np.ones((4, 2), order="F")), "as many rows"),
        (lambda: trsm_lower(np.eye(3, dtype=np.float32), np.ones((3, 2), order="F")), "L must be"),
        (
            lambda: syrk_lower(1.0, np.ones((3, 2), order="F"), 0.0, np.ones((2, 2), order="F")),
            "C must be 3 x 3",
        ),
        (lambda: trsm_lower(np.eye(3), np.ones((2, 4), order="F"), right=True), "as many columns"),
        (
            lambda: trmm_lower_transposed(np.eye(3, order="F"), np.ones((3, 2))),
            "B must be a writeable Fortran-ordered",
        ),
        (lambda: trmm_lower(np.eye(3, order="F"), np.ones((4, 2), order="F")), "as many rows"),
        (
            lambda: gemm_nt(
                1.0,
                np.ones((3, 2), order="F"),
                np.ones((4, 3), order="F"),
                0.0,
                np.ones((3, 4), order="F"),
            ),
            "C must be 3 x 4",
        ),
        (
            lambda: gemm_nt(
                1.0,
                np.ones((3, 2), order="F"),
                np.ones((4, 2), order="F"),
                0.0,
                np.ones((6, 4), order="F")[::2],
            ),
            "C must be a writeable Fortran-ordered",
        ),
    ],
    ids=[
        "potrf-c-order",
        "potrf-not-square",
        "trsm-b-strided",
        "trsm-rows",
        "trsm-float32",
        "syrk-shape",
        "trsm-right-columns",
        "trmm-c-order",
        "trmm-rows",
        "gemm-shape",
        "gemm-c-strided",
    ],
)
def test_bad_layouts_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def count_until(event):
    count = 0
    while not event.is_set():
        count += 1
    return count


def test_the_routines_are_called_without_the_gil():
    """ctypes releases the GIL around a foreign function unless it is declared with
    FUNCFLAG_PYTHONAPI (PYFUNCTYPE)."""
    for function in (
        _lapack._dpotrf,
        _lapack._dtrsm,
        _lapack._dsyrk,
        _lapack._dtrmm,
        _lapack._dgemm,
    ):
        assert isinstance(function, ctypes._CFuncPtr)
        assert not function._flags_ & ctypes._FUNCFLAG_PYTHONAPI


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a second core for the counting thread")
def test_potrf_lets_other_threads_run():
    """While one thread factors (BLAS on one thread, about 0.1-0.5 s), the calling thread
    counts. A call holding the GIL (SciPy's wrapper) lets it count only for the thread
    switch intervals (5 ms) around the call: 9-14 % of its progress alone, measured on a
    0.15 s call, less on a longer one. One releasing it lets it count throughout: 100 %
    on two free cores, about half where the two threads share one core. The bound, 30 %,
    sits between with a margin of 2 on either side."""
    M = spd(2500)
    started, finished = threading.Event(), threading.Event()

    def factor():
        started.set()
        potrf_lower(M)
        finished.set()

    with threadpool_limits(1, "blas"):
        worker = threading.Thread(target=factor)
        worker.start()
        started.wait()
        begin = time.perf_counter()
        during = count_until(finished)
        elapsed = time.perf_counter() - begin
        worker.join()
    stop = threading.Event()
    timer = threading.Timer(elapsed, stop.set)
    timer.start()
    alone = count_until(stop)
    timer.join()
    assert during >= 0.3 * alone


@pytest.mark.parametrize("shape", [(5, 5), (7, 4), (4, 7), (1, 1), (0, 0)])
def test_zero_strict_upper(shape):
    F = np.asfortranarray(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape))
    expected = np.tril(F)
    _lapack.zero_strict_upper(F)
    np.testing.assert_array_equal(F, expected)


def test_zero_strict_upper_of_a_block_leaves_the_rest():
    big = np.asfortranarray(np.arange(1.0, 1.0 + 9 * 8).reshape(9, 8))
    before = big.copy()
    _lapack.zero_strict_upper(big[2:7, 1:6])
    expected = before.copy()
    expected[2:7, 1:6] = np.tril(before[2:7, 1:6])
    np.testing.assert_array_equal(big, expected)


def test_zero_strict_upper_refuses_a_c_ordered_array():
    with pytest.raises(ValueError, match="Fortran-ordered"):
        _lapack.zero_strict_upper(np.ones((3, 4)))
