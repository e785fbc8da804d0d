"""Degenerate matrices through every path: a zero matrix, a zero tile column, entries near
the floating-point limits. Each call gives a correct result or a named error (never a
ZeroDivisionError, a raw NumPy error or NaN)."""

import numpy as np
import problems
import pytest
from problems import grid_sorted_sites

import tlrcore as tlr

N, TILE = 200, 50
METHODS = ["aca", "ara", "svd", "batched"]


def covariance():
    return problems.covariance(grid_sorted_sites(N, cells=2), range_=0.2, nugget=0.1)


def zero_tile_column():
    """The covariance with tile 1's rows and columns zero: positive semidefinite, singular."""
    M = covariance()
    M[TILE : 2 * TILE] = M[:, TILE : 2 * TILE] = 0.0
    return M


MATRICES = {"zero": lambda: np.zeros((N, N)), "zero-tile-column": zero_tile_column}


def build(M, method="svd", accuracy=1e-8):
    return tlr.TLRMatrix.from_generator(
        lambda r, c: M[np.ix_(r, c)], N, TILE, accuracy=accuracy, method=method
    )


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(MATRICES))
def test_degenerate_matrix_is_compressed_exactly_enough(name, method):
    M = MATRICES[name]()
    A = build(M, method)
    assert np.linalg.norm(A.to_dense() - M) <= 1e-8 * np.linalg.norm(
        M
    )  # 0 <= 0 for the zero matrix
    assert A.frobenius_norm() == pytest.approx(np.linalg.norm(A.to_dense()), rel=1e-12)
    assert A.error_bound() <= 1e-8
    info = tlr.summary(A, lambda r, c: M[np.ix_(r, c)])
    assert 0.0 <= info["estimated_error"] <= 1e-8 and info["error_bound"] == A.error_bound()
    if name == "zero":
        assert A.tolerance == 0.0 and A.error_bound() == 0.0 and info["estimated_error"] == 0.0
        assert not np.any(A.ranks[np.tril_indices(A.n_tiles, -1)])


def test_summary_of_the_zero_matrix_is_exact():
    A = tlr.TLRMatrix.from_dense(np.zeros((N, N)), TILE)
    assert tlr.summary(A, lambda r, c: np.zeros((r.size, c.size)))["estimated_error"] == 0.0


