"""TLR LDLᵀ (tlrcore.ldl) against NumPy and SciPy on the densified TLR matrix."""

import functools

import numpy as np
import pytest
from problems import covariance, grid_sorted_sites
from threadpoolctl import threadpool_limits

import tlrcore as tlr
from tlrcore.dense import ldl as dense_ldl
from tlrcore.errors import FactorizationError
from tlrcore.ldl import TLRLDL, ldl

N, TILE = 900, 128  # 7 full tiles and a ragged one of 4
ACCURACIES = pytest.mark.parametrize("accuracy", [1e-10, 1e-6], ids=lambda a: f"acc{a:.0e}")
PIVOTING = pytest.mark.parametrize("pivoting", ["bk", "rook"])


def kernel(n, smooth, range_=0.1):
    """Exponential (Matérn 1.5 with `smooth`) correlation of `n` grid-sorted sites."""
    name = "matern15" if smooth else "exponential"
    return covariance(grid_sorted_sites(n), kernel=name, range_=range_)


def shift_in_widest_gap(C, low, high):
    """``C - s I`` with ``s`` halfway across the widest gap of the spectrum of ``C`` in
    ``(low, high)``."""
    lam = np.linalg.eigvalsh(C)
    inside = np.flatnonzero((lam[:-1] > low) & (lam[1:] < high))
    i = inside[np.argmax(lam[inside + 1] - lam[inside])]
    return C - 0.5 * (lam[i] + lam[i + 1]) * np.eye(C.shape[0])


def congruent_to_signs(n, negative_fraction, seed=1):
    """``C S C`` with ``S = diag(+-1)``: by Sylvester, as many negative eigenvalues as ``S``."""
    C = kernel(n, smooth=False) + 0.5 * np.eye(n)
    signs = np.where(np.random.default_rng(seed).uniform(size=n) < negative_fraction, -1.0, 1.0)
    return C @ (signs[:, None] * C)


def top_positive(C, count):
    """``C - s I`` with ``s`` between the ``count``-th and ``(count + 1)``-th largest
    eigenvalues."""
    lam = np.linalg.eigvalsh(C)[::-1]
    return C - 0.5 * (lam[count - 1] + lam[count]) * np.eye(C.shape[0])


INDEFINITE = {
    # Shift near the unit diagonal: many 2x2 pivots in the diagonal tiles (cond ~ 3e3).
    "matern-shift-near-diagonal": lambda: shift_in_widest_gap(kernel(N, smooth=True), 0.9, 1.2),
    "exp-shift-near-diagonal": lambda: shift_in_widest_gap(kernel(N, smooth=False), 1.2, 2.0),
    "matern-shift-10-positive": lambda: top_positive(kernel(N, smooth=True), 10),
    "congruence-30pct-negative": lambda: congruent_to_signs(N, 0.3),
    "congruence-3pct-negative": lambda: congruent_to_signs(N, 0.03),
}


@pytest.fixture(autouse=True, scope="module")
def one_blas_thread():
    """The dense references (eigvalsh, slogdet) on one BLAS thread: at order 900 BLAS
    threads only contend for the cores of a shared machine. The factorizations run on one
    BLAS thread per tile anyway."""
    with threadpool_limits(1, "blas"):
        yield


@functools.cache
def spd():
    return kernel(N, smooth=False) + 1e-2 * np.eye(N)


@functools.cache
def compressed(case, accuracy):
    """``(A, A.to_dense(), eigenvalues of A.to_dense())`` for a named matrix."""
    M = spd() if case == "spd" else INDEFINITE[case]()
    A = tlr.TLRMatrix.from_dense(M, TILE, accuracy=accuracy)
    Ad = A.to_dense()
    return A, Ad, np.linalg.eigvalsh(Ad)


