"""Safeguarded TLR Cholesky (shift, Schur compensation, modified tiles, tile pivoting)
against the densified matrix, on covariances that lose definiteness under compression."""

import pickle

import numpy as np
import pytest
import scipy.linalg
from problems import covariance, duplicated_sites

import tlrcore as tlr
from tlrcore.cholesky.safeguards import (
    OFF_DIAGONAL_COMPENSATION,
    DiagonalFactorizer,
    _Change,
    _lower_gram,
    _symmetric_abs_rowsum,
    _update_split,
    compensation_lifts,
    parse_safeguard,
    shift_schedule,
    tail_compensation,
)
from tlrcore.compress._recompress import LowRank
from tlrcore.compress.single import SINGLE_SHARE


def kernel_matrix(name, n=1024):
    """Covariances whose TLR Cholesky at accuracy 1e-4 fails."""
    if name == "gaussian":
        return covariance(duplicated_sites(n), kernel="gaussian", range_=0.3)
    if name == "matern25-long":
        return covariance(duplicated_sites(n), kernel="matern25", range_=0.5, scaled=True)
    if name == "exp-duplicated":
        return covariance(duplicated_sites(n, duplicate="across"), range_=1.0)
    if name == "matern15-duplicated":
        X = duplicated_sites(n, duplicate="within")
        return covariance(X, kernel="matern15", range_=0.3, scaled=True)
    raise KeyError(name)


HARD = ["gaussian", "matern25-long", "exp-duplicated", "matern15-duplicated"]
TILE, ACCURACY = 128, 1e-4


@pytest.fixture(scope="module", params=HARD)
def hard(request):
    M = kernel_matrix(request.param)
    return request.param, M, tlr.TLRMatrix.from_dense(M, TILE, accuracy=ACCURACY)


def test_plain_fails_naming_a_tile(hard):
    _, _, A = hard
    with pytest.raises(tlr.NotPositiveDefiniteError, match="safeguard='shift'") as info:
        tlr.cholesky(A)
    assert 0 <= info.value.tile < A.n_tiles


@pytest.mark.parametrize("safeguard", ["shift", "pivot+shift", "schur+modified+shift"])
def test_shift_succeeds_with_a_small_reported_perturbation(hard, safeguard):
    name, M, A = hard
    F = tlr.cholesky(A, safeguard=safeguard)
    n, norm = M.shape[0], np.linalg.norm(M)
    # The retries stop at the first power-of-two multiple of the tile tolerance that works
    # (none when compensated or modified tiles sufficed).
    if F.shift == 0.0:
        assert F.modified_tiles or F.compensated_tiles
        assert "modified" in safeguard and F.perturbation > 0
    else:
        schedule = shift_schedule(A.tolerance, A.n_tiles)
        assert F.shift in schedule
        # Block Gershgorin (tlrcore.cholesky.safeguards): every shift past 2 (n_t - 1) tau works, so
        # the first that works is at most the first entry past it (measured: 1 or 2 tau).
        assert F.shift <= min(s for s in schedule if s >= 2 * (A.n_tiles - 1) * A.tolerance)
        assert F.perturbation >= F.shift * np.sqrt(n) * (1 - 1e-12)
    # ||E||_F: the shift's s sqrt(n), plus per compensated tile ||rowsum|T| ||_2 <= sqrt(b)
    # ||T||_F <= sqrt(b) tau, plus per modified tile at most 2 delta sqrt(b) with delta <= 4
    # tau (the modification's acceptance test): at most (s + 9 tau) sqrt(n), 25 tau sqrt(n)
    # = 1e-2 ||A||_F here. Measured 1.6e-4 .. 6.1e-4 ||A||_F.
    assert F.perturbation <= (F.shift + 9 * A.tolerance) * np.sqrt(n) * (1 + 1e-12)
    perm = np.arange(n) if F.perm is None else F.perm
    L = F.to_dense()
    E = L @ L.T - M[np.ix_(perm, perm)]
    # L L^T = A + E up to compression errors of the order of the accuracy
    assert np.linalg.norm(E) <= F.perturbation + 4 * ACCURACY * norm
    # F.solve solves L L^T exactly, so its residual against A + s I is (A + s I - L L^T) x
    shifted = M + F.shift * np.eye(n)
    b = np.random.default_rng(1).normal(size=n)
    x = F.solve(b)
    change = np.linalg.norm(L @ L.T - shifted[np.ix_(perm, perm)], 2)
    assert np.linalg.norm(shifted @ x - b) <= change * np.linalg.norm(x)  # measured ratio <= 0.44
    if F.modified_tiles or F.compensated_tiles:
        return  # log det of a nearly singular A + E: E's directions matter, not only its size
    assert abs(F.logdet() - np.linalg.slogdet(shifted)[1]) <= 0.02 * n  # measured |.| <= 11.4


