"""TLR Cholesky (left- and right-looking) against SciPy on the densified matrix."""

import numpy as np
import problems
import pytest
import scipy.linalg
from problems import grid_sorted_sites

import tlrcore as tlr


def covariance(n, d=2, range_=0.1, nugget=1e-2, smooth=False, seed=0):
    """Exponential (Matérn 1.5 with `smooth`) covariance with a nugget of `n` grid-sorted
    sites."""
    kernel = "matern15" if smooth else "exponential"
    return problems.covariance(
        grid_sorted_sites(n, d, seed), kernel=kernel, range_=range_, nugget=nugget
    )


CASES = {
    "exp2d-ragged": (900, 2, 128, False),
    "matern15-2d": (1024, 2, 256, True),
    "exp3d": (800, 3, 200, False),
    "exp1d-small-tiles": (300, 1, 32, False),
    "single-tile": (200, 2, 200, False),
}
VARIANTS = ["left", "right"]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("accuracy", [1e-6, 1e-10], ids=lambda a: f"acc{a:.0e}")
def test_factor_logdet_and_solve_match_scipy(case, accuracy, variant, rng):
    n, d, tile, smooth = CASES[case]
    M = covariance(n, d, smooth=smooth)
    A = tlr.TLRMatrix.from_dense(M, tile, accuracy=accuracy)
    F = tlr.cholesky(A, variant=variant)
    L = F.to_dense()
    assert np.allclose(np.triu(L, 1), 0.0)
    norm = np.linalg.norm(M)
    assert np.linalg.norm(L @ L.T - M) <= 2 * accuracy * norm  # measured 0.8-1.06 (right: 0.7-0.9)
    sign, logdet = np.linalg.slogdet(M)
    assert sign > 0
    assert abs(F.logdet() - logdet) <= accuracy * n  # measured <= 0.13
    b = rng.normal(size=n)
    B = rng.normal(size=(n, 3))
    exact = scipy.linalg.cho_solve(scipy.linalg.cho_factor(M, lower=True), B)
    cond = np.linalg.cond(M)
    np.testing.assert_allclose(
        F.solve(B), exact, rtol=0, atol=50 * accuracy * cond * np.abs(exact).max()
    )
    np.testing.assert_allclose(
        F.solve_lower(b), scipy.linalg.solve_triangular(L, b, lower=True), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(
        F.solve_upper(b), scipy.linalg.solve_triangular(L.T, b, lower=False), rtol=1e-9, atol=1e-9
    )


def test_ranks_nbytes_and_repr():
    M = covariance(1000)
    F = tlr.cholesky(tlr.TLRMatrix.from_dense(M, 200, accuracy=1e-8))
    ranks = F.ranks
    np.testing.assert_array_equal(np.diag(ranks), [200] * 5)
    assert np.all(np.triu(ranks, 1) == 0) and np.all(ranks[np.tril_indices(5, -1)] > 0)
    assert F.nbytes < M.nbytes and "TLRCholesky(n=1000" in repr(F)


@pytest.mark.parametrize("variant", VARIANTS)
def test_deterministic_and_thread_independent(variant, monkeypatch):
    A = tlr.TLRMatrix.from_dense(covariance(900), 128, accuracy=1e-8)
    first = tlr.cholesky(A, random_state=5, variant=variant).to_dense()
    np.testing.assert_array_equal(
        first, tlr.cholesky(A, random_state=5, variant=variant).to_dense()
    )
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    np.testing.assert_array_equal(
        first, tlr.cholesky(A, random_state=5, variant=variant).to_dense()
    )


def test_many_right_hand_sides_are_solved_in_chunks_whatever_the_threads(monkeypatch, rng):
    """Matrices wider than RHS_CHUNK go to the tile pool in column chunks: the result is
    the same with one thread, the input is left alone, and it matches dense solves."""
    from tlrcore.concurrency.threads import RHS_CHUNK

    M = covariance(700)
    F = tlr.cholesky(tlr.TLRMatrix.from_dense(M, 100, accuracy=1e-10))
    L = F.to_dense()
    B = rng.normal(size=(700, 2 * RHS_CHUNK + 5))  # two full chunks and a narrow one
    kept = B.copy()
    results = [F.solve_lower(B), F.solve_upper(B), F.multiply_lower(B)]
    np.testing.assert_array_equal(B, kept)
    np.testing.assert_allclose(
        results[0], scipy.linalg.solve_triangular(L, B, lower=True), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(
        results[1], scipy.linalg.solve_triangular(L.T, B, lower=False), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(results[2], L @ B, rtol=1e-12, atol=1e-12 * np.abs(L @ B).max())
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    for got, expected in zip(
        [F.solve_lower(B), F.solve_upper(B), F.multiply_lower(B)], results, strict=True
    ):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("case", ["exp2d-ragged", "matern15-2d", "exp3d"])
def test_variants_agree_to_the_accuracy(case):
    n, d, tile, smooth = CASES[case]
    M = covariance(n, d, smooth=smooth)
    A = tlr.TLRMatrix.from_dense(M, tile, accuracy=1e-8)
    left, right = (tlr.cholesky(A, variant=v) for v in VARIANTS)
    Ll, Lr = left.to_dense(), right.to_dense()
    assert np.linalg.norm(Ll @ Ll.T - Lr @ Lr.T) <= 2e-8 * np.linalg.norm(M)  # measured 0.4-0.5
    assert abs(left.logdet() - right.logdet()) <= 1e-8 * n  # measured <= 0.0015


@pytest.mark.parametrize("variant", VARIANTS)
def test_not_positive_definite_names_the_tile(variant):
    M = np.eye(100)
    M[45, 45] = -1.0
    A = tlr.TLRMatrix.from_dense(M, 20, accuracy=1e-8)
    with pytest.raises(tlr.NotPositiveDefiniteError) as info:
        tlr.cholesky(A, variant=variant)
    assert info.value.tile == 2 and "tile 2" in str(info.value)
    assert isinstance(info.value, np.linalg.LinAlgError)


@pytest.mark.parametrize("variant", VARIANTS)
def test_input_is_not_modified(variant):
    A = tlr.TLRMatrix.from_dense(covariance(600), 100, accuracy=1e-8)
    before = A.to_dense()
    tlr.cholesky(A, variant=variant)
    np.testing.assert_array_equal(A.to_dense(), before)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda A: tlr.cholesky(np.eye(3)), TypeError),
        (lambda A: tlr.cholesky(A, accuracy=2.0), ValueError),
        (lambda A: tlr.cholesky(A, variant="up"), ValueError),
        (lambda A: tlr.cholesky(A).solve(np.ones(5)), ValueError),
        (lambda A: tlr.cholesky(A).solve(np.full(100, np.nan)), ValueError),
    ],
    ids=["not-tlr", "accuracy", "variant", "rhs-shape", "rhs-nan"],
)
def test_bad_arguments(call, error):
    A = tlr.TLRMatrix.from_dense(np.eye(100) * 2.0, 20)
    with pytest.raises(error):
        call(A)


