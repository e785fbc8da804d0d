"""Cholesky-Gram bases (``tlrcore.compress._gram``) and the recompressions through them.

Each truncation is compared with the Householder path it replaces (``gram_basis``
patched to refuse) and with the SVD of the dense product: the departure bound must hold
against the measured ``||P^T P - I||``, and the truncation error stay below the tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from problems import covariance
from strategies import PROPERTY_SETTINGS

import tlrcore.compress._recompress as recompression
from tlrcore.compress._gram import DEPARTURE, gram_basis


def _scaled_factor(rng, m, k, condition, spread):
    """An ``m x k`` matrix whose column-scaled form has condition number `condition`, with
    column norms spread over `spread` decades."""
    Q = np.linalg.qr(rng.standard_normal((m, k)))[0]
    W = np.linalg.qr(rng.standard_normal((k, k)))[0]
    M = Q @ np.diag(np.logspace(0, -np.log10(condition), k)) @ W
    M /= np.linalg.norm(M, axis=0)
    return M * np.logspace(0, -spread, k)


def _kernel_factors(rng, m, distance):
    """Low-rank factors of an exponential kernel block between two clusters of `m` points
    in the plane, `distance` apart, as ACA makes them (columns and pivot-scaled rows, with
    full pivoting until the residual is below 1e-15), and the block."""
    a = rng.uniform(size=(m, 2))
    b = rng.uniform(size=(m, 2)) + [distance, 0.0]
    block = covariance(a, b, range_=0.3)
    residual, us, vs = block.copy(), [], []
    for _ in range(m):
        i, j = np.unravel_index(np.argmax(np.abs(residual)), residual.shape)
        if abs(residual[i, j]) < 1e-15:
            break
        us.append(residual[:, j].copy())
        vs.append(residual[i] / residual[i, j])
        residual -= np.outer(us[-1], vs[-1])
    return np.asfortranarray(np.column_stack(us)), np.asfortranarray(np.column_stack(vs)), block


@pytest.mark.parametrize("condition, spread", [(1.0, 0), (1e2, 8), (1e4, 4), (1e5, 12)])
def test_the_basis_is_orthonormal_within_its_bound(condition, spread):
    rng = np.random.default_rng(int(condition) + spread)
    M = _scaled_factor(rng, 2048, 30, condition, spread)
    basis = gram_basis(M)
    assert basis is not None and basis.departure <= DEPARTURE
    assert np.array_equal(basis.R, np.triu(basis.R))
    P = basis.apply(basis.coefficients(np.eye(30))[0])
    departure = np.linalg.norm(P.T @ P - np.eye(30), 2)
    # the bound holds, and is the rounding it claims: (m + k + 1) eps tr(G) ||L^-1||_F^2
    assert departure <= basis.departure
    assert basis.departure <= 1e-5 * condition**2
    np.testing.assert_allclose(P @ basis.R, M, rtol=0, atol=1e-13 * np.abs(M).max())


def test_coefficients_bound_the_solve_by_the_norm_they_return():
    rng = np.random.default_rng(5)
    M = _scaled_factor(rng, 500, 12, 1e3, 3)
    basis = gram_basis(M)
    Y = rng.standard_normal((12, 4))
    Z, norm = basis.coefficients(Y)
    PY = basis.apply(Z)
    np.testing.assert_allclose(PY, M @ np.linalg.solve(basis.R, Y), rtol=1e-10, atol=1e-12)
    # ||Z||_F with P Y = M_s Z: the scaled solve that the product's rounding follows
    scale = np.linalg.norm(M, axis=0)
    assert norm == pytest.approx(
        np.linalg.norm(np.linalg.solve(basis.R, Y) * scale[:, None]), rel=1e-10
    )


@pytest.mark.parametrize("case", ["zero column", "infinite", "wide"])
def test_the_basis_is_refused_where_cholesky_qr_would_be_wrong(case):
    rng = np.random.default_rng(3)
    M = _scaled_factor(rng, 300, 10, 10.0, 2)
    if case == "zero column":
        M[:, 4] = 0.0
    elif case == "infinite":
        M[7, 1] = np.inf
    else:
        M = rng.standard_normal((8, 12))
    assert gram_basis(M) is None


def _certified(basis, M):
    """The basis's claims hold for `M`: ``P`` orthonormal within ``departure``, ``P R``
    equal to `M` within ``residual``, ``R`` upper triangular."""
    P = basis.apply(basis.coefficients(np.eye(M.shape[1]))[0])
    assert np.linalg.norm(P.T @ P - np.eye(M.shape[1]), 2) <= basis.departure <= DEPARTURE
    assert np.linalg.norm(P @ basis.R - M) <= basis.residual
    assert np.array_equal(basis.R, np.triu(basis.R))


@pytest.mark.parametrize("condition", [1e6, 3e6])
def test_a_second_pass_gives_a_basis_beyond_the_first_pass_bound(condition):
    """Scaled condition numbers above about 5e4 (near-field ACA factors) fail the first
    pass's bound; the second pass (CholeskyQR2) is orthonormal to rounding and factors
    `M` within its residual bound."""
    M = _scaled_factor(np.random.default_rng(7), 2048, 40, condition, 6)
    basis = gram_basis(M)
    assert basis is not None and 0.0 < basis.residual <= 1e-11 * np.linalg.norm(M)
    # the bound of a nearly orthonormal P_1: (m + k + 1) eps tr(G) ||L^-1||_F^2 with both
    # factors about k (7.5e-10 here), doubled; the first pass's was about 1e-5 condition^2
    assert basis.departure <= 2 * (2048 + 40 + 1) * np.finfo(float).eps * 40**2
    _certified(basis, M)


@pytest.mark.parametrize("case", ["repeated column", "condition 1e9", "condition 1e12"])
def test_a_near_singular_factor_is_refused_or_certified(case):
    """A Gram matrix singular to rounding may or may not pass Cholesky, depending on
    rounding; a basis that comes back keeps its claims (it is then rank-deficient in R)."""
    rng = np.random.default_rng(3)
    if case == "repeated column":
        M = _scaled_factor(rng, 300, 10, 10.0, 2)
        M[:, 4] = 3.0 * M[:, 2]
    else:
        M = _scaled_factor(rng, 300, 10, float(case.split()[1]), 2)
    basis = gram_basis(M)
    if basis is not None:
        _certified(basis, M)


def _householder(monkeypatch, function, *args):
    with monkeypatch.context() as patch:
        patch.setattr(recompression, "gram_basis", lambda M: None)
        return function(*args)


@pytest.mark.parametrize("distance", [1.05, 1.5, 3.0])
@pytest.mark.parametrize("relative_tol", [1e-4, 1e-8, 1e-11])
def test_recompression_matches_householder_and_meets_the_tolerance(
    monkeypatch, distance, relative_tol
):
    rng = np.random.default_rng(int(100 * distance))
    U, V, block = _kernel_factors(rng, 400, distance)
    tol = relative_tol * np.linalg.norm(block)
    assert gram_basis(U) is not None and gram_basis(V) is not None
    product = U @ V.T
    fast = recompression.recompress(U, V, tol)
    slow = _householder(monkeypatch, recompression.recompress, U, V, tol)
    s = np.linalg.svd(product, compute_uv=False)
    optimal = recompression.truncation_rank(s, tol)
    assert optimal <= fast[0].shape[1] <= slow[0].shape[1] + 1
    error = fast[0] @ fast[1].T - product
    assert np.linalg.norm(error) <= tol
    assert np.linalg.norm(error, 2) <= fast.dropped * (1 + 1e-6) + 1e-14 * s[0]
    np.testing.assert_allclose(fast[1].T @ fast[1], np.eye(fast[1].shape[1]), atol=1e-10)
    if fast[0].shape[1] == slow[0].shape[1]:
        np.testing.assert_allclose(
            fast[0] @ fast[1].T, slow[0] @ slow[1].T, rtol=0, atol=1e-11 * s[0]
        )


def test_a_zero_tolerance_takes_the_householder_path_bit_for_bit(monkeypatch):
    # the rounding bound of the Gram products is above a zero budget
    rng = np.random.default_rng(9)
    U, V, _ = _kernel_factors(rng, 200, 1.5)
    fast = recompression.recompress(U, V, 0.0)
    slow = _householder(monkeypatch, recompression.recompress, U, V, 0.0)
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])


def test_orthonormal_recompression_matches_householder(monkeypatch):
    rng = np.random.default_rng(11)
    U, V, block = _kernel_factors(rng, 400, 1.2)
    Q, R = np.linalg.qr(U)
    B = V @ R.T  # Q B^T = U V^T
    tol = 1e-8 * np.linalg.norm(block)
    fast = recompression.recompress_orthonormal(Q, B, tol)
    slow = _householder(monkeypatch, recompression.recompress_orthonormal, Q, B, tol)
    assert fast[0].shape[1] == slow[0].shape[1]
    assert np.linalg.norm(fast[0] @ fast[1].T - U @ V.T) <= tol
    np.testing.assert_allclose(
        fast[0] @ fast[1].T, slow[0] @ slow[1].T, rtol=0, atol=1e-11 * np.linalg.norm(block)
    )


@pytest.mark.parametrize("relative_tol", [1e-4, 1e-8, 1e-11])
def test_second_pass_recompressions_match_householder(monkeypatch, relative_tol):
    """Factors beyond the first pass's bound (scaled condition 1e6), in both recompressions:
    the tolerance is met, with Householder's rank to one."""
    rng = np.random.default_rng(13)
    U = _scaled_factor(rng, 1024, 40, 1e6, 3) @ np.diag(np.logspace(0, -8, 40))
    V = _scaled_factor(rng, 800, 40, 1e6, 3)
    assert gram_basis(U).residual > 0.0 and gram_basis(V).residual > 0.0
    product = U @ V.T
    tol = relative_tol * np.linalg.norm(product)
    Q, R = np.linalg.qr(V)
    cases = [
        (recompression.recompress, (U, V), product),
        (recompression.recompress_orthonormal, (Q, U @ R.T), product.T),
    ]  # Q (U R^T)^T = V U^T
    for recompress, args, expected in cases:
        with monkeypatch.context() as patch:
            patch.setattr(recompression, "_householder_qr", None)  # the Gram bases must do it
            fast = recompress(*args, tol)
        slow = _householder(monkeypatch, recompress, *args, tol)
        error = fast[0] @ fast[1].T - expected
        # dropped bounds the spectral error; the margin is this check's own rounding
        margin = 1e-14 * np.linalg.norm(expected, 2)
        assert (
            np.linalg.norm(error) <= tol
            and np.linalg.norm(error, 2) <= fast.dropped * (1 + 1e-6) + margin
        )
        assert slow[0].shape[1] <= fast[0].shape[1] <= slow[0].shape[1] + 1


