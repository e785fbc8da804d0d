"""TLRMatrix contract tests against the densified matrix (tlrcore knows no kernels:
the blocks here come from small numpy formulas)."""

import sys
import tracemalloc

import numpy as np
import pytest
from problems import covariance, dense, generator, grid_sorted_sites

import tlrcore as tlr

METHODS = ["aca", "ara", "svd"]


CASES = {
    "1d-ragged": (700, 1, 128),
    "2d-ragged": (1100, 2, 256),
    "3d": (1024, 3, 256),
    "single-tile": (300, 2, 300),
    "tiny-tiles": (90, 2, 7),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("accuracy", [1e-2, 1e-4, 1e-6, 1e-8, 1e-10], ids=lambda a: f"acc{a:.0e}")
def test_generator_meets_accuracy(method, case, accuracy):
    n, d, tile = CASES[case]
    block = generator(grid_sorted_sites(n, d), range_=0.2, nugget=0.01)
    A = tlr.TLRMatrix.from_generator(block, n, tile, accuracy=accuracy, method=method)
    M = dense(block, n)
    assert np.linalg.norm(M - A.to_dense()) <= accuracy * np.linalg.norm(M)
    assert A.n == n and A.tile_size == tile and A.n_tiles == -(-n // tile)


@pytest.mark.parametrize("method", METHODS)
def test_products_match_dense(method, rng):
    n = 1000
    block = generator(grid_sorted_sites(n, 2), range_=0.3)
    A = tlr.TLRMatrix.from_generator(block, n, 128, accuracy=1e-12, method=method)
    D = A.to_dense()
    x = rng.normal(size=n)
    X = rng.normal(size=(n, 5))
    np.testing.assert_allclose(A @ x, D @ x, rtol=1e-12, atol=1e-12 * np.abs(D @ x).max())
    np.testing.assert_allclose(A @ X, D @ X, rtol=1e-12, atol=1e-12 * np.abs(D @ X).max())
    np.testing.assert_allclose(D, D.T)


def test_products_are_the_same_on_any_number_of_threads(rng, monkeypatch):
    """Each row tile of ``A @ X`` is one task, computed the same way on any thread."""
    n = 1000
    A = tlr.TLRMatrix.from_generator(
        generator(grid_sorted_sites(n, 2), range_=0.3), n, 128, accuracy=1e-10
    )
    X = rng.normal(size=(n, 40))
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    one = A @ X
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "3")
    assert np.array_equal(A @ X, one)


def test_from_dense_ranks_nbytes_and_repr():
    n = 1100
    M = dense(generator(grid_sorted_sites(n, 2), range_=0.1), n)
    A = tlr.TLRMatrix.from_dense(M, 256, accuracy=1e-8)
    ranks = A.ranks
    assert ranks.shape == (5, 5) and ranks.dtype.kind == "i"
    np.testing.assert_array_equal(np.diag(ranks), [256, 256, 256, 256, 76])
    np.testing.assert_array_equal(ranks, ranks.T)
    # diagonal tiles as their triangles (b (b + 1) / 2 entries) and diagonals (b)
    triangles = sum(8 * (b * (b + 1) // 2 + b) for b in np.diag(ranks))
    assert A.diagonal.nbytes == triangles
    # low-rank factors with their trailing single-precision columns at 4 bytes an entry
    low_rank = 0
    for key in A.U:
        for factors in (A.U, A.V):
            head, tail = factors.parts(key)
            assert head.dtype == np.float64 and (tail is None or tail.dtype == np.float32)
            low_rank += head.nbytes + (0 if tail is None else tail.nbytes)
            np.testing.assert_array_equal(
                factors[key], head if tail is None else np.hstack([head, tail])
            )
    assert A.nbytes == triangles + low_rank < M.nbytes
    assert A.frobenius_norm() == pytest.approx(np.linalg.norm(A.to_dense()), rel=1e-12)
    assert np.linalg.norm(M - A.to_dense()) <= 1e-8 * np.linalg.norm(M)
    assert A.error_bound() <= 1e-8
    assert "TLRMatrix(n=1100" in repr(A)


@pytest.mark.parametrize("method", METHODS)
def test_max_rank_is_respected(method):
    n = 800
    block = generator(grid_sorted_sites(n, 2), range_=0.5)
    A = tlr.TLRMatrix.from_generator(block, n, 100, accuracy=1e-12, method=method, max_rank=3)
    off = A.ranks[~np.eye(A.n_tiles, dtype=bool)]
    assert off.max() <= 3


@pytest.mark.parametrize("method", METHODS)
def test_deterministic(method):
    n = 600
    block = generator(grid_sorted_sites(n, 2))
    A = tlr.TLRMatrix.from_generator(block, n, 100, accuracy=1e-6, method=method, random_state=3)
    B = tlr.TLRMatrix.from_generator(block, n, 100, accuracy=1e-6, method=method, random_state=3)
    np.testing.assert_array_equal(A.to_dense(), B.to_dense())


def test_construction_never_allocates_the_dense_matrix():
    n = 4096
    X = grid_sorted_sites(n, 2)
    block = generator(X, range_=0.1)
    tracemalloc.start()
    A = tlr.TLRMatrix.from_generator(block, n, 256, accuracy=1e-6)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    dense_bytes = 8 * n * n
    assert peak < dense_bytes / 4, (peak, dense_bytes)
    assert A.nbytes < dense_bytes / 4


def test_summary_reports_memory_ranks_and_error():
    n = 1200
    block = generator(grid_sorted_sites(n, 2), range_=0.1)
    A = tlr.TLRMatrix.from_generator(block, n, 200, accuracy=1e-6)
    info = tlr.summary(A, block, n_probe_tiles=15)
    assert info["n_tiles"] == 6 and info["probed_tiles"] == 15
    assert info["memory_fraction"] == pytest.approx(A.nbytes / (8 * n * n))
    assert 0 < info["mean_rank"] <= info["max_rank"] < 200
    true_error = np.linalg.norm(dense(block, n) - A.to_dense()) / np.linalg.norm(A.to_dense())
    # all 15 off-diagonal tiles probed: the estimate is exact
    assert info["estimated_error"] == pytest.approx(true_error, rel=1e-6)
    assert info["estimated_error"] <= 1e-6


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"tile_size": 0}, ValueError, "tile_size"),
        ({"tile_size": 101}, ValueError, "tile_size"),
        ({"tile_size": 2.5}, TypeError, "tile_size"),
        ({"accuracy": 0.0}, ValueError, "accuracy"),
        ({"accuracy": 1.0}, ValueError, "accuracy"),
        ({"method": "qr"}, ValueError, "method"),
        ({"max_rank": -1}, ValueError, "max_rank"),
        ({"backend": "tpu"}, ValueError, "backend"),
    ],
    ids=["tile-0", "tile-gt-n", "tile-float", "acc-0", "acc-1", "method", "max-rank", "backend"],
)
def test_bad_arguments(kwargs, error, match):
    block = generator(grid_sorted_sites(100, 2))
    args = {"tile_size": 20, **kwargs}
    tile_size = args.pop("tile_size")
    with pytest.raises(error, match=match):
        tlr.TLRMatrix.from_generator(block, 100, tile_size, **args)


