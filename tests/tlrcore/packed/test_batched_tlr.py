"""The batched (GPU-layout) TLR path against SciPy on the densified matrix.

The same code runs on NumPy here and on CuPy with ``-m gpu``: packed construction from
a generator, batched ARA, the column-batched Cholesky, its solves and log-determinant.
"""

import numpy as np
import problems
import pytest
import scipy.linalg
from problems import covariance, grid_sorted_sites

import tlrcore as tlr
from tlrcore.backends import NUMPY, get_backend
from tlrcore.compress.ara_batched import batched_ara
from tlrcore.packed import PackedTiles


def generator(X, backend, range_=0.1, nugget=1e-2, smooth=False):
    """Covariance block generator returning arrays of `backend`: exponential, or Matérn 1.5
    with `smooth`."""
    B = get_backend(backend)
    kernel = "matern15" if smooth else "exponential"
    host = problems.generator(X, kernel=kernel, range_=range_, nugget=nugget)

    def block(rows, cols):
        return B.asarray(host(rows, cols))

    return block


def dense(X, **kw):
    idx = np.arange(X.shape[0])
    return generator(X, "numpy", **kw)(idx, idx)


CASES = {
    "exp2d-ragged": (900, 2, 128, False),
    "matern15-2d": (1024, 2, 256, True),
    "exp3d": (800, 3, 200, False),
    "exp1d-small-tiles": (300, 1, 32, False),
    "single-tile": (200, 2, 200, False),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("accuracy", [1e-6, 1e-10], ids=lambda a: f"acc{a:.0e}")
def test_build_factor_logdet_and_solves_match_scipy(case, accuracy, backend, rng):
    n, d, tile, smooth = CASES[case]
    X = grid_sorted_sites(n, d)
    M = dense(X, smooth=smooth)
    host = get_backend(backend).to_host
    A = tlr.TLRMatrix.from_generator(
        generator(X, backend, smooth=smooth),
        n,
        tile,
        accuracy=accuracy,
        method="batched",
        backend=backend,
    )
    norm = np.linalg.norm(M)
    assert A.packed is not None and A.backend.name == backend
    assert np.linalg.norm(A.to_dense() - M) <= accuracy * norm  # measured 0.3-0.7
    F = tlr.cholesky(A)
    assert type(F).__name__ == "PackedCholesky"
    L = F.to_dense()
    assert np.allclose(np.triu(L, 1), 0.0)
    assert np.linalg.norm(L @ L.T - M) <= 2 * accuracy * norm  # measured 0.7-1.1
    assert abs(F.logdet() - np.linalg.slogdet(M)[1]) <= accuracy * n  # as the left-looking variant
    b, B = rng.normal(size=n), rng.normal(size=(n, 3))
    exact = scipy.linalg.cho_solve(scipy.linalg.cho_factor(M, lower=True), B)
    cond = np.linalg.cond(M)
    np.testing.assert_allclose(
        host(F.solve(B)), exact, rtol=0, atol=50 * accuracy * cond * np.abs(exact).max()
    )
    np.testing.assert_allclose(
        host(F.solve_lower(b)),
        scipy.linalg.solve_triangular(L, b, lower=True),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(
        host(F.solve_upper(B)),
        scipy.linalg.solve_triangular(L.T, B, lower=False),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(host(F.multiply_lower(b)), L @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(host(A @ B), A.to_dense() @ B, rtol=1e-12, atol=1e-11)


def test_batched_and_left_looking_agree_on_a_dict_matrix():
    X = grid_sorted_sites(1000)
    A = tlr.TLRMatrix.from_generator(generator(X, "numpy"), 1000, 128, accuracy=1e-8)
    assert A.packed is None
    left = tlr.cholesky(A)
    batched = tlr.cholesky(A, variant="packed")
    assert (
        A.packed is None and type(tlr.cholesky(A)).__name__ == "TLRCholesky"
    )  # still the tile layout
    assert abs(left.logdet() - batched.logdet()) <= 1e-8 * 1000
    np.testing.assert_allclose(batched.to_dense(), left.to_dense(), atol=1e-6)
    mean = lambda F: F.ranks[np.tril_indices(F.n_tiles, -1)].mean()  # noqa: E731
    assert abs(mean(batched) - mean(left)) <= 0.05 * mean(left)  # measured 0.7%


def test_bit_identical_on_repeat_and_seed_dependent():
    X = grid_sorted_sites(700)
    A = tlr.TLRMatrix.from_generator(
        generator(X, "numpy"), 700, 100, accuracy=1e-8, method="batched"
    )
    first, again = tlr.cholesky(A), tlr.cholesky(A)
    other = tlr.cholesky(A, random_state=1)
    assert first.logdet() == again.logdet()
    assert np.array_equal(first.to_dense(), again.to_dense())
    assert first.logdet() != other.logdet()


def test_generator_calls_are_capped_and_the_result_ignores_the_free_memory(monkeypatch):
    """No generator call returns more than ``_CHUNK_ENTRIES`` entries (chunks sized by free
    device memory alone leave the generator no memory of its own at 1M sites), the chunked
    build still meets its accuracy, and while the cap binds the result is the same whatever
    memory is free."""
    from tlrcore.backends.numpy_backend import NumpyBackend
    from tlrcore.packed import build

    n, tile = 900, 100
    X = grid_sorted_sites(n)
    M = dense(X)
    monkeypatch.setattr(build, "_CHUNK_ENTRIES", 3 * tile * tile)
    block = generator(X, "numpy")
    sizes = []

    def counted(rows, cols):
        if cols.size == tile:  # a chunk of a tile column (not the norm or symmetry samples)
            sizes.append(rows.size)
        return block(rows, cols)

    dense_results = []
    for free in (2**34, 2**40):
        monkeypatch.setattr(NumpyBackend, "free_memory", lambda self, free=free: free)
        A = tlr.TLRMatrix.from_generator(counted, n, tile, accuracy=1e-8, method="batched")
        dense_results.append(A.to_dense())
    assert max(sizes) == 3 * tile
    assert np.array_equal(dense_results[0], dense_results[1])
    assert np.linalg.norm(dense_results[0] - M) <= 1e-8 * np.linalg.norm(M)


def test_shift_safeguard_and_explicit_shift(rng):
    X = grid_sorted_sites(600)
    M = dense(X, nugget=0.0, range_=0.5, smooth=True)
    A = tlr.TLRMatrix.from_generator(
        generator(X, "numpy", nugget=0.0, range_=0.5, smooth=True),
        600,
        100,
        accuracy=1e-4,
        method="batched",
    )
    with pytest.raises(tlr.NotPositiveDefiniteError) as info:
        tlr.cholesky(A)
    assert info.value.tile is not None and f"diagonal tile {info.value.tile}" in str(info.value)
    F = tlr.cholesky(A, safeguard="shift")
    assert F.shift > 0 and F.perturbation == pytest.approx(F.shift * np.sqrt(600))
    L = F.to_dense()
    assert np.linalg.norm(L @ L.T - M - F.shift * np.eye(600)) <= 2e-4 * np.linalg.norm(M)
    G = tlr.cholesky(A, shift=F.shift)
    assert G.logdet() == F.logdet() and G.shift == F.shift


def test_overwrite_a_releases_the_matrix():
    X = grid_sorted_sites(500)
    A = tlr.TLRMatrix.from_generator(
        generator(X, "numpy"), 500, 100, accuracy=1e-8, method="batched"
    )
    reference = tlr.cholesky(A).logdet()
    F = tlr.cholesky(A, overwrite_a=True)
    assert F.logdet() == reference
    # the storage itself (the public attributes refuse a consumed matrix)
    assert all(column.count == 0 for column in A._packed.columns) and A._diagonal[0].size == 0
    with pytest.raises(tlr.ConsumedMatrixError):
        _ = A.packed


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"variant": "sideways"}, ValueError, "variant"),
        (
            {"variant": "packed", "safeguard": "schur", "overwrite_a": True},
            ValueError,
            "overwrite_a",
        ),
        (
            {"variant": "packed", "safeguard": "pivot"},
            ValueError,
            "no tile pivoting.*'modified' and 'shift'",
        ),
    ],
    ids=["variant", "schur-overwrite", "pivot"],
)
def test_bad_options(options, error, match):
    A = tlr.TLRMatrix.from_generator(
        generator(grid_sorted_sites(300), "numpy"), 300, 100, accuracy=1e-8, method="batched"
    )
    with pytest.raises(error, match=match):
        tlr.cholesky(A, **options)


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda r, c: np.zeros((r.size, c.size + 1)), "shape"),
        (lambda r, c: np.full((r.size, c.size), np.nan), "NaN"),
        (lambda r, c: "text", "non-numeric"),
    ],
    ids=["shape", "nan", "text"],
)
def test_generator_errors_name_the_tiles(bad, match):
    with pytest.raises(tlr.GeneratorError, match=match) as info:
        tlr.TLRMatrix.from_generator(bad, 300, 100, accuracy=1e-8, method="batched")
    assert "tile" in str(info.value)


