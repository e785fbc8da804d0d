"""Budgets of the GPU path per tile column, counted on the strict device stand-in.

On a GPU every array operation is a kernel launch with a fixed cost of Python, CuPy and the
driver, every read of a device value a synchronization that drains the queue, every new
array a trip to the memory pool. :class:`strict_device.StrictBackend` counts them on the CPU
(see its module docstring for what counts), so these budgets are checked without a GPU;
they are counts, not timings: the same on every run (they follow the ranks, so another
LAPACK could move them a little).

The matrices are those of ``benchmarks/launch_count.py``: 2-D exponential covariances
(range 0.1, nugget 1e-2) of uniform sites in KD-tree order, at accuracy 1e-8, tile 64, with
``n = 2048`` and ``4096`` (32 and 64 tile columns).
"""

import numpy as np
import pytest
from strict_device import StrictBackend

import tlrcore as tlr
from geostat.ordering import order_points
from tlrcore.packed.pool import WIDTHS

TILE = 64
SIZES = (2048, 4096)
ACCURACY = 1e-8
#: Width classes a rank of a 64-wide tile can fall in (the most the per-class terms add up).
CLASSES = int(np.sum(WIDTHS <= TILE))

#: Kernel launches in one tile column of the factorization (see
#: :func:`test_factorization_launches_per_column_do_not_grow`); measured at most 555.
LAUNCHES_PER_COLUMN = 1000
#: Growth of the mean per column from 32 to 64 tile columns: measured 1.07 (launches) and
#: 1.05 (allocations); a store and diagonal update by runs of one width class, whose number
#: grows with the tiles below, gives 1.19.
GROWTH = 1.15
#: New device arrays in one tile column of the factorization; measured at most 458.
ALLOCATIONS_PER_COLUMN = 1000
#: Host-to-device copies in one column: per ARA round its selections of tiles (one
#: transfer; the random blocks are drawn on the device), per concatenation of the update's
#: tiles and per truncation one transfer of index arrays and one of budgets and empty
#: columns; measured at most 12.
UPLOADS_PER_COLUMN = 40
#: Reads of the factorization per column besides one per ARA round: the diagonal tile's
#: Cholesky ``info``, the truncation's ranks and dropped values, and the stacked ``eigh``
#: of truncation groups wider than 32 that the CuPy back end solves on the host (the
#: eigensolves are not checked one by one: ``eigh(check=False)``); measured at most 3.
SYNCS_BESIDES_ROUNDS = 4
#: ARA rounds of one column at tile 64 and block 16; measured at most 4.
ROUNDS_PER_COLUMN = 6


class ColumnCounts(StrictBackend):
    """The strict back end, with the counts cut into tile columns: a column of the
    factorization starts with its diagonal tile's Cholesky (one call per column here: no
    safeguard), a column of the build with the generator call of its tiles; ARA rounds are
    the random blocks drawn (one per round)."""

    def __init__(self):
        super().__init__()
        self.rounds = 0
        self._marks = []

    def mark(self):
        self._marks.append((self.counts.snapshot(), self.rounds))

    def columns(self):
        """Per column ``(Counts, rounds)`` since the first mark; the marks cleared."""
        self.mark()
        marks, self._marks = self._marks, []
        return [
            (after - before, rounds_after - rounds_before)
            for (before, rounds_before), (after, rounds_after) in zip(
                marks[:-1], marks[1:], strict=True
            )
        ]

    def cholesky(self, a):
        self.mark()
        return super().cholesky(a)

    def normal(self, seed, shape):
        self.rounds += 1
        return super().normal(seed, shape)


def covariance(B, n, on_column=None):
    """The TLR matrix of this module's covariance of `n` sites on the back end `B`;
    ``on_column()`` is called as the build starts each tile column."""
    X = np.random.default_rng(0).uniform(size=(n, 2))
    X = X[order_points(X, "kdtree", TILE)]

    def block(rows, cols):
        if on_column and cols.size == TILE and rows.size and rows[0] == cols[-1] + 1:
            on_column()  # the tiles below a diagonal tile: a column of the build
        C = np.exp(-np.linalg.norm(X[rows][:, None] - X[cols][None], axis=2) / 0.1)
        C[rows[:, None] == cols[None, :]] += 1e-2
        return B.asarray(C)

    return tlr.TLRMatrix.from_generator(block, n, TILE, accuracy=ACCURACY, backend=B)


def measure(n):
    """``(build columns, factorization columns)`` of :meth:`ColumnCounts.columns`, and the
    factorization's reads by site."""
    B = ColumnCounts()
    A = covariance(B, n, B.mark)
    build = B.columns()
    B.reset()
    tlr.cholesky(A)
    factor = B.columns()
    assert len(factor) == n // TILE and len(build) == n // TILE - 1
    return build, factor, B.sites["syncs"]


