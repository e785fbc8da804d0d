"""geostat.kernels.tabulation.RadialTable: a costly kernel's correlation and derivatives
interpolated in log distance, against the formula, on any distances."""

import pickle

import numpy as np
import pytest

from geostat.kernels import get_kernel
from geostat.kernels.tabulation import SPAN, RadialFunction, RadialTable

RANGE = 3700.0


def distances(rng):
    """Random distances with the span's edges, zero, tiny and huge ones among them."""
    edges = RANGE * np.array(
        [SPAN[0] * 0.999, SPAN[0], SPAN[0] * 1.001, SPAN[1] * 0.999, SPAN[1] * 1.001]
    )
    return np.concatenate(
        [
            [0.0, 1e-12, 1e9],
            edges,
            rng.uniform(0, 5 * RANGE, 20_000),
            np.exp(rng.uniform(np.log(RANGE * 1e-7), np.log(RANGE * 2e4), 20_000)),
        ]
    )


@pytest.mark.parametrize("smoothness", [0.3, 0.78, 3.7])
@pytest.mark.parametrize("name", [None, "range", "smoothness"])
def test_the_table_agrees_with_the_formula_to_its_error_bound(smoothness, name, rng):
    kernel = get_kernel("matern")
    shape = kernel.resolve_shape({"smoothness": smoothness})
    d = distances(rng)
    exact = RadialFunction(kernel, RANGE, shape, name)(d)
    table = RadialTable(kernel, RANGE, shape, name)(d)
    # cubic interpolation with step 1e-3 in log d: measured at most 2e-13 of the
    # correlation's largest value and 1e-12 of a derivative's (smoothness 3.7)
    np.testing.assert_allclose(table, exact, rtol=0, atol=1e-11 * np.abs(exact).max())
    outside = (
        (d == 0) | (d < RANGE * SPAN[0] * np.exp(-2e-3)) | (d > RANGE * SPAN[1] * np.exp(2e-3))
    )
    # the formula itself there (which may round an entry differently within another array)
    np.testing.assert_allclose(table[outside], exact[outside], rtol=1e-15, atol=0)


def test_an_entry_does_not_depend_on_the_block_or_on_pickling(rng):
    """Inside the span the nodes are fixed, so an entry alone and within a block agree to
    the rounding of its log (which NumPy may vectorize differently in another array: no
    bit-equality asserted there), far inside the interpolation error."""
    kernel = get_kernel("matern")
    table = RadialTable(kernel, RANGE, kernel.resolve_shape({"smoothness": 0.78}))
    d = rng.uniform(RANGE * SPAN[0], 5 * RANGE, 20_000).reshape(200, -1)
    whole = table(d)
    picked = rng.integers(0, d.size, 50)
    alone = np.array([table(d.reshape(-1)[i : i + 1])[0] for i in picked])
    # an ulp of log d moves s = log(d) / h by at most 1.2e4 eps, so g by at most h |g'(t)|
    # times that: about 1.3e-15 for a correlation (|g'(t)| <= 1)
    np.testing.assert_allclose(alone, whole.reshape(-1)[picked], rtol=0, atol=1e-14)
    copy = pickle.loads(pickle.dumps(table))
    assert copy._coefficients is None  # made again where it is used
    assert np.array_equal(copy(d), whole) and whole.shape == d.shape


@pytest.mark.parametrize("range_", [1e-300, 1e-3, 1e300])
def test_extreme_ranges_are_tabulated_without_overflow(range_, rng):
    kernel = get_kernel("matern")
    shape = kernel.resolve_shape({"smoothness": 0.78})
    d = range_ * np.concatenate([[0.0], rng.uniform(0, 10, 1000)])
    with np.errstate(over="raise", invalid="raise"):
        table = RadialTable(kernel, range_, shape)(d)
    exact = RadialFunction(kernel, range_, shape)(d)
    np.testing.assert_allclose(table, exact, rtol=0, atol=1e-11)