@pytest.mark.parametrize(
    "safeguard", ["shift", "schur", "modified", "pivot", "schur+modified+pivot+shift"]
)
def test_positive_definite_input_is_never_perturbed_by_on_failure_safeguards(safeguard):
    M = covariance(duplicated_sites(900, seed=3), range_=0.1, nugget=1e-2)
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=1e-8)
    F = tlr.cholesky(A, safeguard=safeguard)
    assert F.perturbation == 0.0 and F.shift == 0.0
    assert F.modified_tiles == () and F.compensated_tiles == ()
    assert abs(F.logdet() - np.linalg.slogdet(M)[1]) <= 1e-5


def test_pivoting_reorders_tiles_and_solves_in_the_callers_order():
    M = covariance(duplicated_sites(900, seed=4), range_=0.1) + np.diag(
        np.repeat([1e-2, 5.0, 1e-1, 2.0, 1e-3, 3.0, 1.0, 0.5], [128] * 7 + [4])
    )
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=1e-10)
    F = tlr.cholesky(A, safeguard="pivot")
    assert F.perm is not None and sorted(F.perm) == list(range(900))
    assert not np.array_equal(F.perm, np.arange(900))
    # first pivot: the tile with the largest diagonal (nugget 5)
    np.testing.assert_array_equal(F.perm[:128], np.arange(128, 256))
    L = F.to_dense()
    assert np.linalg.norm(L @ L.T - M[np.ix_(F.perm, F.perm)]) <= 2e-10 * np.linalg.norm(M)
    B = np.random.default_rng(0).normal(size=(900, 2))
    np.testing.assert_allclose(F.solve(B), np.linalg.solve(M, B), rtol=1e-6, atol=1e-8)
    Z = np.random.default_rng(1).normal(size=(900, 2))
    np.testing.assert_allclose(F.multiply_lower(Z)[F.perm], L @ Z, atol=1e-10)
    assert abs(F.logdet() - np.linalg.slogdet(M)[1]) <= 1e-6


def test_explicit_shift_equals_factoring_the_shifted_matrix():
    M = kernel_matrix("gaussian", 512)
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=1e-6)
    shifted = tlr.TLRMatrix.from_dense(M + 1e-2 * np.eye(512), TILE, accuracy=1e-6)
    F = tlr.cholesky(A, accuracy=1e-6, shift=1e-2)
    G = tlr.cholesky(shifted, accuracy=1e-6)
    assert F.shift == 1e-2 and F.perturbation == pytest.approx(1e-2 * np.sqrt(512))
    assert F.logdet() == pytest.approx(G.logdet(), abs=1e-4)
    assert F.logdet() == pytest.approx(np.linalg.slogdet(M + 1e-2 * np.eye(512))[1], abs=1e-3)


def test_modified_tiles_rescue_isolated_singular_tiles():
    # Duplicated sites inside the diagonal tiles only: the tiles are singular, the
    # off-diagonal compression is consistent, and GMW on the failing tiles suffices.
    M = kernel_matrix("matern15-duplicated")
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=ACCURACY)
    F = tlr.cholesky(A, safeguard="modified")
    assert F.shift == 0.0 and len(F.modified_tiles) > 0
    assert 0 < F.perturbation <= 1e-3 * np.linalg.norm(M)  # measured 2.6e-4
    L = F.to_dense()
    assert np.linalg.norm(L @ L.T - M) <= F.perturbation + 4 * ACCURACY * np.linalg.norm(M)


