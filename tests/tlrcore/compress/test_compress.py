"""Tests of tlrcore.compress: accuracy against the dense block, ranks, max_rank, edge
shapes, determinism, entries read by ACA, input checks.

The blocks are built here from small kernel formulas (tlrcore knows no kernels): the
interaction of two clusters of random points, well separated or adjacent, in 1, 2 and 3
dimensions, plus random matrices of known rank and a full-rank one. In 1-D every x lies
left of every y, so the exponential block has rank one and the Matern-3/2 block rank two
exactly: exact-rank detection.
"""

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from problems import covariance
from strategies import PROPERTY_SETTINGS

from tlrcore.compress import COMPRESSORS, aca_compress, ara_compress, compress_dense, svd_compress

M, P = 120, 150  # ragged on purpose
METHODS = ["svd", "aca", "ara"]
RELATIVE_TOLS = [1e-2, 1e-4, 1e-6, 1e-8, 1e-10]
# ACA and ARA may keep a rank or two above the SVD optimum (they truncate an approximation
# with part of the budget spent on sampling).
RANK_MARGIN = {"svd": 0, "aca": 2, "ara": 2}

#: The kernels of the cases, by the name in the case, as named in ``problems.CORRELATIONS``.
KERNELS = {"exp": "exponential", "matern32": "matern15", "gauss": "gaussian"}
GEOMETRIES = {"separated": 2.0, "adjacent": 1.0}  # shift of the second cluster


def kernel_block(kernel, dim, geometry, m=M, p=P, seed=0, length=0.5):
    """Kernel between m points in [0, 1]^dim and p points shifted along the first axis."""
    rng = np.random.default_rng(seed)
    x = rng.random((m, dim))
    y = rng.random((p, dim))
    y[:, 0] += GEOMETRIES[geometry]
    return covariance(x, y, kernel=KERNELS[kernel], range_=length)


def low_rank_block(rank, m=M, p=P, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, rank)) @ rng.standard_normal((rank, p))


def _kernel_case(kernel, dim, geometry):
    return lambda: kernel_block(kernel, dim, geometry)


CASE_BUILDERS = {
    f"{kernel}-{dim}d-{geometry}": _kernel_case(kernel, dim, geometry)
    for kernel, dim, geometry in itertools.product(KERNELS, (1, 2, 3), GEOMETRIES)
}
CASE_BUILDERS["lowrank-1"] = lambda: low_rank_block(1)
CASE_BUILDERS["lowrank-7"] = lambda: low_rank_block(7)
CASE_BUILDERS["lowrank-30"] = lambda: low_rank_block(30)
CASE_BUILDERS["fullrank"] = lambda: np.random.default_rng(2).standard_normal((M, P))


@functools.cache
def case_block(name):
    block = CASE_BUILDERS[name]()
    block.flags.writeable = False  # a compressor writing into its input fails loudly
    return block


@functools.cache
def singular_values(name):
    return np.linalg.svd(case_block(name), compute_uv=False)


def optimal_rank(s, tol):
    """Smallest k with sqrt(sum(s[k:]**2)) <= tol, computed independently of tlrcore."""
    return next(k for k in range(s.size + 1) if np.sqrt(np.sum(s[k:] ** 2)) <= tol)


def read_only(array):
    array = np.asarray(array)
    array.flags.writeable = False
    return array


def compress(method, block, tol, max_rank=None, rng=0):
    """Run `method` through its own callback interface, callbacks returning read-only arrays."""
    if method == "svd":
        return svd_compress(block, tol, max_rank=max_rank)
    if method == "aca":
        return aca_compress(
            lambda idx: read_only(block[idx, :]),
            lambda idx: read_only(block[:, idx]),
            block.shape,
            tol,
            max_rank=max_rank,
        )
    return ara_compress(
        lambda X: read_only(block @ X),
        lambda X: read_only(block.T @ X),
        block.shape,
        tol,
        max_rank=max_rank,
        rng=rng,
    )


def frobenius_error(block, U, V):
    return np.linalg.norm(block - U @ V.T)


def check_factors(block, U, V):
    m, p = block.shape
    assert U.dtype == np.float64 and V.dtype == np.float64
    assert U.ndim == 2 and V.ndim == 2
    assert U.shape[0] == m and V.shape[0] == p and U.shape[1] == V.shape[1]