def check_against_dense(F, Ad, lam, accuracy, rng):
    """Reconstruction, inertia, slogdet and solve of `F` against the dense `Ad`."""
    n = Ad.shape[0]
    L, D = F.to_dense()
    norm = np.linalg.norm(Ad)
    assert np.linalg.norm(L @ D @ L.T - Ad) <= 2 * accuracy * norm  # measured 0.57-0.67
    assert F.inertia() == (int(np.sum(lam > 0)), int(np.sum(lam < 0)), 0)
    sign, logdet = np.linalg.slogdet(Ad)
    assert F.slogdet()[0] == sign
    assert abs(F.logdet() - logdet) <= accuracy * n  # measured <= 0.03 of the bound
    cond = np.abs(lam).max() / np.abs(lam).min()
    B = rng.normal(size=(n, 3))
    residual = np.linalg.norm(Ad @ F.solve(B) - B, axis=0) / np.linalg.norm(B, axis=0)
    assert residual.max() <= 0.1 * accuracy * cond  # measured <= 0.18 of the bound


@ACCURACIES
@PIVOTING
def test_spd_covariance_matches_numpy_and_cholesky(accuracy, pivoting, rng):
    A, Ad, lam = compressed("spd", accuracy)
    F = ldl(A, accuracy=accuracy, pivoting=pivoting)
    assert isinstance(F, TLRLDL) and F.inertia() == (N, 0, 0)
    check_against_dense(F, Ad, lam, accuracy, rng)
    assert abs(F.logdet() - tlr.cholesky(A, accuracy=accuracy).logdet()) <= accuracy * N


@ACCURACIES
@PIVOTING
@pytest.mark.parametrize("case", list(INDEFINITE))
def test_indefinite_inertia_slogdet_and_solve(case, pivoting, accuracy, rng):
    A, Ad, lam = compressed(case, accuracy)
    # Weyl: the factor reproduces Ad to 2 accuracy ||Ad||_F, so its inertia is that of Ad.
    assert np.abs(lam).min() > 10 * accuracy * np.linalg.norm(Ad)
    F = ldl(A, accuracy=accuracy, pivoting=pivoting)
    check_against_dense(F, Ad, lam, accuracy, rng)


@PIVOTING
def test_2x2_pivots_and_the_factor_structure(pivoting, rng):
    A = compressed("matern-shift-near-diagonal", 1e-8)[0]
    F = ldl(A, pivoting=pivoting)
    L, D = F.to_dense()
    assert sum(np.count_nonzero(np.diagonal(Dk, -1)) for Dk in F.d) > 10
    e = np.diagonal(D, -1)
    assert not np.any((e[:-1] != 0) & (e[1:] != 0))  # 1x1 and 2x2 blocks only
    np.testing.assert_array_equal(np.tril(D, -2), 0.0)
    np.testing.assert_array_equal(D, D.T)
    for k in range(F.n_tiles):
        rows = F.tile(k)
        tile = L[rows, rows][F.perms[k]]  # P_k (P_k^T L_k) = L_k: unit lower triangular
        np.testing.assert_array_equal(tile, F.diagonal[k])
        np.testing.assert_array_equal(np.triu(tile, 1), 0.0)
        np.testing.assert_array_equal(np.diagonal(tile), 1.0)
        assert np.all(L[: F.offsets[k], rows] == 0)  # block lower triangular
    b = rng.normal(size=N)
    np.testing.assert_allclose(F.solve(b), np.linalg.solve(L @ D @ L.T, b), rtol=1e-8, atol=1e-8)


def test_indefinite_diagonal_tile_where_cholesky_fails():
    n = 400
    M = kernel(n, smooth=False) + 0.1 * np.eye(n)
    M[np.arange(200, 300), np.arange(200, 300)] = 0.0  # tile 2 has a zero diagonal
    A = tlr.TLRMatrix.from_dense(M, 100, accuracy=1e-10)
    with pytest.raises(tlr.NotPositiveDefiniteError):
        tlr.cholesky(A)
    Ad = A.to_dense()
    lam = np.linalg.eigvalsh(Ad)
    F = ldl(A)
    assert F.inertia() == (int(np.sum(lam > 0)), int(np.sum(lam < 0)), 0) and F.inertia()[1] > 0
    sign, logdet = np.linalg.slogdet(Ad)
    assert F.slogdet()[0] == sign and abs(F.logdet() - logdet) <= 1e-10 * n


