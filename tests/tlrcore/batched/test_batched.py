"""tlrcore.batched against SciPy and ``@`` matrix by matrix: fixed and variable batches, every
strategy, every back end (CuPy cases are marked gpu)."""

import numpy as np
import pytest
import scipy.linalg
from problems import spd

import tlrcore as tlr
from tlrcore.backends import get_backend
from tlrcore.batched import _run
from tlrcore.batched import plan as _plan

STRATEGIES = ["auto", "group", "pad"]
#: Orders of a variable batch: 1x1, repeats, a multiple of 64 (moved by "auto" on NumPy).
ORDERS = [5, 1, 17, 128, 17, 1, 40, 3]


def indefinite(m, order):
    """Symmetric, with positive leading minors of orders below `order` and a negative one at
    `order`."""
    A = np.eye(m)
    A[order - 1, order - 1] = -1.0
    return A


def to(backend, batch):
    """`batch` (array or list) on the back end named `backend`."""
    b = get_backend(backend)
    return b.asarray(batch) if isinstance(batch, np.ndarray) else [b.asarray(a) for a in batch]


def host(batch):
    """`batch` (array or list) as NumPy."""
    b = get_backend(batch if not isinstance(batch, list) or not batch else batch[0])
    return b.to_host(batch) if not isinstance(batch, list) else [b.to_host(a) for a in batch]


def assert_close(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        np.testing.assert_allclose(
            g, e, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(e).max(initial=0.0)))
        )


# ---------------------------------------------------------------- cholesky


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cholesky_variable_matches_scipy(backend, strategy, rng):
    mats = [spd(m, rng) for m in ORDERS]
    got = tlr.batched.cholesky(to(backend, mats), strategy=strategy)
    assert isinstance(got, list)
    assert_close(host(got), [scipy.linalg.cholesky(A, lower=True) for A in mats])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("order", [1, 24, 128], ids=lambda m: f"m{m}")
def test_cholesky_fixed_matches_scipy(backend, strategy, order, rng):
    mats = np.stack([spd(order, rng) for _ in range(5)])
    got = tlr.batched.cholesky(to(backend, mats), strategy=strategy)
    assert got.shape == mats.shape
    assert_close(host(got), [scipy.linalg.cholesky(A, lower=True) for A in mats])


def test_cholesky_reads_only_the_lower_triangle(backend, rng):
    mats = [spd(m, rng) for m in ORDERS]
    garbled = [np.tril(A) + np.triu(rng.standard_normal(A.shape), 1) for A in mats]
    assert_close(
        host(tlr.batched.cholesky(to(backend, garbled))),
        host(tlr.batched.cholesky(to(backend, mats))),
    )


@pytest.mark.parametrize("form", ["list", "array"])
def test_cholesky_empty_batch(backend, form):
    mats = [] if form == "list" else np.zeros((0, 4, 4))
    got = tlr.batched.cholesky(to(backend, mats), backend=backend)
    assert (got == []) if form == "list" else (got.shape == (0, 4, 4))


def test_cholesky_of_one_by_one_matrices_is_the_square_root(backend):
    mats = [np.array([[4.0]]), np.array([[2.25]]), np.array([[1e-300]])]
    got = host(tlr.batched.cholesky(to(backend, mats)))
    assert [float(L[0, 0]) for L in got] == [2.0, 1.5, 1e-150]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("form", ["list", "array"])
def test_cholesky_failure_names_first_failing_matrix(backend, strategy, form, rng):
    # Failures at index 2 (leading minor of order 3) and 4; index 2 has the larger order,
    # so it is not the first stack that any strategy computes.
    orders = [6, 9, 7, 9, 6] if form == "list" else [7] * 5
    mats = [spd(m, rng) for m in orders]
    mats[2], mats[4] = indefinite(orders[2], order=3), indefinite(orders[4], order=1)
    batch = mats if form == "list" else np.stack(mats)
    with pytest.raises(
        tlr.NotPositiveDefiniteError, match=rf"mats\[2\].*order 3 of {orders[2]}"
    ) as info:
        tlr.batched.cholesky(to(backend, batch), strategy=strategy)
    assert info.value.tile == 2


@pytest.mark.parametrize("unit_bytes", [1, 2**20], ids=["one-matrix-parts", "large-parts"])
def test_same_results_on_any_number_of_threads_and_parts(monkeypatch, unit_bytes, rng):
    mats = [spd(m, rng) for m in [30, 30, 30, 30, 12, 12, 64]]
    Bs = [rng.standard_normal((m, 2)) for m in [30, 30, 30, 30, 12, 12, 64]]
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    reference = [
        tlr.batched.cholesky(mats),
        tlr.batched.cholesky(np.stack(mats[:4])),
        tlr.batched.solve_triangular(mats, Bs),
        tlr.batched.gemm(mats, Bs),
    ]
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "3")
    monkeypatch.setattr(_run, "UNIT_BYTES", unit_bytes)
    got = [
        tlr.batched.cholesky(mats),
        tlr.batched.cholesky(np.stack(mats[:4])),
        tlr.batched.solve_triangular(mats, Bs),
        tlr.batched.gemm(mats, Bs),
    ]
    for expected, result in zip(reference, got, strict=True):
        assert len(result) == len(expected)
        for a, b in zip(expected, result, strict=True):
            np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- triangular solves