def test_modified_alone_refuses_growing_changes_and_says_what_to_use():
    A = tlr.TLRMatrix.from_dense(kernel_matrix("gaussian"), TILE, accuracy=ACCURACY)
    with pytest.raises(
        tlr.NotPositiveDefiniteError, match=r"delta = [1-9].*safeguard='compensate'"
    ) as info:
        tlr.cholesky(A, safeguard="modified")
    assert 0 <= info.value.tile < A.n_tiles


def compensation_bound(A, form="rowsum"):
    """Bound on ``||C||_F`` of the always-on compensation (tlrcore.cholesky.safeguards): the
    update tails, ``||T_k||_F <= tau`` per tile (times ``sqrt(b)`` in rowsum form), plus
    the lifts ``g_k = c_off sqrt(sum_j e_kj^2)`` on the ``b`` entries of every lifted tile."""
    b = A.tile_size
    tails = np.sqrt(A.n_tiles) * A.tolerance * (np.sqrt(b) if form == "rowsum" else 1.0)
    lifts = np.sqrt(b * np.sum(compensation_lifts(A.tile_errors, A.tolerance, A.n_tiles) ** 2))
    return tails + lifts


@pytest.mark.parametrize(
    "safeguard", ["compensate", "compensate-block", "compensate+modified", "pivot+compensate"]
)
def test_compensation_rescues_without_shift_within_the_contract(hard, safeguard):
    name, M, A = hard
    F = tlr.cholesky(A, safeguard=safeguard)
    assert F.shift == 0.0 and F.compensated_tiles == tuple(range(A.n_tiles))
    assert F.modified_tiles == ()
    form = "block" if "block" in safeguard else "rowsum"
    # the lift, tile-local: only tiles within LIFT_MARGIN lifts of singular get it
    assert len(F.lifted_tiles) > 0 and F.perturbation_parts["lift"] > 0
    assert F.perturbation <= compensation_bound(A, form) * (1 + 1e-12)
    parts = F.perturbation_parts
    assert (
        max(parts["compensation"], parts["lift"])
        <= F.perturbation
        <= parts["compensation"] + parts["lift"]
    )
    perm = np.arange(M.shape[0]) if F.perm is None else F.perm
    L = F.to_dense()
    # against A_tlr: ||F||_F (< eps ||A_tlr||_F, ARA's estimate with margin 2) + ||C||_F
    dense_tlr = A.to_dense()[np.ix_(perm, perm)]
    assert np.linalg.norm(L @ L.T - dense_tlr) <= 2 * ACCURACY * A.frobenius_norm() + F.perturbation
    # the target, ||E||_F <= 10 eps ||A||_F against the exact A (measured 6.1-8.6
    # on these matrices; the worst-case contract above allows 2-3 times more)
    assert np.linalg.norm(L @ L.T - M[np.ix_(perm, perm)]) <= 10 * ACCURACY * np.linalg.norm(M)


def test_recorded_tile_errors_are_the_spectral_errors_of_the_tiles():
    M = kernel_matrix("gaussian", 512)
    for method in ("svd", "aca", "ara"):
        A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=ACCURACY, method=method)
        true = np.zeros_like(A.tile_errors)
        for (i, j), U in A.U.items():
            true[i, j] = true[j, i] = np.linalg.norm(M[A.tile(i), A.tile(j)] - U @ A.V[i, j].T, 2)
        np.testing.assert_array_equal(A.tile_errors, A.tile_errors.T)
        if method == "svd":
            # the dropped singular value is the error, to rounding, and the bound of the
            # single-precision rounding of trailing columns (within SINGLE_SHARE tol) comes on top
            scale = 1e-12 * np.linalg.norm(M)
            assert np.all(true <= A.tile_errors * (1 + 1e-8) + scale)
            assert np.all(A.tile_errors - true <= SINGLE_SHARE * A.tolerance + scale)
        else:  # the truncation's part; the sampling error (budgeted, <= 0.15 tol) comes on top
            assert np.all(np.abs(A.tile_errors - true) <= 0.15 * A.tolerance)


