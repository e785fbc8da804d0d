"""Sites.covariance_block(...).entries: the covariance at scattered index pairs, as the
blocks give it."""

import numpy as np
import pytest

from geostat.covariance import Sites
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.solvers import NUMPY


@pytest.mark.parametrize(
    "kernel, params, dim, distance",
    [
        ("exponential", {"variance": 2.0, "range": 0.1, "nugget": 0.05}, 2, "euclidean"),
        ("matern", {"variance": 1.0, "range": 0.2, "smoothness": 1.5}, 3, "euclidean"),
        ("exponential", {"variance": 1.0, "range": 500.0, "nugget": 0.1}, 2, "great_circle"),
    ],
    ids=["exp2d-nugget", "matern15-3d", "great-circle"],
)
def test_entries_equal_the_blocks(kernel, params, dim, distance):
    rng = np.random.default_rng(5)
    if distance == "great_circle":
        coords = np.column_stack([rng.uniform(-120, -80, 200), rng.uniform(30, 50, 200)])
    else:
        coords = rng.uniform(size=(200, dim))
    kern = get_kernel(kernel, params.get("smoothness"))
    block = Sites(coords, get_distance(distance), NUMPY).covariance_block(kern, params)
    rows, cols = np.arange(40, 120), np.arange(100, 160)  # overlapping: nugget on 20 entries
    C = block(rows, cols)
    # Both sum the squared coordinate differences in coordinate order (scipy's cdist on
    # the host, NumPy here): equal to rounding; a few ulps of d change exp(-d / range) by
    # a few ulps times d / range <= 20, far below 1e-12.
    np.testing.assert_allclose(block.entries(rows[:, None], cols[None, :]), C, rtol=1e-12, atol=0)
    # scattered pairs, stacked as the tile generators ask for them
    i = rng.integers(0, 200, size=(3, 50, 1))
    j = rng.integers(0, 200, size=(3, 1, 4))
    expected = np.stack([block(i[t, :, 0], j[t, 0, :]) for t in range(3)])
    np.testing.assert_allclose(block.entries(i, j), expected, rtol=1e-12, atol=0)
    same = block.entries(np.arange(10), np.arange(10))
    np.testing.assert_allclose(same, params["variance"] + params.get("nugget", 0.0), rtol=1e-15)