SOLVES = {
    "lower": (True, False),
    "lower-trans": (True, True),
    "upper": (False, False),
    "upper-trans": (False, True),
}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", list(SOLVES))
def test_solve_triangular_variable_matches_scipy(backend, case, strategy, rng):
    lower, trans = SOLVES[case]
    Ls = [np.tril(spd(m, rng)) if lower else np.triu(spd(m, rng)) for m in ORDERS]
    # Any number of columns per right-hand side, and 1-D vectors.
    Bs = [
        rng.standard_normal((m, k)) for m, k in zip(ORDERS, [1, 3, 0, 2, 7, 1, 2, 5], strict=True)
    ]
    Bs[1], Bs[6] = Bs[1][:, 0], Bs[6][:, 0]
    got = tlr.batched.solve_triangular(
        to(backend, Ls), to(backend, Bs), lower=lower, trans=trans, strategy=strategy
    )
    expected = [
        scipy.linalg.solve_triangular(L, B, lower=lower, trans=int(trans))
        for L, B in zip(Ls, Bs, strict=True)
    ]
    assert_close(host(got), expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_solve_triangular_fixed_matches_scipy(backend, strategy, rng):
    Ls = np.stack([np.tril(spd(20, rng)) for _ in range(4)])
    Bs = rng.standard_normal((4, 20, 3))
    got = tlr.batched.solve_triangular(to(backend, Ls), to(backend, Bs), strategy=strategy)
    assert got.shape == Bs.shape
    assert_close(
        host(got),
        [scipy.linalg.solve_triangular(L, B, lower=True) for L, B in zip(Ls, Bs, strict=True)],
    )


def test_solve_triangular_empty_batch(backend):
    got = tlr.batched.solve_triangular(
        to(backend, np.zeros((0, 3, 3))), to(backend, np.zeros((0, 3, 2)))
    )
    assert got.shape == (0, 3, 2)
    assert tlr.batched.solve_triangular([], [], backend=backend) == []


# ---------------------------------------------------------------- products

GEMMS = {
    "NN": (False, False, 1.0, 0.0),
    "TN": (True, False, 1.0, 0.0),
    "NT-alpha": (False, True, -2.5, 0.0),
    "TT-alpha-beta": (True, True, 0.5, 3.0),
    "NN-beta": (False, False, 1.0, -1.0),
}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", list(GEMMS))
def test_gemm_variable_ranks_match_matmul(backend, case, strategy, rng):
    transa, transb, alpha, beta = GEMMS[case]
    # TLR shapes: b x r_i times r_i x s with a rank of its own per tile (0 and 1 included),
    # and one item of other outer sizes.
    shapes = [(48, r, 16) for r in [5, 12, 0, 12, 1, 37, 5]] + [(9, 3, 30)]
    As = [rng.standard_normal((k, m) if transa else (m, k)) for m, k, _ in shapes]
    Bs = [rng.standard_normal((n, k) if transb else (k, n)) for _, k, n in shapes]
    Cs = [rng.standard_normal((m, n)) for m, _, n in shapes]
    got = tlr.batched.gemm(
        to(backend, As),
        to(backend, Bs),
        transa=transa,
        transb=transb,
        alpha=alpha,
        beta=beta,
        Cs=to(backend, Cs),
        strategy=strategy,
    )
    expected = [
        alpha * ((A.T if transa else A) @ (B.T if transb else B)) + beta * C
        for A, B, C in zip(As, Bs, Cs, strict=True)
    ]
    assert_close(host(got), expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gemm_fixed_matches_matmul(backend, strategy, rng):
    As, Bs, Cs = (
        rng.standard_normal((3, 10, 4)),
        rng.standard_normal((3, 6, 4)),
        rng.standard_normal((3, 10, 6)),
    )
    got = tlr.batched.gemm(
        to(backend, As),
        to(backend, Bs),
        transb=True,
        alpha=2.0,
        beta=1.0,
        Cs=to(backend, Cs),
        strategy=strategy,
    )
    assert got.shape == (3, 10, 6)
    assert_close(host(got), [2.0 * A @ B.T + C for A, B, C in zip(As, Bs, Cs, strict=True)])


def test_gemm_beta_zero_ignores_cs_like_blas(rng):
    As, Bs = [rng.standard_normal((3, 2))], [rng.standard_normal((2, 4))]
    got = tlr.batched.gemm(As, Bs, Cs=[np.full((3, 4), np.nan)])
    assert_close(got, [As[0] @ Bs[0]])


def test_gemm_empty_batch(backend):
    got = tlr.batched.gemm(to(backend, np.zeros((0, 3, 2))), to(backend, np.zeros((0, 2, 5))))
    assert got.shape == (0, 3, 5)


# ---------------------------------------------------------------- plans


def test_pad_grid_bounds_the_padding():
    m = np.arange(0, 5000)
    padded = _plan.pad_up(m)
    assert np.all(padded >= m) and np.all(padded % 8 == 0)
    assert np.all(padded < np.maximum(m + 8, m * _plan.PAD_RATIO) + 8 + 1e-9)
    assert not np.any((padded >= 128) & (padded % 64 == 0))


def test_buckets_partition_the_batch():
    dims = np.array([[3, 1], [5, 2], [3, 1], [5, 1], [3, 1]])
    groups = _plan.buckets(dims)
    assert sorted((shape, list(idx)) for idx, shape in groups) == [
        ((3, 1), [0, 2, 4]),
        ((5, 1), [3]),
        ((5, 2), [1]),
    ]


# ---------------------------------------------------------------- misuse

A3 = np.eye(3)
BAD_CALLS = {
    "cholesky-2d-array": (lambda: tlr.batched.cholesky(A3), ValueError, r"3-D array.*mats\[None\]"),
    "cholesky-4d-array": (
        lambda: tlr.batched.cholesky(A3[None, None]),
        ValueError,
        r"shape \(1, 1, 3, 3\)",
    ),
    "cholesky-not-square-array": (
        lambda: tlr.batched.cholesky(np.ones((2, 3, 4))),
        ValueError,
        "square",
    ),
    "cholesky-not-square-item": (
        lambda: tlr.batched.cholesky([A3, np.ones((2, 3))]),
        ValueError,
        r"mats\[1\].*square",
    ),
    "cholesky-1d-item": (
        lambda: tlr.batched.cholesky([np.ones(3)]),
        ValueError,
        r"mats\[0\] must be a 2-D",
    ),
    "cholesky-nan": (
        lambda: tlr.batched.cholesky([A3, A3, np.full((3, 3), np.nan)]),
        ValueError,
        r"mats\[2\] contains NaN",
    ),
    "cholesky-inf-fixed": (
        lambda: tlr.batched.cholesky(np.stack([A3, np.full((3, 3), np.inf)])),
        ValueError,
        r"mats\[1\] contains NaN or infinite",
    ),
    "cholesky-complex": (lambda: tlr.batched.cholesky([A3 + 0j]), TypeError, "complex"),
    "cholesky-strings": (
        lambda: tlr.batched.cholesky([np.array([["a"]])]),
        TypeError,
        "real numbers",
    ),
    "cholesky-not-a-batch": (
        lambda: tlr.batched.cholesky({"a": A3}),
        TypeError,
        "list of 2-D arrays",
    ),
    "cholesky-strategy": (
        lambda: tlr.batched.cholesky([A3], strategy="bucket"),
        ValueError,
        "auto",
    ),
    "cholesky-backend": (lambda: tlr.batched.cholesky([A3], backend="tpu"), ValueError, "numpy"),
    "solve-lengths": (
        lambda: tlr.batched.solve_triangular([A3, A3], [np.ones(3)]),
        ValueError,
        "2 matrices.*1",
    ),
    "solve-forms": (
        lambda: tlr.batched.solve_triangular(A3[None], [np.ones(3)]),
        TypeError,
        "both",
    ),
    "solve-rows": (
        lambda: tlr.batched.solve_triangular([A3], [np.ones((4, 2))]),
        ValueError,
        r"Bs\[0\] has 4 rows.*order 3",
    ),
    "solve-rows-fixed": (
        lambda: tlr.batched.solve_triangular(A3[None], np.ones((1, 2, 2))),
        ValueError,
        "Bs has 2 rows",
    ),
    "solve-nan-rhs": (
        lambda: tlr.batched.solve_triangular([A3, A3], [np.ones(3), np.array([1, np.nan, 1])]),
        ValueError,
        r"Bs\[1\] contains NaN",
    ),
    "gemm-lengths": (
        lambda: tlr.batched.gemm([A3], [A3, A3]),
        ValueError,
        "1 matrices but Bs has 2",
    ),
    "gemm-inner": (
        lambda: tlr.batched.gemm([A3, A3], [A3, np.ones((2, 3))]),
        ValueError,
        r"op\(As\[1\]\) has 3 columns but op\(Bs\[1\]\) has 2 rows",
    ),
    "gemm-c-shape": (
        lambda: tlr.batched.gemm([A3], [A3], beta=1.0, Cs=[np.ones((3, 2))]),
        ValueError,
        r"Cs\[0\] has shape \(3, 2\)",
    ),
    "gemm-beta-without-c": (lambda: tlr.batched.gemm([A3], [A3], beta=1.0), ValueError, "needs Cs"),
    "gemm-alpha-type": (lambda: tlr.batched.gemm([A3], [A3], alpha="2"), TypeError, "alpha"),
    "gemm-alpha-nan": (
        lambda: tlr.batched.gemm([A3], [A3], alpha=np.nan),
        ValueError,
        "alpha must be finite",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_misuse_raises_naming_the_argument(case):
    call, error, message = BAD_CALLS[case]
    with pytest.raises(error, match=message):
        call()