def test_summary_of_a_zero_approximation_reports_an_infinite_error():
    # [[0, B], [B^T, 0]] with every tile capped to rank 0: A_tlr = 0, the error is all of A.
    M = np.kron([[0.0, 1.0], [1.0, 0.0]], np.ones((N // 2, N // 2)))
    A = tlr.TLRMatrix.from_dense(M, N // 2, max_rank=0)
    assert A.frobenius_norm() == 0.0
    assert tlr.summary(A, lambda r, c: M[np.ix_(r, c)])["estimated_error"] == np.inf


@pytest.mark.parametrize("variant", ["left", "packed"])
def test_zero_matrix_shift_safeguard_raises_not_positive_definite(variant):
    A = tlr.TLRMatrix.from_dense(np.zeros((N, N)), TILE)
    with pytest.raises(
        tlr.NotPositiveDefiniteError, match=r"A is zero \(\|\|A\|\|_F = 0\).*explicit shift="
    ) as info:
        tlr.cholesky(A, safeguard="shift", variant=variant)
    assert info.value.tile == 0


def test_zero_matrix_modified_safeguard_names_the_tile():
    A = tlr.TLRMatrix.from_dense(np.zeros((N, N)), TILE)
    with pytest.raises(
        tlr.NotPositiveDefiniteError, match=r"diagonal tile 0 .*A is zero.*explicit shift="
    ) as info:
        tlr.cholesky(A, safeguard="schur+modified+pivot+shift")
    assert info.value.tile == 0


@pytest.mark.parametrize("safeguard", [None, "shift"])
@pytest.mark.parametrize("variant", ["left", "packed"])
def test_zero_matrix_with_an_explicit_shift_is_the_shift(variant, safeguard):
    A = tlr.TLRMatrix.from_dense(np.zeros((N, N)), TILE)
    F = tlr.cholesky(A, variant=variant, safeguard=safeguard, shift=4.0)
    np.testing.assert_array_equal(F.to_dense(), 2.0 * np.eye(N))  # sqrt(4) and zero tiles, exactly
    assert F.shift == 4.0 and F.logdet() == pytest.approx(N * np.log(4.0), rel=1e-14)


# Every factorization on the two singular matrices: (call, {matrix: expected}), where
# expected is (error class, tile) or None for a factor of A + E (E reported).
FAILS_AT = {
    "zero": (tlr.NotPositiveDefiniteError, 0),
    "zero-tile-column": (tlr.NotPositiveDefiniteError, 1),
}
CALLS = {
    "left": (lambda A: tlr.cholesky(A), FAILS_AT),
    "right": (lambda A: tlr.cholesky(A, variant="right"), FAILS_AT),
    "batched": (lambda A: tlr.cholesky(A, variant="packed"), FAILS_AT),
    "schur": (lambda A: tlr.cholesky(A, safeguard="schur"), FAILS_AT),
    # the zero tile column is pivoted to the last position
    "pivot": (
        lambda A: tlr.cholesky(A, safeguard="pivot"),
        {**FAILS_AT, "zero-tile-column": (tlr.NotPositiveDefiniteError, 3)},
    ),
    "modified": (
        lambda A: tlr.cholesky(A, safeguard="modified"),
        {**FAILS_AT, "zero-tile-column": None},
    ),
    "shift": (lambda A: tlr.cholesky(A, safeguard="shift"), {**FAILS_AT, "zero-tile-column": None}),
    "batched-shift": (
        lambda A: tlr.cholesky(A, variant="packed", safeguard="shift"),
        {**FAILS_AT, "zero-tile-column": None},
    ),
    "all-safeguards": (
        lambda A: tlr.cholesky(A, safeguard="schur+modified+pivot+shift"),
        {**FAILS_AT, "zero-tile-column": None},
    ),
    "ldl": (
        lambda A: tlr.ldl(A),
        {"zero": (tlr.FactorizationError, 0), "zero-tile-column": (tlr.FactorizationError, 1)},
    ),
}


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("name", list(MATRICES))
def test_singular_matrix_factors_or_names_the_tile(name, call):
    M = MATRICES[name]()
    A = build(M)
    factorize, expected = CALLS[call]
    if expected[name] is not None:
        error, tile = expected[name]
        with pytest.raises(error) as info:
            factorize(A)
        assert info.value.tile == tile and f"tile {tile}" in str(info.value)
        assert isinstance(info.value, np.linalg.LinAlgError)
        return
    F = factorize(A)
    L = F.to_dense()
    perm = np.arange(N) if F.perm is None else F.perm
    # L L^T = A + E, ||E||_F = F.perturbation, up to the compression of the factorization
    change = np.linalg.norm(L @ L.T - M[np.ix_(perm, perm)])
    assert 0 < F.perturbation and change <= F.perturbation + 4e-8 * np.linalg.norm(M)
    assert np.isfinite(F.logdet())


# Entries at 4e-121 and 3e120, inside the range for n = 200 ([1.3e-136, 1.5e136]).
IN_RANGE = [2.0**-400, 2.0**400]  # 3.9e-121, 2.6e120
OUT_OF_RANGE = [1e-300, 1e300]


@pytest.mark.parametrize("scale", OUT_OF_RANGE, ids=["tiny", "huge"])
@pytest.mark.parametrize("method", METHODS)
def test_entries_beyond_the_norm_range_are_refused(method, scale):
    M = scale * covariance()
    with pytest.raises(tlr.GeneratorError, match="outside .* rescale the matrix"):
        build(M, method)
    if method != "batched":
        with pytest.raises(ValueError, match=r"M has entries up to .* rescale the matrix"):
            tlr.TLRMatrix.from_dense(M, TILE, method=method)


FACTORIZATIONS = {
    "left": lambda A: tlr.cholesky(A, variant="left").logdet(),
    "right": lambda A: tlr.cholesky(A, variant="right").logdet(),
    "batched": lambda A: tlr.cholesky(A, variant="packed").logdet(),
    "pivot+schur+modified": lambda A: tlr.cholesky(
        A, variant="left", safeguard="pivot+schur+modified"
    ).logdet(),
    "ldl": lambda A: tlr.ldl(A).logdet(),
}


@pytest.mark.parametrize("factorization", list(FACTORIZATIONS))
@pytest.mark.parametrize("scale", IN_RANGE, ids=["2^-400", "2^400"])
@pytest.mark.parametrize("method", ["aca", "batched"])
def test_scaled_matrix_meets_the_contract(method, scale, factorization):
    M = covariance()
    A = build(scale * M, method)  # (dividing by a power of two is exact)
    assert np.linalg.norm(A.to_dense() / scale - M) <= 1e-8 * np.linalg.norm(M)
    assert A.error_bound() <= 1e-8
    # log det(s M) = log det M + n log s, to the accuracy bound of test_cholesky (accuracy
    # * n) plus the rounding of n terms of size |log s| = 277: at most n eps |n log s|.
    shift = N * np.log(scale)
    error = abs(FACTORIZATIONS[factorization](A) - shift - np.linalg.slogdet(M)[1])
    assert error <= 1e-8 * N + N * np.finfo(float).eps * abs(shift)
