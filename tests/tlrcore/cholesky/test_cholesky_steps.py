"""Steps of the left-looking TLR Cholesky (sampled tile update, column samples, column
solve, heap trim, the tile pool and chain thread) against dense references."""

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.linalg

from tlrcore.cholesky._steps import (
    SOLVE_CHUNK,
    BlockDiagonal,
    ColumnGrams,
    ColumnSamples,
    RowPanels,
    cross_grams,
    gram_root,
    sampled_update,
    solve_column,
    stack,
    thin_product,
)
from tlrcore.concurrency import heap as _malloc
from tlrcore.concurrency.threads import serial_thread, submit, tile_pool


def low_rank(rng, rows, rank, decay):
    """``rows x rank`` factor whose columns decay geometrically (like a kernel tile's)."""
    return rng.normal(size=(rows, rank)) * decay ** np.arange(rank)


def tile_update(seed, k=3, m=96, p=80, ranks=(6, 9, 4)):
    """Factors of ``A(i, k)`` and of ``L(i, :k)``, ``L(k, :k)``, and the dense update."""
    rng = np.random.default_rng(seed)
    Ua, Va = low_rank(rng, m, 12, 0.5), np.linalg.qr(rng.normal(size=(p, 12)))[0]
    Ui = [low_rank(rng, m, r, 0.3) for r in ranks[:k]]
    Vi = [rng.normal(size=(40, r)) for r in ranks[:k]]
    Uk = [low_rank(rng, p, r + 1, 0.3) for r in ranks[:k]]
    Vk = [rng.normal(size=(40, r + 1)) for r in ranks[:k]]
    dense = Ua @ Va.T - sum(U @ V.T @ W @ X.T for U, V, W, X in zip(Ui, Vi, Vk, Uk, strict=True))
    return (Ua, Va, np.hstack(Ui), np.hstack(Uk), cross_grams(Vi, Vk)), dense


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("relative", [1e-4, 1e-9])
def test_sampled_update_meets_the_tile_tolerance(seed, relative):
    args, dense = tile_update(seed)
    tolerance = relative * np.linalg.norm(dense)
    U, V = sampled_update(*args, tolerance, 16, seed)
    # ARA meets the tolerance with high probability (failure ~1e-3 for a residual in a
    # single direction, tlrcore.compress.ara); for these fixed seeds it holds outright.
    assert np.linalg.norm(U @ V.T - dense) <= tolerance
    # the optimal rank for the tolerance, or at most a few above (ARA's SVD truncation)
    s = np.linalg.svd(dense, compute_uv=False)
    optimal = int(np.count_nonzero(np.sqrt(np.cumsum(s[::-1] ** 2))[::-1] > tolerance))
    assert optimal <= U.shape[1] <= optimal + 2


def test_sampled_update_with_nothing_to_subtract_compresses_the_tile():
    (Ua, Va, *_), _ = tile_update(3)
    tolerance = 1e-10 * np.linalg.norm(Ua)
    U, V = sampled_update(
        Ua, Va, np.zeros((Ua.shape[0], 0)), np.zeros((Va.shape[0], 0)), [], tolerance, 16, 0
    )
    assert np.linalg.norm(U @ V.T - Ua @ Va.T) <= tolerance


