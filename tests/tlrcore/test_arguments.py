"""Bad arguments to the tlrcore entry points: an error naming the argument, never a raw
NumPy error or a silent conversion."""

import numpy as np
import problems
import pytest

import tlrcore as tlr


@pytest.fixture(scope="module")
def spd():
    return problems.spd(60, np.random.default_rng(0))


@pytest.fixture(scope="module")
def matrix(spd):
    return tlr.TLRMatrix.from_dense(spd, 16)


@pytest.mark.parametrize(
    "M", [np.array([["a", "b"], ["b", "a"]]), np.eye(3) + 1j], ids=["strings", "complex"]
)
def test_from_dense_refuses_non_real_matrices(M):
    with pytest.raises(TypeError, match="M must be a real numeric matrix"):
        tlr.TLRMatrix.from_dense(M, 2)


def test_generator_returning_complex_blocks_is_refused(spd):
    with pytest.raises(tlr.GeneratorError, match="complex"):
        tlr.TLRMatrix.from_generator(lambda rows, cols: spd[np.ix_(rows, cols)] + 0j, 60, 16)


@pytest.mark.parametrize(
    "x", [np.full(60, np.nan), np.array(["a"] * 60), [1.0] * 59], ids=["nan", "strings", "short"]
)
@pytest.mark.parametrize(
    "use", ["matmul", "solve", "solve_lower", "multiply_lower", "batched-solve"]
)
def test_operands_are_checked(matrix, x, use):
    run = {
        "matmul": lambda: matrix @ x,
        "solve": lambda: tlr.cholesky(matrix).solve(x),
        "solve_lower": lambda: tlr.cholesky(matrix).solve_lower(x),
        "multiply_lower": lambda: tlr.cholesky(matrix).multiply_lower(x),
        "batched-solve": lambda: tlr.cholesky(matrix, variant="packed").solve(x),
    }[use]
    with pytest.raises((TypeError, ValueError), match=r"^(x|b|z) (must|contains)"):
        run()


@pytest.mark.parametrize(
    ("settings", "error", "match"),
    [
        ({"random_state": "seed"}, TypeError, "random_state must be"),
        ({"random_state": -1}, ValueError, "random_state must be"),
        ({"block_size": "16"}, TypeError, "block_size must be an integer"),
        ({"block_size": 0}, ValueError, "block_size must be at least 1"),
    ],
    ids=["seed-str", "seed-negative", "block-str", "block-zero"],
)
def test_factorization_settings_are_checked(matrix, settings, error, match):
    with pytest.raises(error, match=match):
        tlr.cholesky(matrix, **settings)
    with pytest.raises(error, match=match):
        tlr.ldl(matrix, **settings)


def test_construction_seed_is_checked(spd):
    with pytest.raises(TypeError, match="random_state must be"):
        tlr.TLRMatrix.from_dense(spd, 16, method="ara", random_state="seed")


def test_summary_checks_its_arguments(matrix, spd):
    with pytest.raises(TypeError, match="A must be a tlrcore.TLRMatrix"):
        tlr.summary(spd)
    with pytest.raises(ValueError, match=r"block \(tile .*\) returned an array of shape \(\)"):
        tlr.summary(matrix, block=lambda rows, cols: 1.0)
    report = tlr.summary(matrix, block=lambda rows, cols: spd[np.ix_(rows, cols)])
    assert 0.0 <= report["estimated_error"] <= 1e-8
