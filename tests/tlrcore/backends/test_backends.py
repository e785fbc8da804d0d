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
    assert B.normal(7, (50, 3)).shape == (50, 3) and B.to_host(B.normal(7, (4, 0))).size == 0


def test_normal_draws_are_standard_normal(backend):
    """A million draws: mean, variance, skewness and kurtosis within about five standard
    errors of the normal's, and nothing in common between two seeds."""
    B = get_backend(backend)
    z, w = (B.to_host(B.normal(seed, (1000, 1000))).ravel() for seed in (11, 12))
    assert abs(z.mean()) < 5e-3 and abs(z.var() - 1.0) < 8e-3
    assert abs(np.mean(z**3)) < 2e-2 and abs(np.mean(z**4) - 3.0) < 5e-2
    assert abs(np.corrcoef(z, w)[0, 1]) < 5e-3


def _splitmix_normal(seed, shape):
    """The CuPy back end's draws computed on the host: Box-Muller of SplitMix64's outputs."""
    mask, gamma = 2**64 - 1, 0x9E3779B97F4A7C15

    def mix(z, shift=lambda z, s: z >> s, mul=lambda a, b: a * b):
        z = mul(z ^ shift(z, 30), 0xBF58476D1CE4E5B9)
        z = mul(z ^ shift(z, 27), 0x94D049BB133111EB)
        return z ^ shift(z, 31)

    key = mix((seed + gamma) & mask, mul=lambda a, b: (a * b) & mask)
    n = 2 * np.arange(int(np.prod(shape)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        a, b = (
            mix(
                np.uint64(key) + (n + np.uint64(j)) * np.uint64(gamma),
                lambda z, s: z >> np.uint64(s),
                lambda x, y: x * np.uint64(y),
            )
            for j in (1, 2)
        )
    u = ((a >> np.uint64(11)) + np.uint64(1)).astype(np.float64) * 2.0**-53
    v = (b >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return (np.sqrt(-2.0 * np.log(u)) * np.cos(2.0 * np.pi * v)).reshape(shape)


@pytest.mark.gpu
def test_the_gpu_draws_are_splitmix64_box_muller():
    """The CuPy kernel against its formula computed on the host (to the rounding of ``log``
    and ``cos``), for a seed beyond 64 bits too."""
    if not cupy_available():
        pytest.skip("CuPy or a GPU is not available")
    B = get_backend("cupy")
    for seed in (0, 7, 2**70 + 5):
        np.testing.assert_allclose(
            B.to_host(B.normal(seed, (300, 7))),
            _splitmix_normal(seed, (300, 7)),
            rtol=1e-12,
            atol=1e-12,
        )


def test_eigh_stacks_solve_each_stack_wherever_it_is_solved(backend, rng):
    """Stacks of orders a GPU's batched solver takes (16) and of orders it solves on the host
    (40, 48), in one call: each as ``numpy.linalg.eigh``, also unchecked, where a stack with
    values that are not finite gives NaN in its place only."""
    B = get_backend(backend)
    stacks = [spd(m, rng, count=c) for m, c in ((40, 3), (16, 2), (48, 1))]
    for check in (True, False):
        solved = B.eigh_stacks([B.asarray(a) for a in stacks], check=check)
        for a, (lam, vec) in zip(stacks, solved, strict=True):
            lam, vec = B.to_host(lam), B.to_host(vec)
            np.testing.assert_allclose(lam, np.linalg.eigh(a)[0], rtol=1e-12)
            np.testing.assert_allclose(
                vec @ (lam[:, :, None] * vec.transpose(0, 2, 1)), a, atol=1e-10
            )
    broken = stacks[0].copy()
    broken[1, 3, 3] = np.nan
    solved = B.eigh_stacks([B.asarray(broken), B.asarray(stacks[1])], check=False)
    lam = B.to_host(solved[0][0])
    assert np.isnan(lam[1]).all() and np.isfinite(lam[[0, 2]]).all()
    assert np.isfinite(B.to_host(solved[1][0])).all()


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
