"""Plumbing of the anisotropic and space-time models: the ordering of space-time points,
the tangent plane on longitude/latitude, variogram plots, profile intervals of an angle."""

import math

import numpy as np
import pytest

import geostat as gs
from geostat.covariance import Sites
from geostat.distance import (
    EUCLIDEAN,
    SpaceTimeDistance,
    TangentPlaneDistance,
    get_distance,
    lonlat_to_xyz,
    ordering_points,
)
from geostat.solvers import NUMPY


def _space_time_points(n_sites, n_times, seed=0):
    rng = np.random.default_rng(seed)
    sites = rng.uniform(size=(n_sites, 2))
    return np.column_stack(
        [np.repeat(sites, n_times, axis=0), np.tile(np.arange(n_times, dtype=float), n_sites)]
    )


def test_ordering_points_give_time_the_spatial_extent():
    X = _space_time_points(30, 40)
    points = ordering_points(X, SpaceTimeDistance(EUCLIDEAN))
    spatial_extent = np.ptp(X[:, :2], axis=0).max()
    np.testing.assert_allclose(np.ptp(points[:, -1]), spatial_extent, rtol=1e-12)
    np.testing.assert_array_equal(points[:, :2], X[:, :2])
    assert np.array_equal(X[:, -1], np.tile(np.arange(40.0), 30)), "the input is not modified"


def test_ordering_points_of_spatial_sites_are_the_embedding():
    X = np.random.default_rng(1).uniform(size=(50, 2))
    np.testing.assert_array_equal(ordering_points(X, EUCLIDEAN), X)


def test_tangent_plane_is_isometric_near_its_centre():
    """Orthographic projection: distances between sites near the centre equal the chordal
    ones to second order in the angle from the centre (rel. error < angle^2 / 2)."""
    rng = np.random.default_rng(2)
    lonlat = np.column_stack([10 + rng.uniform(-0.5, 0.5, 40), 45 + rng.uniform(-0.5, 0.5, 40)])
    plane = TangentPlaneDistance.around(lonlat)
    chord = get_distance("chordal").pairwise(lonlat)
    angle = math.radians(1.0)
    np.testing.assert_allclose(plane.pairwise(lonlat), chord, rtol=angle**2)
    xyz = lonlat_to_xyz(np.array([plane.center]))
    assert np.allclose(plane.embed(np.array([plane.center])), 0.0, atol=1e-9 * np.linalg.norm(xyz))


def test_tangent_plane_axes_point_east_and_north():
    plane = TangentPlaneDistance((0.0, 0.0))
    east, north = plane.embed(np.array([[0.1, 0.0], [0.0, 0.1]]))
    assert east[0] > 0 and abs(east[1]) < 1e-9 * east[0]
    assert north[1] > 0 and abs(north[0]) < 1e-9 * north[1]


def test_tangent_plane_warns_beyond_ten_degrees():
    lonlat = np.array([[0.0, 0.0], [30.0, 0.0], [15.0, 5.0]])
    with pytest.warns(gs.GeostatWarning, match="degrees from their centre"):
        TangentPlaneDistance.around(lonlat)