def test_packed_norm_keeps_the_digits_of_small_entries():
    # n = 650, tile 128: the last tile is padded with the identity (118 ones), which the
    # norm must not sum with the squares of the entries and subtract again: at scale 1e-10
    # that cancels their digits.
    X = grid_sorted_sites(650)
    block = generator(X, "numpy")
    one, small = (
        tlr.TLRMatrix.from_generator(
            lambda r, c, s=s: s * block(r, c), 650, 128, accuracy=1e-8, method="batched"
        )
        for s in (1.0, 1e-10)
    )
    # Sums of squares of entries rounded once by the scaling: pairwise summation keeps
    # them to log2(650^2) eps ~ 4e-15 relative.
    assert small.tolerance == pytest.approx(1e-10 * one.tolerance, rel=1e-12, abs=0)
    assert small.frobenius_norm() == pytest.approx(
        np.linalg.norm(small.to_dense()), rel=1e-12, abs=0
    )


def test_packed_round_trip_and_views():
    X = grid_sorted_sites(650)
    M = dense(X)
    A = tlr.TLRMatrix.from_dense(M, 128, accuracy=1e-9)
    P = PackedTiles.from_tiles(NUMPY, A.diagonal, A.U, A.V, A.offsets)
    assert P.n_padded == 768
    # P multiplies the factors padded with zeros to their segment's width: the same r
    # products summed in another blocking, so |difference| <= 2 gamma_r (|U| |V|^T)
    # <= r eps ||M||_2 (V has orthonormal columns, U's rows have norm <= ||M||_2).
    rank = A.ranks[np.tril_indices(A.n_tiles, -1)].max()
    atol = rank * np.finfo(float).eps * np.linalg.norm(M, 2)
    np.testing.assert_allclose(P.to_dense(), A.to_dense(), rtol=0, atol=atol)
    assert np.array_equal(P.rank_matrix(), A.ranks)
    assert P.frobenius_norm() == pytest.approx(A.frobenius_norm(), rel=1e-13)
    diagonal, U, V = P.views()
    assert all(np.array_equal(U[key], A.U[key]) and np.array_equal(V[key], A.V[key]) for key in A.U)
    assert all(np.array_equal(D, E) for D, E in zip(diagonal, A.diagonal, strict=True))


