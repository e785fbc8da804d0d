"""geostat -> tlrcore wiring: kernel covariances as TLR matrices of ordered sites."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from geostat.distance import get_distance, lonlat_to_xyz
from geostat.kernels import get_kernel
from geostat.ordering import inverse_permutation
from geostat.plotting import plot_ranks
from geostat.solvers import covariance_block, tlr_covariance


def dense_cov(X, kernel, params):
    shape = {k: params[k] for k in kernel.shape_names if k in params}
    C = params["variance"] * kernel.correlation(cdist(X, X), params["range"], **shape)
    return C + params.get("nugget", 0.0) * np.eye(len(X))


@pytest.mark.parametrize("ordering", ["kdtree", "morton", "none"])
@pytest.mark.parametrize(
    "kernel, params, dim",
    [
        ("exponential", {"variance": 2.0, "range": 0.1, "nugget": 0.05}, 2),
        ("matern", {"variance": 1.0, "range": 0.1, "smoothness": 1.5}, 2),
        ("matern", {"variance": 1.0, "range": 0.2, "smoothness": 0.8, "nugget": 0.01}, 3),
    ],
    ids=["exp2d-nugget", "matern15-2d", "matern08-3d"],
)
def test_tlr_covariance_matches_dense_in_the_new_order(kernel, params, dim, ordering):
    X = np.random.default_rng(1).uniform(size=(1500, dim))
    kern = get_kernel(kernel, params.get("smoothness"))
    A, perm = tlr_covariance(
        X, kern, params, get_distance("euclidean"), accuracy=1e-6, tile_size=256, ordering=ordering
    )
    C = dense_cov(X[perm], kern, params)
    assert np.linalg.norm(C - A.to_dense()) <= 1e-6 * np.linalg.norm(C)
    np.testing.assert_array_equal(np.sort(perm), np.arange(1500))
    # undoing the permutation gives the covariance in the caller's order
    inv = inverse_permutation(perm)
    C0 = dense_cov(X, kern, params)
    assert np.linalg.norm(A.to_dense()[np.ix_(inv, inv)] - C0) <= 1e-6 * np.linalg.norm(C0)


def test_ordering_is_what_makes_it_small():
    X = np.random.default_rng(2).uniform(size=(2048, 2))
    kern = get_kernel("exponential")
    params = {"variance": 1.0, "range": 0.1}
    ordered, _ = tlr_covariance(
        X, kern, params, get_distance("euclidean"), accuracy=1e-6, tile_size=256, ordering="kdtree"
    )
    random, _ = tlr_covariance(
        X, kern, params, get_distance("euclidean"), accuracy=1e-6, tile_size=256, ordering="none"
    )
    assert ordered.nbytes < 0.5 * random.nbytes


def test_chordal_block_uses_embedded_coordinates():
    rng = np.random.default_rng(3)
    lonlat = np.column_stack([rng.uniform(-120, -80, 300), rng.uniform(30, 50, 300)])
    kern = get_kernel("exponential")
    params = {"variance": 1.0, "range": 500.0, "nugget": 0.1}
    block = covariance_block(lonlat, kern, params, get_distance("chordal"))
    idx = np.arange(300)
    np.testing.assert_allclose(
        block(idx, idx), dense_cov(lonlat_to_xyz(lonlat), kern, params), rtol=1e-12
    )


def test_rank_heatmap():
    X = np.random.default_rng(4).uniform(size=(1024, 2))
    A, _ = tlr_covariance(
        X,
        get_kernel("exponential"),
        {"variance": 1.0, "range": 0.1},
        get_distance("euclidean"),
        accuracy=1e-6,
        tile_size=128,
    )
    ax = plot_ranks(A)
    image = ax.images[0].get_array()
    assert image.shape == (8, 8) and np.ma.getmaskarray(image).diagonal().all()
    assert "mean rank" in ax.get_title()
