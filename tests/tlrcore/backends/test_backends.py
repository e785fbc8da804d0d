"""The array back ends against SciPy: Cholesky with per-matrix info, triangular solves,
reproducible samples, and the errors of get_backend."""

import functools

import numpy as np
import pytest
import scipy.linalg
from problems import spd
from scipy.spatial.distance import squareform

from tlrcore.backends import NUMPY, Backend, cupy_available, get_backend


@pytest.mark.parametrize("order", ["C", "F"])
def test_cholesky_of_one_matrix_reads_the_lower_triangle_only(backend, rng, order):
    B = get_backend(backend)
    M = spd(70, rng)
    garbage = np.tril(M) + np.triu(np.full_like(M, 1e6), 1)  # the upper triangle must not be read
    A = B.asarray(np.asarray(garbage, order=order))
    L, info = B.cholesky(A)
    assert int(info) == 0
    np.testing.assert_allclose(
        B.to_host(L), scipy.linalg.cholesky(M, lower=True), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_array_equal(B.to_host(A), garbage)  # not modified


def test_cholesky_of_a_stack_reports_the_failing_matrix_and_minor(backend, rng):
    B = get_backend(backend)
    M = spd(64, rng, count=5)
    M[3, 10, 10] = -1.0
    L, info = B.cholesky(B.asarray(M))
    assert info.tolist() == [0, 0, 0, 11, 0]
    for p in (0, 1, 2, 4):
        np.testing.assert_allclose(
            B.to_host(L[p]), scipy.linalg.cholesky(M[p], lower=True), rtol=1e-12, atol=1e-12
        )


@pytest.mark.parametrize("trans", [False, True], ids=["L", "LT"])
def test_solve_triangular_on_stacks_with_broadcasting(backend, rng, trans):
    B = get_backend(backend)
    L = np.linalg.cholesky(spd(20, rng, count=3))
    rhs = rng.normal(size=(20, 4))
    X = B.to_host(B.solve_triangular(B.asarray(L), B.asarray(rhs), lower=True, trans=trans))
    assert X.shape == (3, 20, 4)
    for p in range(3):
        op = L[p].T if trans else L[p]
        np.testing.assert_allclose(op @ X[p], rhs, rtol=1e-10, atol=1e-10)


def test_normal_is_reproducible(backend):
    B = get_backend(backend)
    first, again, other = (B.to_host(B.normal(seed, (50, 3))) for seed in (7, 7, 8))
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert abs(first.mean()) < 0.5 and 0.5 < first.std() < 1.5
    # every back end draws NumPy's numbers, so a sketch does not depend on the device
    assert np.array_equal(first, NUMPY.normal(7, (50, 3)))


@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_squareform_matches_scipy(backend, n):
    """The generic squareform (the GPU's) and NumPy's: SciPy's matrix, bit for bit (copies)."""
    values = np.random.default_rng(n).uniform(size=n * (n - 1) // 2)
    expected = squareform(values, checks=False)
    np.fill_diagonal(expected, 2.5)
    B = get_backend(backend)
    for square in (B.squareform, functools.partial(Backend.squareform, B)):
        assert np.array_equal(B.to_host(square(B.asarray(values), n, 2.5)), expected)


def test_get_backend_names_arrays_and_errors():
    assert (
        get_backend("numpy") is NUMPY
        and get_backend(np.zeros(2)) is NUMPY
        and get_backend(NUMPY) is NUMPY
    )
    with pytest.raises(ValueError, match="unknown"):
        get_backend("tpu")
    with pytest.raises(TypeError, match="backend must be"):
        get_backend(3)


@pytest.mark.skipif(cupy_available(), reason="CuPy and a GPU are available")
def test_cupy_without_a_gpu_names_the_fix():
    with pytest.raises(ValueError, match="backend='numpy'"):
        get_backend("cupy")