def test_lowrank_factors_unpack_and_pickle():
    U, V = np.ones((3, 1)), np.ones((2, 1))
    pair = LowRank(U, V, 0.5)
    left, right = pickle.loads(pickle.dumps(pair))
    assert left is not U and np.array_equal(left, U) and np.array_equal(right, V)
    assert pickle.loads(pickle.dumps(pair)).dropped == 0.5


def test_lifts_without_recorded_errors_take_each_tile_at_its_tolerance():
    lifts = compensation_lifts(None, 2.0, 5)
    np.testing.assert_allclose(lifts, OFF_DIAGONAL_COMPENSATION * 2.0 * 2.0)
    errors = np.array([[0.0, 3.0], [3.0, 0.0]])
    np.testing.assert_allclose(compensation_lifts(errors, 1.0, 2), OFF_DIAGONAL_COMPENSATION * 3.0)


@pytest.mark.parametrize("safeguard", ["compensate", "compensate-block"])
def test_compensation_of_positive_definite_input_keeps_the_contract(safeguard):
    M = covariance(duplicated_sites(1024, seed=3), range_=0.1, nugget=1e-2)
    accuracy = 1e-8
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=accuracy)
    plain = tlr.cholesky(A)
    F = tlr.cholesky(A, safeguard=safeguard)
    norm = np.linalg.norm(M)
    form = "block" if safeguard == "compensate-block" else "rowsum"
    # lambda_min >= nugget 1e-2, far above LIFT_MARGIN lifts: no tile is lifted, only the tails
    assert F.lifted_tiles == () and F.perturbation_parts["lift"] == 0.0
    assert 0 < F.perturbation <= compensation_bound(A, form) * (1 + 1e-12)
    L = F.to_dense()
    E = L @ L.T - M
    assert np.linalg.norm(E) <= 2 * accuracy * norm + F.perturbation
    # log det(M + E) - log det(M) = trace(M^{-1} E) + O(|E|^2): at most
    # ||M^{-1}||_F ||E||_F <= sqrt(n) ||E||_F / lambda_min(M), lambda_min >= nugget 1e-2
    bound = np.sqrt(1024) * np.linalg.norm(E) / 1e-2
    assert abs(F.logdet() - np.linalg.slogdet(M)[1]) <= 1.01 * bound
    assert abs(F.logdet() - plain.logdet()) <= 1.01 * bound


def test_compensation_rowsum_dominates_and_block_equals_the_tail():
    rng = np.random.default_rng(0)
    W = np.asfortranarray(rng.normal(size=(60, 40)) * np.logspace(0, -6, 40))
    tol = 1e-5
    Y, eigenvalues, H = _update_split(W, tol, with_head=True)
    # the head and the tail add up to the update, to rounding of the eigenvectors
    np.testing.assert_allclose(
        H @ H.T + Y @ Y.T, W @ W.T, rtol=0, atol=1e-13 * np.linalg.norm(W, 2) ** 2
    )
    T = Y @ Y.T
    assert np.linalg.norm(T) <= tol and np.linalg.eigvalsh(T).min() >= -1e-15
    # Y^T Y = diag(eigenvalues), so the tile path tallies ||T||_F from the eigenvalues;
    # both sides carry the rounding of the Gram's eigenpairs, O(eps ||W||_2^2) per entry
    # (100 times that as margin), against a tail of norm ~tol = 1e-5 here
    rounding = 100 * np.finfo(float).eps * np.linalg.norm(W, 2) ** 2
    np.testing.assert_allclose(Y.T @ Y, np.diag(eigenvalues), rtol=0, atol=rounding)
    assert np.sqrt(eigenvalues @ eigenvalues) == pytest.approx(
        np.linalg.norm(T), abs=rounding * Y.shape[1]
    )
    # the tail holds the most of the smallest eigenvalues of W W^T that fit in tol
    lam = np.maximum(np.linalg.eigvalsh(W.T @ W), 0.0)
    count = Y.shape[1]
    assert 0 < count < lam.size and np.linalg.norm(lam[: count + 1]) > tol
    rowsum = tail_compensation(np, T, "rowsum")  # the packed path's form
    np.testing.assert_array_equal(tail_compensation(np, T, "block"), T)
    assert np.linalg.eigvalsh(rowsum - T).min() >= -1e-15  # diag(rowsum|T|) - T is PSD
    np.testing.assert_allclose(np.diag(rowsum), np.abs(T).sum(axis=1), rtol=1e-12)
    # the tile path's form, from the lower triangle only
    lower = _lower_gram(Y)
    np.testing.assert_allclose(np.tril(lower), np.tril(T), rtol=0, atol=1e-15 * np.abs(T).max())
    assert not np.triu(lower, 1).any()
    np.testing.assert_allclose(_symmetric_abs_rowsum(lower), np.diag(rowsum), rtol=1e-12)