def test_single_tile_is_the_dense_ldl():
    M = INDEFINITE["congruence-30pct-negative"]()[:100, :100]
    F = ldl(tlr.TLRMatrix.from_dense(M, 100))
    _, D, perm = dense_ldl(M)
    np.testing.assert_array_equal(F.d[0], D)
    np.testing.assert_array_equal(F.perms[0], perm)
    assert F.slogdet() == pytest.approx(dense_ldl(M).slogdet(), rel=1e-12)


def test_deterministic_and_thread_independent(monkeypatch):
    A = compressed("exp-shift-near-diagonal", 1e-8)[0]
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "3")
    first = ldl(A, random_state=5)
    again = ldl(A, random_state=5)
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    serial = ldl(A, random_state=5)
    for other in (again, serial):
        for x, y in zip(first.to_dense(), other.to_dense(), strict=True):
            np.testing.assert_array_equal(x, y)
        for x, y in zip(first.perms, other.perms, strict=True):
            np.testing.assert_array_equal(x, y)


def test_input_is_not_modified():
    A = compressed("congruence-30pct-negative", 1e-6)[0]
    before = [D.copy() for D in A.diagonal], {ij: (A.U[ij].copy(), A.V[ij].copy()) for ij in A.U}
    ldl(A, accuracy=1e-8, pivoting="rook")
    for D, D0 in zip(A.diagonal, before[0], strict=True):
        np.testing.assert_array_equal(D, D0)
    for ij, (U0, V0) in before[1].items():
        np.testing.assert_array_equal(A.U[ij], U0)
        np.testing.assert_array_equal(A.V[ij], V0)


def test_ranks_nbytes_and_repr():
    A = compressed("congruence-30pct-negative", 1e-6)[0]
    F = ldl(A)
    ranks = F.ranks
    np.testing.assert_array_equal(np.diag(ranks), [TILE] * 7 + [N - 7 * TILE])
    assert np.all(np.triu(ranks, 1) == 0) and np.all(ranks[np.tril_indices(8, -1)] > 0)
    assert 0 < F.nbytes < N * N * 8 and F.n == N and F.n_tiles == 8 and F.tolerance == A.tolerance
    assert repr(F).startswith("TLRLDL(n=900, n_tiles=8, pivoting='bk'")


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda A: ldl(np.eye(100)), TypeError, "TLRMatrix"),
        (lambda A: ldl(A, accuracy=2.0), ValueError, "accuracy"),
        (lambda A: ldl(A, accuracy="1e-8"), TypeError, "accuracy"),
        (lambda A: ldl(A, pivoting="lu"), ValueError, "pivoting"),
        (lambda A: ldl(A, block_size=0), ValueError, "block_size"),
        (lambda A: ldl(A).solve(np.ones(5)), ValueError, "shape"),
        (lambda A: ldl(A).solve(np.full(100, np.nan)), ValueError, "NaN"),
    ],
    ids=[
        "not-tlr",
        "accuracy-range",
        "accuracy-type",
        "pivoting",
        "block-size",
        "rhs-shape",
        "rhs-nan",
    ],
)
def test_bad_arguments(call, error, match):
    A = tlr.TLRMatrix.from_dense(np.eye(100) * 2.0, 20)
    with pytest.raises(error, match=match):
        call(A)


def zero_entry():
    M = 2.0 * np.eye(100)
    M[45, 45] = 0.0
    return M, 20, 2


def zero_tile():
    M = 2.0 * np.eye(100)
    M[40:60, 40:60] = 0.0
    return M, 20, 2


def cancelling_schur_complement():
    """``[[B, B], [B, B]]``: the update cancels tile 1 to rounding noise."""
    x = np.linspace(0, 1, 100)
    B = np.exp(-np.abs(x[:, None] - x[None, :]) / 0.3)
    return np.block([[B, B], [B, B]]), 100, 1


@pytest.mark.parametrize(
    "make", [zero_entry, zero_tile, cancelling_schur_complement], ids=lambda f: f.__name__
)
def test_singular_diagonal_tile_raises_naming_it(make):
    M, tile, bad = make()
    with pytest.raises(FactorizationError, match=f"diagonal tile {bad} is singular") as info:
        ldl(tlr.TLRMatrix.from_dense(M, tile, accuracy=1e-12))
    assert info.value.tile == bad and isinstance(info.value, np.linalg.LinAlgError)
