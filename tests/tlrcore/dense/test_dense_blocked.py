"""tlrcore.dense.blocked: the Cholesky factor, inverse and product by blocks on the tile
pool, against SciPy, and the NumPy back end's use of them."""

import numpy as np
import pytest
import scipy.linalg

from tlrcore.backends import NUMPY
from tlrcore.dense import blocked

EPS = np.finfo(float).eps


def spd(n, seed=0):
    rng = np.random.default_rng(seed)
    G = rng.normal(size=(n, n + 10))
    S = G @ G.T / n + 0.1 * np.eye(n)
    return np.asfortranarray((S + S.T) / 2)  # symmetric to the last bit


# Orders below, at and across block boundaries, and one with a short last block.
ORDERS = [1, 255, 256, 257, 700]


@pytest.mark.parametrize("n", ORDERS)
def test_cholesky_matches_scipy_and_keeps_the_strict_upper_triangle(n):
    M = spd(n, n)
    a = M.copy(order="F")
    assert blocked.cholesky_lower(a) == 0
    L = np.tril(a)
    # backward stable: ||L L^T - M||_F <= c n eps ||M||_F (c = 2: ample)
    assert np.linalg.norm(L @ L.T - M) <= 2 * n * EPS * np.linalg.norm(M)
    reference = scipy.linalg.cholesky(M, lower=True)
    # two backward stable factors differ by at most about n cond(M) eps |L|
    np.testing.assert_allclose(
        L, reference, rtol=0, atol=8 * n * np.linalg.cond(M) * EPS * np.abs(reference).max()
    )
    np.testing.assert_array_equal(np.triu(a, 1), np.triu(M, 1))


def test_cholesky_reports_the_failing_minor_as_lapack():
    n = 600
    M = spd(n, 1)
    for minor in (1, 200, 256, 257, 511, 600):
        bad = M.copy(order="F")
        bad[
            minor - 1, minor - 1
        ] = -1.0  # the leading minor of this order is the first indefinite one
        expected = scipy.linalg.lapack.dpotrf(bad, lower=1)[1]
        assert expected == minor
        assert blocked.cholesky_lower(bad.copy(order="F")) == minor


@pytest.mark.parametrize("n", ORDERS)
@pytest.mark.parametrize("lower", [False, True])
def test_inverse_matches_lapack(n, lower):
    M = spd(n, n + 1)
    L = np.asfortranarray(scipy.linalg.cholesky(M, lower=True))
    got = blocked.inverse_lower(L, lower=lower)
    expected = scipy.linalg.lapack.dpotri(L, lower=1)[0]
    expected = np.tril(expected) if lower else np.tril(expected) + np.tril(expected, -1).T
    # Both are backward stable inverses: they differ by about cond(M) eps |M^-1|.
    cond = np.linalg.cond(M)
    np.testing.assert_allclose(
        got, expected, rtol=0, atol=8 * n * cond * EPS * np.abs(expected).max()
    )
    if lower:
        assert np.all(np.triu(got, 1) == 0)
    else:
        np.testing.assert_array_equal(got, got.T)


def test_matmul_matches_numpy_within_rounding():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(700, 300)), rng.normal(size=(300, 520))
    got = blocked.matmul(A, B)
    # |fl(A B) - A B| <= k eps |A| |B| for inner dimension k, on either side
    np.testing.assert_array_less(
        np.abs(got - A @ B), 2 * 300 * EPS * (np.abs(A) @ np.abs(B)) + 1e-300
    )


def test_results_do_not_depend_on_the_number_of_threads(monkeypatch):
    M = spd(600, 5)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TLRCORE_NUM_THREADS", threads)
        a = M.copy(order="F")
        assert blocked.cholesky_lower(a) == 0
        L = np.asfortranarray(np.tril(a))
        results.append((L, blocked.inverse_lower(L), blocked.matmul(M, M)))
    for other in results[1:]:
        for first, again in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_the_numpy_backend_factors_large_matrices_by_blocks(monkeypatch, order, overwrite):
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(blocked, "PARALLEL_FROM", 300)
    calls = []
    factor = blocked.cholesky_lower
    monkeypatch.setattr(blocked, "cholesky_lower", lambda a: calls.append(a.shape) or factor(a))
    M = np.array(spd(520, 6), order=order)
    kept = M.copy()
    bound = 8 * 520 * np.linalg.cond(kept) * EPS  # backward stable factor and inverse
    L, info = NUMPY.dense_cholesky(M, overwrite=overwrite)
    assert info == 0 and calls == [(520, 520)]
    reference = scipy.linalg.cholesky(kept, lower=True)
    np.testing.assert_allclose(L, reference, rtol=0, atol=bound * np.abs(reference).max())
    assert np.all(np.triu(L, 1) == 0)
    if not overwrite:
        np.testing.assert_array_equal(M, kept)
    inverse = NUMPY.cholesky_inverse(L)
    np.testing.assert_allclose(inverse @ kept, np.eye(520), rtol=0, atol=bound)
    singular = L.copy(order="F")
    singular[300, 300] = 0.0
    with pytest.raises(ValueError, match="info=301: the factor is singular"):
        NUMPY.cholesky_inverse(singular)


def test_the_numpy_backend_keeps_the_matrix_in_the_strict_upper_triangle_on_failure(monkeypatch):
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(blocked, "PARALLEL_FROM", 300)
    M = np.ascontiguousarray(spd(520, 7))
    M[400, 400] = -1.0
    kept = M.copy()
    L, info = NUMPY.dense_cholesky(M, overwrite=True)
    assert info == 401
    np.testing.assert_array_equal(np.triu(L, 1), np.triu(kept, 1))