@pytest.mark.parametrize("tol_scale", [1e-3, 1e-7, 1e-12], ids=lambda t: f"tol{t:.0e}")
def test_batched_ara_meets_the_tolerance_at_near_optimal_rank(tol_scale):
    X = grid_sorted_sites(8 * 128, seed=3)
    tiles = np.stack(
        [covariance(X[(i + 1) * 128 : (i + 2) * 128], X[:128], range_=0.1) for i in range(7)]
    )
    tol = tol_scale * np.linalg.norm(tiles[0])
    U, V, ranks, _ = batched_ara(
        lambda active, omega: tiles[active] @ omega,
        lambda Q: tiles.transpose(0, 2, 1) @ Q,
        7,
        (128, 128),
        tol,
        NUMPY,
        seed=0,
    )
    errors = np.linalg.norm(tiles - U @ V.transpose(0, 2, 1), axis=(1, 2))
    assert np.all(errors <= tol)
    for tile, rank in zip(tiles, ranks, strict=True):
        s = np.linalg.svd(tile, compute_uv=False)
        optimal = int(np.sum(np.sqrt(np.cumsum((s**2)[::-1])[::-1]) > tol))
        # Below sqrt(eps) of the largest tile the Gram truncation cannot resolve the
        # singular values: the tolerance still holds, the rank may grow to complete.
        assert optimal <= rank <= (optimal + 2 if tol_scale >= 1e-7 else 128)
    # Also then the bases stay orthonormal: the directions come from the sampled basis
    # only, never from the zero columns of dropped directions.
    unit = np.eye(U.shape[2]) * (np.arange(U.shape[2]) < ranks[:, None, None])
    np.testing.assert_allclose(U.transpose(0, 2, 1) @ U, unit, rtol=0, atol=1e-12)