def test_sampled_update_is_bit_identical_for_equal_inputs():
    args, _ = tile_update(4)
    first = sampled_update(*args, 1e-8, 16, 7)
    second = sampled_update(*args, 1e-8, 16, 7)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def ara_draw(draws, j, width):
    """Draw `j` of `width` columns as ARA asks for it: a first draw of two blocks or more at
    once (:meth:`~tlrcore.compress.ara.GaussianBlocks.first`), then one at a time."""
    if j == 0 and width >= 32 and width % 16 == 0:
        return draws.first(64, width // 16, 16)
    return draws.next(64, width)


def test_column_samples_draw_each_shared_block_once_as_the_seed_would():
    rng = np.random.default_rng(5)
    Uk = rng.normal(size=(64, 20))
    samples = ColumnSamples(Uk, 16)
    assert [samples.width(j) for j in range(3)] == [
        32,
        16,
        16,
    ]  # ARA's first product samples two blocks
    for widths in ([32, 16, 5, 16], [32, 16, 16], [7, 16], [16, 16], [32, 16, 5, 16]):
        draws, reference = samples.draws(3), np.random.default_rng(3)
        for j, width in enumerate(widths):
            X = ara_draw(draws, j, width)
            np.testing.assert_array_equal(X, reference.standard_normal((64, width)))
            product = samples.project(X)
            np.testing.assert_array_equal(product, Uk.T @ X)
            if widths[: j + 1] == [samples.width(i) for i in range(j + 1)]:
                assert X is samples.block(3, j)[0] and product is samples.block(3, j)[1]  # shared
                assert not X.flags.writeable
            else:
                assert X.flags.writeable  # the tile's own draw
    assert len(samples._streams[3]) == 3  # three full blocks drawn for the column, once each
    other = rng.normal(size=(64, 16))  # not a shared block: computed directly
    np.testing.assert_array_equal(samples.project(other), Uk.T @ other)


@pytest.mark.parametrize("widths", [[80, 16], [48, 16, 5], [64]])
def test_a_first_draw_of_more_blocks_is_the_columns_first_blocks_side_by_side(widths):
    """ARA's rank hint draws several blocks at once: the column's first blocks (two, one,
    one, ...) side by side, whose product is theirs, and the draws go on after them."""
    rng = np.random.default_rng(6)
    Uk = rng.normal(size=(64, 20))
    samples = ColumnSamples(Uk, 16)
    draws, blocks = samples.draws(3), widths[0] // 16
    X = draws.first(64, blocks, 16)
    parts = [samples.block(3, j) for j in range(blocks - 1)]
    np.testing.assert_array_equal(X, np.hstack([part[0] for part in parts]))
    assert samples.project(X) is samples.project(
        samples.first(3, blocks)
    )  # one array per column and width
    np.testing.assert_array_equal(samples.project(X), np.hstack([part[1] for part in parts]))
    assert not X.flags.writeable and X is samples.draws(3).first(64, blocks, 16)
    handed = blocks - 1  # the stream's entries handed out: the first has two blocks
    for width in widths[1:]:  # a full block from the stream, or the generator's own draw after it
        Y = draws.next(64, width)
        if width == 16:
            assert Y is samples.block(3, handed)[0]
            handed += 1
        else:
            generator = np.random.default_rng(3)
            generator.bit_generator.state = samples.block(3, handed - 1)[2]
            np.testing.assert_array_equal(Y, generator.standard_normal((64, width)))


def test_shared_column_samples_give_the_same_tile_as_direct_products():
    args, dense = tile_update(6)
    tolerance = 1e-9 * np.linalg.norm(dense)
    samples = ColumnSamples(args[3], 16)
    direct = sampled_update(*args, tolerance, 16, 11)
    for _ in range(2):  # first fills the cache, then reads it
        cached = sampled_update(*args, tolerance, 16, 11, samples)
        for a, b in zip(direct, cached, strict=True):
            np.testing.assert_array_equal(a, b)


def test_solve_column_matches_scipy_and_ignores_the_threads():
    rng = np.random.default_rng(8)
    Lkk = np.linalg.cholesky(np.cov(rng.normal(size=(64, 200))) + np.eye(64))
    factors = [
        rng.normal(size=(64, r)) for r in (0, 70, 1, SOLVE_CHUNK, 5)
    ]  # chunks cut across tiles
    serial = solve_column(Lkk, factors, map)
    with ThreadPoolExecutor(2) as pool:
        threaded = solve_column(Lkk, factors, pool.map)
    for V, x, y in zip(factors, serial, threaded, strict=True):
        np.testing.assert_array_equal(x, y)  # fixed chunks: the same solves whatever the threads
        exact = scipy.linalg.solve_triangular(Lkk, V, lower=True)
        # L(k, k) = chol(C + I) is well conditioned: backward-stable solves agree to ~1e-15
        np.testing.assert_allclose(
            x, exact, rtol=1e-12, atol=1e-12 * np.max(np.abs(exact), initial=1.0)
        )
    assert solve_column(Lkk, [], map) == []


def test_stack_is_fortran_ordered_and_exact():
    rng = np.random.default_rng(9)
    blocks = [rng.normal(size=(5, r)) for r in (2, 0, 3)]
    S = stack(blocks, 5)
    assert S.flags.f_contiguous
    np.testing.assert_array_equal(S, np.hstack(blocks))
    assert stack([], 5).shape == (5, 0)


def test_numpy_allocated_bytes_counts_what_numpy_allocated_and_not_views_of_other_memory():
    owned = np.ones((30, 4))
    assert _malloc.numpy_allocated_bytes(owned) == owned.nbytes
    assert _malloc.numpy_allocated_bytes(owned[:, :2].T) == 30 * 2 * 8  # a view of NumPy's memory
    foreign = np.frombuffer(bytearray(960), dtype=np.float64).reshape(30, 4)  # as a spool's mapping
    assert _malloc.numpy_allocated_bytes(foreign) == 0
    assert _malloc.numpy_allocated_bytes(foreign[:, 1:]) == 0


def test_trim_heap_can_be_turned_off(monkeypatch):
    import sys

    monkeypatch.setenv("TLRCORE_MALLOC_TUNING", "0")
    assert _malloc.trim_heap() is False
    monkeypatch.delenv("TLRCORE_MALLOC_TUNING")
    trimmed = _malloc.trim_heap()
    assert isinstance(trimmed, bool)
    if not sys.platform.startswith("linux"):
        assert trimmed is False


@pytest.mark.parametrize(
    "pool_of", [lambda: tile_pool(2), lambda: serial_thread(object())], ids=["pool", "chain"]
)
def test_a_failing_block_drops_the_queued_calls(pool_of):
    gate, ran = threading.Event(), []

    def call(i):
        gate.wait(5.0)
        ran.append(i)

    with pytest.raises(RuntimeError, match="tile failed"):
        with pool_of() as pool:
            for i in range(20):
                pool.submit(call, i)
            threading.Timer(0.2, gate.set).start()  # lets the running calls finish
            raise RuntimeError("tile failed")
    assert len(ran) <= 2  # at most one call per thread had started: the rest were dropped


def test_submit_without_an_executor_calls_at_once():
    calls = []
    future = submit(None, lambda x: calls.append(x) or x * 2, 21)
    assert calls == [21] and future.done() and future.result() == 42
    with serial_thread(None) as chain:
        assert chain is None


@pytest.mark.parametrize(
    "shapes",
    [
        [(3, 4), (0, 2), (5, 1), (2, 0), (4, 4)],
        [(2, 3)],
        [],
        [(0, 0), (0, 3)],
        [(1, 1), (17, 3), (2, 70), (16, 16), (65, 5), (130, 128), (6, 9), (4, 1)],
    ],
)
def test_block_diagonal_products_match_the_dense_matrix(shapes):
    rng = np.random.default_rng(len(shapes))
    blocks = [rng.normal(size=shape) for shape in shapes]
    dense = scipy.linalg.block_diag(*blocks) if blocks else np.zeros((0, 0))
    M = BlockDiagonal(blocks)
    assert M.shape == dense.shape and M.T.shape == dense.T.shape
    for columns in (7, 0):
        X, Y = (
            rng.normal(size=(dense.shape[1], columns)),
            rng.normal(size=(dense.shape[0], columns)),
        )
        X0 = X.copy()
        assert (M @ X).shape == (dense.shape[0], columns) and (M.T @ Y).shape == (
            dense.shape[1],
            columns,
        )
        # products of the same few numbers, summed in another order: rounding apart
        np.testing.assert_allclose(M @ X, dense @ X, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(M.T @ Y, dense.T @ Y, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(X, X0)  # the operand is not touched
    # blocks grouped by shape: padding at most quadruples each dimension of a block
    assert sum(P.size for P, _, _ in M._groups) <= 16 * sum(r * c for r, c in shapes)
    assert sum(P.shape[0] for P, _, _ in M._groups) == sum(r * c > 0 for r, c in shapes)


def test_block_diagonal_pads_only_blocks_of_similar_shapes():
    """Ranks 4-11 beside one of 130 (a tile row next to a near tile): in one group every
    block would be padded to 130 x 130, 30 times the entries at 131,072 sites."""
    shapes = [(130, 128)] + [(r, c) for r in (4, 6, 11) for c in (5, 9)]
    M = BlockDiagonal([np.ones(shape) for shape in shapes])
    padded = sorted(P.shape for P, _, _ in M._groups)
    assert padded == [
        (1, 130, 128),
        (2, 4, 9),
        (4, 11, 9),
    ]  # size classes (1, 4], (4, 16], (64, 256]


def test_row_panels_stack_each_rows_tiles_as_views_and_grow():
    rng = np.random.default_rng(9)
    U = {}
    panels = RowPanels(U, [6, 4], [3, 50])
    tiles = {
        (0, 0): rng.normal(size=(6, 2)),
        (0, 1): rng.normal(size=(6, 0)),
        (0, 2): rng.normal(size=(6, 4)),
        (1, 0): rng.normal(size=(4, 5)),
    }
    for (i, k), Ut in tiles.items():
        panels.add(i, k, Ut)
    # row 0 outgrew its 3 columns: every tile's view was renewed onto the new buffer
    np.testing.assert_array_equal(panels.stacked(0), np.hstack([tiles[0, k] for k in range(3)]))
    np.testing.assert_array_equal(panels.stacked(1), tiles[1, 0])
    for key, Ut in tiles.items():
        np.testing.assert_array_equal(U[key], Ut)
        assert (
            U[key].base is not None
            and np.shares_memory(U[key], panels.stacked(key[0]))
            or Ut.shape[1] == 0
        )
    assert panels.stacked(0).flags.f_contiguous


@pytest.mark.parametrize("case", ["full-rank", "dependent-columns", "no-columns"])
def test_gram_root_gives_the_update_to_rounding(case):
    """W W^T = U V^T V U^T, from the Cholesky factor of V^T V, or the QR of V where the
    Gram matrix is singular (dependent columns)."""
    rng = np.random.default_rng(12)
    r = 0 if case == "no-columns" else 6
    U, V = rng.normal(size=(50, r)), rng.normal(size=(40, r))
    if case == "dependent-columns":
        V[:, 1] = V[:, 0]
        with pytest.raises(np.linalg.LinAlgError):
            np.linalg.cholesky(V.T @ V)
    W = gram_root(U, V)
    exact = U @ V.T @ V @ U.T
    # both roots round at eps ||U||^2 ||V||^2 (a few hundred operations per entry)
    scale = np.linalg.norm(U) ** 2 * np.linalg.norm(V) ** 2
    np.testing.assert_allclose(
        W @ W.T, exact, rtol=0, atol=1e3 * np.finfo(float).eps * max(scale, 1.0)
    )
    out = np.empty((50, r), order="F")
    assert gram_root(U, V, out=out) is out


@pytest.mark.parametrize("threads", [0, 2])
def test_column_grams_give_each_tiles_cross_products(threads):
    """:class:`ColumnGrams` as the left-looking factorization drives it: column ``j``
    added once ``V(:, j)`` is solved, waited for by column ``k``, released after it.

    Its blocks are ``V(i, j)^T V(k, j)``, computed through one Gram matrix (or the thin
    product with ``V(j+1, j)``) instead of the pair's own product: entry by entry the
    same dot product of length ``p`` in another summation order, hence equal within
    ``2 p eps ||v_a|| ||v_b||`` (``|fl(x^T y) - x^T y| <= p eps |x|^T |y|``).
    """
    rng = np.random.default_rng(9)
    n_t, p = 7, 50
    ranks = {(i, j): int(rng.integers(0, 6)) for j in range(n_t) for i in range(j + 1, n_t)}
    V = {
        pair: rng.normal(size=(p, r)) * 10.0 ** rng.integers(-3, 3, size=r)
        for pair, r in ranks.items()
    }
    # no pool (None): tlrcore.concurrency.threads.submit calls at once
    with ThreadPoolExecutor(threads) if threads else contextlib.nullcontext() as pool:
        grams = ColumnGrams(n_t)
        for k in range(n_t):
            grams.wait(k)
            for i in range(k + 1, n_t):
                blocks = grams.blocks(i, k)
                expected = cross_grams([V[i, j] for j in range(k)], [V[k, j] for j in range(k)])
                assert [b.shape for b in blocks] == [e.shape for e in expected]
                for j, (b, e) in enumerate(zip(blocks, expected, strict=True)):
                    bound = (
                        2
                        * p
                        * np.finfo(float).eps
                        * np.outer(np.linalg.norm(V[i, j], axis=0), np.linalg.norm(V[k, j], axis=0))
                    )
                    assert np.all(np.abs(b - e) <= bound)
            if k + 2 < n_t:
                rest = [V[i, k] for i in range(k + 2, n_t)]
                grams.add(k, V[k + 1, k], stack(rest, p), [v.shape[1] for v in rest], pool)
            grams.release(k)
            assert grams._by_column[k] == {}


def test_column_grams_raise_a_failed_gram_matrix_when_waited_for():
    grams = ColumnGrams(3)
    S = np.array([[None]])  # its Gram matrix fails in the pool (the thin product has no terms)
    with ThreadPoolExecutor(1) as pool:
        grams.add(0, np.ones((1, 0)), S, [1], pool)
        grams.wait(1)  # column 1 reads only the thin product
        with pytest.raises(TypeError):
            grams.wait(2)


def test_thin_product_is_the_product_in_fortran_order():
    rng = np.random.default_rng(10)
    A = np.asfortranarray(rng.normal(size=(300, 40)))[
        :, :35
    ]  # a block of a wider buffer, as RowPanels gives
    B = rng.normal(size=(35, 7))
    P = thin_product(A, B)
    assert P.shape == (300, 7) and P.flags.f_contiguous
    # the same dot products of length 35, possibly summed in another order
    bound = 35 * np.finfo(float).eps * (np.abs(A) @ np.abs(B))
    assert np.all(np.abs(P - A @ B) <= bound)
    np.testing.assert_array_equal(
        thin_product(A, B), P
    )  # the same call on the same data: the same bits