@pytest.mark.parametrize(
    "bad, match",
    [
        (
            lambda rows, cols: np.zeros((rows.size, cols.size + 1)),
            r"tile \(0, 0\)\) returned an array of shape \(20, 21\)",
        ),
        (
            lambda rows, cols: np.where(
                np.add.outer(rows, cols) == 150, np.nan, 1.0 * (rows[:, None] == cols[None, :])
            ),
            r"tile \(3, 3\)",
        ),
    ],
    ids=["wrong-shape", "nan-in-tile"],
)
def test_generator_errors_name_the_tile(bad, match):
    with pytest.raises(tlr.GeneratorError, match=match):
        tlr.TLRMatrix.from_generator(bad, 100, 20)


ALL_METHODS = METHODS + ["batched"]
SYMMETRY = r"1e-10 \* max\|A\|"


def perturbed_block(X, tile_rows, tile_cols, tile=100, amount=1e-3):
    """The exponential block plus `amount` on tile (`tile_rows`, `tile_cols`) only (for a
    diagonal tile, its strict lower triangle): symmetric everywhere else."""
    exact = generator(X, range_=0.2, nugget=0.01)

    def block(rows, cols):
        C = exact(rows, cols)
        inside = (rows[:, None] // tile == tile_rows) & (cols[None, :] // tile == tile_cols)
        return C + amount * (inside & (rows[:, None] > cols[None, :]))

    return block


@pytest.mark.parametrize("method", ALL_METHODS)
def test_asymmetric_off_diagonal_tile_is_refused(method):
    X = grid_sorted_sites(600, 2)
    with pytest.raises(tlr.GeneratorError, match=r"tile \(4, 1\)\) is not symmetric.*" + SYMMETRY):
        tlr.TLRMatrix.from_generator(perturbed_block(X, 4, 1), 600, 100, method=method)


@pytest.mark.parametrize("method", ALL_METHODS)
def test_asymmetric_diagonal_tile_is_refused(method):
    X = grid_sorted_sites(600, 2)
    match = r"tile \(3, 3\)\) returned a block that is not symmetric.*" + SYMMETRY
    with pytest.raises(tlr.GeneratorError, match=match):
        tlr.TLRMatrix.from_generator(perturbed_block(X, 3, 3), 600, 100, method=method)


class Promising:
    """`block` with the promise ``symmetric_blocks = True``."""

    symmetric_blocks = True

    def __init__(self, block):
        self.block = block

    def __call__(self, rows, cols):
        return self.block(rows, cols)


@pytest.mark.parametrize("method", ALL_METHODS)
def test_a_promise_of_symmetric_blocks_skips_the_diagonal_scan_but_not_the_sample(method):
    """The diagonal tiles of a generator promising ``symmetric_blocks`` are not scanned:
    an asymmetric one is then caught by the random sample (about 57 of its pairs fall in
    tile (3, 3)), whose message names the entries. Only ``True`` is a promise."""
    X = grid_sorted_sites(600, 2)
    promising = Promising(perturbed_block(X, 3, 3))
    with pytest.raises(
        tlr.GeneratorError, match=r"tile \(3, 3\)\) is not symmetric: A\[\d+, \d+\] differs"
    ):
        tlr.TLRMatrix.from_generator(promising, 600, 100, method=method)
    promising.symmetric_blocks = 1
    with pytest.raises(
        tlr.GeneratorError, match=r"tile \(3, 3\)\) returned a block that is not symmetric"
    ):
        tlr.TLRMatrix.from_generator(promising, 600, 100, method=method)


@pytest.mark.parametrize("method", ALL_METHODS)
def test_a_promise_of_symmetric_blocks_changes_no_tile(method):
    X = grid_sorted_sites(600, 2)
    block = generator(X, range_=0.2, nugget=0.01)
    A, B = (
        tlr.TLRMatrix.from_generator(g, 600, 100, method=method) for g in (block, Promising(block))
    )
    assert A.tolerance == B.tolerance
    for D, E in zip(A.diagonal, B.diagonal, strict=True):
        np.testing.assert_array_equal(D, E)
    for pair in A.U:
        np.testing.assert_array_equal(A.U[pair], B.U[pair])
        np.testing.assert_array_equal(A.V[pair], B.V[pair])


def test_asymmetric_dense_matrix_is_refused():
    n = 600
    M = dense(generator(grid_sorted_sites(n, 2), range_=0.2), n)
    M[450, 20] += 1e-6
    with pytest.raises(
        ValueError, match=r"M is not symmetric: max\|M - M.T\| = 1e-06 .*\(M \+ M.T\) / 2"
    ):
        tlr.TLRMatrix.from_dense(M, 100)


def rounding_asymmetric(n, seed=0):
    """``B diag(d) B^T`` by general products, as a user computes it: symmetric up to
    rounding, not bit for bit; and its generator."""
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(n, 40))
    W = B * rng.uniform(0.5, 2.0, size=40)
    return W @ B.T, lambda rows, cols: W[rows] @ B[cols].T


