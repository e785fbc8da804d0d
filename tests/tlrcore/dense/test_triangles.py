"""Diagonal tiles kept as triangles (tlrcore.dense.triangles) against NumPy and SciPy on the
whole tiles: packing copies entries, so unpacked tiles are equal bit for bit; solves and
products agree to the rounding of the same operation in another order."""

import numpy as np
import pytest
import scipy.linalg as sl

from tlrcore._lapack import pack_lower, symm_packed, trmm_packed, trsm_packed, unpack_lower
from tlrcore.dense.triangles import MIRROR_BLOCK, Triangles

#: Odd and even orders (the RFP layout differs), one above MIRROR_BLOCK and not a multiple.
SIZES = (1, 2, 7, 8, 65, MIRROR_BLOCK + 45)


def symmetric(n, seed=0):
    M = np.random.default_rng(seed).standard_normal((n, n))
    return M + M.T


def triangular(n, seed=0):
    """A well-conditioned lower-triangular tile: the Cholesky factor of ``I + M M^T / n``,
    ``M`` standard normal, whose condition number is below 10 for every size here."""
    M = np.random.default_rng(seed).standard_normal((n, n))
    return np.linalg.cholesky(np.eye(n) + M @ M.T / n)


@pytest.mark.parametrize("n", SIZES)
def test_pack_and_unpack_copy_the_lower_triangle_bit_for_bit(n):
    S = np.asfortranarray(symmetric(n))
    packed = pack_lower(S)
    assert packed.shape == (n * (n + 1) // 2,)
    out = np.full((n, n), 7.0, order="F")
    unpack_lower(packed, out)
    np.testing.assert_array_equal(np.tril(out), np.tril(S))
    np.testing.assert_array_equal(np.triu(out, 1), np.triu(np.full((n, n), 7.0), 1))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize(
    "shape, order", [((), "C"), ((3,), "C"), ((3,), "F"), ((1,), "C")], ids=["vec", "C", "F", "1"]
)
def test_packed_solve_agrees_with_scipy(n, trans, shape, order):
    """dtfsm on the packed triangle against solve_triangular on the whole one: the same
    substitution in another order of blocks, so agreement to a few ulps times the condition
    number (below 10 here)."""
    L = triangular(n)
    B = np.asarray(np.random.default_rng(1).standard_normal((n, *shape)), order=order)
    expected = sl.solve_triangular(L, B, lower=True, trans=1 if trans else 0)
    X = B.copy(order="K")
    assert trsm_packed(pack_lower(np.asfortranarray(L)), X, trans) is X
    np.testing.assert_allclose(X, expected, rtol=0, atol=64 * np.finfo(float).eps * n)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    "shape, order", [((), "C"), ((3,), "C"), ((3,), "F"), ((1,), "C")], ids=["vec", "C", "F", "1"]
)
def test_packed_symmetric_product_agrees_with_numpy(n, shape, order):
    """Two dsymm and two dgemm on the packed blocks against the whole symmetric tile's product:
    the same sums in another order, within ``n u`` times the products of absolute values."""
    S = symmetric(n)
    X = np.asarray(np.random.default_rng(3).standard_normal((n, *shape)), order=order)
    before = X.copy()
    Y = symm_packed(pack_lower(np.asfortranarray(S)), X)
    assert Y.shape == X.shape
    bound = 2 * n * np.finfo(float).eps * (np.abs(S) @ np.abs(X))
    assert np.all(np.abs(Y - S @ X) <= bound)
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    "shape, order",
    [((), "C"), ((3,), "C"), ((3,), "F"), ((1,), "C"), ((0,), "C")],
    ids=["vec", "C", "F", "1", "0"],
)
def test_packed_triangular_product_agrees_with_numpy(n, shape, order):
    """Two dtrmm and one dgemm on the packed blocks against the whole triangle's product: the
    same sums in another order, within ``n u`` times the products of absolute values; the
    result keeps `X`'s memory order and `X` is not changed."""
    L = triangular(n)
    X = np.asarray(np.random.default_rng(4).standard_normal((n, *shape)), order=order)
    before = X.copy()
    Y = trmm_packed(pack_lower(np.asfortranarray(L)), X)
    assert Y.shape == X.shape
    if X.ndim == 2 and X.shape[1] > 1:
        assert Y.flags.c_contiguous == X.flags.c_contiguous
    bound = 2 * n * np.finfo(float).eps * (np.abs(L) @ np.abs(X))
    assert np.all(np.abs(Y - L @ X) <= bound)
    np.testing.assert_array_equal(X, before)