@pytest.fixture(scope="module")
def columns():
    return {n: measure(n) for n in SIZES}


def per_column(columns, kind):
    return np.array([getattr(counts, kind) for counts, _ in columns])


def test_factorization_launches_per_column_do_not_grow(columns):
    """Kernel launches per column depend on the ARA rounds and the width classes in use, not
    on the column index or the number of row tiles.

    Column ``k`` of the factorization is, by :mod:`tlrcore.cholesky.packed`: per ARA round
    ``t`` (``R`` rounds) a fixed number of operations of the ARA itself (sketch, two
    projections, two SVQB passes) and of :meth:`~tlrcore.packed.update.ColumnUpdate.sample`
    (at most 11, :func:`test_a_sampling_round_costs_the_same_operations_whatever_the_tiles`);
    once, the concatenations of the update's tiles (a few per width class and per segment
    of ``A``'s column), the projection (3 per segment, 4 per width class), the truncation
    (a fixed number per group of equal basis width), the diagonal update (at most 8
    segments) and the store into the pool (a few per width class). The classes a rank can
    take are ``CLASSES = 12`` at tile 64, so with ``R <= 5`` the count is bounded whatever
    ``n``; it still rises between 32 and 64 columns as more classes come
    into use (the rare ranks of far tiles), by 6 %, and levels off."""
    means = {}
    for n, (_, factor, _) in columns.items():
        launches = per_column(factor, "launches")
        assert launches.max() <= LAUNCHES_PER_COLUMN, (n, launches.max())
        means[n] = launches[:-1].mean()  # the last column has no tiles below
    assert means[SIZES[1]] <= GROWTH * means[SIZES[0]], means


def test_factorization_allocations_and_uploads_per_column_are_bounded(columns):
    """New arrays follow the operations (nearly every operation makes one): the same bound and
    growth as the launches. Uploads are the index arrays of the concatenations (one transfer
    each), one random block per round and the ARA's selections of tiles."""
    means = {}
    for n, (_, factor, _) in columns.items():
        allocations = per_column(factor, "allocations")
        uploads = per_column(factor, "uploads")
        assert allocations.max() <= ALLOCATIONS_PER_COLUMN, (n, allocations.max())
        assert uploads.max() <= UPLOADS_PER_COLUMN, (n, uploads.max())
        means[n] = allocations[:-1].mean()
    assert means[SIZES[1]] <= GROWTH * means[SIZES[0]], means


def test_factorization_syncs_are_one_per_ara_round_plus_a_constant(columns):
    """One device-to-host read per ARA round (its estimates and kept counts together, which
    decide the next round's tiles on the host, and show a failed eigensolve as values that
    are not finite), plus :data:`SYNCS_BESIDES_ROUNDS` at most. A checked eigensolve would
    read its ``info`` (CuPy raises from it): three reads a round. The ARA's loop stops at a
    basis twice the tile wide (8 rounds of full blocks at tile 64); at this accuracy a
    column takes 4 rounds, so it reads about 7 times. The target of 2 per column would need
    the rounds' decisions made on the device."""
    for n, (_, factor, _) in columns.items():
        syncs = per_column(factor, "syncs")
        rounds = np.array([r for _, r in factor])
        assert rounds.max() <= ROUNDS_PER_COLUMN, (n, rounds.max())
        assert np.all(syncs <= rounds + SYNCS_BESIDES_ROUNDS), (n, (syncs - rounds).max())
        assert syncs.mean() <= 8, (n, syncs.mean())


def test_the_factorization_reads_only_where_it_decides(columns):
    """Every read of the factorization is one of the ARA's (a round's estimates and kept
    counts, the truncation's ranks, the stacked ``eigh`` the CuPy back end solves on the
    host) or the diagonal tile's Cholesky ``info``: a new read elsewhere (a hidden host
    round trip) is named here by its line."""
    for n, (_, factor, sites) in columns.items():
        places = {site.rsplit(":", 1)[0].replace("\\", "/") for site in sites}
        allowed = ("tlrcore/compress/ara_batched.py", "tlrcore/cholesky/packed.py")
        assert all(place.endswith(allowed) for place in places), sites
        cholesky = sum(count for site, count in sites.items() if "cholesky/packed.py" in site)
        assert cholesky == len(factor), (n, sites)  # one per diagonal tile


def test_build_budgets_per_column(columns):
    """The build of a column: one generator call (one read: its values are finite, in place of
    the factorization's Cholesky ``info``), the ARA (a read per round) and its
    truncation; the diagonal tiles are checked in one read for the whole matrix. Launches
    per column do not depend on the column (measured 261 and 267 on average at 32 and 64
    columns, at most 284)."""
    means = {}
    for n, (build, _, _) in columns.items():
        launches = per_column(build, "launches")
        syncs = per_column(build, "syncs")
        rounds = np.array([r for _, r in build])
        assert launches.max() <= 500 and per_column(build, "allocations").max() <= 500
        assert np.all(syncs <= rounds + SYNCS_BESIDES_ROUNDS), (n, (syncs - rounds).max())
        means[n] = launches.mean()
    assert means[SIZES[1]] <= GROWTH * means[SIZES[0]], means