# ------------------------------------------------------------------ accuracy
@pytest.mark.parametrize("rel_tol", RELATIVE_TOLS, ids=lambda t: f"tol{t:.0e}")
@pytest.mark.parametrize("case", list(CASE_BUILDERS))
@pytest.mark.parametrize("method", METHODS)
def test_tolerance_met_with_near_optimal_rank(method, case, rel_tol):
    block = case_block(case)
    s = singular_values(case)
    tol = rel_tol * np.linalg.norm(block)
    U, V = compress(method, block, tol)
    check_factors(block, U, V)
    assert frobenius_error(block, U, V) <= tol
    k_opt = optimal_rank(s, tol)
    assert k_opt <= U.shape[1] <= k_opt + RANK_MARGIN[method]


@pytest.mark.parametrize("method", METHODS)
def test_v_has_orthonormal_columns(method):
    block = case_block("exp-2d-adjacent")
    U, V = compress(method, block, 1e-6 * np.linalg.norm(block))
    np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_exact_low_rank_is_recovered(method):
    block = case_block("lowrank-7")
    U, V = compress(method, block, 1e-12 * np.linalg.norm(block))
    assert U.shape[1] == 7


@pytest.mark.parametrize("shape", [(300, 517), (517, 300)], ids=["wide", "tall"])
@pytest.mark.parametrize("method", METHODS)
def test_ragged_shapes(method, shape):
    block = kernel_block("matern32", 2, "adjacent", *shape)
    tol = 1e-6 * np.linalg.norm(block)
    U, V = compress(method, block, tol)
    check_factors(block, U, V)
    assert frobenius_error(block, U, V) <= tol
    k_opt = optimal_rank(np.linalg.svd(block, compute_uv=False), tol)
    assert U.shape[1] <= k_opt + RANK_MARGIN[method]


@pytest.mark.parametrize("method", METHODS)
def test_tol_zero_is_exact_to_rounding(method):
    block = case_block("gauss-2d-separated")
    U, V = compress(method, block, 0.0)
    assert frobenius_error(block, U, V) <= 1e-13 * np.linalg.norm(block)


def test_aca_finds_a_part_the_pivots_never_visit():
    """Two decoupled interactions (block diagonal): the pivots, chosen from |u|, never
    leave the first part; the spot check of rows and columns finds the second (without
    it the error is ~7e5 tol)."""
    rng = np.random.default_rng(3)
    x = np.vstack([rng.random((60, 2)), rng.random((60, 2)) + [50.0, 0.0]])
    y = np.vstack([rng.random((70, 2)) + [2.0, 0.0], rng.random((80, 2)) + [52.0, 0.0]])
    block = read_only(covariance(x, y, range_=1.0))
    tol = 1e-6 * np.linalg.norm(block)
    U, V = compress("aca", block, tol)
    assert frobenius_error(block, U, V) <= tol


# ------------------------------------------------------------------ max_rank
MAX_RANK_CASES = [
    pytest.param(method, case, id=f"{method}-{case}")
    for method, case in itertools.product(
        METHODS, ["exp-3d-adjacent", "gauss-2d-separated", "fullrank"]
    )
    # ACA's rank-37 cross of a noise-like block is worse than zero (error 1.4 ||A||)
    if (method, case) != ("aca", "fullrank")
]


@pytest.mark.parametrize("method, case", MAX_RANK_CASES)
def test_max_rank_binds_without_raising(method, case):
    block = case_block(case)
    s = singular_values(case)
    U, V = compress(method, block, 1e-10 * np.linalg.norm(block), max_rank=5)
    check_factors(block, U, V)
    assert U.shape[1] <= 5
    best = np.sqrt(np.sum(s[5:] ** 2))  # Eckart-Young: the best rank-5 error
    error = frobenius_error(block, U, V)
    if method == "svd":
        np.testing.assert_allclose(error, best, rtol=1e-10)
    else:
        assert error <= 1.5 * best


@pytest.mark.parametrize("method", METHODS)
def test_max_rank_not_binding_keeps_tolerance(method):
    block = case_block("exp-2d-separated")
    tol = 1e-6 * np.linalg.norm(block)
    k_opt = optimal_rank(singular_values("exp-2d-separated"), tol)
    U, V = compress(method, block, tol, max_rank=k_opt + 3)
    assert U.shape[1] <= k_opt + 3
    assert frobenius_error(block, U, V) <= tol