def _truncation_products(rounding, k=50, made=None):
    """``products`` for ``_gram_truncation`` whose rounding bound is `rounding` at every
    rank (factors of the right rank, their values immaterial here); the ranks whose
    factors are made are appended to `made`."""
    size = rounding / recompression.rounding_bound(k, 1.0)
    made = [] if made is None else made

    def products(rank):
        def factors():
            made.append(rank)
            return np.zeros((3, rank)), np.zeros((4, rank))

        return factors, k, size

    return products


@pytest.mark.parametrize("spare, kept", [(0.0, None), (0.25, 10)])
def test_a_rank_whose_tail_leaves_no_room_for_the_rounding_is_tried_once_more(spare, kept):
    """Tails that fill the budget to within the rounding bound: the rank of the budget
    less that rounding is tried, and kept when within the spare ranks."""
    s = 2.0 ** -np.arange(40.0)
    tol = 1.001 * np.sqrt(np.sum(s[8:] ** 2))  # the budget's rank is 8 (Householder's)
    rounding = 0.6 * tol  # leaves a budget of rank 10 (0.4 tol)
    assert recompression.truncation_rank(s, tol - rounding) == 10
    made = []
    got = recompression._gram_truncation(
        s, tol, None, 1.0, _truncation_products(rounding, made=made), spare=spare
    )
    if kept is None:
        assert got is None and made == []  # 2 ranks above Householder's, 1 allowed
    else:
        assert got[0].shape[1] == kept and got.dropped <= tol
        assert got.dropped == pytest.approx(s[kept] + rounding)
        assert made == [kept]  # the factors of the rank refused (8) are never made
    # a small rounding: the budget's rank at once; a rounding above the budget: refused
    once = recompression._gram_truncation(s, tol, None, 1.0, _truncation_products(1e-6 * tol))
    assert once[0].shape[1] == 8
    assert (
        recompression._gram_truncation(
            s, tol, None, 1.0, _truncation_products(1.5 * tol), spare=1.0
        )
        is None
    )


