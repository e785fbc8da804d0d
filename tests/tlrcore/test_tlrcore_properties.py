"""Property-based tests of the tlrcore entry points.

(Named ``test_tlrcore_properties.py``, not ``test_properties.py``: the test folders have
no ``__init__.py``, so two test modules with one basename cannot be collected together.)

Random symmetric, asymmetric, indefinite, singular, zero and non-finite matrices of order
1..64, in several dtypes and containers, go into ``TLRMatrix.from_dense``,
``tlr.cholesky`` (every safeguard), ``tlr.ldl``, ``tlr.dense.ldl``,
``tlr.dense.modified_cholesky`` and ``tlr.batched.cholesky``. Each call gives a documented
exception naming the argument (``tests/strategies.py``) or a result that is checked against
NumPy on the dense matrix, with tolerances derived from the accuracy contract
``||A - A_tlr||_F <= accuracy ||A||_F`` and from backward-error bounds; no input is
modified. Derandomized and bounded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    PROPERTY_SETTINGS,
    assert_unchanged,
    call_checked,
    call_checked_exc,
    record,
    snapshot,
)

import tlrcore as tlr

EPS = np.finfo(np.float64).eps
#: At most this many tiles per side, so that every example stays in milliseconds.
MAX_TILES = 10

GOOD_KINDS = (
    ["kernel"] * 4
    + ["spd"] * 2
    + ["psd_singular", "indefinite", "identity", "zero", "diagonal", "near_symmetric", "scaled"]
)
BAD_KINDS = [
    "asymmetric",
    "nan",
    "inf",
    "huge",
    "tiny",
    "wrong_shape",
    "one_d",
    "empty",
    "complex",
    "string",
]


def pick(draw, good, bad, allow_bad, label=None):
    return draw(st.sampled_from(good + bad if allow_bad else good), label=label)


def _orthogonal(rng, n):
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def _sym(M):
    return (M + M.T) / 2


@st.composite
def matrices(draw, bad=True, max_n=64, kinds=None):
    """``(M, kind)``: a matrix argument, good (symmetric, finite, float) unless `bad`."""
    n = draw(st.integers(1, max_n), label="n")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    kind = (
        draw(st.sampled_from(kinds), label="kind")
        if kinds
        else pick(draw, GOOD_KINDS, BAD_KINDS, bad, "kind")
    )
    if kind in ("kernel", "scaled", "huge", "tiny"):
        x = np.sort(rng.uniform(size=n))
        h = np.abs(x[:, None] - x[None, :]) / draw(st.sampled_from([0.05, 0.3, 1.0]))
        M = np.exp(-h) if draw(st.booleans()) else np.exp(-(h**2))
        M += draw(st.sampled_from([0.0, 1e-8, 1e-3, 0.1])) * np.eye(n)
        M *= {"kernel": 1.0, "huge": 1e150, "tiny": 1e-150}.get(
            kind, 10.0 ** draw(st.sampled_from([-100, -10, 10, 100]))
        )
    elif kind in ("spd", "asymmetric", "nan", "inf", "complex", "string", "near_symmetric"):
        Q = _orthogonal(rng, n)
        M = _sym(Q @ np.diag(10 ** rng.uniform(0, 3, n)) @ Q.T)
    elif kind == "psd_singular":
        B = rng.standard_normal((n, max(1, n // 3)))
        M = B @ B.T
    elif kind == "indefinite":
        Q = _orthogonal(rng, n)
        M = _sym(Q @ np.diag(rng.choice([-1.0, 1.0], n) * 10 ** rng.uniform(-1, 1, n)) @ Q.T)
    elif kind == "identity":
        M = np.eye(n)
    elif kind == "zero":
        M = np.zeros((n, n))
    elif kind == "diagonal":
        M = np.diag(rng.choice([-1.0, 1.0, 2.0], n))
    elif kind == "wrong_shape":
        M = rng.standard_normal((n, n + 1))
    elif kind == "one_d":
        M = rng.standard_normal(n)
    else:  # empty
        M = np.empty((0, 0))
    if kind == "asymmetric" and n > 1:
        M = M + 1e-6 * np.abs(M).max() * rng.standard_normal((n, n))
    if kind == "near_symmetric" and n > 1:
        M = M + 1e-13 * np.abs(M).max() * rng.standard_normal((n, n))
    if kind in ("nan", "inf"):
        i, j = rng.integers(n, size=2)
        M[i, j] = M[j, i] = np.nan if kind == "nan" else np.inf
    if kind == "complex":
        M = M + 1j * np.eye(n)
    if kind == "string":
        M = M.astype(object)
        M[0, 0] = "1.0"
    form = pick(
        draw,
        ["float64"] * 5 + ["float32", "int", "list", "fortran"],
        ["bool", "object"],
        bad,
        "form",
    )
    if (
        form == "float32"
        and M.dtype.kind == "f"
        and (bad or 1e-30 < np.abs(M).max(initial=1) < 1e30)
    ):
        with np.errstate(over="ignore"):  # entries beyond float32 become inf: bad input too
            M = M.astype(np.float32)
    elif (
        form == "int"
        and M.dtype.kind == "f"
        and np.isfinite(M).all()
        and np.abs(M).max(initial=0) < 1e15
    ):
        M = np.round(M * 10).astype(np.int64)
    elif form == "list":
        M = M.tolist()
    elif form == "fortran":
        M = np.asfortranarray(M)
    elif form == "bool" and M.dtype.kind == "f":
        M = M > 0.5
    elif form == "object":
        M = np.asarray(M).astype(object)
    return M, kind


def tile_sizes(n, bad):
    """1..n, at most :data:`MAX_TILES` tiles per side; bad: 0, n + 1, non-integers."""
    good = st.integers(math.ceil(n / MAX_TILES), max(n, 1))
    if not bad:
        return good
    return st.one_of(good, st.sampled_from([0, -1, n + 1, 2.5, "8", True, None]))


def accuracies(bad):
    good = [1e-8, 1e-6, 1e-3, 0.1]
    return st.sampled_from(good + ([0.0, 1.0, -1e-8, np.nan, "1e-8", None] if bad else []))


def dense_of(M):
    """Float64 copy of a matrix argument that should have been accepted."""
    return np.array(np.asarray(M), dtype=np.float64)


def rounding(n, *norms):
    """A backward-error allowance of dense factorizations and products: ``c n eps`` times
    the norms of the factors' products (Higham, ch. 9-10: ``|dA| <= gamma_{cn} |L||D||L^T|``),
    with ``c = 16`` for the blocked and tiled orderings."""
    return 16 * (n + 1) * EPS * sum(norms)


def lower_symmetric(M):
    """The symmetric matrix the dense factorizations read: the lower triangle of `M`."""
    return np.tril(M) + np.tril(M, -1).T


def is_symmetric_enough(M):
    """tlrcore's criterion: ``max|M - M^T| <= 1e-10 max|M|``."""
    return np.abs(M - M.T).max(initial=0) <= 1e-10 * np.abs(M).max(initial=0)