@pytest.mark.parametrize("method", METHODS)
def test_max_rank_zero_gives_rank_zero(method):
    block = case_block("exp-2d-separated")
    U, V = compress(method, block, 1e-6, max_rank=0)
    assert U.shape == (M, 0) and V.shape == (P, 0)


# ------------------------------------------------------------------ edge cases
@pytest.mark.parametrize("tol", [0.0, 1e-8], ids=["tol0", "tol1e-8"])
@pytest.mark.parametrize("method", METHODS)
def test_zero_block_gives_rank_zero(method, tol):
    U, V = compress(method, read_only(np.zeros((M, P))), tol)
    assert U.shape == (M, 0) and V.shape == (P, 0)


@pytest.mark.parametrize("method", METHODS)
def test_small_block_below_tolerance_gives_rank_zero(method):
    block = case_block("gauss-2d-separated")
    U, V = compress(method, block, 2.0 * np.linalg.norm(block))
    assert U.shape == (M, 0) and V.shape == (P, 0)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)], ids=["no-rows", "no-cols", "empty"])
@pytest.mark.parametrize("method", METHODS)
def test_empty_block(method, shape):
    U, V = compress(method, read_only(np.zeros(shape)), 1e-6)
    assert U.shape == (shape[0], 0) and V.shape == (shape[1], 0)


# (2, 2), (3, 3), (4, 4): ACA's term limit ceil(m p / (m + p)) is below the first block of
# rows; the rows read but not pivoted must stay unused, or the spot check finds no free row
# and passes a rank-1 cross of a full-rank block.
@pytest.mark.parametrize(
    "shape",
    [(1, 40), (40, 1), (1, 1), (2, 3), (2, 2), (3, 3), (4, 4)],
    ids=lambda s: f"{s[0]}x{s[1]}",
)
@pytest.mark.parametrize("method", METHODS)
def test_tiny_blocks(method, shape):
    block = read_only(np.random.default_rng(4).standard_normal(shape))
    U, V = compress(method, block, 1e-12)
    assert frobenius_error(block, U, V) <= 1e-12


# ------------------------------------------------------------------ determinism
@pytest.mark.parametrize("method", METHODS)
def test_deterministic(method):
    block = case_block("matern32-3d-adjacent")
    tol = 1e-6 * np.linalg.norm(block)
    U1, V1 = compress(method, block, tol, rng=7)
    U2, V2 = compress(method, block, tol, rng=7)
    np.testing.assert_array_equal(U1, U2)
    np.testing.assert_array_equal(V1, V2)


def test_ara_seed_and_generator_agree():
    block = case_block("exp-2d-adjacent")
    tol = 1e-6 * np.linalg.norm(block)
    by_seed = compress("ara", block, tol, rng=11)
    by_generator = compress("ara", block, tol, rng=np.random.default_rng(11))
    default_twice = [compress("ara", block, tol, rng=None) for _ in range(2)]
    for a, b in [(by_seed, by_generator), tuple(default_twice)]:
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("seed", range(5))
def test_ara_accuracy_over_seeds(seed):
    block = case_block("gauss-3d-adjacent")
    tol = 1e-4 * np.linalg.norm(block)
    U, V = compress("ara", block, tol, rng=seed)
    assert frobenius_error(block, U, V) <= tol


@pytest.mark.parametrize(
    "block_size, shape, widths",
    [(16, (120, 150), [32, 16]), (16, (120, 20), [16, 4]), (8, (120, 150), [16, 8])],
)
def test_ara_samples_its_first_two_blocks_in_one_product(block_size, shape, widths):
    """The first product samples two blocks when the basis has room for both (the second
    measures the first's basis); narrower blocks come one product at a time."""
    block = case_block("exp-2d-adjacent")[: shape[0], : shape[1]]
    seen = []

    def matmat(X):
        seen.append(X.shape[1])
        return block @ X

    U, V = ara_compress(
        matmat,
        lambda Y: block.T @ Y,
        shape,
        1e-6 * np.linalg.norm(block),
        block_size=block_size,
        rng=3,
    )
    assert seen[: len(widths)] == widths
    assert frobenius_error(block, U, V) <= 1e-6 * np.linalg.norm(block)