def _anisotropic_field(n=150, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    kernel = gs.Anisotropic(gs.Exponential())
    params = {
        "variance": 1.0,
        "range": 0.4,
        "nugget": 0.05,
        "smoothness": 0.5,
        "anisotropy_ratio": 0.3,
        "anisotropy_angle": math.radians(30),
    }
    C = Sites(X, EUCLIDEAN, NUMPY).covariance_block(kernel, params)(np.arange(n), np.arange(n))
    return X, np.linalg.cholesky(C) @ rng.standard_normal(n)


@pytest.fixture(scope="module")
def anisotropic_fit():
    X, y = _anisotropic_field()
    return gs.SpatialGP(
        kernel="exponential", anisotropy="geometric", method="exact", n_starts=1
    ).fit(X, y)


def test_variogram_plot_draws_both_axes(anisotropic_fit):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from geostat.plotting import model_semivariogram, plot_variogram

    ax = plot_variogram(anisotropic_fit)
    assert {line.get_gid() for line in ax.lines} >= {"model", "model-minor"}
    params = anisotropic_fit.params_
    h = np.array([0.1])
    major = model_semivariogram(anisotropic_fit, h)
    minor = model_semivariogram(anisotropic_fit, h, params["anisotropy_angle"] + math.pi / 2)
    assert minor[0] > major[0], "the semivariogram rises faster across the major axis"


def test_profile_interval_of_the_angle_contains_the_estimate(anisotropic_fit):
    table = anisotropic_fit.confidence_intervals(level=0.9, method="profile")
    row = table.loc["anisotropy_angle"]
    assert row["lower"] < row["estimate"] < row["upper"]
    assert row["upper"] - row["lower"] < math.pi
    assert 0 <= row["estimate"] < math.pi


@pytest.mark.filterwarnings(
    "ignore:the Fisher information is singular"
)  # white noise: no range to identify
def test_space_time_variogram_pairs_sites_at_one_time():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from geostat.plotting import plot_variogram

    X = _space_time_points(25, 6, seed=4)
    y = np.random.default_rng(5).standard_normal(X.shape[0])
    est = gs.SpatialGP(
        kernel=gs.SpaceTime(space="exponential", separability=0.0), method="exact", n_starts=1
    ).fit(X, y)
    ax = plot_variogram(est)
    pairs = [c for c in ax.collections if c.get_gid() == "empirical"]
    assert pairs, "the empirical variogram is drawn"


@pytest.mark.parametrize("method", ["exact", "tlr"])
def test_lag_kernels_run_the_gpu_code_paths(method):
    """A space-time anisotropic likelihood on the stand-in back end (the GPU's code paths on
    NumPy arrays: packed TLR layout, generic dense calls) equals the NumPy one: up to
    rounding for the dense Cholesky (cond ~1e3: 1e-10 relative), and for TLR within 3 error
    scales of each of the two builds (``strategies.tlr_loglik_error_scale``)."""
    from standin import StandIn
    from strategies import tlr_loglik_error_scale

    from geostat.likelihood import make_likelihood

    X = _space_time_points(40, 8, seed=6)
    y = np.random.default_rng(7).standard_normal((X.shape[0], 1))
    kernel = gs.SpaceTime(space=gs.Anisotropic(gs.Exponential()), time="exponential")
    params = {
        "variance": 1.0,
        "range": 0.3,
        "anisotropy_ratio": 0.5,
        "anisotropy_angle": 0.4,
        "time_range": 2.0,
        "separability": 0.5,
        "nugget": 0.1,
    }
    args = (method, X, y, np.ones((X.shape[0], 1)), kernel, SpaceTimeDistance(EUCLIDEAN), False)
    options = {"accuracy": 1e-9, "tile_size": 64} if method == "tlr" else {}
    on_cpu = make_likelihood(*args, **options).log_likelihood(params)
    on_standin = make_likelihood(*args, backend=StandIn(), **options).log_likelihood(params)
    if method == "exact":
        assert on_standin == pytest.approx(on_cpu, rel=1e-10)
    else:
        sigma = tlr_loglik_error_scale(
            X,
            y,
            np.ones((X.shape[0], 1)),
            kernel,
            params,
            1e-9,
            distance=SpaceTimeDistance(EUCLIDEAN),
        )
        assert abs(on_standin - on_cpu) <= 6 * sigma


@pytest.mark.parametrize(
    "kernel, settings, match",
    [
        (
            gs.SpaceTime(space="exponential"),
            {},
            r"single time \(0\).*'time_range' cannot be estimated",
        ),
        (
            "exponential",
            {"anisotropy": "geometric"},
            r"single value of the third coordinate.*'vertical_range'",
        ),
    ],
    ids=["one-time", "flat-third-coordinate"],
)
def test_an_axis_with_a_single_value_is_refused(kernel, settings, match):
    rng = np.random.default_rng(8)
    X = np.column_stack([rng.uniform(size=(30, 2)), np.zeros(30)])
    with pytest.raises(ValueError, match=match):
        gs.SpatialGP(kernel=kernel, **settings).fit(X, rng.normal(size=30))
