"""The tiled product of a rectangular block generator against the dense product."""

import numpy as np
import pytest
from problems import covariance

from tlrcore import GeneratorError
from tlrcore.compress.tiled_product import tiled_product


def clustered(rng, count, centres):
    """`count` points around each of `centres` (clusters of radius 0.1)."""
    return np.vstack([c + 0.1 * rng.random((count, 2)) for c in centres])


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    centres = [(0, 0), (0.5, 0), (0, 0.5), (0.5, 0.5)]
    rows, cols = clustered(rng, 150, centres), clustered(rng, 100, centres)
    matrix = covariance(rows, cols, range_=0.3)
    row_tiles = [np.arange(150 * k, 150 * (k + 1)) for k in range(4)]
    col_tiles = [np.arange(100 * k, 100 * (k + 1)) for k in range(4)]
    return matrix, row_tiles, col_tiles, rng.standard_normal((400, 3))


def generator(matrix):
    return lambda i, j: matrix[np.ix_(i, j)]


@pytest.mark.parametrize("tolerance", [1e-4, 1e-8, 1e-12])
def test_product_within_the_tile_tolerance(problem, tolerance):
    matrix, row_tiles, col_tiles, X = problem
    dense = np.eye(4, dtype=bool)
    got = tiled_product(generator(matrix), row_tiles, col_tiles, X, tolerance, dense)
    # Each compressed tile is within the tolerance in Frobenius norm (ACA's estimate, with
    # the safety factor of tlrcore.compress.aca), so a row tile's error is at most
    # tolerance * sum over its compressed tiles of ||X_b||_2; allow ten times that.
    bound = tolerance * sum(np.linalg.norm(X[tile], 2) for tile in col_tiles)
    assert np.abs(got - matrix @ X).max() <= 10 * bound


def test_all_dense_is_the_dense_product(problem):
    matrix, row_tiles, col_tiles, X = problem
    got = tiled_product(
        generator(matrix), row_tiles, col_tiles, X, 1e-8, np.ones((4, 4), dtype=bool)
    )
    np.testing.assert_allclose(got, matrix @ X, rtol=1e-13, atol=1e-13 * np.abs(matrix @ X).max())


def test_rows_in_any_order(problem):
    """Row tiles that permute the rows give the rows in their own order."""
    matrix, _, col_tiles, X = problem
    perm = np.random.default_rng(0).permutation(600)
    row_tiles = [np.sort(perm[k * 150 : (k + 1) * 150]) for k in range(4)]
    got = tiled_product(
        generator(matrix), row_tiles, col_tiles, X, 1e-10, np.zeros((4, 4), dtype=bool)
    )
    assert np.abs(got - matrix @ X).max() <= 1e-7 * np.abs(matrix @ X).max()


def test_bad_arguments(problem):
    matrix, row_tiles, col_tiles, X = problem
    block = generator(matrix)
    with pytest.raises(ValueError, match="tolerance"):
        tiled_product(block, row_tiles, col_tiles, X, 0.0, np.eye(4, dtype=bool))
    with pytest.raises(ValueError, match="dense"):
        tiled_product(block, row_tiles, col_tiles, X, 1e-8, np.eye(3, dtype=bool))
    with pytest.raises(ValueError, match="rows"):
        tiled_product(block, row_tiles, col_tiles, X[:10], 1e-8, np.eye(4, dtype=bool))


def test_generator_errors_are_named(problem):
    matrix, row_tiles, col_tiles, X = problem

    def bad(i, j):
        out = matrix[np.ix_(i, j)].copy()
        out[0, 0] = np.nan
        return out

    with pytest.raises(GeneratorError, match="tile"):
        tiled_product(bad, row_tiles, col_tiles, X, 1e-8, np.eye(4, dtype=bool))