@pytest.mark.parametrize("form", ["block", "rowsum"])
def test_deferred_update_gives_the_compensated_tile_of_the_updated_one(form):
    """``factor(A(k, k), W, updated=False)`` (the left-looking path: the block form
    subtracts the update's head only) factors the same compensated tile as ``factor(A(k,
    k) - W W^T, W)``, to the rounding of the eigenvectors (``O(R eps ||W||_2^2)``), and
    tallies the same change."""
    rng = np.random.default_rng(2)
    b, R, tol = 80, 50, 1e-6
    W = np.asfortranarray(rng.normal(size=(b, R)) * np.logspace(0, -5, R))
    Akk = W @ W.T + 0.1 * np.eye(b)
    results = []
    for updated in (True, False):
        factorizer = DiagonalFactorizer(tol, compensate=form, lifts=np.zeros(1))
        D = np.asfortranarray(Akk - W @ W.T if updated else Akk.copy())
        results.append((factorizer.factor(D, W, 0, updated=updated), factorizer.perturbation))
    (L1, p1), (L2, p2) = results
    rounding = 100 * R * np.finfo(float).eps * np.linalg.norm(W, 2) ** 2
    np.testing.assert_allclose(
        np.tril(L1) @ np.tril(L1).T, np.tril(L2) @ np.tril(L2).T, rtol=0, atol=rounding
    )
    # ||T||_F <= tol; its rowsum form reaches sqrt(b) tol
    assert 0 < p1 <= (tol if form == "block" else np.sqrt(b) * tol) and p2 == pytest.approx(
        p1, rel=1e-12
    )


def test_tile_change_norm_sums_its_parts_before_the_norm():
    """``_Change.norm2`` (diagonal + root in O(b r), or with blocks densely) is the
    Frobenius norm of the summed symmetric change, against NumPy on the dense sum."""

    class Tally:
        def record(self, k, part, norm2):
            pass

    rng = np.random.default_rng(4)
    d, Y = rng.uniform(size=30), rng.normal(size=(30, 4))
    B = rng.normal(size=(30, 30))
    lower = np.tril(B + B.T)
    for with_block in (False, True):
        change = _Change(30)
        change.add_diagonal(Tally(), "lift", d, 0)
        change.add_root(Tally(), "compensation", Y, float(np.sum((Y.T @ Y) ** 2)), 0)
        want = np.diag(d) + Y @ Y.T
        if with_block:
            change.add_block(Tally(), "modified", lower, 0)
            want += B + B.T
        assert change.norm2() == pytest.approx(np.linalg.norm(want) ** 2, rel=1e-12)


def test_plain_factor_is_unchanged_by_the_safeguard_machinery():
    # safeguard=None factors each tile by one dpotrf; "shift", with nothing to shift, gives
    # the same factor bit for bit and reports no perturbation
    M = covariance(duplicated_sites(512, seed=5), range_=0.1, nugget=1e-2)
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=1e-8)
    F, G = tlr.cholesky(A), tlr.cholesky(A, safeguard="shift")
    assert F.perturbation == 0.0 and F.perturbation_parts["compensation"] == 0.0
    for Lf, Lg in zip(F.diagonal, G.diagonal, strict=True):
        np.testing.assert_array_equal(Lf, Lg)