FROM_DENSE_NAMES = {"M", "tile_size", "accuracy", "method", "max_rank", "random_state"}
CHOLESKY_NAMES = {
    "A",
    "accuracy",
    "safeguard",
    "shift",
    "variant",
    "overwrite_a",
    "block_size",
    "random_state",
}


def build(M, tile_size, accuracy=1e-8, **kw):
    """``from_dense`` under the contract; ``(A, M as float64)`` or None."""
    before = snapshot(M)
    out = call_checked(
        tlr.TLRMatrix.from_dense, M, tile_size, names=FROM_DENSE_NAMES, accuracy=accuracy, **kw
    )
    assert_unchanged(before, M, "M")
    if out is None:
        return None
    Md = dense_of(M)
    assert np.isfinite(Md).all(), "from_dense accepted a matrix with NaN or infinite entries"
    assert is_symmetric_enough(Md), (
        f"from_dense accepted a non-symmetric M (max|M - M^T| = {np.abs(Md - Md.T).max():.3g})"
    )
    return out[0], Md


# ---------------------------------------------------------------- from_dense
@settings(max_examples=150, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_from_dense_meets_the_accuracy_contract_or_refuses_naming_the_argument(data):
    bad = data.draw(st.booleans(), label="bad")
    M, kind = data.draw(matrices(bad=bad), label="M")
    n = max(np.shape(M)[0], 1) if np.ndim(M) else 1
    tile_size = data.draw(tile_sizes(n, bad), label="tile_size")
    accuracy = data.draw(accuracies(bad), label="accuracy")
    method = data.draw(
        st.sampled_from(["svd", "aca", "ara"] + (["qr", None] if bad else [])), label="method"
    )
    built = build(M, tile_size, accuracy, method=method)
    if built is None:
        return
    A, Md = built
    n = Md.shape[0]
    n_tiles = math.ceil(n / tile_size)
    assert (A.n, A.tile_size, A.n_tiles) == (n, tile_size, n_tiles)
    ranks = np.asarray(A.ranks)
    assert ranks.shape == (n_tiles, n_tiles) and ranks.dtype.kind in "iu" and (ranks >= 0).all()
    sizes = np.diff(np.append(np.arange(0, n, tile_size), n))
    np.testing.assert_array_equal(np.diag(ranks), sizes)
    D = check_contract(A, Md, accuracy, kind)
    assert D.shape == (n, n) and np.isfinite(D).all()
    # Off-diagonal tiles are stored once and mirrored; diagonal tiles as given (symmetric
    # to tlrcore's criterion).
    assert is_symmetric_enough(D), "to_dense() is not symmetric"
    norm = np.linalg.norm(Md)
    # The product from the factors, against the densified matrix: products of the same
    # tiles in a different association, within rounding of |U||V^T|.
    x = np.random.default_rng(0).standard_normal(n)
    lowrank = sum(
        np.linalg.norm(U) * np.linalg.norm(V)
        for U, V in zip(A.U.values(), A.V.values(), strict=True)
    )
    diff = np.linalg.norm(A @ x - D @ x)
    assert diff <= rounding(n, norm, 2 * lowrank) * np.linalg.norm(x), (
        f"A @ x differs from to_dense() @ x by {diff}"
    )
    assert math.isclose(
        A.frobenius_norm(), np.linalg.norm(D), rel_tol=1e-10, abs_tol=rounding(n, norm)
    )
    record(f"from_dense: checked ({kind})")


def check_contract(A, Md, accuracy, kind):
    """``||M - A_tlr||_F <= accuracy ||M||_F``: for n <= 64 the norm sample is the whole
    matrix, so the norm estimate N <= ||M||_F holds exactly and the contract is strict; plus
    the asymmetry of M that the lower-triangle storage drops, plus the rounding of U V^T."""
    D = A.to_dense()
    norm = np.linalg.norm(Md)
    error = np.linalg.norm(D - Md)
    bound = accuracy * norm + np.linalg.norm(Md - Md.T) + rounding(len(Md), norm)
    assert error <= bound, (
        f"||M - A_tlr||_F = {error:.3g} > {bound:.3g} (accuracy {accuracy}, {kind})"
    )
    return D


GENERATOR_FAULTS = ["wrong_shape", "nan", "asymmetric", "list", "transposed_shape"]


@settings(max_examples=100, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_from_generator_meets_the_accuracy_contract_or_names_the_tile(data):
    M, kind = data.draw(matrices(bad=False), label="M")
    Md = dense_of(M)
    n = len(Md)
    fault = data.draw(st.sampled_from([None] * 4 + GENERATOR_FAULTS), label="fault")
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((n, n)) * 1e-6 * max(np.abs(Md).max(), 1.0)

    def block(rows, cols):
        out = Md[np.ix_(rows, cols)]
        if fault == "wrong_shape":
            return out[:, :-1]
        if fault == "transposed_shape" and len(rows) != len(cols):
            return out.T
        if fault == "nan":  # on the last diagonal entry, which is always evaluated
            out = np.where(np.equal.outer(rows, cols) & (rows[:, None] == n - 1), np.nan, out)
        if fault == "asymmetric":
            return out + noise[np.ix_(rows, cols)]
        return out.tolist() if fault == "list" else out

    tile_size = data.draw(tile_sizes(n, False), label="tile_size")
    accuracy = data.draw(accuracies(False), label="accuracy")
    method = data.draw(st.sampled_from(["aca", "ara", "svd"]), label="method")
    out = call_checked(
        tlr.TLRMatrix.from_generator,
        block,
        n,
        tile_size,
        accuracy=accuracy,
        method=method,
        names={"block", "n", "tile_size", "accuracy", "method", "max_rank", "tile"},
    )
    if out is None:
        return
    if fault == "asymmetric" and n > 1:
        raise AssertionError("from_generator accepted a generator of a non-symmetric matrix")
    if (
        fault in ("wrong_shape", "nan")
        or fault == "transposed_shape"
        and n % tile_size
        and n > tile_size
    ):
        raise AssertionError(f"from_generator accepted a generator with fault {fault!r}")
    A, _ = out
    check_contract(A, Md, accuracy, kind)
    record(f"from_generator: checked ({method})")


# ---------------------------------------------------------------- cholesky
SAFEGUARDS = [
    None,
    None,
    "shift",
    "pivot",
    "modified",
    "schur",
    "pivot+modified",
    ("schur", "shift"),
]


@settings(max_examples=150, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_cholesky_factor_reproduces_the_matrix_or_fails_with_a_tile(data):
    M, kind = data.draw(matrices(bad=False), label="M")
    n = len(M)
    built = build(
        M,
        data.draw(tile_sizes(n, False), label="tile_size"),
        data.draw(st.sampled_from([1e-10, 1e-8, 1e-4]), label="build accuracy"),
    )
    assert built is not None, "from_dense refused a good matrix"
    A, Md = built
    D_A = A.to_dense()
    S_A = lower_symmetric(D_A)  # what the factorizations read: the lower triangle
    bad = data.draw(st.integers(0, 3), label="bad") == 0
    safeguard = data.draw(
        st.sampled_from(SAFEGUARDS + (["bogus", 3] if bad else [])), label="safeguard"
    )
    kw = data.draw(
        st.fixed_dictionaries(
            {},
            optional={
                "accuracy": st.sampled_from([None, 1e-8, 1e-4] + ([0.0, "1e-8"] if bad else [])),
                "shift": st.sampled_from(
                    [0.0, 1e-3 * np.abs(D_A).max()] + ([-1.0, np.nan] if bad else [])
                ),
                "overwrite_a": st.booleans(),
                "variant": st.sampled_from(["left", "right"] + (["up"] if bad else [])),
            },
        ),
        label="options",
    )
    accuracy, shift = kw.get("accuracy"), kw.get("shift", 0.0)
    valid = isinstance(accuracy, float) and 0 < accuracy < 1
    tolerance = accuracy * A.frobenius_norm() / A.n_tiles if valid else A.tolerance
    n_tiles = A.n_tiles
    F, caught, exc = call_checked_exc(
        tlr.cholesky, A, names=CHOLESKY_NAMES, safeguard=safeguard, **kw
    )
    # A is consumed by overwrite_a=True once the factorization started, whether it
    # succeeded or not (documented); otherwise it is left exactly as it was.
    started = exc is None or isinstance(exc, tlr.NotPositiveDefiniteError)
    if kw.get("overwrite_a") and started:
        try:
            A.to_dense()
        except tlr.ConsumedMatrixError:
            pass
        else:
            raise AssertionError("A is still usable after cholesky(A, overwrite_a=True)")
    elif not kw.get("overwrite_a"):
        np.testing.assert_array_equal(A.to_dense(), D_A, err_msg="cholesky modified A")
    # Compression of the updated tiles changes A by at most one tolerance per off-diagonal
    # tile (the computed factor is the exact one of A_tlr + F): ||F||_F <= sqrt(nt (nt - 1)) tau.
    # The ARA's error estimate is probabilistic: a factor 2 of margin.
    compression = (
        2 * math.sqrt(n_tiles * (n_tiles - 1)) * (tolerance if exc is not None else F.tolerance)
    )
    if exc is not None:
        # Weyl: A_tlr + F + shift I is positive definite when lambda_min(A_tlr) + shift
        # exceeds ||F||_2 and the rounding of the dense tile factorizations; the
        # factorization must not fail then (with or without safeguards).
        lam_min = np.linalg.eigvalsh(S_A)[0]
        margin = 2 * compression + rounding(n, np.linalg.norm(D_A))
        assert not (isinstance(exc, tlr.NotPositiveDefiniteError) and lam_min + shift > margin), (
            f"cholesky failed (tile {exc.tile}) on a matrix with "
            f"lambda_min + shift = {lam_min + shift:.3g} > {margin:.3g} ({kind})"
        )
        return
    L = F.to_dense()
    assert L.shape == (n, n) and np.isfinite(L).all(), "factor not finite"
    np.testing.assert_array_equal(L, np.tril(L), err_msg="factor not lower triangular")
    assert F.perturbation >= 0 and (F.perturbation > 0 or F.shift == 0), (
        "perturbation does not count the shift"
    )
    perm = np.arange(n) if F.perm is None else np.asarray(F.perm)
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    target = S_A[np.ix_(perm, perm)]
    error = np.linalg.norm(L @ L.T - target)
    bound = F.perturbation + compression + rounding(n, np.linalg.norm(np.abs(L) @ np.abs(L).T))
    assert error <= bound, (
        f"||L L^T - A_tlr||_F = {error:.3g} > {bound:.3g} "
        f"(perturbation {F.perturbation:.3g}, safeguard {safeguard!r}, {kind})"
    )
    # logdet is 2 sum log L_kk; solve is backward stable for P^T L L^T P.
    assert math.isclose(F.logdet(), 2 * np.log(np.diag(L)).sum(), rel_tol=1e-12, abs_tol=1e-12 * n)
    b = np.random.default_rng(1).standard_normal(n)
    x = F.solve(b)
    LLt = np.empty_like(target)
    LLt[np.ix_(perm, perm)] = L @ L.T
    residual = np.linalg.norm(LLt @ x - b)
    assert residual <= rounding(
        n, np.linalg.norm(np.abs(L) @ np.abs(L).T) * np.linalg.norm(x), np.linalg.norm(b)
    )
    record(f"cholesky: checked (safeguard={safeguard})")


# ---------------------------------------------------------------- TLR LDL^T
@settings(max_examples=80, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_tlr_ldl_reproduces_the_matrix_and_its_inertia(data):
    M, kind = data.draw(matrices(bad=False, max_n=48), label="M")
    n = len(M)
    built = build(
        M,
        data.draw(tile_sizes(n, False), label="tile_size"),
        data.draw(st.sampled_from([1e-10, 1e-8, 1e-4]), label="accuracy"),
    )
    assert built is not None, "from_dense refused a good matrix"
    A, _ = built
    D_A = A.to_dense()
    S_A = lower_symmetric(D_A)  # what the factorizations read: the lower triangle
    pivoting = data.draw(st.sampled_from(["bk", "rook", "bk", "none"]), label="pivoting")
    out = call_checked(
        tlr.ldl, A, names={"A", "accuracy", "pivoting", "block_size"}, pivoting=pivoting
    )
    np.testing.assert_array_equal(A.to_dense(), D_A, err_msg="ldl modified A")
    lam = np.linalg.eigvalsh(S_A)
    compression = 2 * math.sqrt(A.n_tiles * (A.n_tiles - 1)) * A.tolerance
    if out is None:
        return
    F, caught = out
    L, D = F.to_dense()
    assert np.isfinite(L).all() and np.isfinite(D).all()
    error = np.linalg.norm(L @ D @ L.T - S_A)
    growth = np.linalg.norm(np.abs(L) @ np.abs(D) @ np.abs(L).T)
    bound = compression + rounding(n, growth)
    assert error <= bound, f"||L D L^T - A_tlr||_F = {error:.3g} > {bound:.3g} ({kind})"
    # Sylvester + Weyl: the inertia of L D L^T is that of A_tlr when every eigenvalue of
    # A_tlr is farther from zero than the backward error.
    if np.abs(lam).min() > 2 * bound:
        expected = (int((lam > 0).sum()), int((lam < 0).sum()), 0)
        assert tuple(F.inertia()) == expected, f"inertia {F.inertia()} != {expected} ({kind})"
        record("ldl: inertia compared")
    record(f"ldl: checked ({kind})")


# ---------------------------------------------------------------- dense LDL^T and modified Cholesky
@settings(max_examples=120, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_dense_ldl_is_a_backward_stable_factorization(data):
    bad = data.draw(st.booleans(), label="bad")
    M, kind = data.draw(matrices(bad=bad), label="M")
    pivoting = data.draw(
        st.sampled_from(["bk", "rook"] + (["none", 3] if bad else [])), label="pivoting"
    )
    before = snapshot(M)
    out = call_checked(tlr.dense.ldl, M, names={"M", "pivoting", "check_finite"}, pivoting=pivoting)
    assert_unchanged(before, M, "M")
    if out is None:
        return
    Md = dense_of(M)
    assert np.isfinite(Md).all() and is_symmetric_enough(Md), f"dense.ldl accepted a bad M ({kind})"
    (L, D, perm), _ = out
    Md = lower_symmetric(Md)
    n = Md.shape[0]
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    np.testing.assert_array_equal(np.diag(L), np.ones(n))
    np.testing.assert_array_equal(L, np.tril(L))
    assert (np.abs(np.triu(D, 2)) == 0).all() and (np.abs(np.tril(D, -2)) == 0).all(), (
        "D not block diagonal"
    )
    growth = np.linalg.norm(np.abs(L) @ np.abs(D) @ np.abs(L).T)
    bound = rounding(n, np.linalg.norm(Md), growth)
    error = np.linalg.norm(Md[np.ix_(perm, perm)] - L @ D @ L.T)
    assert error <= bound, (
        f"||P M P^T - L D L^T||_F = {error:.3g} > {bound:.3g} ({kind}, {pivoting})"
    )
    lam = np.linalg.eigvalsh(_sym(Md))
    if n and np.abs(lam).min() > 4 * bound:
        result = tlr.dense.ldl(M, pivoting=pivoting)
        assert tuple(result.inertia()) == (int((lam > 0).sum()), int((lam < 0).sum()), 0)
        sign, logdet = np.linalg.slogdet(_sym(Md))
        # |d log|det|| <= sum |d lambda_i| / |lambda_i| <= n bound / min|lambda| (Weyl).
        assert result.slogdet()[0] == sign
        assert abs(result.logdet() - logdet) <= 2 * n * bound / np.abs(lam).min()
        record("dense.ldl: inertia and logdet compared")


@settings(max_examples=120, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_modified_cholesky_factors_a_nearby_positive_definite_matrix(data):
    bad = data.draw(st.booleans(), label="bad")
    M, kind = data.draw(matrices(bad=bad), label="M")
    method = data.draw(
        st.sampled_from(["gmw", "cheng-higham"] + (["ldl"] if bad else [])), label="method"
    )
    pivoting = data.draw(st.sampled_from(["bk", "rook"]), label="pivoting")
    delta = data.draw(
        st.sampled_from([None, None, 1e-3] + ([0.0, -1.0, np.nan] if bad else [])), label="delta"
    )
    before = snapshot(M)
    out = call_checked(
        tlr.dense.modified_cholesky,
        M,
        names={"M", "method", "pivoting", "delta", "return_E"},
        method=method,
        pivoting=pivoting,
        delta=delta,
        return_E=True,
    )
    assert_unchanged(before, M, "M")
    if out is None:
        return
    Md = dense_of(M)
    assert np.isfinite(Md).all() and is_symmetric_enough(Md), (
        f"modified_cholesky accepted a bad M ({kind})"
    )
    result, _ = out
    Md = lower_symmetric(Md)
    L, perm, E = result.L, np.asarray(result.perm), result.E
    n = Md.shape[0]
    np.testing.assert_array_equal(L, np.tril(L))
    assert (np.diag(L) > 0).all() and np.isfinite(L).all()
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    np.testing.assert_allclose(E, E.T, rtol=0, atol=rounding(n, np.abs(E).max(initial=0)))
    assert math.isclose(
        result.E_norm, np.linalg.norm(E), rel_tol=1e-10, abs_tol=rounding(n, np.linalg.norm(Md))
    )
    target = (Md + E)[np.ix_(perm, perm)]
    error = np.linalg.norm(L @ L.T - target)
    bound = rounding(n, np.linalg.norm(np.abs(L) @ np.abs(L).T), np.linalg.norm(Md))
    assert error <= bound, (
        f"||L L^T - P (M + E) P^T||_F = {error:.3g} > {bound:.3g} ({kind}, {method})"
    )
    lam = np.linalg.eigvalsh(_sym(Md))
    # ||E||_F is at least the distance to the positive semidefinite cone (documented).
    assert result.E_norm >= np.linalg.norm(np.minimum(lam, 0)) - bound
    # A sufficiently positive definite M is left unchanged (documented: lambda_min >= delta
    # "with some margin"; a factor 4).
    if lam[0] >= 4 * result.delta:
        assert result.E_norm == 0.0, (
            f"E_norm = {result.E_norm} for lambda_min = {lam[0]:.3g} >= 4 delta"
        )
        record("modified_cholesky: positive definite M left unchanged")


# ---------------------------------------------------------------- batched Cholesky
@st.composite
def batches(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    b = draw(st.integers(1, 6), label="b")
    fixed = draw(st.booleans(), label="fixed")
    m = draw(st.integers(1, 24), label="m")
    sizes = (
        [m] * b
        if fixed
        else draw(st.lists(st.integers(1, 24), min_size=b, max_size=b), label="sizes")
    )
    mats = []
    for size in sizes:
        Q = _orthogonal(rng, size)
        # Positive definite with lambda_min >= 1e-3 lambda_max, or clearly indefinite
        # (lambda_min = -0.1 lambda_max): never borderline.
        lam = 10 ** rng.uniform(0, 3, size)
        if draw(st.integers(0, 4), label="indefinite") == 0:
            lam[0] = -0.1 * lam.max()
        mats.append(_sym(Q @ np.diag(lam) @ Q.T))
    fault = draw(
        st.sampled_from([None] * 5 + ["nan", "non_square", "complex", "one_d", "empty", "2d"]),
        label="fault",
    )
    if fault == "nan":
        mats[0] = mats[0].copy()
        mats[0][0, 0] = np.nan
    elif fault == "non_square":
        mats[-1] = np.ones((sizes[-1], sizes[-1] + 1))
    elif fault == "complex":
        mats[0] = mats[0] + 0j
    elif fault == "one_d":
        mats[0] = np.ones(sizes[0])
    elif fault == "empty":
        mats = []
    form = np.array(mats) if fixed and fault not in ("non_square", "one_d", "empty") else mats
    if fault == "2d":
        form = mats[0]
    elif not fixed and draw(st.booleans()):
        form = tuple(mats)
    return form, fault


@settings(max_examples=100, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_batched_cholesky_factors_each_matrix_or_names_the_first_failure(data):
    mats, fault = data.draw(batches(), label="mats")
    strategy = data.draw(
        st.sampled_from(["auto", "group", "pad"] + (["fastest"] if fault else [])), label="strategy"
    )
    before = snapshot(mats)
    out = call_checked(
        tlr.batched.cholesky,
        mats,
        names={"mats", "strategy", "backend", "check_finite"},
        strategy=strategy,
    )
    assert_unchanged(before, mats, "mats")
    items = (
        [np.asarray(a) for a in mats] if isinstance(mats, (list, tuple)) else list(np.asarray(mats))
    )
    first_bad = next(
        (
            i
            for i, a in enumerate(items)
            if a.ndim == 2
            and a.shape[0] == a.shape[1]
            and np.isfinite(a).all()
            and np.isrealobj(a)
            and np.linalg.eigvalsh(a)[0] < 0
        ),
        None,
    )
    if out is None:
        return
    assert fault in (None, "empty"), f"batched.cholesky accepted a batch with fault {fault!r}"
    assert first_bad is None, f"batched.cholesky factored an indefinite matrix (item {first_bad})"
    factors, _ = out
    assert isinstance(factors, list) == isinstance(mats, (list, tuple))
    assert len(factors) == len(items)
    for i, (L, M) in enumerate(zip(factors, items, strict=True)):
        L = np.asarray(L)
        np.testing.assert_array_equal(L, np.tril(L))
        bound = rounding(M.shape[0], np.linalg.norm(np.abs(L) @ np.abs(L).T))
        assert np.linalg.norm(L @ L.T - M) <= bound, f"item {i}: L L^T differs from the matrix"
    record("batched.cholesky: factored")


@settings(max_examples=40, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_batched_cholesky_names_the_first_indefinite_matrix(data):
    mats, fault = data.draw(batches().filter(lambda bf: bf[1] is None), label="mats")
    items = (
        [np.asarray(a) for a in mats] if isinstance(mats, (list, tuple)) else list(np.asarray(mats))
    )
    first_bad = next((i for i, a in enumerate(items) if np.linalg.eigvalsh(a)[0] < 0), None)
    try:
        tlr.batched.cholesky(mats)
    except tlr.NotPositiveDefiniteError as exc:
        assert exc.tile == first_bad, (
            f".tile = {exc.tile}, but the first indefinite matrix is {first_bad}"
        )
    else:
        assert first_bad is None


# ---------------------------------------------------------------- specific bad inputs
def _asymmetric(n=40):
    M = np.exp(-np.abs(np.subtract.outer(np.linspace(0, 1, n), np.linspace(0, 1, n))) / 0.2)
    M[5, 30] += 1e-3
    return M


def test_from_dense_refuses_a_non_symmetric_matrix():
    assert call_checked(tlr.TLRMatrix.from_dense, _asymmetric(), 10, names={"M"}) is None


def test_from_generator_refuses_a_non_symmetric_generator():
    M = _asymmetric()
    out = call_checked(
        tlr.TLRMatrix.from_generator, lambda r, c: M[np.ix_(r, c)], 40, 10, names={"tile"}
    )
    assert out is None, "a generator of a non-symmetric matrix was accepted"


@pytest.mark.parametrize("safeguard", ["shift", None, "schur", "modified", "pivot"])
def test_cholesky_of_a_zero_matrix(safeguard):
    A = tlr.TLRMatrix.from_dense(np.zeros((20, 20)), 5)
    out = call_checked(tlr.cholesky, A, names=CHOLESKY_NAMES, safeguard=safeguard)
    assert out is None, "a zero matrix was factored"


@pytest.mark.parametrize("use", ["to_dense", "matmul", "cholesky", "ldl", "frobenius_norm"])
@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_a_matrix_consumed_by_overwrite_a_cannot_be_used(use, outcome):
    M = _asymmetric()
    M = (M + M.T) / 2 - (2.0 if outcome == "failure" else 0.0) * np.eye(40)
    A = tlr.TLRMatrix.from_dense(M, 10)
    try:
        tlr.cholesky(A, overwrite_a=True)
    except tlr.NotPositiveDefiniteError:
        assert outcome == "failure"
    calls = {
        "to_dense": lambda: A.to_dense(),
        "matmul": lambda: A @ np.ones(40),
        "cholesky": lambda: tlr.cholesky(A),
        "ldl": lambda: tlr.ldl(A),
        "frobenius_norm": lambda: A.frobenius_norm(),
    }
    with pytest.raises(tlr.ConsumedMatrixError, match="overwrite_a"):
        calls[use]()
