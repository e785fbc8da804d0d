"""Tile columns compressed when first read (``TLRMatrix.from_generator(..., deferred=True)``):
the same tiles bit for bit as an eager build, a left-looking factorization with
``overwrite_a`` that holds only a few columns of ``A`` at a time, and every other reader
of the tiles served after compressing the columns still pending."""

import pickle

import numpy as np
import problems
import pytest
from problems import grid_sorted_sites

import tlrcore as tlr
from tlrcore.cholesky import left

N, TILE, ACCURACY = 1500, 100, 1e-8


@pytest.fixture(scope="module")
def block():
    return problems.generator(grid_sorted_sites(N), range_=0.1, nugget=1e-2)


def build(block, deferred, method="aca"):
    return tlr.TLRMatrix.from_generator(
        block, N, TILE, accuracy=ACCURACY, method=method, deferred=deferred
    )


def assert_same_tiles(A, B):
    assert list(A.U) == list(B.U)  # also the order, which sums over the tiles follow
    for key in A.U:
        assert np.array_equal(A.U[key], B.U[key]) and np.array_equal(A.V[key], B.V[key]), key
    assert np.array_equal(A.tile_errors, B.tile_errors)
    for D, E in zip(A.diagonal, B.diagonal, strict=True):
        assert np.array_equal(D, E)


@pytest.mark.parametrize("method", ["aca", "ara", "svd"])
def test_deferred_columns_are_the_eager_tiles(block, method):
    eager, deferred = build(block, False, method), build(block, True, method)
    assert deferred.deferred_columns == list(range(N // TILE - 1))
    assert eager.deferred_columns == []
    assert "deferred_columns=14" in repr(deferred)
    assert deferred.tile_rank(5, 2) == eager.tile_rank(5, 2)
    assert deferred.deferred_columns == [c for c in range(N // TILE - 1) if c != 2]
    assert_same_tiles(eager, deferred)
    assert deferred.deferred_columns == []
    assert deferred.frobenius_norm() == eager.frobenius_norm()


def test_every_reader_compresses_the_pending_columns(block):
    eager = build(block, False)
    x = np.random.default_rng(1).standard_normal(N)
    readers = {
        "matmul": lambda A: A @ x,
        "to_dense": lambda A: A.to_dense(),
        "ranks": lambda A: A.ranks,
        "tile_errors": lambda A: A.tile_errors,
        "truncated": lambda A: A.truncated(1e-6).to_dense(),
        "shared": lambda A: A.shared().to_dense(),
        "pickled": lambda A: pickle.loads(pickle.dumps(A)).to_dense(),
    }
    for name, read in readers.items():
        deferred = build(block, True)
        assert np.array_equal(read(deferred), read(eager)), name
        assert deferred.deferred_columns == [], name


def live_columns(monkeypatch, A):
    """Count, in the returned list's first entry, the most tile columns of `A` held at once
    during a factorization with ``overwrite_a`` (compressed and not yet released)."""
    state = {"live": 0, "most": 0}
    store, release = A._store_column, A._release_column

    def stored(j, factors):
        store(j, factors)
        state["live"] += 1
        state["most"] = max(state["most"], state["live"])

    def released(k):
        held = k < A.n_tiles - 1 and k not in A.deferred_columns
        out = release(k)
        state["live"] -= held
        return out

    monkeypatch.setattr(A, "_store_column", stored)
    monkeypatch.setattr(A, "_release_column", released)
    return state


@pytest.mark.parametrize("threads", ["1", "3"])
def test_a_factorization_holds_a_few_columns_of_a(block, monkeypatch, threads):
    monkeypatch.setenv("TLRCORE_NUM_THREADS", threads)
    A = build(block, True)
    state = live_columns(monkeypatch, A)
    L = tlr.cholesky(A, overwrite_a=True)
    n_tiles = N // TILE
    # column k, column k - 1 (released while k is factored) and those compressed ahead
    assert state["most"] <= left.COMPRESS_AHEAD + 2 < n_tiles - 1
    assert state["live"] == 0
    with pytest.raises(tlr.ConsumedMatrixError):
        A.to_dense()
    reference = tlr.cholesky(build(block, False))
    # the same tiles; the factor's arithmetic may differ in the layout of its row panels
    dense = problems.dense(block, N)
    assert abs(L.logdet() - reference.logdet()) <= 1e-10 * abs(reference.logdet())
    F = L.to_dense()
    assert np.linalg.norm(F @ F.T - dense) <= 10 * ACCURACY * np.linalg.norm(dense)


def test_deferred_factors_repeat_bit_for_bit(block, monkeypatch):
    factors = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TLRCORE_NUM_THREADS", threads)
        factors.append(tlr.cholesky(build(block, True), overwrite_a=True).to_dense())
    assert all(np.array_equal(factors[0], F) for F in factors[1:])


def test_compensation_reads_every_tile_error(block):
    eager = tlr.cholesky(build(block, False), safeguard="compensate")
    deferred = tlr.cholesky(build(block, True), safeguard="compensate")
    assert np.array_equal(eager.to_dense(), deferred.to_dense())


def test_a_bad_tile_in_a_deferred_column_names_it_when_read(monkeypatch):
    X = grid_sorted_sites(N)
    good = problems.generator(X, range_=0.1, nugget=1e-2)

    def poisoned(rows, cols):
        C = good(rows, cols)
        if cols[0] == 9 * TILE and rows[0] >= 12 * TILE:
            C[:] = np.nan
        return C

    A = tlr.TLRMatrix.from_generator(poisoned, N, TILE, ACCURACY, deferred=True)
    with pytest.raises(tlr.GeneratorError, match=r"tile \(1[234], 9\)"):
        tlr.cholesky(A, overwrite_a=True)
    assert A.deferred_columns == []  # consumed: nothing more is compressed


def test_deferred_refuses_the_packed_layout(block):
    with pytest.raises(ValueError, match="deferred=True.*method='batched'"):
        tlr.TLRMatrix.from_generator(block, N, TILE, method="batched", deferred=True)


def test_a_column_released_unread_is_never_compressed(block):
    A = build(block, True)
    calls = []
    store = A._store_column
    A._store_column = lambda j, factors: (calls.append(j), store(j, factors))
    A._release_column(3)
    A._compressed_column(3)
    assert 3 not in A.deferred_columns and calls == []


def test_the_bytes_of_a_deferred_matrix_are_estimated_from_its_first_column(block):
    eager, deferred = build(block, False), build(block, True)
    assert eager.estimated_nbytes() == eager.nbytes
    estimate = deferred.estimated_nbytes()
    assert deferred.deferred_columns == list(range(1, N // TILE - 1))  # the first one read
    assert deferred.nbytes < estimate
    # an estimate from one column: within a factor of two here (0.80 measured)
    assert 0.5 * eager.nbytes <= estimate <= 2 * eager.nbytes
