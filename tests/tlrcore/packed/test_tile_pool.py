"""The tile pool and the column update of the batched Cholesky (tlrcore.packed.pool,
tlrcore.packed.update): storage round trips, and the factor unchanged whatever the
chunking and work budget, with a number of batched operations per column that does not
grow with the number of tile columns."""

import numpy as np
import problems
from problems import grid_sorted_sites

import tlrcore as tlr
from tlrcore.cholesky import packed as cholesky_packed
from tlrcore.packed import update as schur_update
from tlrcore.packed.pool import WIDTHS, PoolIndex, TilePool, store_column, width_class


def generator(X):
    return problems.generator(X, range_=0.1, nugget=1e-2)


def dense(X):
    return problems.dense(generator(X), X.shape[0])


def test_width_classes_are_at_most_half_apart():
    assert [width_class(r) for r in (0, 1, 8, 9, 11, 17, 33, 100)] == [1, 1, 8, 12, 12, 24, 48, 128]
    assert np.all(WIDTHS[4:] / WIDTHS[3:-1] <= 1.5 + 1e-12)
    assert width_class(10**6) == 10**6


def test_store_and_gather_round_trip_across_chunks():
    rng = np.random.default_rng(0)
    b, ranks = 8, np.array([5, 3, 0, 7, 7, 1])
    pool = TilePool(
        np, b, chunk_bytes=8 * b * 8 * 2, max_tiles=100
    )  # two tiles of width 8 per chunk
    index = PoolIndex(8)
    # Storing and gathering only copies: the factors come back bit for bit, zero beyond
    # each tile's rank (their products would be sums of another width, rounded otherwise).
    columns, factors = [], {}
    for j in range(2):
        U = np.zeros((6, b, 7))
        V = np.zeros((6, b, 7))
        for p, r in enumerate(ranks):
            U[p, :, :r], V[p, :, :r] = rng.normal(size=(b, r)), rng.normal(size=(b, r))
            factors[j + 1 + p, j] = U[p, :, :r], V[p, :, :r]
        column = store_column(pool, index, j, U, V, ranks)
        assert np.array_equal(column.ranks, ranks)
        for p in range(6):
            for got, expected in zip(column.tile(p), factors[j + 1 + p, j], strict=True):
                np.testing.assert_array_equal(got, expected)
        columns.append(column)
    assert pool.n_chunks > 2  # the chunking was exercised
    rows = np.array([3, 1, 6, 4, 5, 7, 2])
    cols = np.array([0, 0, 0, 1, 1, 1, 1])
    seen = []
    groups, _ = pool.gather_trimmed(index, rows, cols)
    for members, U, V in groups:
        assert U.shape[2] == max(width_class(index.rank[rows[m], cols[m]]) for m in members)
        for t, m in enumerate(members):
            for got, expected in zip((U[t], V[t]), factors[rows[m], cols[m]], strict=True):
                r = expected.shape[1]
                np.testing.assert_array_equal(got[:, :r], expected)
                np.testing.assert_array_equal(got[:, r:], 0.0)
        seen += list(members)
    assert sorted(seen) == list(range(rows.size))


def tighten(monkeypatch):
    """Chunks of 64 KiB and a work budget of 1 MiB: several chunks per width, and the
    rectangle gathered block by block instead of once per column."""
    monkeypatch.setattr(cholesky_packed, "_MIN_CHUNK_BYTES", 2**16)
    monkeypatch.setattr(cholesky_packed, "_MAX_CHUNK_BYTES", 2**16)
    monkeypatch.setattr(cholesky_packed, "_MIN_WORK_BYTES", 2**20)
    monkeypatch.setattr(cholesky_packed, "_WORK_FRACTION", 2**60)


def test_chunking_and_work_blocks_meet_the_accuracy(monkeypatch):
    tighten(monkeypatch)
    X = grid_sorted_sites(1200)
    M = dense(X)
    A = tlr.TLRMatrix.from_generator(generator(X), 1200, 64, accuracy=1e-8, method="batched")
    F = tlr.cholesky(A)
    L = F.to_dense()
    assert np.linalg.norm(L @ L.T - M) <= 2e-8 * np.linalg.norm(M)
    assert abs(F.logdet() - np.linalg.slogdet(M)[1]) <= 1e-8 * 1200


def test_tight_and_default_budgets_give_the_same_factor(monkeypatch):
    X = grid_sorted_sites(1200)
    A = tlr.TLRMatrix.from_generator(generator(X), 1200, 64, accuracy=1e-8, method="batched")
    roomy = tlr.cholesky(A)
    tighten(monkeypatch)
    tight = tlr.cholesky(A)
    np.testing.assert_allclose(tight.to_dense(), roomy.to_dense(), rtol=0, atol=1e-12)
    assert np.array_equal(tight.ranks, roomy.ranks)


def test_batched_operations_per_column_do_not_grow_with_the_columns(monkeypatch):
    groups = []
    original = schur_update._Rectangle.__init__

    def spy(self, *args):
        original(self, *args)
        groups.append(len(self.pairs))

    monkeypatch.setattr(schur_update._Rectangle, "__init__", spy)
    X = grid_sorted_sites(2048)
    A = tlr.TLRMatrix.from_generator(generator(X), 2048, 32, accuracy=1e-8, method="batched")
    F = tlr.cholesky(A)
    classes = np.unique([width_class(r) for r in F.ranks[np.tril_indices(64, -1)]]).size
    # One group per width class of the ranks, however many of the 63 earlier columns
    # contribute: column by column it was up to 63 x (segments per column).
    assert max(groups) <= classes <= 20