def one_ulp_off(n, seed=0):
    """A symmetric matrix with its strict lower triangle moved by one ulp at random; and
    its generator."""
    M = dense(generator(grid_sorted_sites(n, 2), range_=0.2, nugget=0.01), n)
    M = (M + M.T) / 2
    step = np.random.default_rng(seed).choice([-1.0, 0.0, 1.0], size=M.shape)
    M += np.tril(step * np.spacing(M), -1)
    return M, lambda rows, cols: M[np.ix_(rows, cols)]


@pytest.mark.parametrize("make", [rounding_asymmetric, one_ulp_off], ids=lambda f: f.__name__)
@pytest.mark.parametrize("method", ALL_METHODS)
def test_rounding_level_asymmetry_is_accepted(make, method):
    M, block = make(500)
    assert 0 < np.abs(M - M.T).max() <= 8 * np.finfo(float).eps * np.abs(M).max()
    if method != "batched":
        tlr.TLRMatrix.from_dense(M, 100, method=method)
    A = tlr.TLRMatrix.from_generator(block, 500, 100, method=method)
    assert np.linalg.norm(A.to_dense() - M) <= 1e-8 * np.linalg.norm(M)


def test_from_dense_rejects_bad_input():
    with pytest.raises(ValueError, match="square"):
        tlr.TLRMatrix.from_dense(np.ones((3, 4)), 2)
    with pytest.raises(ValueError, match="NaN"):
        tlr.TLRMatrix.from_dense(np.full((3, 3), np.nan), 2)