@pytest.mark.parametrize(
    "hint, first", [(None, 32), (0, 32), (16, 32), (17, 48), (40, 64), (150, 112)]
)
def test_ara_samples_the_blocks_a_rank_hint_asks_for_in_its_first_product(hint, first):
    """A rank hint covers the rank expected and one block more in the first product (at
    least two blocks, at most what the basis has room for: 120 rows leave 7 blocks); the
    blocks are still appended one at a time, so the basis stops where the samples say."""
    block = case_block("exp-2d-adjacent")[:120, :150]
    tol = 1e-6 * np.linalg.norm(block)
    seen = []

    def matmat(X):
        seen.append(X.shape[1])
        return block @ X

    U, V = ara_compress(matmat, lambda Y: block.T @ Y, block.shape, tol, rng=3, rank_hint=hint)
    assert seen[0] == first
    assert frobenius_error(block, U, V) <= tol
    plain = ara_compress(lambda X: block @ X, lambda Y: block.T @ Y, block.shape, tol, rng=3)
    assert abs(U.shape[1] - plain[0].shape[1]) <= 1  # the SVD's truncation, either way


def test_a_rank_hint_far_above_the_rank_leaves_the_basis_as_small():
    """Blocks sampled past the estimate's stop are not appended: a rank-6 block hinted at
    100 gets a basis of one block, as unhinted."""
    rng = np.random.default_rng(4)
    block = rng.normal(size=(300, 6)) @ rng.normal(size=(6, 250))
    widths = []

    def rmatmat(Y):
        widths.append(Y.shape[1])
        return block.T @ Y

    for hint in (None, 100):
        U, V = ara_compress(
            lambda X: block @ X,
            rmatmat,
            block.shape,
            1e-9 * np.linalg.norm(block),
            rng=1,
            rank_hint=hint,
        )
        assert U.shape[1] == 6 and frobenius_error(block, U, V) <= 1e-9 * np.linalg.norm(block)
    assert widths == [6, 6]


# ------------------------------------------------------------------ ACA reads O(k (m + p)) entries
@pytest.mark.parametrize("case", ["exp-2d-separated", "gauss-3d-separated", "matern32-2d-adjacent"])
def test_aca_reads_few_entries(case):
    m, p = 600, 700
    kernel, dim, geometry = case.split("-")
    block = kernel_block(kernel, int(dim[0]), geometry, m, p)
    counts = {"get_rows": 0, "get_cols": 0}

    def get_rows(idx):
        assert idx.dtype.kind == "i" and idx.ndim == 1 and idx.size > 0
        counts["get_rows"] += idx.size * p
        return block[idx, :]

    def get_cols(idx):
        assert idx.dtype.kind == "i" and idx.ndim == 1 and idx.size > 0
        counts["get_cols"] += idx.size * m
        return block[:, idx]

    tol = 1e-6 * np.linalg.norm(block)
    U, V = aca_compress(get_rows, get_cols, (m, p), tol)
    assert frobenius_error(block, U, V) <= tol
    entries = counts["get_rows"] + counts["get_cols"]
    # one row and one column per step, some steps past the final rank, spot checks
    assert entries <= 3 * (U.shape[1] + 10) * (m + p)
    assert entries < m * p


@pytest.mark.parametrize("case", ["exp-2d-separated", "matern32-3d-adjacent"])
def test_aca_reads_rows_in_blocks(case):
    """ACA reads its pivot rows a block at a time (4 to 16, by the rank so far) and their
    columns in one call: far fewer calls than terms."""
    m, p = 600, 700
    kernel, dim, geometry = case.split("-")
    block = kernel_block(kernel, int(dim[0]), geometry, m, p)
    calls = {"rows": 0, "rows read": 0, "cols": 0}

    def get_rows(idx):
        calls["rows"] += 1
        calls["rows read"] += idx.size
        return block[idx, :]

    def get_cols(idx):
        calls["cols"] += 1
        return block[:, idx]

    U, V = aca_compress(get_rows, get_cols, (m, p), 1e-8 * np.linalg.norm(block))
    assert frobenius_error(block, U, V) <= 1e-8 * np.linalg.norm(block)
    # every round but the first reads at least 4 rows, a spot check 8 (its failure resumes
    # from one row); one at a time would take a call per term, at least the final rank
    assert calls["rows read"] >= 4 * calls["rows"]
    assert calls["cols"] <= calls["rows"] < U.shape[1]


