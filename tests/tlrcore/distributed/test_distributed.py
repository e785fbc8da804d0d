"""tlrcore.distributed: the TLR matrix and its Cholesky factor on a 2-worker Dask
LocalCluster, against the in-process ones (and, through them, dense SciPy); a worker
killed mid-factorization; the error without the ``dask`` extra.

Equality: the workers run the in-process steps on the same tiles with the same seeds, so
the tiles of ``A`` (the same compression of the same blocks) are compared bit for bit.
The factor's triangular solves are grouped differently (one tile per task, against
stacked tile columns in process), and so is the update of a diagonal tile (two parts,
against one), which rounds differently in the last place, so the factor is compared at
the distributed path's contract, 1e-10 relative on the log-likelihood terms.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from problems import covariance, duplicated_sites
from scipy.linalg import solve_triangular

import tlrcore
from tlrcore.errors import ConsumedMatrixError, GeneratorError, NotPositiveDefiniteError

distributed = pytest.importorskip("distributed")
td = pytest.importorskip("tlrcore.distributed")

N, TILE, ACCURACY = 2000, 256, 1e-8
#: The promised agreement of distributed and in-process log-likelihood terms.
RTOL = 1e-10


class Exponential:
    """``exp(-|x - y| / 0.1) + nugget [x == y]`` on fixed sites: a picklable generator."""

    def __init__(self, sites, nugget=1e-2):
        self.sites, self.nugget = sites, nugget

    def __call__(self, rows, cols):
        block = covariance(self.sites[rows], self.sites[cols], range_=0.1)
        block[rows[:, None] == cols[None, :]] += self.nugget
        return block


class Gaussian:
    """``exp(-(|x - y| / 0.3)^2)`` without nugget: numerically singular, its TLR Cholesky at
    accuracy 1e-4 fails at tile 0 (the hard Gaussian of
    tests/tlrcore/cholesky/test_safeguards.py)."""

    def __init__(self, sites):
        self.sites = sites

    def __call__(self, rows, cols):
        return covariance(self.sites[rows], self.sites[cols], kernel="gaussian", range_=0.3)


class WithEntries(Exponential):
    """The generator with an elementwise ``entries(i, j)``, which in-process ACA reads its
    columns through (its last bits differ from those of ``cdist``)."""

    def entries(self, i, j):
        d = np.sqrt(((self.sites[i] - self.sites[j]) ** 2).sum(axis=-1))
        return np.exp(-d / 0.1) + self.nugget * (i == j)


class NaNAt(Exponential):
    """The generator with NaN in every block that touches index `where`."""

    def __init__(self, sites, where):
        super().__init__(sites)
        self.where = where

    def __call__(self, rows, cols):
        block = super().__call__(rows, cols)
        if self.where in rows:
            block[:] = np.nan
        return block


def sites(n, seed=0):
    """Uniform sites ordered by strips, so that tiles are compact."""
    x = np.random.default_rng(seed).random((n, 2))
    return x[np.lexsort((x[:, 1], np.floor(x[:, 0] * 8)))]


async def exit_now():
    """Kill the worker process at once (a coroutine, so that ``client.run`` need not wait)."""
    os._exit(1)


def loglik_terms(L, z):
    """``(log det, ||L^{-1} z||^2)``."""
    y = L.solve_lower(z)
    return L.logdet(), float(y @ y)


@pytest.fixture(scope="module")
def block():
    return Exponential(sites(N))


@pytest.fixture(scope="module")
def local(block):
    """The in-process matrix and factor."""
    A = tlrcore.TLRMatrix.from_generator(block, N, TILE, accuracy=ACCURACY)
    return A, tlrcore.cholesky(A)


@pytest.fixture(scope="module")
def remote(client, block):
    A = td.DistributedTLRMatrix.from_generator(client, block, N, TILE, accuracy=ACCURACY)
    return A, td.cholesky(A)


def test_tiles_equal_the_in_process_ones(remote, local):
    A, A0 = remote[0].gather(), local[0]
    assert A.tolerance == A0.tolerance
    for D, D0 in zip(A.diagonal, A0.diagonal, strict=True):
        np.testing.assert_array_equal(D, D0)
    assert A.U.keys() == A0.U.keys()
    for pair in A0.U:
        np.testing.assert_array_equal(A.U[pair], A0.U[pair])
        np.testing.assert_array_equal(A.V[pair], A0.V[pair])
    assert remote[0].frobenius_norm() == pytest.approx(A0.frobenius_norm(), rel=1e-14)


def _task_heap_state():
    from tlrcore.concurrency import heap

    return heap._task_heap


def test_workers_keep_task_memory_in_their_heap(remote, client):
    """Every worker that ran tiles of the factorization set its heap for task after task
    (the state is per process: the client's is not touched)."""
    import platform

    from tlrcore.concurrency import heap

    client_state = heap._task_heap
    states = client.run(_task_heap_state)
    assert states and set(states.values()) == {platform.libc_ver()[0] == "glibc"}
    assert heap._task_heap is client_state


def test_column_tasks_of_few_tiles_give_the_in_process_tiles(client, monkeypatch):
    """With two tiles per compression task, a 14-tile column splits into many tasks on each
    worker (its critical tile alone): every tile, rank and recorded error is the
    in-process one, bit for bit."""
    from tlrcore.distributed import matrix

    monkeypatch.setattr(matrix, "COLUMN_TILES", 2)
    block, n = Exponential(sites(1400, seed=6)), 1400
    A = td.DistributedTLRMatrix.from_generator(client, block, n, 100).gather()
    A0 = tlrcore.TLRMatrix.from_generator(block, n, 100)
    assert A.U.keys() == A0.U.keys()
    for pair in A0.U:
        np.testing.assert_array_equal(A.U[pair], A0.U[pair])
        np.testing.assert_array_equal(A.V[pair], A0.V[pair])
    np.testing.assert_array_equal(A.tile_errors, A0.tile_errors)


def test_a_generator_with_entries_gives_the_in_process_tiles(client):
    block = WithEntries(sites(1000, seed=3))
    A, A0 = (
        td.DistributedTLRMatrix.from_generator(client, block, 1000, 200),
        tlrcore.TLRMatrix.from_generator(block, 1000, 200),
    )
    A = A.gather()
    for pair in A0.U:
        np.testing.assert_array_equal(A.U[pair], A0.U[pair])
        np.testing.assert_array_equal(A.V[pair], A0.V[pair])


def test_factor_matches_the_in_process_factor(remote, local):
    L, L0 = remote[1].gather(), local[1]
    assert np.array_equal(L.ranks, L0.ranks) or np.abs(L.ranks - L0.ranks).max() <= 1
    # Both are factors of the same A at the same tile tolerance: they differ by at most
    # a few tile tolerances per tile (rank choices at the threshold), and by nothing
    # when the rounding agrees.
    dense, dense0 = L.to_dense(), L0.to_dense()
    assert np.linalg.norm(dense - dense0) <= 4 * L0.tolerance * L0.n_tiles
    assert remote[1].logdet() == pytest.approx(L0.logdet(), rel=RTOL)


def test_logdet_and_solves_against_dense(remote, local, rng):
    L, dense = remote[1], local[1].to_dense()
    b = rng.standard_normal((N, 3))
    # Tiled against dense substitution with the same L: rounding ~ cond(L) eps, with
    # cond(L) = sqrt(cond(A)) < 1e3 here (nugget 1e-2, ||A||_2 < 1e3); 1e-9 leaves margin.
    np.testing.assert_allclose(
        L.solve_lower(b), solve_triangular(dense, b, lower=True), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(
        L.solve_upper(b[:, 0]),
        solve_triangular(dense, b[:, 0], lower=True, trans="T"),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(L.solve(b), local[1].solve(b), rtol=1e-9, atol=1e-9)
    assert L.logdet() == pytest.approx(2 * np.log(np.diag(dense)).sum(), rel=1e-12)
    z = b[:, 0]
    for value, reference in zip(loglik_terms(L, z), loglik_terms(local[1], z), strict=True):
        assert value == pytest.approx(reference, rel=RTOL)


def test_product_ranks_and_bytes_equal_those_of_the_gathered_factor(remote, rng):
    """``L z`` sums each tile row in the order of ``TLRCholesky.multiply_lower`` on the
    same tiles; BLAS may round differently for arrays at other addresses (a tile sent
    between processes), so the products agree to rounding: each entry sums ``n`` terms of
    size ``|L_ij z_j|``, ``||L||_2 < 32`` and ``|z| < 6`` here, so ``n eps ||L|| |z|`` <
    1e-10 bounds both the comparison with the gathered factor and with the dense product."""
    L = remote[1]
    gathered = L.gather()
    z = rng.standard_normal((N, 2))
    product = L.multiply_lower(z)
    np.testing.assert_allclose(product, gathered.multiply_lower(z), rtol=0, atol=1e-10)
    np.testing.assert_allclose(product, gathered.to_dense() @ z, rtol=0, atol=1e-10)
    np.testing.assert_allclose(L.multiply_lower(z[:, 0]), product[:, 0], rtol=0, atol=1e-10)
    assert np.array_equal(L.ranks, gathered.ranks)
    # the workers hold the diagonal tiles as triangles too
    assert L.nbytes == gathered.nbytes
    triangles = sum(8 * (b * (b + 1) // 2 + b) for b in np.diff(gathered.offsets))
    assert gathered.diagonal.nbytes == triangles
    with pytest.raises(ValueError, match="z must have shape"):
        L.multiply_lower(np.ones(5))


def test_solve_is_the_two_substitutions_in_one_graph(remote, rng):
    """The same tasks as ``solve_upper(solve_lower(b))``, without the round trip of the
    intermediate: equal to rounding (cond(L) eps < 1e-12, as in the test above)."""
    L, b = remote[1], rng.standard_normal((N, 2))
    np.testing.assert_allclose(L.solve(b), L.solve_upper(L.solve_lower(b)), rtol=1e-10, atol=1e-10)


def test_progress_counts_the_factored_columns(client, block, monkeypatch, capsys):
    """Inside ``tlrcore.progress()`` waiting for the factor shows a counter of its tile
    columns (shown at once here instead of after two seconds)."""
    import tlrcore.concurrency.threads

    monkeypatch.setattr(tlrcore.concurrency.threads, "PROGRESS_DELAY", 0.0)
    with tlrcore.progress():
        td.cholesky(
            td.DistributedTLRMatrix.from_generator(client, block, 600, 100), overwrite_a=True
        )
    assert "TLR Cholesky on the cluster" in capsys.readouterr().err


def test_accuracy_argument_matches_in_process(client, block, local):
    A = td.DistributedTLRMatrix.from_generator(client, block, N, TILE, accuracy=ACCURACY)
    L = td.cholesky(A, accuracy=1e-6, random_state=3, overwrite_a=True)
    L0 = tlrcore.cholesky(local[0], accuracy=1e-6, random_state=3)
    assert L.tolerance == pytest.approx(L0.tolerance, rel=1e-14)
    assert L.logdet() == pytest.approx(L0.logdet(), rel=RTOL)
    with pytest.raises(ConsumedMatrixError, match="overwrite_a"):
        td.cholesky(A)


def test_shift_matches_in_process(client, block, local):
    A = td.DistributedTLRMatrix.from_generator(
        client, block, N, TILE, accuracy=ACCURACY, wait=False
    )
    L = td.cholesky(A, shift=0.25, overwrite_a=True)
    L0 = tlrcore.cholesky(local[0], shift=0.25)
    assert L.logdet() == pytest.approx(L0.logdet(), rel=RTOL)
    assert L.shift == 0.25 and L.perturbation == pytest.approx(0.25 * np.sqrt(N), rel=1e-15)
    with pytest.raises(ValueError, match="shift"):
        td.cholesky(td.DistributedTLRMatrix.from_generator(client, block, 600, 300), shift=-1.0)


@pytest.mark.parametrize(
    "safeguard, wait",
    [("compensate", True), ("compensate-block", False), ("compensate+schur+modified", True)],
)
def test_compensation_matches_in_process(client, safeguard, wait):
    """The always-on compensation on a matrix the plain factorization fails on: the same
    factorizer in the diagonal tasks, with lifts from the tile errors the workers
    recorded, gives the in-process factor and tally.

    Tolerance: the two factorizations run the same operations on tiles that are equal bit
    for bit, except that the cluster solves ``L(i, k)`` one tile at a time (in process:
    stacked tile columns), so ``L`` may differ by rounding, ``O(eps cond(L(k, k)))``
    relative (measured here: 6e-15, 1e-14 absolute, against entries up to 1). The
    perturbation sums the tails' eigenvalues squared (``< tau``, the eigenvalues of ``W^T
    W`` then move by ``O(eps ||W||^2)``, ``||W||^2 <= ||A(k, k)||_2 <= b``: ``eps b /
    tau`` ~ 1e-11 relative at tau ~ 3e-3) and the lifts, equal bit for bit (the same sum
    of the same recorded errors); the log-determinant moves by ``O(eps cond)`` relative.
    Measured: perturbation equal or 1 ulp apart, log-determinants 4e-16 relative; held
    to the module's 1e-10. The decisions at thresholds (tail counts, lifts) agree as
    long as no eigenvalue sits within rounding of its threshold, as here."""
    n = 512
    block = Gaussian(sites(n, seed=4))
    A0 = tlrcore.TLRMatrix.from_generator(block, n, 128, accuracy=1e-4)
    A = td.DistributedTLRMatrix.from_generator(client, block, n, 128, accuracy=1e-4, wait=wait)
    if wait:
        np.testing.assert_array_equal(A.gather().tile_errors, A0.tile_errors)
        with pytest.raises(NotPositiveDefiniteError):
            td.cholesky(A)
    L, L0 = (
        td.cholesky(A, safeguard=safeguard, overwrite_a=not wait),
        tlrcore.cholesky(A0, safeguard=safeguard),
    )
    assert L.shift == 0.0 and L.compensated_tiles == L0.compensated_tiles == tuple(range(4))
    assert L.lifted_tiles == L0.lifted_tiles and len(L.lifted_tiles) > 0 and L.modified_tiles == ()
    assert L.perturbation == pytest.approx(L0.perturbation, rel=RTOL) and L.perturbation > 0
    for part, value in L0.perturbation_parts.items():
        assert L.perturbation_parts[part] == pytest.approx(value, rel=RTOL, abs=0.0)
    assert L.logdet() == pytest.approx(L0.logdet(), rel=RTOL)
    np.testing.assert_allclose(L.to_dense(), L0.to_dense(), rtol=0, atol=1e-10)


class DuplicatedMatern:
    """Matérn 1.5 (range 0.3) on every site twice, 1e-12 apart, in the same tile: the
    diagonal tiles are singular and modified Cholesky rescues them (the
    ``"matern15-duplicated"`` matrix of tests/tlrcore/cholesky/test_safeguards.py)."""

    def __init__(self, n, seed=0):
        self.sites = duplicated_sites(n, seed, duplicate="within")

    def __call__(self, rows, cols):
        X, Y = self.sites[rows], self.sites[cols]
        return covariance(X, Y, kernel="matern15", range_=0.3, scaled=True)


@pytest.mark.parametrize("safeguard", ["modified", "schur+modified"])
def test_modified_tiles_match_in_process(client, safeguard):
    """``"modified"`` (and ``"schur"`` before it) on its own, where it changes tiles: the
    cluster modifies the tiles the in-process factorization modifies, by the same
    amount (tolerances of :func:`test_compensation_matches_in_process`)."""
    n = 512
    block = DuplicatedMatern(n)
    A0 = tlrcore.TLRMatrix.from_generator(block, n, 128, accuracy=1e-4)
    A = td.DistributedTLRMatrix.from_generator(client, block, n, 128, accuracy=1e-4)
    L, L0 = (
        td.cholesky(A, safeguard=safeguard, overwrite_a=True),
        tlrcore.cholesky(A0, safeguard=safeguard),
    )
    assert len(L0.modified_tiles) + len(L0.compensated_tiles) > 0
    assert (L.modified_tiles, L.compensated_tiles) == (L0.modified_tiles, L0.compensated_tiles)
    assert L.perturbation == pytest.approx(L0.perturbation, rel=RTOL) and L.perturbation > 0
    assert L.logdet() == pytest.approx(L0.logdet(), rel=RTOL)


def test_compensation_of_positive_definite_input_lifts_nothing(remote, local):
    """With a nugget far above the tolerance no tile is lifted: only the update tails are
    compensated, as in process (tolerances as in the test above)."""
    L, L0 = (
        td.cholesky(remote[0], safeguard="compensate"),
        tlrcore.cholesky(local[0], safeguard="compensate"),
    )
    assert L.lifted_tiles == L0.lifted_tiles == () and L.perturbation_parts["lift"] == 0.0
    assert L.compensated_tiles == tuple(range(remote[0].n_tiles))
    assert 0 < L.perturbation == pytest.approx(L0.perturbation, rel=RTOL)
    assert L.logdet() == pytest.approx(L0.logdet(), rel=RTOL)


def test_safeguards_other_than_tile_local_ones_are_refused_naming_what_works(remote):
    for safeguard in ("shift", "compensate+pivot"):
        with pytest.raises(
            ValueError, match="caller's loop.*'compensate', 'compensate-block', 'schur'"
        ):
            td.cholesky(remote[0], safeguard=safeguard)
    with pytest.raises(ValueError, match="unknown safeguard"):
        td.cholesky(remote[0], safeguard="lift")


def test_errors_come_back_naming_the_tile(client, block):
    with pytest.raises(GeneratorError, match=r"tile \(3, "):
        td.DistributedTLRMatrix.from_generator(client, NaNAt(block.sites, 3 * TILE + 5), N, TILE)
    indefinite = Exponential(block.sites, nugget=-0.5)
    A = td.DistributedTLRMatrix.from_generator(client, indefinite, N, TILE)
    with pytest.raises(NotPositiveDefiniteError) as info:
        td.cholesky(A)
    assert info.value.tile is not None


class PromisingAsymmetric(Exponential):
    """The generator with the promise ``symmetric_blocks = True`` and ``1e-3`` added to the
    strict lower triangle of diagonal tile (3, 3)."""

    symmetric_blocks = True

    def __call__(self, rows, cols):
        block = super().__call__(rows, cols)
        inside = (
            (rows[:, None] // TILE == 3)
            & (cols[None, :] // TILE == 3)
            & (rows[:, None] > cols[None, :])
        )
        return block + 1e-3 * inside


def test_a_promise_of_symmetric_blocks_skips_the_diagonal_scan_but_not_the_sample(client, block):
    """As in-process (tests/tlrcore/test_matrix.py): the sample names the entries."""
    with pytest.raises(
        GeneratorError, match=r"tile \(3, 3\)\) is not symmetric: A\[\d+, \d+\] differs"
    ):
        td.DistributedTLRMatrix.from_generator(client, PromisingAsymmetric(block.sites), N, TILE)


class NaNInCorner(Exponential):
    """The generator with NaN at entry ``(n - 1, 0)`` only, in the off-diagonal tile
    ``(n_tiles - 1, 0)`` (which the checks made before the off-diagonal tiles are built
    do not sample)."""

    def __call__(self, rows, cols):
        block = super().__call__(rows, cols)
        block[(rows[:, None] == len(self.sites) - 1) & (cols[None, :] == 0)] = np.nan
        return block


def test_tiles_built_on_demand_give_the_same_factor(client, block, local):
    A = td.DistributedTLRMatrix.from_generator(
        client, block, N, TILE, accuracy=ACCURACY, wait=False
    )
    # the diagonal tiles, dropped after their norms were taken, are generated again
    for D, D0 in zip(client.gather(A.diagonal), local[0].diagonal, strict=True):
        np.testing.assert_array_equal(D, D0)
    A = td.DistributedTLRMatrix.from_generator(
        client, block, N, TILE, accuracy=ACCURACY, wait=False
    )
    L = td.cholesky(A, overwrite_a=True)
    assert L.logdet() == pytest.approx(local[1].logdet(), rel=RTOL)
    for overwrite_a in (False, True):
        lazy = td.DistributedTLRMatrix.from_generator(
            client, NaNInCorner(block.sites), N, TILE, wait=False
        )
        with pytest.raises(GeneratorError, match=rf"tile \({lazy.n_tiles - 1}, 0\)"):
            td.cholesky(lazy, overwrite_a=overwrite_a)


def test_tiles_built_on_demand_are_built_by_their_first_reader(client, block, local):
    """A matrix built with ``wait=False`` that is read before it is factored submits its
    compression then: the tiles are the in-process ones bit for bit, and its factorization
    with ``overwrite_a=True`` reads them (nothing left for it to build)."""
    A = td.DistributedTLRMatrix.from_generator(
        client, block, N, TILE, accuracy=ACCURACY, wait=False
    )
    gathered, A0 = A.gather(), local[0]
    for pair in A0.U:
        np.testing.assert_array_equal(gathered.U[pair], A0.U[pair])
        np.testing.assert_array_equal(gathered.V[pair], A0.V[pair])
    assert A.take_build() is None
    L = td.cholesky(A, overwrite_a=True)
    assert L.logdet() == pytest.approx(local[1].logdet(), rel=RTOL)


def test_bad_arguments(client, block, local):
    with pytest.raises(TypeError, match="client"):
        td.DistributedTLRMatrix.from_generator(object(), block, N, TILE)
    with pytest.raises(ValueError, match="method"):
        td.DistributedTLRMatrix.from_generator(client, block, N, TILE, method="batched")
    with pytest.raises(TypeError, match="DistributedTLRMatrix"):
        td.cholesky(local[0])
    L = td.cholesky(td.DistributedTLRMatrix.from_generator(client, block, 600, 300))
    with pytest.raises(ValueError, match="b must have shape"):
        L.solve_lower(np.ones(5))


def test_import_needs_the_dask_extra_and_tlrcore_does_not_import_dask():
    code = (
        "import sys; import tlrcore, geostat; "
        "assert 'dask' not in sys.modules and 'distributed' not in sys.modules; "
        "sys.modules['distributed'] = None\n"
        "try:\n    import tlrcore.distributed\nexcept ImportError as exc:\n    print(exc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install ".[dask]"' in out.stdout


@pytest.mark.slow  # a worker is restarted
def test_worker_killed_mid_factorization_gives_the_same_value(client):
    """A worker dies while the factorization runs: the tiles it held are recomputed from
    the graph (generator + parameters), and the log-likelihood terms agree with those of
    an undisturbed run on the same cluster. They are the same tasks on the same data and
    usually agree bit for bit, but in some runs the recomputed factor differed in the
    last bits (cause not identified), so the test holds them to the distributed path's
    contract, 1e-10 relative."""
    n, tile = 3000, 200
    block = Exponential(sites(n, seed=1))
    z = np.random.default_rng(2).standard_normal(n)
    quiet = loglik_terms(
        td.cholesky(td.DistributedTLRMatrix.from_generator(client, block, n, tile)), z
    )

    A = td.DistributedTLRMatrix.from_generator(client, block, n, tile)
    L = td.cholesky(A, overwrite_a=True, wait=False)
    distributed.wait(L.diagonal[2])
    pending = sum(not row.done() for row in L.rows[1:])
    client.run(exit_now, workers=[A.placement.owner(n // tile - 1)], wait=False)
    assert pending > 0
    assert loglik_terms(L.wait(), z) == pytest.approx(quiet, rel=RTOL)


class _Scheduler:
    """A client stub whose scheduler lists no worker until `wait_for_workers` brings one
    (`comes_back`) or times out."""

    def __init__(self, comes_back):
        self.comes_back, self.workers, self.waits = comes_back, {}, []

    def scheduler_info(self, n_workers):
        return {"workers": dict(self.workers)}

    def wait_for_workers(self, n_workers, timeout):
        self.waits.append(timeout)
        if not self.comes_back:
            raise TimeoutError
        self.workers = {"tcp://127.0.0.1:2": {}, "tcp://127.0.0.1:1": {}}


@pytest.mark.parametrize("comes_back", [True, False])
def test_placement_waits_for_a_worker_that_is_away(comes_back, monkeypatch):
    from tlrcore.distributed import _graph

    monkeypatch.setattr(_graph, "WORKER_WAIT", 0.5)
    client = _Scheduler(comes_back)
    if comes_back:
        assert _graph.RowPlacement.of(client).addresses == [
            "tcp://127.0.0.1:1",
            "tcp://127.0.0.1:2",
        ]
    else:
        with pytest.raises(ValueError, match="no workers"):
            _graph.RowPlacement.of(client)
    assert client.waits == [0.5]


def test_a_diagonal_tile_updated_in_two_parts_gives_the_factor_of_the_whole_update(rng):
    """The cluster subtracts the update of diagonal tile ``k`` by all columns but the last
    beforehand (:func:`prepared_diagonal`) and the last one where it factors the tile: the
    factor of the whole update, to rounding. The parts are summed in another order, which
    moves the updated tile by ``O(eps ||A(k, k)||)`` and its factor by ``O(eps cond)``
    relative (the tile here has condition number below 10): held to 1e-12. The prepared
    tile's input is left as it was."""
    from tlrcore.distributed._tasks import factor_diagonal, prepared_diagonal

    b, k = 96, 3
    B = rng.standard_normal((b, b))
    Akk = B @ B.T / b + 2.0 * np.eye(b)
    U = [rng.standard_normal((b, 5)) * 0.1 for _ in range(k)]
    V = [rng.standard_normal((40, 5)) * 0.1 for _ in range(k)]
    options = [1e-8, 0.0, False, False, None]
    whole = factor_diagonal(Akk, (U, V), k, options)[0][0]
    kept = Akk.copy()
    prepared = prepared_diagonal(Akk, (U[:-1], V[:-1]))
    np.testing.assert_array_equal(Akk, kept)
    parts = factor_diagonal(prepared, (U, V), k, options, None, k - 1)[0][0]
    np.testing.assert_allclose(parts, whole, rtol=0, atol=1e-12 * np.abs(whole).max())
    dense = Akk - sum(u @ v.T @ v @ u.T for u, v in zip(U, V, strict=True))
    np.testing.assert_allclose(parts @ parts.T, dense, rtol=0, atol=1e-12 * np.abs(dense).max())


@pytest.mark.parametrize("safeguard", [None, "schur"])
def test_the_factor_graph_prepares_diagonal_tiles_and_reads_tiles_from_their_column_tasks(
    client, monkeypatch, safeguard
):
    """Without a safeguard that reads a diagonal tile's whole update, every diagonal tile
    from the third on is prepared by a task of its own (off the critical chain); with one,
    none is. Either way each tile of ``A`` is read from the result of the task that
    compressed its column (no task per tile), those tasks are in the factorization's graph,
    a few columns ahead of it, and the factor is the in-process one."""
    from operator import getitem

    from tlrcore.distributed import factorize
    from tlrcore.distributed._tasks import after

    graphs = []
    submit = factorize.submit

    def recording(client, tasks, *args, **kwargs):
        graphs.append(tasks)
        return submit(client, tasks, *args, **kwargs)

    monkeypatch.setattr(factorize, "submit", recording)
    block, n, tile = Exponential(sites(900, seed=7)), 900, 100
    A = td.DistributedTLRMatrix.from_generator(client, block, n, tile, wait=False)
    L = td.cholesky(A, safeguard=safeguard, overwrite_a=True)
    (tasks,) = graphs
    prepared = [key for key in tasks if key[0].startswith("tlr-diagonal-prepared-")]
    assert len(prepared) == (0 if safeguard else A.n_tiles - 2)
    reads = [task[2] for key, task in tasks.items() if key[0].startswith("tlr-row-")]
    assert len(reads) == A.n_tiles * (A.n_tiles - 1) // 2
    assert all(isinstance(read, tuple) and read[0] is getitem for read in reads)
    # the tiles of A are compressed in the same graph, column j after diagonal tile j - 2
    compressions = {key: task for key, task in tasks.items() if "column-tiles" in key[0]}
    assert {j for _, _, j in compressions} == set(range(A.n_tiles - 1))
    for (_, _, j), task in compressions.items():
        if j >= factorize.BUILD_AHEAD:
            assert task[0] is after and task[1][0].startswith("tlr-log-diagonal-")
            assert task[1][1] == j - factorize.BUILD_AHEAD
    L0 = tlrcore.cholesky(tlrcore.TLRMatrix.from_generator(block, n, tile), safeguard=safeguard)
    assert L.logdet() == pytest.approx(L0.logdet(), rel=RTOL)


def test_a_tile_read_from_its_column_task_is_the_tile(remote, client):
    A = remote[0]
    func, future, position = A.tile_task(5, 2)
    got, want = client.gather([client.submit(func, future, position), A.tiles[5, 2]])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
