"""The TLR inverse factor ``X = L^{-1}`` and the entries of ``A^{-1}`` it gives, against
dense inverses of the densified factor.

Bounds. Each off-diagonal tile of ``X`` solves ``L(i, i) X(i, J) = -T`` with ``T`` the
block forward substitution's sum, truncated by ``delta_i``, ``||delta_i||_F <= tau /
s_i`` (``tau`` the tile tolerance, ``s_i >= ||X(i, i)||_2`` the norm estimate), so the
computed ``X~`` satisfies ``L X~ = I - Delta`` and ``||X~ - X||_F <= ||X||_2
||Delta||_F``. The compressed tiles of ``X~^T X~`` add at most ``accuracy ||diag||_2 /
n_tiles`` each. ARA's truncation is probabilistic (its error estimate has a margin of
2, :mod:`tlrcore.compress.ara`): the tests allow twice the bounds.
"""

import numpy as np
import problems
import pytest
import scipy.linalg
from problems import grid_sorted_sites

import tlrcore as tlr
from tlrcore.cholesky.factor import TLRCholesky

CASES = {
    "exp2d-ragged": (900, 2, 128, "exponential", 1e-2),
    "matern15-2d": (1024, 2, 256, "matern15", 1e-3),
    "exp3d": (800, 3, 200, "exponential", 1e-2),
    "exp1d-small-tiles": (300, 1, 32, "exponential", 1e-2),
    "single-tile": (200, 2, 200, "exponential", 1e-2),
}


def factored(case, accuracy, seed=0):
    n, d, tile, kernel, nugget = CASES[case]
    M = problems.covariance(grid_sorted_sites(n, d, seed), kernel=kernel, range_=0.1, nugget=nugget)
    return M, tlr.cholesky(tlr.TLRMatrix.from_dense(M, tile, accuracy=accuracy))


def truncation_bound(inverse, X):
    """``2 ||X||_2 tau sqrt(sum_{i > J} 1 / ||X(i, i)||_2^2)`` (module docstring)."""
    norms = [np.linalg.norm(D, 2) for D in inverse.diagonal]
    terms = sum(i / norms[i] ** 2 for i in range(inverse.n_tiles))
    return 2 * np.linalg.norm(X, 2) * inverse.tolerance * np.sqrt(terms)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("accuracy", [1e-6, 1e-10], ids=lambda a: f"acc{a:.0e}")
def test_inverse_factor_matches_the_dense_inverse(case, accuracy):
    _, F = factored(case, accuracy)
    inverse = tlr.inverse_factor(F, accuracy)
    X = np.linalg.inv(F.to_dense())
    computed = inverse.to_dense()
    assert np.allclose(np.triu(computed, 1), 0.0)
    error = np.linalg.norm(computed - X)
    assert error <= truncation_bound(inverse, X) + 1e-12 * np.linalg.norm(X)
    # the bound is not vacuous: well below the inverse itself
    assert truncation_bound(inverse, X) < 1e-3 * np.linalg.norm(X)
    for J, D in enumerate(inverse.diagonal):
        tile = F.tile(J)
        np.testing.assert_allclose(D, X[tile, tile], rtol=0, atol=1e-10 * np.abs(X).max())