def test_indefinite_matrix_exhausts_the_shift_schedule():
    M = kernel_matrix("gaussian", 512) - 0.5 * np.eye(512)
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=1e-6)
    with pytest.raises(tlr.NotPositiveDefiniteError, match="probably indefinite"):
        tlr.cholesky(A, safeguard="shift")


def test_input_matrix_is_not_modified():
    M = kernel_matrix("gaussian", 512)
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=ACCURACY)
    before = A.to_dense()
    tlr.cholesky(A, safeguard="shift+schur+modified", shift=1e-6)
    tlr.cholesky(A, safeguard="pivot+shift")
    np.testing.assert_array_equal(A.to_dense(), before)


def test_safeguarded_factor_is_deterministic():
    A = tlr.TLRMatrix.from_dense(kernel_matrix("exp-duplicated", 512), TILE, accuracy=ACCURACY)
    F, G = (tlr.cholesky(A, safeguard="pivot+shift") for _ in range(2))
    assert F.logdet() == G.logdet() and F.perturbation == G.perturbation


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"safeguard": "jitter"}, ValueError, "unknown safeguard 'jitter'"),
        ({"safeguard": 3}, ValueError, "safeguard must be None"),
        ({"safeguard": "compensate+compensate-block"}, ValueError, "one form of compensation"),
        ({"shift": -1.0}, ValueError, "shift must be a finite number >= 0"),
        ({"shift": np.nan}, ValueError, "shift must be a finite number >= 0"),
        ({"shift": "1e-3"}, TypeError, "shift must be a finite number"),
        ({"safeguard": "shift", "overwrite_a": True}, ValueError, "overwrite_a"),
        ({"safeguard": "pivot", "variant": "right"}, ValueError, "variant='left'"),
    ],
    ids=[
        "unknown-name",
        "wrong-type",
        "two-compensations",
        "negative-shift",
        "nan-shift",
        "string-shift",
        "shift-overwrite",
        "right",
    ],
)
def test_bad_options_raise_naming_the_argument(kwargs, error, match):
    A = tlr.TLRMatrix.from_dense(np.eye(64) * 2.0, 32, accuracy=1e-8)
    with pytest.raises(error, match=match):
        tlr.cholesky(A, **kwargs)


def test_parse_safeguard_accepts_combinations():
    assert parse_safeguard(None) == frozenset()
    assert parse_safeguard("pivot+ shift") == {"pivot", "shift"}
    assert parse_safeguard(("schur", "modified")) == {"schur", "modified"}


def test_schur_compensation_dominates_the_dropped_tail():
    from tlrcore.cholesky.safeguards import _schur_compensation

    rng = np.random.default_rng(0)
    W = rng.normal(size=(60, 40)) * np.logspace(0, -6, 40)
    tol = 1e-5
    c = _schur_compensation(W, tol)
    lam, Q = scipy.linalg.eigh(W @ W.T)
    tail = np.sqrt(np.cumsum(lam**2)) <= tol
    T = (Q[:, tail] * lam[tail]) @ Q[:, tail].T
    assert np.linalg.norm(T) <= tol
    assert np.linalg.eigvalsh(np.diag(c) - T).min() >= -1e-15  # diag(rowsum|T|) - T is PSD
    np.testing.assert_allclose(c, np.abs(T).sum(axis=1), rtol=1e-6, atol=1e-18)


def test_pivot_norm_reads_the_updated_lower_triangle_only():
    from scipy.linalg.blas import dsyrk

    from tlrcore.cholesky.pivoted import _frobenius, _strict_upper_squares

    rng = np.random.default_rng(0)
    B = rng.normal(size=(40, 40))
    D = np.asfortranarray(B @ B.T)
    stale = _strict_upper_squares(D)
    W = rng.normal(size=(40, 5))
    D = dsyrk(-1.0, W, beta=1.0, c=D, lower=1, overwrite_c=1)  # lower triangle only
    symmetric = np.tril(D) + np.tril(D, -1).T
    assert _frobenius(D, stale) == pytest.approx(np.linalg.norm(symmetric), rel=1e-12)