def test_packed_solve_of_a_fortran_block_writes_only_the_block():
    n = 40
    L = triangular(n)
    big = np.asfortranarray(np.random.default_rng(2).standard_normal((n + 5, 6)))
    before = big.copy()
    block = big[:n, 1:4]
    trsm_packed(pack_lower(np.asfortranarray(L)), block)
    np.testing.assert_allclose(block, sl.solve_triangular(L, before[:n, 1:4], lower=True))
    np.testing.assert_array_equal(big[n:], before[n:])
    np.testing.assert_array_equal(big[:, [0, 4, 5]], before[:, [0, 4, 5]])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: pack_lower(np.ones((3, 4), order="F")), "square"),
        (lambda: pack_lower(np.ones((3, 3), dtype=np.float32, order="F")), "float64"),
        (lambda: unpack_lower(np.ones(5), np.empty((3, 3), order="F")), "6 float64"),
        (lambda: trsm_packed(np.ones(6), np.ones(4)), "10 float64"),
        (lambda: symm_packed(np.ones(6), np.ones(4)), "10 float64"),
        (lambda: trmm_packed(np.ones(6), np.ones(4)), "10 float64"),
    ],
    ids=["not-square", "float32", "unpack-size", "solve-size", "product-size", "triangular-size"],
)
def test_bad_packed_operands_are_rejected(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_symmetric_tiles_unpack_whole_products_norms_and_diagonals():
    tiles = [symmetric(n, seed=n) for n in SIZES]
    T = Triangles(tiles, symmetric=True)
    assert len(T) == len(SIZES)
    rng = np.random.default_rng(3)
    for k, S in enumerate(tiles):
        D = T[k]
        np.testing.assert_array_equal(D, S)
        assert D.flags.f_contiguous and D.flags.writeable
        np.testing.assert_array_equal(np.tril(T.lower(k)), np.tril(S))
        np.testing.assert_array_equal(T.diagonal(k), np.diagonal(S))
        X = rng.standard_normal((S.shape[0], 3))
        np.testing.assert_allclose(T.symmetric_product(k, X), S @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            T.symmetric_product(k, X[:, 0]), S @ X[:, 0], rtol=1e-12, atol=1e-12
        )
        assert T.squared_norm(k) == pytest.approx(np.sum(S * S), rel=1e-13)
        assert T.size(k) == S.shape[0]
    # the C-ordered tile is read as its (equal) transpose
    C = Triangles([np.ascontiguousarray(S) for S in tiles], symmetric=True)
    assert all(np.array_equal(C[k], S) for k, S in enumerate(tiles))
    assert T.nbytes == sum(8 * (n * (n + 1) // 2 + n) for n in SIZES)


def test_triangular_tiles_unpack_with_zeros_above_solve_and_multiply():
    tiles = [triangular(n, seed=n) for n in SIZES]
    T = Triangles(tiles)
    for k, L in enumerate(tiles):
        np.testing.assert_array_equal(T[k], L)
        b = np.random.default_rng(k).standard_normal(L.shape[0])
        x = b.copy()
        T.solve(k, x)
        np.testing.assert_allclose(L @ x, b, rtol=0, atol=1e-12 * L.shape[0])
        np.testing.assert_allclose(T.triangular_product(k, x), b, rtol=0, atol=1e-12 * L.shape[0])
        assert T.squared_norm(k) == pytest.approx(np.sum(L * L), rel=1e-13)


def test_views_release_independently_and_released_tiles_raise():
    T = Triangles([symmetric(5), symmetric(6)], symmetric=True)
    view = T.view()
    T.release(0)
    assert T.tile_nbytes(0) == 0 and view.tile_nbytes(0) > 0
    np.testing.assert_array_equal(view[0], symmetric(5))
    assert T.size(0) == 5
    for call in (lambda: T[0], lambda: T.diagonal(0), lambda: T.solve(0, np.ones(5))):
        with pytest.raises(ValueError, match="tile 0 was released"):
            call()


def test_empty_then_stored_and_bad_tiles():
    T = Triangles.empty([3, 2])
    T.store(1, np.tril(np.ones((2, 2))))
    assert T.tile_nbytes(0) == 0
    np.testing.assert_array_equal(T[1], np.tril(np.ones((2, 2))))
    with pytest.raises(ValueError, match="tile 0 must be square"):
        T.store(0, np.ones((3, 2)))


def test_the_stored_arrays_are_read_only_and_the_input_untouched():
    S = symmetric(9)
    before = S.copy()
    T = Triangles([S], symmetric=True)
    D = T[0]
    D[:] = 0.0
    np.testing.assert_array_equal(T[0], before)
    np.testing.assert_array_equal(S, before)
    with pytest.raises(ValueError, match="read-only"):
        T.diagonal(0)[0] = 1.0