@pytest.mark.parametrize("case", ["exp2d-ragged", "exp3d", "single-tile"])
def test_entries_of_the_inverse(case, rng):
    """The diagonal equals that of ``X~^T X~`` to rounding; principal blocks (in any order,
    across tiles, one index, all) are within the compressed tiles' bound of it, and within
    the factor's and inverse factor's errors of ``(L L^T)^{-1}``."""
    accuracy = 1e-9
    _, F = factored(case, accuracy)
    inverse = tlr.inverse_factor(F, accuracy)
    X = inverse.to_dense()
    gram = X.T @ X
    np.testing.assert_allclose(inverse.inverse_diagonal(), np.diag(gram), rtol=1e-12)
    tiles_bound = 2 * np.sqrt(2) * accuracy * np.linalg.norm(np.diag(gram))
    n = F.n
    for index in (rng.permutation(n)[: n // 3], np.array([n // 2]), np.arange(n)[::-1]):
        block = inverse.inverse_block(index)
        assert np.array_equal(block, block.T)
        assert np.linalg.norm(block - gram[np.ix_(index, index)]) <= tiles_bound
    exact = np.linalg.inv(F.to_dense() @ F.to_dense().T)
    index = rng.permutation(n)[: n // 4]
    X_exact = np.linalg.inv(F.to_dense())
    whole = 2 * np.linalg.norm(X_exact, 2) * truncation_bound(inverse, X_exact) + tiles_bound
    assert np.linalg.norm(inverse.inverse_block(index) - exact[np.ix_(index, index)]) <= whole


def test_entries_in_the_order_of_a_pivoted_factor(rng):
    """With ``A[perm][:, perm] ~ L L^T`` the entries are those of ``A^{-1}``, in ``A``'s order."""
    M, F = factored("exp2d-ragged", 1e-10)
    perm = rng.permutation(M.shape[0])
    pivoted = TLRCholesky(F.diagonal, F.U, F.V, F.offsets, F.tolerance, perm=perm)
    A = np.empty_like(M)
    A[np.ix_(perm, perm)] = M  # A[perm][:, perm] = M
    exact = np.linalg.inv(A)
    inverse = tlr.inverse_factor(pivoted, 1e-10)
    scale = np.abs(exact).max()
    np.testing.assert_allclose(
        inverse.inverse_diagonal(), np.diag(exact), rtol=0, atol=1e-6 * scale
    )
    index = rng.permutation(M.shape[0])[:100]
    np.testing.assert_allclose(
        inverse.inverse_block(index), exact[np.ix_(index, index)], rtol=0, atol=1e-6 * scale
    )


def test_block_diagonal_matrix_has_empty_tiles():
    """Rank-0 tiles of ``L`` give rank-0 tiles of ``X``, and exact entries."""
    blocks = [
        problems.covariance(grid_sorted_sites(64, 2, s), range_=0.1, nugget=0.1) for s in range(3)
    ]
    M = scipy.linalg.block_diag(*blocks)
    F = tlr.cholesky(tlr.TLRMatrix.from_dense(M, 64, accuracy=1e-10))
    inverse = tlr.inverse_factor(F, 1e-10)
    assert all(U.shape[1] == 0 for U in inverse.U.values())
    exact = np.linalg.inv(M)
    np.testing.assert_allclose(inverse.inverse_block(np.arange(192)), exact, atol=1e-9)
    np.testing.assert_allclose(inverse.inverse_diagonal(), np.diag(exact), rtol=1e-9)


def test_the_same_for_any_number_of_threads(monkeypatch):
    _, F = factored("exp2d-ragged", 1e-8)
    results = []
    for threads in ("1", "3"):
        monkeypatch.setenv("TLRCORE_NUM_THREADS", threads)
        inverse = tlr.inverse_factor(F, 1e-8)
        results.append((inverse.to_dense(), inverse.inverse_block(np.arange(0, 900, 7))))
    for a, b in zip(*results, strict=True):
        assert np.array_equal(a, b)


def test_a_draw_stream_is_the_same_however_it_was_extended():
    """Tiles of a column read one stream in an order the threads decide: its columns must
    not depend on the sizes of the requests that extended it."""
    from tlrcore.cholesky.inverse import DrawStream

    at_once = DrawStream(7, seed=3).columns(40).copy()
    for requests in ([1, 40], [3, 5, 11, 40], [39, 40]):
        stream = DrawStream(7, seed=3)
        for end in requests:
            piece = stream.columns(end)
        np.testing.assert_array_equal(piece, at_once)


def test_bad_input():
    M, F = factored("exp1d-small-tiles", 1e-8)
    with pytest.raises(TypeError, match="tlrcore.TLRCholesky"):
        tlr.inverse_factor(np.linalg.cholesky(M), 1e-8)
    with pytest.raises(TypeError, match="tlrcore.TLRCholesky"):
        tlr.inverse_factor(tlr.TLRMatrix.from_dense(M, 32), 1e-8)
    for accuracy in (0.0, 1.5):
        with pytest.raises(ValueError, match="accuracy must be in"):
            tlr.inverse_factor(F, accuracy)
    diagonal = [np.array(D) for D in F.diagonal]
    diagonal[3][5, 5] = 0.0
    singular = TLRCholesky(diagonal, F.U, F.V, F.offsets, F.tolerance)
    with pytest.raises(tlr.FactorizationError, match="diagonal tile 3") as info:
        tlr.inverse_factor(singular, 1e-8)
    assert info.value.tile == 3