def batched(M, accuracy=ACCURACY):
    """`M` built by the batched (packed) build, which the batched factorization takes."""
    return tlr.TLRMatrix.from_generator(
        lambda r, c: M[np.ix_(r, c)], M.shape[0], TILE, accuracy=accuracy, method="batched"
    )


def test_batched_build_records_the_spectral_errors_of_the_tiles():
    M = kernel_matrix("gaussian", 512)
    A = batched(M)
    true = np.zeros_like(A.tile_errors)
    for (i, j), U in A.U.items():
        true[i, j] = true[j, i] = np.linalg.norm(M[A.tile(i), A.tile(j)] - U @ A.V[i, j].T, 2)
    np.testing.assert_array_equal(A.tile_errors, A.tile_errors.T)
    assert np.all(np.diag(A.tile_errors) == 0) and np.all(
        A.tile_errors[~np.eye(A.n_tiles, dtype=bool)] > 0
    )
    # The recorded value is the truncation's spectral error; the sampling error lies in the
    # orthogonal complement of the basis, so (tlrcore.compress.ara_batched)
    #     dropped <= ||A_ij - U V^T||_2 <= sqrt(dropped^2 + ||(I - Q Q^T) A_ij||_2^2),
    # the last term below the stopping rule's 2 e <= tol / 2. The Gram-based SVD resolves
    # the dropped value to about sqrt(eps) ||A_ij||_2 <= 1.5e-8 ||A||_F <= 8.5e-4 tol here
    # (n_t = 4, accuracy 1e-4, the norm estimate behind tol low by at most sqrt(2));
    # measured: recorded = true to 1e-6 tol.
    rounding = 1e-3 * A.tolerance
    assert np.all(A.tile_errors <= true + rounding)
    assert np.all(true**2 <= A.tile_errors**2 + (0.5 * A.tolerance) ** 2 + rounding**2)


@pytest.mark.parametrize("name", ["gaussian", "matern15-duplicated"])
@pytest.mark.parametrize("safeguard", ["compensate", "compensate-block"])
def test_batched_compensation_rescues_within_the_contract(name, safeguard):
    # the packed path on the NumPy back end: the same compensation, one eigh per tile, and
    # lifts from the tile errors the batched build records
    M = kernel_matrix(name)
    A = batched(M)
    assert A.tile_errors is not None
    F = tlr.cholesky(A, safeguard=safeguard)
    assert type(F).__name__ == "PackedCholesky" and F.compensated_tiles == tuple(range(A.n_tiles))
    assert len(F.lifted_tiles) > 0
    form = "block" if safeguard == "compensate-block" else "rowsum"
    assert 0 < F.perturbation <= compensation_bound(A, form) * (1 + 1e-12)
    L = F.to_dense()
    E = np.linalg.norm(L @ L.T - M)
    assert E <= 2 * ACCURACY * np.linalg.norm(M) + F.perturbation
    assert E <= 10 * ACCURACY * np.linalg.norm(M)  # the target; measured 6.9-8.5
    # without recorded errors every e_kj is taken at its bound tau: larger lifts (the
    # recorded ones are 0.4-0.8 tau here; measured 1.6 times the lift)
    unrecorded = tlr.TLRMatrix(
        A.diagonal, A.U, A.V, A.offsets, A.accuracy, A.tolerance, A.backend, A.packed
    )
    G = tlr.cholesky(unrecorded, safeguard=safeguard)
    assert (
        F.perturbation_parts["lift"] < G.perturbation_parts["lift"]
        and F.perturbation < G.perturbation
    )