@pytest.mark.parametrize("variant", VARIANTS)
def test_overwrite_a_gives_the_same_factor_and_consumes_a(variant):
    M = covariance(900)
    keep = tlr.cholesky(tlr.TLRMatrix.from_dense(M, 128, accuracy=1e-8), variant=variant).to_dense()
    A = tlr.TLRMatrix.from_dense(M, 128, accuracy=1e-8)
    np.testing.assert_array_equal(
        tlr.cholesky(A, overwrite_a=True, variant=variant).to_dense(), keep
    )
    with pytest.raises(tlr.ConsumedMatrixError):
        A @ np.ones(900)


@pytest.mark.parametrize("safeguard", [None, "modified", "compensate", "schur+modified"])
def test_overwrite_a_releases_the_diagonal_triangles_bit_for_bit(safeguard):
    """With overwrite_a=True the left-looking factorization releases each triangle of A's
    diagonal once factored, and gets the factor of a kept A bit for bit, also when the
    safeguards change the tiles."""
    X = np.repeat(np.random.default_rng(1).uniform(size=(300, 2)), 2, axis=0)  # duplicated sites
    M = problems.covariance(X, range_=0.2, nugget=1e-2 if safeguard is None else 0.0)
    keep = tlr.cholesky(tlr.TLRMatrix.from_dense(M, 128, accuracy=1e-6), safeguard=safeguard)
    A = tlr.TLRMatrix.from_dense(M, 128, accuracy=1e-6)
    triangles = A.diagonal
    assert triangles.nbytes > 0
    F = tlr.cholesky(A, overwrite_a=True, safeguard=safeguard)
    assert safeguard is None or F.modified_tiles or F.compensated_tiles
    assert triangles.nbytes == 0
    np.testing.assert_array_equal(F.to_dense(), keep.to_dense())


@pytest.mark.parametrize("trim_bytes, trims", [(0, 8), (1 << 40, 1)])
def test_overwrite_a_trims_the_heap_once_enough_is_released_and_at_the_end(
    monkeypatch, trim_bytes, trims
):
    """The heap is trimmed when A's released low-rank factors add up to TRIM_BYTES (each
    column with 0), and once at the end in any case."""
    left = __import__("sys").modules["tlrcore.cholesky.left"]
    calls = []
    monkeypatch.setattr(left, "trim_heap", lambda: calls.append(1))
    monkeypatch.setattr(left, "TRIM_BYTES", trim_bytes)
    A = tlr.TLRMatrix.from_dense(covariance(1000), 125, accuracy=1e-8)
    tlr.cholesky(A, overwrite_a=True)
    assert len(calls) == trims


