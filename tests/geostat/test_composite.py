"""The block composite likelihood against a dense reference on the same blocks."""

import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.distance import cdist

from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood.composite import BlockCompositeLikelihood
from geostat.likelihood.dense import ExactLikelihood
from geostat.ordering import order_points


def reference(X, y, F, range_, eta, block_size):
    """Profiled composite log-likelihood from SciPy: OLS residuals of each replicate,
    then independent blocks of the k-d tree order, each with ``K = (1 + d/r) exp(-d/r)
    + eta I`` on its observed sites."""
    residuals = np.full(y.shape, np.nan)
    for j in range(y.shape[1]):
        seen = ~np.isnan(y[:, j])
        residuals[seen, j] = y[seen, j] - F[seen] @ np.linalg.lstsq(F[seen], y[seen, j], rcond=None)[0]
    perm = order_points(X, "kdtree", block_size)
    quadratic = logdet = count = 0.0
    for start in range(0, len(perm), block_size):
        sites = perm[start:start + block_size]
        for j in range(y.shape[1]):
            seen = sites[~np.isnan(residuals[sites, j])]
            if seen.size == 0:
                continue
            u = cdist(X[seen], X[seen]) / range_
            L = np.linalg.cholesky((1 + u) * np.exp(-u) + eta * np.eye(seen.size))
            w = scipy.linalg.solve_triangular(L, residuals[seen, j], lower=True)
            quadratic += w @ w
            logdet += 2 * np.log(np.diag(L)).sum()
            count += seen.size
    return -0.5 * (count * (np.log(2 * np.pi * quadratic / count) + 1) + logdet)


def data(n=700, replicates=1, missing=0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    F = np.column_stack([np.ones(n), X[:, 0]])
    y = 3 + 2 * X[:, :1] + rng.normal(size=(n, replicates))
    if missing:
        y[rng.uniform(size=y.shape) < missing] = np.nan
        y[:100, -1] = np.nan  # whole blocks without this replicate
    return X, y, F


def composite(X, y, F, block_size):
    exact = ExactLikelihood(X, y, F, get_kernel("matern", smoothness=1.5), get_distance("euclidean"))
    return BlockCompositeLikelihood(exact, block_size=block_size)


@pytest.mark.parametrize("replicates, missing", [(1, 0.0), (3, 0.2)])
@pytest.mark.parametrize("block_size", [64, 256])
def test_value_matches_the_dense_reference(replicates, missing, block_size):
    X, y, F = data(replicates=replicates, missing=missing)
    likelihood = composite(X, y, F, block_size)
    for range_, eta in [(0.05, 0.1), (0.3, 0.01)]:
        value = likelihood.terms({"range": range_}, eta).profiled_value()
        np.testing.assert_allclose(value, reference(X, y, F, range_, eta, block_size), rtol=1e-12)


def test_gradient_matches_central_differences():
    X, y, F = data(replicates=2, missing=0.1)
    likelihood = composite(X, y, F, 128)
    theta, eta = {"range": 0.1}, 0.05
    gradient = likelihood.terms(theta, eta, gradient=True).profiled_gradient({"range", "eye"})
    h = 1e-6
    for name, at in [("range", lambda t: ({"range": 0.1 + t}, eta)), ("eye", lambda t: (theta, eta + t))]:
        up, down = (likelihood.terms(*at(s * h)).profiled_value() for s in (1, -1))
        # central differences: truncation O(h^2 f''') and rounding O(eps |f| / h), both < 1e-5 here
        np.testing.assert_allclose(gradient[name], (up - down) / (2 * h), rtol=1e-6, atol=1e-4)


def test_blocks_partition_the_sites_and_the_input_is_not_changed():
    X, y, F = data(n=1000, replicates=2, missing=0.1)
    copies = X.copy(), y.copy(), F.copy()
    likelihood = composite(X, y, F, 128)
    assert sum(block.n for block in likelihood.blocks) == 1000
    assert max(block.n for block in likelihood.blocks) <= 128
    assert likelihood.n_obs == int(np.sum(~np.isnan(y)))
    for before, after in zip(copies, (X, y, F)):
        np.testing.assert_array_equal(before, after)


def test_beyond_max_sites_a_random_subset_of_blocks_is_kept():
    X, y, F = data(n=1000)
    exact = ExactLikelihood(X, y, F, get_kernel("matern", smoothness=1.5), get_distance("euclidean"))
    kept = [BlockCompositeLikelihood(exact, block_size=100, max_sites=300, rng=np.random.default_rng(seed))
            for seed in (1, 1, 2)]
    assert [len(c.blocks) for c in kept] == [3, 3, 3] and all(c.n == 300 for c in kept)
    values = [c.terms({"range": 0.1}, 0.05).profiled_value() for c in kept]
    assert values[0] == values[1] and values[0] != values[2]
    whole = BlockCompositeLikelihood(exact, block_size=100, max_sites=1000)
    assert len(whole.blocks) == 10
