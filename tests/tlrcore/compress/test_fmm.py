"""The black-box fast multipole product against the dense product of the same kernel."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from tlrcore.compress.fmm import (
    balanced_leaf_size,
    bounding_cube,
    chebyshev_nodes,
    fmm_product,
    interpolation_weights,
    leaf_counts,
)
from tlrcore.errors import GeneratorError


def exponential(P, Q):
    return np.exp(-cdist(P, Q) / 0.1)


def quadratic(P, Q):
    """A polynomial of degree 2 in each coordinate of ``P - Q``: interpolated exactly from
    three nodes per dimension."""
    return (
        1.0
        + 0.5 * ((P[:, None, :] - Q[None, :, :]) ** 2).sum(axis=-1)
        - (P[:, None, 0] - Q[None, :, 0])
    )


def relative_error(got, reference):
    return np.abs(got - reference).max() / np.abs(reference).max()


def test_interpolation_weights_reproduce_polynomials_of_degree_below_the_order():
    order = 7
    u = np.linspace(-1, 1, 41)
    weights = interpolation_weights(u, order)
    nodes = chebyshev_nodes(order)
    for degree in range(order):
        # Lagrange interpolation at p nodes is exact below degree p; the weights'
        # rounding is a few ulps of the Lebesgue constant (below 3 for p = 7)
        np.testing.assert_allclose(weights @ nodes**degree, u**degree, rtol=0, atol=1e-13)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_a_polynomial_kernel_is_multiplied_exactly(d):
    """The far field interpolates in both points; for a kernel of degree 2 per coordinate
    three nodes are exact, so only rounding separates the product from the dense one."""
    rng = np.random.default_rng(d)
    sources, targets = rng.random((3000, d)), rng.random((2000, d)) * 1.2 - 0.1
    X = rng.standard_normal((3000, 2))
    reference = quadratic(targets, sources) @ X
    got = fmm_product(quadratic, targets, sources, X, order=3, leaf_size=16)
    # sums of 3,000 terms of size up to 2 |x| in float64, through a few transfers
    assert relative_error(got, reference) <= 1e-11


@pytest.mark.parametrize("d, order, bound", [(1, 10, 1e-8), (2, 12, 1e-7), (3, 6, 1e-3)])
def test_exponential_kernel_converges_with_the_order(d, order, bound):
    rng = np.random.default_rng(10 + d)
    n, m = (4000, 3000) if d < 3 else (2000, 1500)
    sources = rng.random((n, d))
    targets = np.r_[rng.random((m, d)) * 1.4 - 0.2, sources[:50]]  # outside, and on sites
    X = rng.standard_normal((n, 1))
    reference = exponential(targets, sources) @ X
    coarse = relative_error(
        fmm_product(exponential, targets, sources, X, 2, leaf_size=32), reference
    )
    fine = relative_error(
        fmm_product(exponential, targets, sources, X, order, leaf_size=32), reference
    )
    # the interpolation error of an analytic kernel falls geometrically with the order
    # (about 5x per node in these runs); the bounds leave 10-100x of margin
    assert fine <= bound
    assert fine <= 1e-2 * coarse


def warped(P, Q):
    """A kernel of the distance between warped points: smooth, not of ``P - Q`` alone."""

    def warp(Z):
        return Z + 0.3 * Z**2

    return np.exp(-cdist(warp(P), warp(Q)) / 0.2)


def test_a_kernel_not_of_differences_needs_the_pairs_own_interactions():
    rng = np.random.default_rng(8)
    sources, targets = rng.random((4000, 2)), rng.random((3000, 2))
    X = rng.standard_normal((4000, 1))
    reference = warped(targets, sources) @ X
    own = fmm_product(warped, targets, sources, X, 12, leaf_size=32, invariant=False)
    shared = fmm_product(warped, targets, sources, X, 12, leaf_size=32)
    # as for the exponential kernel above; with one matrix per offset (wrong for this
    # kernel) the far field is that of other boxes
    assert relative_error(own, reference) <= 1e-7
    assert relative_error(shared, reference) >= 1e-4


def test_clustered_sources_and_a_target_region_apart():
    rng = np.random.default_rng(3)
    centres = rng.random((5, 2))
    sources = (centres[:, None, :] + 0.01 * rng.standard_normal((5, 800, 2))).reshape(-1, 2)
    targets = np.r_[rng.random((2000, 2)), rng.random((500, 2)) + [3.0, 0.0]]
    X = rng.standard_normal((sources.shape[0], 3))
    reference = exponential(targets, sources) @ X
    got = fmm_product(exponential, targets, sources, X, order=12, leaf_size=32)
    assert np.abs(got - reference).max() <= 1e-7 * np.abs(reference).max()


def test_a_target_gets_its_value_whatever_the_other_targets_given_the_bounds():
    rng = np.random.default_rng(4)
    sources, targets = rng.random((3000, 2)), rng.random((5000, 2))
    X = rng.standard_normal((3000, 1))
    bounds = bounding_cube(targets, sources)
    whole = fmm_product(exponential, targets, sources, X, 8, leaf_size=32, bounds=bounds)
    some = rng.choice(5000, 40, replace=False)
    part = fmm_product(exponential, targets[some], sources, X, 8, leaf_size=32, bounds=bounds)
    # the same sums, through products of other shapes: rounding only
    assert np.abs(part - whole[some]).max() <= 1e-13 * np.abs(X).sum()


def test_few_sources_are_summed_directly_and_empty_sets_give_zeros():
    rng = np.random.default_rng(5)
    sources, targets = rng.random((10, 2)), rng.random((30, 2))
    X = rng.standard_normal((10, 1))
    got = fmm_product(exponential, targets, sources, X, 4, leaf_size=64)
    np.testing.assert_allclose(got, exponential(targets, sources) @ X, rtol=1e-12, atol=1e-14)
    assert fmm_product(exponential, targets[:0], sources, X, 4).shape == (0, 1)
    assert np.array_equal(
        fmm_product(exponential, targets, sources[:0], X[:0], 4), np.zeros((30, 1))
    )
    same = np.zeros((5, 2))
    np.testing.assert_allclose(
        fmm_product(exponential, same, same, np.ones((5, 1)), 4), np.full((5, 1), 5.0)
    )


def test_inputs_are_not_modified():
    rng = np.random.default_rng(6)
    sources, targets, X = rng.random((500, 2)), rng.random((400, 2)), rng.standard_normal((500, 2))
    copies = [a.copy() for a in (sources, targets, X)]
    fmm_product(exponential, targets, sources, X, 6, leaf_size=8)
    for original, copy in zip((sources, targets, X), copies, strict=True):
        assert np.array_equal(original, copy)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"targets": np.zeros((3, 3))}, "same number of columns"),
        ({"targets": np.zeros((3, 4)), "sources": np.zeros((5, 4))}, "1 to 3"),
        ({"targets": np.full((3, 2), np.nan)}, "targets must be finite"),
        ({"sources": np.zeros(5)}, "sources must be 2-D"),
        ({"X": np.ones((4, 1))}, "X must be"),
        ({"X": np.full((5, 1), np.inf)}, "X must be finite"),
        ({"order": 0}, "order must be"),
        ({"order": 33}, "order must be"),
        ({"order": 2.5}, "order must be"),
        ({"leaf_size": 0}, "leaf_size must be"),
        ({"bounds": (np.zeros(2), 0.5)}, "bounds must hold"),
    ],
)
def test_bad_arguments_are_named(change, match):
    arguments = {
        "targets": np.random.default_rng(0).random((3, 2)),
        "sources": np.random.default_rng(1).random((5, 2)),
        "X": np.ones((5, 1)),
        "order": 4,
    } | change
    with pytest.raises(ValueError, match=match):
        fmm_product(exponential, **arguments)


@pytest.mark.parametrize(
    "function, match",
    [
        (lambda P, Q: np.zeros((P.shape[0], Q.shape[0] + 1)), "shape"),
        (lambda P, Q: np.full((P.shape[0], Q.shape[0]), np.nan), "NaN or infinite"),
    ],
)
def test_a_bad_kernel_function_raises_a_generator_error(function, match):
    rng = np.random.default_rng(7)
    with pytest.raises(GeneratorError, match=match):
        fmm_product(function, rng.random((2000, 2)), rng.random((2000, 2)), np.ones((2000, 1)), 4)


def test_leaf_counts_show_clustered_sources_among_spread_targets():
    rng = np.random.default_rng(9)
    spread = rng.random((20000, 2))
    # uniform sources: depth 3 (64 boxes of about 62 sources), at most 64 target leaves
    assert leaf_counts(spread, rng.random((4000, 2)), 64)[0] <= 4**4
    clustered = 0.5 + 1e-3 * rng.standard_normal((4000, 2))
    target_leaves, source_leaves = leaf_counts(spread, clustered, 64)
    assert source_leaves <= 4000 and target_leaves >= 10000


def test_balanced_leaves_grow_with_the_sources_and_the_order_within_their_limits():
    sources = (10**2, 10**3, 10**4, 10**5, 10**6)
    sizes = [balanced_leaf_size(n, 10**6, 12, 2, False) for n in sources]
    assert sizes == sorted(sizes) and sizes[0] == 16 and sizes[-1] <= 1024
    assert balanced_leaf_size(10**5, 10**6, 16, 2, False) > balanced_leaf_size(
        10**5, 10**6, 8, 2, False
    )
    # a pair's own interactions cost more than a shared matrix's: larger leaves
    assert balanced_leaf_size(10**5, 10**6, 10, 2, False) > balanced_leaf_size(10**5, 10**6, 10, 2)
    assert balanced_leaf_size(10, 0, 4, 1) >= 16