CONSUMED = r"A was consumed by tlr.cholesky\(A, overwrite_a=True\).*build the matrix again"
#: Every public use of a TLRMatrix.
USES = {
    "cholesky": lambda A: tlr.cholesky(A),
    "cholesky-left": lambda A: tlr.cholesky(A, variant="left"),
    "cholesky-right": lambda A: tlr.cholesky(A, variant="right"),
    "cholesky-batched": lambda A: tlr.cholesky(A, variant="packed"),
    "cholesky-shift": lambda A: tlr.cholesky(A, safeguard="shift"),
    "cholesky-explicit-shift": lambda A: tlr.cholesky(A, shift=1.0),
    "cholesky-schur+modified": lambda A: tlr.cholesky(A, safeguard="schur+modified"),
    "cholesky-pivot": lambda A: tlr.cholesky(A, safeguard="pivot"),
    "cholesky-accuracy": lambda A: tlr.cholesky(A, accuracy=1e-6),
    "cholesky-overwrite-again": lambda A: tlr.cholesky(A, overwrite_a=True),
    "ldl": lambda A: tlr.ldl(A),
    "matmul": lambda A: A @ np.ones(A.n),
    "to_dense": lambda A: A.to_dense(),
    "ranks": lambda A: A.ranks,
    "nbytes": lambda A: A.nbytes,
    "mean_rank": lambda A: A.mean_rank,
    "pack": lambda A: A.pack(),
    "frobenius_norm": lambda A: A.frobenius_norm(),
    "error_bound": lambda A: A.error_bound(),
    "summary": lambda A: tlr.summary(A),
    "diagonal": lambda A: A.diagonal,
    "U": lambda A: A.U,
    "V": lambda A: A.V,
    "packed": lambda A: A.packed,
}


def built(variant, M):
    """`M` compressed in the layout `variant` factors by default (packed for "packed")."""
    method = "batched" if variant == "packed" else "svd"
    return tlr.TLRMatrix.from_generator(
        lambda r, c: M[np.ix_(r, c)], M.shape[0], 64, accuracy=1e-8, method=method
    )


def test_variant_batched_is_a_deprecated_alias_of_packed():
    A = built("packed", covariance(300))
    with pytest.warns(DeprecationWarning, match="variant='packed'"):
        old = tlr.cholesky(A, variant="batched")
    np.testing.assert_array_equal(old.to_dense(), tlr.cholesky(A, variant="packed").to_dense())


@pytest.mark.parametrize("use", list(USES))
@pytest.mark.parametrize("variant", ["left", "right", "packed"])
def test_reused_consumed_matrix_refuses(variant, use):
    A = built(variant, covariance(300))
    tlr.cholesky(A, overwrite_a=True, variant=variant)
    with pytest.raises(tlr.ConsumedMatrixError, match=CONSUMED):
        USES[use](A)
    assert repr(A) == "TLRMatrix(n=300, tile_size=64, n_tiles=5, consumed)"
    assert (A.n, A.tile_size, A.n_tiles) == (300, 64, 5)


@pytest.mark.parametrize("failing_tile", [0, 2])
@pytest.mark.parametrize("variant", ["left", "right", "packed"])
def test_failed_overwrite_factorization_consumes_the_matrix(variant, failing_tile):
    # Released up to the failing column (the batched variant has also factored the
    # diagonal tiles in place): partly released is consumed.
    M = covariance(300)
    M[64 * failing_tile + 5, 64 * failing_tile + 5] = -1.0
    A = built(variant, M)
    with pytest.raises(tlr.NotPositiveDefiniteError) as info:
        tlr.cholesky(A, overwrite_a=True, variant=variant)
    assert info.value.tile == failing_tile
    with pytest.raises(tlr.ConsumedMatrixError, match=CONSUMED):
        tlr.cholesky(A, variant=variant)
    assert "consumed" in repr(A)


def test_refused_options_leave_the_matrix_usable():
    A = tlr.TLRMatrix.from_dense(covariance(300), 64)
    with pytest.raises(ValueError, match="overwrite_a"):
        tlr.cholesky(A, safeguard="shift", overwrite_a=True)
    assert "consumed" not in repr(A)
    assert np.isfinite(tlr.cholesky(A).logdet())


def test_forward_substitution_skips_leading_zero_tiles_exactly():
    """Right-hand sides zero in their first tiles (columns of the identity) solve as a
    triangular solve says: zero above, the dense solution below; and skipping the zero
    tiles changes nothing, bit for bit, against the same columns solved beside one that
    is nonzero in the first tile (one chunk of 32 columns either way)."""
    M = covariance(600)
    F = tlr.cholesky(tlr.TLRMatrix.from_dense(M, 100, accuracy=1e-10))
    E = np.zeros((600, 32))
    E[250 + np.arange(32), np.arange(32)] = 1.0
    W = F.solve_lower(E)
    assert not np.any(W[:250])
    reference = scipy.linalg.solve_triangular(F.to_dense(), E, lower=True)
    np.testing.assert_allclose(W, reference, rtol=1e-9, atol=1e-12 * np.abs(reference).max())
    from_the_start = E.copy()
    from_the_start[:, 31] = 0.0
    from_the_start[0, 31] = 1.0  # every tile is visited
    np.testing.assert_array_equal(F.solve_lower(from_the_start)[:, :31], W[:, :31])