# (matrix, n, safeguard) that the tile path rescues or refuses in the same way (measured)
BATCHED_ON_FAILURE = [
    ("matern15-duplicated", 1000, "modified"),  # ragged: the last tile is padded
    ("matern15-duplicated", 1024, "schur+modified"),
    ("exp-duplicated", 1024, "schur"),
    ("gaussian", 1024, "schur+modified+shift"),
    ("gaussian", 1024, "compensate+modified"),
    ("matern25-long", 1024, "compensate+schur+modified"),
]


@pytest.mark.parametrize(("name", "n", "safeguard"), BATCHED_ON_FAILURE, ids=lambda v: str(v))
def test_batched_schur_and_modified_rescue_within_the_contract(name, n, safeguard):
    M = kernel_matrix(name, n)
    A = batched(M)
    F = tlr.cholesky(A, safeguard=safeguard)
    assert type(F).__name__ == "PackedCholesky"
    norm = np.linalg.norm(M)
    if safeguard == "modified":
        assert len(F.modified_tiles) > 0 and A.n_tiles - 1 in F.modified_tiles
        assert 0 < F.perturbation <= 1e-3 * norm  # as on the tile path; measured 2.4e-4
    if safeguard == "schur":
        assert F.perturbation_parts["schur"] > 0 and F.compensated_tiles and F.modified_tiles == ()
    # the contract of test_shift_succeeds_with_a_small_reported_perturbation: ||E||_F is the
    # shift's s sqrt(n) plus sqrt(b) tau per Schur-compensated tile plus 2 delta sqrt(b),
    # delta <= 4 tau, per modified tile; with compensation that of compensation_bound
    bound = (F.shift + 9 * A.tolerance) * np.sqrt(n)
    if "compensate" in safeguard:
        bound = compensation_bound(A) + 8 * A.tolerance * np.sqrt(
            A.tile_size * len(F.modified_tiles)
        )
    assert F.perturbation <= bound * (1 + 1e-12)
    L = F.to_dense()
    E = np.linalg.norm(L @ L.T - M)
    assert E <= F.perturbation + 4 * ACCURACY * norm  # L L^T = A + E up to compression errors
    assert E <= 10 * ACCURACY * norm  # the target; measured 0.8-8.5


def test_batched_modified_refuses_growing_changes_like_the_tile_path():
    A = batched(kernel_matrix("gaussian"))
    with pytest.raises(
        tlr.NotPositiveDefiniteError, match=r"delta = [1-9].*safeguard='compensate'"
    ) as info:
        tlr.cholesky(A, safeguard="modified")
    assert 0 < info.value.tile < A.n_tiles  # tile 0 is modified; the growth comes after it
    with pytest.raises(tlr.NotPositiveDefiniteError, match="diagonal tile 0 .*leading minor"):
        tlr.cholesky(A, safeguard="schur")  # no update to compensate on tile 0


def test_batched_safeguarded_factor_is_deterministic():
    A = batched(kernel_matrix("matern15-duplicated", 512))
    F, G = (tlr.cholesky(A, safeguard="compensate+schur+modified") for _ in range(2))
    assert F.logdet() == G.logdet() and F.perturbation == G.perturbation
    assert F.perturbation_parts == G.perturbation_parts


@pytest.mark.parametrize("safeguard", ["compensate", "schur+modified"])
def test_batched_compensation_refuses_overwrite_a(safeguard):
    A = tlr.TLRMatrix.from_generator(
        lambda r, c: 2.0 * (r[:, None] == c), 64, 32, accuracy=1e-8, method="batched"
    )
    with pytest.raises(ValueError, match="overwrite_a"):
        tlr.cholesky(A, safeguard=safeguard, overwrite_a=True)


def test_batched_refuses_pivoting_naming_what_it_supports():
    A = tlr.TLRMatrix.from_generator(
        lambda r, c: 2.0 * (r[:, None] == c), 64, 32, accuracy=1e-8, method="batched"
    )
    with pytest.raises(
        ValueError, match="no tile pivoting.*'compensate'.*'schur', 'modified' and 'shift'"
    ):
        tlr.cholesky(A, safeguard="pivot+compensate")