def test_batched_ara_handles_zero_and_exactly_low_rank_tiles():
    rng = np.random.default_rng(0)
    tiles = np.zeros((3, 64, 64))
    tiles[1] = rng.normal(size=(64, 3)) @ rng.normal(size=(3, 64))
    tiles[2] = rng.normal(size=(64, 64))
    U, V, ranks, dropped = batched_ara(
        lambda a, o: tiles[a] @ o,
        lambda Q: tiles.transpose(0, 2, 1) @ Q,
        3,
        (64, 64),
        1e-10,
        NUMPY,
        seed=0,
    )
    assert list(ranks[:2]) == [0, 3] and ranks[2] == 64
    # nothing but rounding dropped: ||tile||_2 ~ 1e2 here, and 1e-12 is 1e4 eps of that
    assert dropped[0] == 0.0 and dropped[2] == 0.0 and dropped[1] <= 1e-12
    np.testing.assert_allclose(U @ V.transpose(0, 2, 1), tiles, atol=1e-10)


@pytest.mark.parametrize("where", ["samples", "eigensolve"])
def test_batched_ara_names_the_tiles_whose_values_are_not_finite(where, monkeypatch):
    """The eigensolves are not checked one by one (a read each on a GPU): a NaN from the
    samples or from an eigensolve is found by the round's or the truncation's read."""
    from strict_device import StrictBackend

    from tlrcore.errors import FactorizationError

    B = StrictBackend()
    rng = np.random.default_rng(0)
    tiles = rng.normal(size=(4, 32, 3)) @ rng.normal(size=(4, 3, 32))
    if where == "samples":
        tiles[2, 5, 7] = np.nan
    else:
        solve = StrictBackend.eigh

        def failing(self, a, check=True):
            lam, vec = solve(self, a, check)
            poisoned = B.to_host(vec)
            poisoned[1] = np.nan  # the second tile still in the batch
            return lam, B.xp.asarray(poisoned)

        monkeypatch.setattr(StrictBackend, "eigh", failing)
    T = B.xp.asarray(tiles)
    with pytest.raises(FactorizationError, match=r"tiles \((8|7), 3\)") as error:
        batched_ara(
            lambda active, omega: T[B.xp.asarray(active)] @ omega,
            lambda Q: T.transpose(0, 2, 1) @ Q,
            4,
            (32, 32),
            1e-8,
            B,
            seed=0,
            tiles=(6, 3),
        )
    assert "not finite" in str(error.value)