def test_serial_and_threaded_construction_agree(monkeypatch):
    n = 900
    block = generator(grid_sorted_sites(n, 2))
    threaded = tlr.TLRMatrix.from_generator(block, n, 128, accuracy=1e-8)
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "1")
    serial = tlr.TLRMatrix.from_generator(block, n, 128, accuracy=1e-8)
    np.testing.assert_array_equal(serial.to_dense(), threaded.to_dense())
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="TLRCORE_NUM_THREADS"):
        tlr.TLRMatrix.from_generator(block, n, 128)


def test_mmap_threshold_is_pinned_once_and_can_be_disabled(monkeypatch):
    import platform

    from tlrcore.concurrency import heap as _malloc

    monkeypatch.setattr(_malloc, "_pinned", None)
    monkeypatch.setenv("TLRCORE_MALLOC_TUNING", "0")
    assert _malloc.pin_mmap_threshold() is False
    monkeypatch.setattr(_malloc, "_pinned", None)
    monkeypatch.delenv("TLRCORE_MALLOC_TUNING")
    pinned = _malloc.pin_mmap_threshold()
    assert pinned is (platform.libc_ver()[0] == "glibc")
    assert _malloc.pin_mmap_threshold() is pinned


def test_task_processes_reuse_heap_memory_once_and_can_be_disabled(monkeypatch):
    """reuse_task_memory sets glibc's mmap threshold, trim threshold and pad once (checked on
    a stand-in C library, so that this process keeps its own settings)."""
    from tlrcore.concurrency import heap

    calls = []

    class FakeLibc:
        def mallopt(self, parameter, value):
            calls.append((parameter, value))
            return 1

    monkeypatch.setattr(heap.ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.setattr(heap, "_task_heap", None)
    monkeypatch.setenv("TLRCORE_MALLOC_TUNING", "0")
    assert heap.reuse_task_memory() is False and calls == []
    monkeypatch.setattr(heap, "_task_heap", None)
    monkeypatch.delenv("TLRCORE_MALLOC_TUNING")
    expected = sys.platform.startswith("linux")
    assert heap.reuse_task_memory() is expected
    assert heap.reuse_task_memory() is expected
    if expected:
        assert calls == [
            (heap._M_MMAP_THRESHOLD, heap.TASK_MMAP_THRESHOLD),
            (heap._M_TRIM_THRESHOLD, heap.TASK_TRIM_THRESHOLD),
            (heap._M_TOP_PAD, heap.TOP_PAD),
        ]


@pytest.mark.parametrize("case", ["2d-ragged", "3d", "tiny-tiles"])
@pytest.mark.parametrize("own, coarser", [(1e-9, 1e-8), (1e-10, 1e-6), (1e-6, 1e-6)], ids=str)
def test_truncated_meets_the_coarser_accuracy_from_the_factors(case, own, coarser):
    n, d, tile = CASES[case]
    block = generator(grid_sorted_sites(n, d), nugget=0.01)
    A = tlr.TLRMatrix.from_generator(block, n, tile, accuracy=own)
    before = A.to_dense()
    T = A.truncated(coarser)
    M = dense(block, n)
    assert T.accuracy == coarser and T.tolerance == pytest.approx(
        A.tolerance * coarser / own, rel=1e-12
    )
    # the contract of the module docstring at the coarser accuracy (each tile's two errors
    # add to at most tau'): the truncation spends at most tau' - tau on each tile, exactly
    # (SVD); the build's own error comes on top
    assert T.truncation_error <= np.sqrt(T.n_tiles * (T.n_tiles - 1)) * (
        T.tolerance - A.tolerance
    ) * (1 + 1e-9)
    assert np.linalg.norm(T.to_dense() - M) <= coarser * np.linalg.norm(M)
    # (abs: the rounding of recomputed factors, about k eps per entry over n^2 entries, when
    # nothing is dropped)
    assert T.truncation_error == pytest.approx(
        np.linalg.norm(T.to_dense() - before), rel=1e-6, abs=1e-9
    )
    for key in A.U:
        assert T.U[key].shape[1] <= A.U[key].shape[1]
        assert T.tile_errors[key] >= A.tile_errors[key]
    np.testing.assert_array_equal(A.to_dense(), before)  # the original is untouched
    # its diagonal tiles serve the copy; what the copy hands out are new arrays
    for D, E in zip(A.diagonal, T.diagonal, strict=True):
        np.testing.assert_array_equal(D, E)
    tile = T.diagonal[0]
    value = tile[0, 0]
    tile[0, 0] = value + 1.0
    assert T.diagonal[0][0, 0] == A.diagonal[0][0, 0] == value


def test_a_truncated_copy_is_unchanged_by_factoring_the_original_in_place_and_factors_alike():
    """The copy shares the original's diagonal tiles: factoring the original with
    overwrite_a=True (which releases them) leaves the copy as it was, and the copy's factor
    is then the one it had before, bit for bit (the same operations on the same arrays)."""
    n, d, tile = CASES["2d-ragged"]
    A = tlr.TLRMatrix.from_generator(
        generator(grid_sorted_sites(n, d), nugget=0.01), n, tile, accuracy=1e-9
    )
    T = A.truncated(1e-7)
    before, factor_before = T.to_dense(), tlr.cholesky(T).to_dense()
    tlr.cholesky(A, overwrite_a=True)
    np.testing.assert_array_equal(T.to_dense(), before)
    np.testing.assert_array_equal(tlr.cholesky(T, overwrite_a=True).to_dense(), factor_before)


def test_shared_is_the_same_tiles_read_only_and_outlives_factoring_the_matrix_in_place():
    n, d, tile = CASES["2d-ragged"]
    A = tlr.TLRMatrix.from_generator(
        generator(grid_sorted_sites(n, d), nugget=0.01), n, tile, accuracy=1e-9
    )
    before = A.to_dense()
    S = A.shared()
    parts = [
        (a, b)
        for factors, shared in ((A.U, S.U), (A.V, S.V))
        for key in factors
        for a, b in zip(factors.parts(key), shared.parts(key), strict=True)
        if a is not None
    ]
    assert all(np.shares_memory(a, b) and not b.flags.writeable for a, b in parts)
    assert all(np.array_equal(a, b) for a, b in zip(A.diagonal, S.diagonal, strict=True))
    assert (S.accuracy, S.tolerance, S.n_tiles) == (A.accuracy, A.tolerance, A.n_tiles)
    F = tlr.cholesky(A, overwrite_a=True)  # releases A's tiles, writes into none
    np.testing.assert_array_equal(S.to_dense(), before)
    np.testing.assert_array_equal(tlr.cholesky(S).to_dense(), F.to_dense())
    with pytest.raises(tlr.ConsumedMatrixError):
        A.shared()


def singular_tiles_matrix():
    """Matern 1.5 on sites each duplicated (to 1e-12) inside its tile: every diagonal tile is
    singular, so the plain factorization fails and the safeguards act on every tile."""
    rng = np.random.default_rng(0)
    X = np.repeat(grid_sorted_sites(256, 2), 2, axis=0) + 1e-12 * rng.standard_normal((512, 2))
    M = covariance(X, kernel="matern15", range_=0.3, scaled=True)
    return tlr.TLRMatrix.from_dense(M, 128, accuracy=1e-4)


@pytest.mark.parametrize(
    "variant, safeguard",
    [
        ("left", None),
        ("right", None),
        ("left", "pivot"),
        ("left", "modified"),
        ("left", "compensate"),
        ("left", "schur+modified"),
    ],
)
def test_no_factorization_in_place_writes_into_the_tiles_a_shared_matrix_reads(variant, safeguard):
    """shared() rests on this: cholesky(A, overwrite_a=True) of a matrix in the tile layout,
    with any variant or safeguard, releases A's tiles but writes into none of them, also when
    the safeguards change every diagonal tile."""
    if safeguard in (None, "pivot"):
        n, d, tile = CASES["2d-ragged"]
        A = tlr.TLRMatrix.from_generator(
            generator(grid_sorted_sites(n, d), nugget=1e-6), n, tile, accuracy=1e-6
        )
    else:
        A = singular_tiles_matrix()
    S = A.shared()
    before = S.to_dense()
    F = tlr.cholesky(A, overwrite_a=True, variant=variant, safeguard=safeguard)
    assert safeguard in (None, "pivot") or F.modified_tiles or F.compensated_tiles
    np.testing.assert_array_equal(S.to_dense(), before)


def test_shared_refuses_a_packed_matrix():
    n, d, tile = CASES["2d-ragged"]
    A = tlr.TLRMatrix.from_generator(
        generator(grid_sorted_sites(n, d), nugget=0.01),
        n,
        tile,
        accuracy=1e-9,
        method="batched",
    )
    with pytest.raises(ValueError, match="packed"):
        A.shared()


def test_a_packed_matrix_truncates_to_a_copy_with_its_own_diagonal_tiles():
    n, d, tile = CASES["2d-ragged"]
    A = tlr.TLRMatrix.from_generator(
        generator(grid_sorted_sites(n, d), nugget=0.01),
        n,
        tile,
        accuracy=1e-9,
        method="batched",
    )
    T = A.truncated(1e-7)
    assert T.packed is None
    assert not any(np.shares_memory(D, E) for D, E in zip(A.diagonal, T.diagonal, strict=True))


def test_truncated_refuses_a_finer_accuracy_and_a_consumed_matrix():
    block = generator(grid_sorted_sites(400, 2), nugget=0.01)
    A = tlr.TLRMatrix.from_generator(block, 400, 100, accuracy=1e-6)
    with pytest.raises(ValueError, match="accuracy must be at least"):
        A.truncated(1e-8)
    with pytest.raises(ValueError, match="accuracy must be in"):
        A.truncated(1.0)
    tlr.cholesky(A, overwrite_a=True)
    with pytest.raises(tlr.ConsumedMatrixError):
        A.truncated(1e-4)


class _PlantedBlock:
    """A smooth 1-D exponential covariance plus a symmetric 4 x 4 block of 0.5 planted in
    one off-diagonal tile: a few large entries in rows and columns that ACA's partial
    pivoting need not visit. The generator says so (``cross_approximation = False``)."""

    cross_approximation = False
    symmetric_blocks = True

    def __init__(self, n=1024):
        x = np.linspace(0.0, 1.0, n)
        self.dense = np.exp(-np.abs(x[:, None] - x[None, :]) / 0.002)
        rows, cols = np.arange(700, 704), np.arange(130, 134)
        self.dense[np.ix_(rows, cols)] += 0.5
        self.dense[np.ix_(cols, rows)] += 0.5

    def __call__(self, rows, cols):
        return self.dense[np.ix_(rows, cols)]


def test_a_generator_without_cross_approximation_is_compressed_from_whole_tiles():
    block = _PlantedBlock()
    A = tlr.TLRMatrix.from_generator(block, block.dense.shape[0], 128, accuracy=1e-8)
    error = np.linalg.norm(A.to_dense() - block.dense) / np.linalg.norm(block.dense)
    assert error <= 1e-8
    assert A.ranks[5, 1] >= 1, "the planted block is found"
    ara = tlr.TLRMatrix.from_generator(
        block, block.dense.shape[0], 128, accuracy=1e-8, method="ara"
    )
    np.testing.assert_array_equal(
        A.to_dense(), ara.to_dense()
    )  # the same build: ARA chosen by default


def test_a_large_diagonal_is_made_again_when_read_with_the_same_values(monkeypatch):
    """Above STORED_DIAGONAL_BYTES the build keeps only the diagonal tiles' norms and the
    generator makes each tile again when read: the matrix, its norm and its factor equal
    those of the kept tiles bit for bit, and the tiles take no memory."""
    import tlrcore.matrix as matrix_module

    n, d, tile = CASES["2d-ragged"]
    block = generator(grid_sorted_sites(n, d), nugget=0.01)
    kept = tlr.TLRMatrix.from_generator(block, n, tile, accuracy=1e-8)
    monkeypatch.setattr(matrix_module, "STORED_DIAGONAL_BYTES", 0)
    made = tlr.TLRMatrix.from_generator(block, n, tile, accuracy=1e-8)
    assert made.diagonal.nbytes == 0 < kept.diagonal.nbytes
    assert made.nbytes == kept.nbytes - kept.diagonal.nbytes
    np.testing.assert_array_equal(made.to_dense(), kept.to_dense())
    assert made.frobenius_norm() == kept.frobenius_norm()
    x = np.random.default_rng(0).standard_normal((n, 2))
    np.testing.assert_array_equal(made @ x, kept @ x)
    factor = tlr.cholesky(kept).to_dense()
    np.testing.assert_array_equal(tlr.cholesky(made.shared()).to_dense(), factor)
    np.testing.assert_array_equal(tlr.cholesky(made, overwrite_a=True).to_dense(), factor)
    with pytest.raises(tlr.ConsumedMatrixError):
        _ = made.diagonal
