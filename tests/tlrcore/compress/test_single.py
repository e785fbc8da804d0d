"""Trailing columns of low-rank factors in single precision (tlrcore.compress.single): the
rounding bound holds against the exact change (computed in float64 from the rounded
values), the storage is lossless, and matrices and factors keep their accuracy contracts."""

import numpy as np
import pytest
from problems import covariance, morton_sites

import tlrcore as tlr
from tlrcore.compress._recompress import LowRank
from tlrcore.compress.single import (
    SINGLE_SHARE,
    CompactFactors,
    compact,
    factor_budget,
    round_in_place,
    round_trailing,
    rounding_bounds,
)

#: Column scales, from float32's subnormal range to near its overflow.
SCALES = (1e-44, 1e-40, 1e-20, 1.0, 1e20, 1e37)


def factors(rows, cols, rank, scales, seed=0):
    """``(U, V)`` with columns of decreasing size `scales` (geometric), as compressors give."""
    rng = np.random.default_rng(seed)
    sizes = np.geomspace(scales[0], scales[1], rank)
    return rng.standard_normal((rows, rank)) * sizes, rng.standard_normal((cols, rank))


@pytest.mark.parametrize("scale", SCALES)
def test_the_rounding_bound_holds_column_by_column(scale):
    U, V = factors(60, 40, 8, (scale, scale * 1e-3))
    bounds = rounding_bounds(U, V)
    U32, V32 = U.astype(np.float32).astype(np.float64), V.astype(np.float32).astype(np.float64)
    for j in range(U.shape[1]):
        change = np.outer(U32[:, j], V32[:, j]) - np.outer(U[:, j], V[:, j])
        # the change itself is computed in float64, exact to a relative 2^-52 of each term
        assert np.linalg.norm(change) <= bounds[j] * (1 + 1e-12) + 1e-300


def test_columns_that_could_overflow_are_never_rounded():
    U, V = factors(20, 20, 4, (1e39, 1.0))
    assert np.isinf(rounding_bounds(U, V)[0])
    rounded = round_trailing(LowRank(U, V), np.inf)
    assert rounded.single == 3  # all but the first, whose entries float32 cannot hold
    assert np.isfinite(rounded[0]).all()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("scale", [1e-30, 1.0, 1e30])
def test_round_trailing_stays_within_its_budget_and_rounds_the_last_columns(seed, scale):
    """Budgets placed at the cumulative bounds themselves, where the rounding decision turns."""
    U, V = factors(50, 70, 12, (scale, scale * 1e-9), seed)
    before = (U.copy(), V.copy())
    tail = np.cumsum(rounding_bounds(U, V)[::-1])
    for count, budget in enumerate([tail[0] / 2, *tail[:-1]]):
        result = round_trailing(LowRank(U, V), budget)
        assert result.single == count
        change = np.linalg.norm(result[0] @ result[1].T - U @ V.T)
        assert change <= result.dropped * (1 + 1e-9) + 1e-300
        assert result.dropped == result.dropped_frobenius <= budget
        first = U.shape[1] - count
        for F, G in zip(result, (U, V), strict=True):
            np.testing.assert_array_equal(F[:, :first], G[:, :first])
            np.testing.assert_array_equal(F[:, first:], F[:, first:].astype(np.float32))
    np.testing.assert_array_equal(U, before[0])  # the inputs are not modified
    np.testing.assert_array_equal(V, before[1])
    same = LowRank(U, V)
    assert round_trailing(same, 0.0) is same


def test_round_in_place_rounds_views_of_a_panel():
    U, V = factors(30, 30, 6, (1.0, 1e-12))
    panel = np.asfortranarray(np.hstack([np.ones((30, 2)), U]))
    view = panel[:, 2:]
    count = round_in_place(view, V, 1e-6)
    assert count > 0
    np.testing.assert_array_equal(panel[:, :2], 1.0)
    np.testing.assert_array_equal(view[:, -count:], view[:, -count:].astype(np.float32))


def test_compact_storage_is_lossless_and_half_as_large():
    U, V = factors(64, 48, 10, (1.0, 1e-14))
    rounded = round_trailing(LowRank(U, V), 1e-6)
    assert 0 < rounded.single < 10
    U_store, V_store = CompactFactors(), CompactFactors()
    head_u, tail_u, head_v, tail_v = pair = compact(rounded)
    assert compact(pair) is pair
    U_store.store_parts((1, 0), head_u, tail_u)
    V_store.store_parts((1, 0), head_v, tail_v)
    np.testing.assert_array_equal(U_store[1, 0], rounded[0])
    np.testing.assert_array_equal(V_store[1, 0], rounded[1])
    single = rounded.single
    assert U_store.nbytes == 64 * (8 * (10 - single) + 4 * single)
    assert U_store.rank((1, 0)) == 10 and tail_u.dtype == np.float32
    view = U_store.view()
    np.testing.assert_array_equal(view[1, 0], rounded[0])
    assert not view.parts((1, 0))[0].flags.writeable
    freed = U_store.release((1, 0), np.zeros((0, 0)))
    assert freed >= 0 and U_store.rank((1, 0)) == 0
    np.testing.assert_array_equal(view[1, 0], rounded[0])  # the view keeps its arrays
    other = CompactFactors()
    other.store_split((2, 1), rounded[0], single)
    np.testing.assert_array_equal(other[2, 1], rounded[0])


def test_factor_budget_is_the_share_of_the_tolerance_over_the_root_of_twice_the_norm():
    assert factor_budget(2.0, 8.0) == pytest.approx(SINGLE_SHARE * 2.0 / 4.0)
    assert factor_budget(1.0, 0.0) == 0.0


@pytest.mark.parametrize("accuracy", [1e-4, 1e-7, 1e-10])
@pytest.mark.parametrize("kernel", ["exponential", "matern15", "gaussian"])
def test_matrices_and_factors_meet_their_contracts_with_single_columns(accuracy, kernel):
    """Many tiles end in single-precision columns (their tolerance splits the budget), and
    ``||A - A_tlr|| <= accuracy ||A||`` and the factor's ``||L L^T - A_tlr|| <= 2 accuracy
    ||A_tlr||`` (the factorization's own bound with ARA's margin of 2) still hold."""
    M = covariance(morton_sites(1500), kernel=kernel, range_=0.15, nugget=1e-2)
    A = tlr.TLRMatrix.from_dense(M, 128, accuracy=accuracy, method="aca")
    single = sum(A.U.parts(key)[1] is not None for key in A.U)
    assert single >= len(A.U) // 4
    dense = A.to_dense()
    assert np.linalg.norm(M - dense) <= accuracy * np.linalg.norm(M)
    L = tlr.cholesky(A)
    rounded = sum(L.U.parts(key)[1] is not None for key in L.U)
    assert rounded > 0
    Ld = L.to_dense()
    assert np.linalg.norm(Ld @ Ld.T - dense) <= 2 * accuracy * A.frobenius_norm()