# ------------------------------------------------------------------ interface
def test_registry_and_compress_dense():
    assert COMPRESSORS == {"svd": svd_compress, "aca": aca_compress, "ara": ara_compress}
    block = case_block("exp-2d-adjacent")
    tol = 1e-6 * np.linalg.norm(block)
    for method in METHODS:
        expected = compress(method, block, tol, rng=3)
        got = compress_dense(block, tol, method=method, rng=3)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])


def test_compress_dense_accepts_lists_and_defaults_to_aca():
    block = low_rank_block(2, 6, 5)
    U, V = compress_dense(block.tolist(), 1e-10)
    assert U.shape[1] == 2
    assert frobenius_error(block, U, V) <= 1e-10


def test_compress_dense_unknown_method():
    with pytest.raises(ValueError, match="method"):
        compress_dense(np.eye(3), 1e-6, method="qr")


# ------------------------------------------------------------------ input checks
def _run_with(method, **overrides):
    """Call `method` on a small valid problem with some arguments replaced."""
    block = low_rank_block(3, 20, 30)
    kwargs = {"tol": 1e-6, "max_rank": None}
    callbacks = {
        "svd": {"block": block},
        "aca": {
            "get_rows": lambda idx: block[idx, :],
            "get_cols": lambda idx: block[:, idx],
            "shape": block.shape,
        },
        "ara": {
            "matmat": lambda X: block @ X,
            "rmatmat": lambda X: block.T @ X,
            "shape": block.shape,
        },
    }[method]
    kwargs.update(callbacks)
    kwargs.update(overrides)
    return COMPRESSORS[method](**kwargs)


BAD_ARGUMENTS = {
    "tol-negative": ("tol", -1.0),
    "tol-nan": ("tol", float("nan")),
    "tol-inf": ("tol", float("inf")),
    "tol-string": ("tol", "1e-6"),
    "tol-none": ("tol", None),
    "max_rank-negative": ("max_rank", -1),
    "max_rank-float": ("max_rank", 2.5),
    "max_rank-bool": ("max_rank", True),
}


@pytest.mark.parametrize("name", list(BAD_ARGUMENTS))
@pytest.mark.parametrize("method", METHODS)
def test_bad_tol_or_max_rank(method, name):
    argname, value = BAD_ARGUMENTS[name]
    with pytest.raises(ValueError, match=argname):
        _run_with(method, **{argname: value})


BAD_SHAPES = {
    "negative": (-1, 30),
    "one-dim": (20,),
    "three-dims": (20, 30, 1),
    "float": (20.0, 30),
    "string": "ab",
}


@pytest.mark.parametrize("name", list(BAD_SHAPES))
@pytest.mark.parametrize("method", ["aca", "ara"])
def test_bad_shape(method, name):
    with pytest.raises(ValueError, match="shape"):
        _run_with(method, shape=BAD_SHAPES[name])


@pytest.mark.parametrize(
    "block",
    [np.ones(4), np.ones((2, 2, 2)), np.array([[1.0, np.nan]]), [["a"]]],
    ids=["1d", "3d", "nan", "text"],
)
def test_svd_bad_block(block):
    with pytest.raises(ValueError, match="block"):
        svd_compress(block, 1e-6)


BAD_CALLBACKS = {
    "aca-rows-shape": ("aca", "get_rows", lambda idx: np.ones((np.size(idx), 29))),
    "aca-rows-nan": ("aca", "get_rows", lambda idx: np.full((np.size(idx), 30), np.nan)),
    "aca-rows-transposed": ("aca", "get_rows", lambda idx: np.ones((30, np.size(idx)))),
    "aca-cols-shape": ("aca", "get_cols", lambda idx: np.ones(20)),
    "aca-cols-inf": ("aca", "get_cols", lambda idx: np.full((20, np.size(idx)), np.inf)),
    "ara-matmat-shape": ("ara", "matmat", lambda X: np.ones((19, X.shape[1]))),
    "ara-matmat-nan": ("ara", "matmat", lambda X: np.full((20, X.shape[1]), np.nan)),
    "ara-rmatmat-shape": ("ara", "rmatmat", lambda X: np.ones((X.shape[1], 30))),
    "ara-rmatmat-nan": ("ara", "rmatmat", lambda X: np.full((30, X.shape[1]), np.nan)),
}