@pytest.mark.parametrize("pattern", ["alternating", "random"])
def test_storing_a_factor_column_and_its_diagonal_update_do_not_follow_its_runs(pattern):
    """A factor column whose ranks change width class from tile to tile (one run per tile):
    storing it in the pool and subtracting its products from the diagonal tiles below cost
    the same operations for 16 tiles as for 64 (copies by width class, products by at most
    ``MAX_SEGMENTS`` segments), not one or more per run."""
    from tlrcore.cholesky.packed import _update_diagonal
    from tlrcore.packed.pool import PoolIndex, TilePool, store_column

    b, k = 32, 0
    counts = {}
    for p in (16, 64):
        B = StrictBackend()
        xp = B.xp
        rng = np.random.default_rng(3)
        if pattern == "alternating":
            ranks = np.where(np.arange(p) % 2, 3, 20)
        else:
            ranks = rng.integers(1, b, size=p)
        mask = xp.asarray(np.arange(b)[None, :] < ranks[:, None], dtype=xp.float64)[:, None, :]
        U = xp.asarray(rng.standard_normal((p, b, b))) * mask
        V = xp.asarray(rng.standard_normal((p, b, b))) * mask
        D = xp.zeros((p + 1, b, b))
        pool = TilePool(xp, b, 2**20, p)
        B.reset()
        column = store_column(pool, PoolIndex(p + 1), k, U, V, ranks)
        _update_diagonal(D, k, U, V, ranks, [0.0])
        counts[p] = B.counts.snapshot()
        if pattern == "alternating":
            assert len(column.U) == p  # a run per tile
        expected = np.zeros((p, b, b))
        for i in range(p):
            Ui, Vi = B.to_host(U[i, :, : ranks[i]]), B.to_host(V[i, :, : ranks[i]])
            expected[i] = -(Ui @ (Vi.T @ Vi) @ Ui.T)
        np.testing.assert_allclose(B.to_host(D[1:]), expected, rtol=1e-12, atol=1e-10)
    if pattern == "alternating":
        assert counts[64].launches == counts[16].launches, counts
    assert counts[64].launches <= 2 * CLASSES * 5 + 8 * 6, counts
    assert counts[64].allocations <= counts[64].launches + 2 * CLASSES, counts


def test_a_sampling_round_costs_the_same_operations_whatever_the_tiles(monkeypatch):
    """A sampling round of column ``k``, ``A(i, k) Omega - sum_j U_ij V_ij^T Z_j`` for every
    row ``i`` still sampling, is a fixed number of operations: ``Z_j`` (three), the products
    of ``V^T`` with ``Omega`` and ``Z`` in the columns' layout (three), the gather into the
    rows' layout, the product with the rows' concatenations and the pick of the rows still
    sampling (three), and, when those fall below three quarters, the rows' concatenations cut
    down (two); however many segments ``A``'s column has and width classes its tiles fall in.
    The projection, once per column, costs three per segment of ``A`` and four per width
    class (the pairs' small factors gathered, multiplied and placed). The concatenations,
    made once per column, are counted apart."""
    from tlrcore.packed import update

    B = StrictBackend()
    A = covariance(B, 2048)
    built, rounds, projections = [0], [], []
    build, sample, project = (
        update._Rectangle.__init__,
        update.ColumnUpdate.sample,
        update.ColumnUpdate.project,
    )

    def counted_build(self, *args):
        before = B.counts.launches
        build(self, *args)
        built[0] += B.counts.launches - before

    def counted(method, record):
        def call(self, *args):
            segments = len(self.A.U)
            built[0], before = 0, B.counts.launches
            result = method(self, *args)
            classes = len(self._everything.pairs)
            record.append((B.counts.launches - before - built[0], segments, classes))
            return result

        return call

    monkeypatch.setattr(update._Rectangle, "__init__", counted_build)
    monkeypatch.setattr(update.ColumnUpdate, "sample", counted(sample, rounds))
    monkeypatch.setattr(update.ColumnUpdate, "project", counted(project, projections))
    tlr.cholesky(A)
    rounds, projections = np.array(rounds), np.array(projections)
    assert rounds[:, 1].max() >= 4 and rounds[:, 2].max() >= 6  # many segments and classes
    assert rounds[:, 0].max() <= 11, rounds
    assert np.all(projections[:, 0] <= 3 * projections[:, 1] + 4 * projections[:, 2] + 8)