def test_segments_cut_the_padding_and_blocks_return_the_right_tiles():
    from tlrcore.packed.column import TileColumn, segment_bounds

    ranks = np.array([60, 40, 8, 7, 9, 5, 30, 6, 4, 4, 3, 2])
    bounds = segment_bounds(ranks)
    padded = sum((c - a) * ranks[a:c].max() for a, c in zip(bounds[:-1], bounds[1:], strict=True))
    assert (
        bounds[0] == 0 and bounds[-1] == ranks.size and padded <= 1.3 * ranks.sum()
    )  # one segment: 5.3x
    rng = np.random.default_rng(0)
    U = np.zeros((12, 16, 60))
    V = np.zeros((12, 16, 60))
    for p, r in enumerate(ranks):
        U[p, :, :r], V[p, :, :r] = rng.normal(size=(16, r)), rng.normal(size=(16, r))
    column = TileColumn.from_padded(np, U, V, ranks)
    assert column.nbytes < (U.nbytes + V.nbytes) / 3  # 184 of 720 padded columns
    # No segment may be a view of the padded input, not even the widest one (a contiguous
    # slice): such a view kept every column's padded U and V alive, 1.4 GB a column at
    # 1,048,576 sites on a GPU, which ran out of 139 GiB after 66 of 512 columns.
    assert not any(np.shares_memory(S, X) for S in column.U + column.V for X in (U, V))
    # The segments hold copies of the factors, trimmed to a width that keeps every rank:
    # compare the factors bit for bit (products of different widths round differently).
    for positions in (np.arange(12), np.arange(5, 12), np.array([0, 2, 3, 7, 11])):
        seen = []
        for lo, hi, Us, Vs in column.blocks(positions):
            width = Us.shape[2]
            assert width >= ranks[positions[lo:hi]].max()
            np.testing.assert_array_equal(Us, U[positions[lo:hi], :, :width])
            np.testing.assert_array_equal(Vs, V[positions[lo:hi], :, :width])
            seen += list(range(lo, hi))
        assert seen == list(range(positions.size))
    Ut, Vt = column.tile(6)
    assert (
        Ut.shape == (16, 30)
        and np.array_equal(Ut, U[6, :, :30])
        and np.array_equal(Vt, V[6, :, :30])
    )


def test_gemm_flops_are_counted():
    X = grid_sorted_sites(800)
    block = generator(X, "numpy")
    one = tlr.cholesky(
        tlr.TLRMatrix.from_generator(block, 800, 800, accuracy=1e-8, method="batched")
    )
    assert one.gemm_flops == 0.0  # a single tile: no low-rank products
    small = tlr.cholesky(
        tlr.TLRMatrix.from_generator(block, 800, 200, accuracy=1e-8, method="batched")
    )
    large = tlr.cholesky(
        tlr.TLRMatrix.from_generator(block, 800, 100, accuracy=1e-8, method="batched")
    )
    # at least the sampling of every updated tile once: 4 b r s per tile and update
    assert small.gemm_flops > 4 * 200 * 16 * 6 and large.gemm_flops > small.gemm_flops


@pytest.mark.slow
def test_batched_matches_left_looking_at_16k():
    from geostat.ordering import order_points

    n, tile = 16384, 1024
    X = np.random.default_rng(16).uniform(size=(n, 2))
    X = X[order_points(X, "kdtree", tile)]
    block = generator(X, "numpy")
    batched = tlr.cholesky(
        tlr.TLRMatrix.from_generator(block, n, tile, accuracy=1e-8, method="batched")
    )
    left = tlr.cholesky(tlr.TLRMatrix.from_generator(block, n, tile, accuracy=1e-8))
    assert abs(batched.logdet() - left.logdet()) <= 1e-8 * n  # measured 1.3e-3 of the bound
    b = np.random.default_rng(0).normal(size=n)
    x, y = batched.solve(b), left.solve(b)
    assert np.linalg.norm(x - y) <= 1e-5 * np.linalg.norm(y)  # measured 1.1e-6