@pytest.mark.parametrize("name", list(BAD_CALLBACKS))
def test_bad_callback_output(name):
    method, argname, callback = BAD_CALLBACKS[name]
    with pytest.raises(ValueError, match=argname):
        _run_with(method, **{argname: callback})


@pytest.mark.parametrize("value", [0, -3, 2.0, None], ids=str)
def test_ara_bad_block_size(value):
    with pytest.raises(ValueError, match="block_size"):
        _run_with("ara", block_size=value)


def test_ara_bad_rng():
    with pytest.raises(ValueError, match="rng"):
        _run_with("ara", rng="seed")


@pytest.mark.parametrize("value", [-1, 2.5, True, "10"], ids=str)
def test_ara_bad_rank_hint(value):
    with pytest.raises(ValueError, match="rank_hint"):
        _run_with("ara", rank_hint=value)


@pytest.mark.parametrize("form", ["factors", "orthonormal"])
@pytest.mark.parametrize("m, p, r", [(60, 50, 12), (8, 40, 12), (40, 8, 12), (30, 20, 0)])
def test_recompression_keeps_the_svd_truncation_of_the_product(form, m, p, r):
    # U V^T (or Q B^T, Q orthonormal) with more columns than rows on either side, or none:
    # Householder QR of the factors, SVD of the small core, reflectors applied to the
    # kept vectors.
    from tlrcore.compress._recompress import recompress, recompress_orthonormal, truncation_rank

    rng = np.random.default_rng(m + p + r)
    if form == "factors":
        U, V = rng.normal(size=(m, r)) * 0.5 ** np.arange(r), rng.normal(size=(p, r))
        compress = recompress
    else:
        U = np.linalg.qr(rng.normal(size=(m, r)))[0]
        V = rng.normal(size=(p, U.shape[1])) * 0.5 ** np.arange(U.shape[1])
        compress = recompress_orthonormal
    product = U @ V.T
    s = np.linalg.svd(product, compute_uv=False)
    tol = 1e-3 * s[0] if r else 0.0
    Uk, Vk = compress(U, V, tol)
    rank = truncation_rank(s, tol)
    assert Uk.shape == (m, rank) and Vk.shape == (p, rank)
    error = np.linalg.norm(Uk @ Vk.T - product)
    # the error is that of the best rank-k approximation, to rounding of the QRs and SVD
    assert error == pytest.approx(
        np.sqrt(np.sum(s[rank:] ** 2)), rel=1e-8, abs=1e-13 * max(s[:1], default=1.0)
    )
    assert error <= tol
    np.testing.assert_allclose(Vk.T @ Vk, np.eye(rank), atol=1e-13)
    np.testing.assert_allclose(np.linalg.norm(Uk, axis=0), s[:rank], rtol=1e-12)


# ------------------------------------------------------------------ ACA's helpers
@settings(**PROPERTY_SETTINGS, max_examples=200)
@given(
    values=st.lists(
        st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 3.5]) | st.floats(-1.0, 4.0),
        min_size=1,
        max_size=80,
    ),
    count=st.integers(1, 90),
)
def test_the_largest_rows_come_as_a_stable_sort_would_give_them(values, count):
    """ACA's extra pivot rows: the `count` largest, largest first, ties in index order,
    found without sorting every row (ties are common: rows already used score -1)."""
    from tlrcore.compress.aca import _largest_first

    values = np.array(values)
    np.testing.assert_array_equal(
        _largest_first(values, count), np.argsort(-values, kind="stable")[:count]
    )


def test_the_golden_order_is_computed_once_per_size_and_read_only():
    from tlrcore.compress.aca import _GOLDEN, _golden_order

    order = _golden_order(2048)
    assert order is _golden_order(2048) and not order.flags.writeable
    np.testing.assert_array_equal(order, np.argsort(np.argsort((np.arange(2048) * _GOLDEN) % 1.0)))
