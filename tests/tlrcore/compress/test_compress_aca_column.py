"""ACA of a tile column's tiles together (tlrcore.compress.aca_column) and the TLR build
that serves their reads in batches: same factors as ACA tile by tile, errors naming the tile."""

import numpy as np
import pytest
from problems import covariance, uniform_sites

import tlrcore as tlr
from tlrcore.compress import aca_compress
from tlrcore.compress.aca_column import aca_column


def kernel_matrix(n, seed=0, range_=0.2):
    """Exponential correlation of `n` uniform sites sorted by their first coordinate."""
    X = uniform_sites(n, seed=seed)
    return covariance(X[np.lexsort(X.T[::-1])], range_=range_)


def serve(blocks):
    """The two readers of aca_column over explicit dense blocks."""

    def rows(parts):
        return [blocks[t][idx, :] for t, idx in parts]

    def cols(parts):
        return [blocks[t][:, idx] for t, idx in parts]

    return rows, cols


@pytest.mark.parametrize(
    "tol, max_rank", [(1e-8, None), (1e-3, 4), (0.0, None)], ids=["tol", "max-rank", "exact"]
)
def test_aca_column_equals_aca_tile_by_tile(tol, max_rank):
    M = kernel_matrix(300)
    noise = np.random.default_rng(1).normal(size=(20, 40))  # full rank: ends in the dense SVD
    blocks = [M[100:160, :40], M[160:300, :40], noise, M[200:201, 40:80]]
    got = aca_column(*serve(blocks), [b.shape[0] for b in blocks], 40, tol, max_rank)
    for block, (U, V) in zip(blocks, got, strict=True):
        U0, V0 = aca_compress(
            lambda idx, b=block: b[idx, :],
            lambda idx, b=block: b[:, idx],
            block.shape,
            tol,
            max_rank=max_rank,
        )
        # the same coroutine on the same entries: the same operations, bit for bit
        np.testing.assert_array_equal(U, U0)
        np.testing.assert_array_equal(V, V0)


def test_aca_column_of_no_tiles_and_empty_tiles():
    M = kernel_matrix(50)
    assert aca_column(*serve([]), [], 10, 1e-8) == []
    ((U, V),) = aca_column(*serve([M[:0, :10]]), [0], 10, 1e-8)
    assert U.shape == (0, 0) and V.shape == (10, 0)


class WithEntries:
    """A dense matrix as a block generator with ``entries`` (counting the calls)."""

    def __init__(self, M):
        self.M, self.calls = M, 0

    def __call__(self, rows, cols):
        self.calls += 1
        return self.M[np.ix_(rows, cols)]

    def entries(self, i, j):
        self.calls += 1
        return self.M[i, j]


def test_build_with_entries_equals_build_without_and_meets_accuracy():
    n, tile = 1000, 100  # 10 tiles: batched reads across up to 9 tiles per column
    M = kernel_matrix(n, seed=2, range_=0.1) + 1e-2 * np.eye(n)
    batched = WithEntries(M)
    A = tlr.TLRMatrix.from_generator(batched, n, tile, accuracy=1e-8)
    B = tlr.TLRMatrix.from_generator(
        lambda rows, cols: M[np.ix_(rows, cols)], n, tile, accuracy=1e-8
    )
    for key in B.U:  # the same entries reach the same coroutines: bit-identical factors
        np.testing.assert_array_equal(A.U[key], B.U[key])
        np.testing.assert_array_equal(A.V[key], B.V[key])
    assert np.linalg.norm(A.to_dense() - M) <= 1e-8 * np.linalg.norm(M)
    # one rows call and at most two entries calls (pivot and spot-check columns) per round,
    # far fewer than two calls per ACA step and tile
    assert batched.calls < 0.5 * sum(2 * min(U.shape) + 2 for U in A.U.values())


def test_build_of_a_ragged_last_tile_matches_dense():
    n = 730
    M = kernel_matrix(n, seed=3) + 1e-2 * np.eye(n)
    A = tlr.TLRMatrix.from_generator(WithEntries(M), n, 100, accuracy=1e-7)
    assert np.linalg.norm(A.to_dense() - M) <= 1e-7 * np.linalg.norm(M)


class PoisonedReads(WithEntries):
    """NaN in tile (4, 1) for the small reads of ACA only (the norm and symmetry samples
    read large blocks, which stay finite)."""

    def __call__(self, rows, cols):
        C = super().__call__(rows, cols)
        return self.poison(C, rows[:, None], cols[None, :]) if min(rows.size, cols.size) <= 8 else C

    def entries(self, i, j):
        return self.poison(super().entries(i, j), i, j)

    @staticmethod
    def poison(C, i, j):
        inside = ((i // 100 == 4) & (j // 100 == 1)) | ((i // 100 == 1) & (j // 100 == 4))
        return np.where(inside, np.nan, C)


@pytest.mark.parametrize("entries", [True, False], ids=["entries", "block-only"])
def test_nan_in_an_off_diagonal_tile_names_the_tile(entries):
    n = 600
    block = PoisonedReads(kernel_matrix(n, seed=4))
    if not entries:
        block = block.__call__  # a bound method: no entries attribute
    with pytest.raises(tlr.GeneratorError, match=r"tile \(4, 1\)\) returned NaN"):
        tlr.TLRMatrix.from_generator(block, n, 100, accuracy=1e-8)


def test_entries_of_the_wrong_shape_are_refused():
    n = 300
    M = kernel_matrix(n)
    block = WithEntries(M)
    block.entries = lambda i, j: np.zeros(3)
    # the blocks are right, so no single tile is to blame: the error names the column's tiles
    with pytest.raises(
        tlr.GeneratorError, match=r"tiles 1\.\.2 of column 0\) returned an array of shape"
    ):
        tlr.TLRMatrix.from_generator(block, n, 100, accuracy=1e-8)


@pytest.mark.parametrize("entries", [True, False], ids=["entries", "block-only"])
def test_a_column_compressed_on_chosen_rows_equals_its_tiles_alone(entries):
    """compress_column on a strided choice of rows (a cluster worker's) gives each tile the
    factors of compress_tile, bit for bit (widened: the trailing columns are float32)."""
    from tlrcore.compress.generated import CheckedBlock, compress_column, compress_tile

    n, size = 1200, 100
    block = WithEntries(kernel_matrix(n, seed=5))
    checked = CheckedBlock(block if entries else block.__call__)
    tiles = [np.arange(lo, lo + size) for lo in range(0, n, size)]
    rows = [3, 5, 7, 9, 11]
    pairs = compress_column(checked, tiles, 1, 1e-6, None, rows)
    assert len(pairs) == len(rows)
    for i, (U_head, U_tail, V_head, V_tail) in zip(rows, pairs, strict=True):
        U0, V0 = compress_tile(checked, tiles[i], tiles[1], (i, 1), 1e-6, "aca", None, 0)
        np.testing.assert_array_equal(np.hstack([U_head, U_tail]), U0)
        np.testing.assert_array_equal(np.hstack([V_head, V_tail]), V0)
    block.entries = lambda i, j: np.zeros(3)
    if entries:
        checked = CheckedBlock(block)
        with pytest.raises(tlr.GeneratorError, match=r"tiles 3, 5, 7, 9, 11 of column 1\)"):
            compress_column(checked, tiles, 1, 1e-6, None, rows)