@settings(**PROPERTY_SETTINGS, max_examples=60)
@given(
    m=st.integers(2, 120),
    p=st.integers(2, 120),
    k=st.integers(1, 40),
    decay=st.floats(0.0, 3.0),
    spread=st.floats(0.0, 12.0),
    relative_tol=st.sampled_from([0.0, 1e-12, 1e-8, 1e-4, 0.3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_recompression_meets_its_tolerance(m, p, k, decay, spread, relative_tol, seed):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((m, k)) * np.logspace(0, -decay * k / 10, k)
    V = rng.standard_normal((p, k)) * np.logspace(0, -spread, k)[rng.permutation(k)]
    product = U @ V.T
    s = np.linalg.svd(product, compute_uv=False)
    tol = relative_tol * s[0]
    Uk, Vk = recompression.recompress(U, V, tol)
    error = np.linalg.norm(Uk @ Vk.T - product)
    # the budget, to the rounding of Householder QR when the tolerance is below it
    rounding = 64 * np.finfo(float).eps * (m + p + k) * np.linalg.norm(U) * np.linalg.norm(V)
    assert error <= tol + rounding
    # no rank beyond the factors', and none below the optimum (the budget's reduction by
    # the bases' departure bound and the dense SVD's rounding aside)
    assert Uk.shape[1] <= min(m, p, k)
    assert Uk.shape[1] >= recompression.truncation_rank(s, tol * (1 + 1e-6) + rounding)
