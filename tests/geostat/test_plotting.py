"""Plots: empirical and fitted semivariograms, maps, kriging maps and profile likelihoods."""

import importlib.util
import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

import geostat as gs  # noqa: E402
from geostat.distance import chordal  # noqa: E402
from geostat.plotting import (  # noqa: E402
    MAX_VARIOGRAM_SITES,
    empirical_variogram,
    plot_field,
    plot_kriging,
    plot_profile,
    plot_variogram,
)

xr = pytest.importorskip("xarray")
HAS_CARTOPY = importlib.util.find_spec("cartopy") is not None


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def by_gid(artists, gid):
    return [a for a in artists if a.get_gid() == gid]


def brute_variogram(D, y, n_bins, max_distance):
    """Matheron's estimator by a loop over pairs and replicates."""
    pairs, h_sum, sq_sum = np.zeros(n_bins), np.zeros(n_bins), np.zeros(n_bins)
    y = y.reshape(len(D), -1)
    for i, j in itertools.combinations(range(len(D)), 2):
        if D[i, j] > max_distance:
            continue
        k = min(int(D[i, j] / max_distance * n_bins), n_bins - 1)
        for r in range(y.shape[1]):
            if not (np.isnan(y[i, r]) or np.isnan(y[j, r])):
                pairs[k] += 1
                h_sum[k] += D[i, j]
                sq_sum[k] += (y[i, r] - y[j, r]) ** 2
    full = pairs > 0
    return pd.DataFrame(
        {
            "distance": h_sum[full] / pairs[full],
            "semivariance": 0.5 * sq_sum[full] / pairs[full],
            "pairs": pairs[full].astype(np.int64),
        }
    )


def test_empirical_variogram_equals_a_loop_over_pairs():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(12, 2))
    y = rng.normal(size=12)
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    table = empirical_variogram(X, y, n_bins=4, max_distance=0.8)
    pd.testing.assert_frame_equal(table, brute_variogram(D, y, 4, 0.8), rtol=1e-12)


def test_empirical_variogram_pools_replicates_and_skips_missing_values():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(10, 2))
    y = rng.normal(size=(10, 3))
    y[[1, 4], 0] = np.nan
    y[7, 2] = np.nan
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    table = empirical_variogram(X, y, n_bins=3)
    pd.testing.assert_frame_equal(table, brute_variogram(D, y, 3, 0.5 * D.max()), rtol=1e-12)


def test_empirical_variogram_uses_chordal_km_for_lon_lat_columns():
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"lat": rng.uniform(30, 45, 9), "lon": rng.uniform(-110, -90, 9)})
    y = rng.normal(size=9)
    D = chordal(X[["lon", "lat"]].to_numpy())
    table = empirical_variogram(X, y, n_bins=5, max_distance=1500.0)
    pd.testing.assert_frame_equal(table, brute_variogram(D, y, 5, 1500.0), rtol=1e-12)


def test_empirical_variogram_subsamples_large_data():
    n = MAX_VARIOGRAM_SITES + 200
    X = np.random.default_rng(3).uniform(size=(n, 2))
    y = X[:, 0] + np.random.default_rng(4).normal(size=n)
    table = empirical_variogram(X, y, n_bins=5, max_distance=2.0)  # every pair binned
    assert table["pairs"].sum() == MAX_VARIOGRAM_SITES * (MAX_VARIOGRAM_SITES - 1) // 2
    pd.testing.assert_frame_equal(table, empirical_variogram(X, y, n_bins=5, max_distance=2.0))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_bins": 0}, "n_bins"),
        ({"max_distance": -1.0}, "max_distance"),
        ({"max_distance": "far"}, "max_distance"),
    ],
    ids=["bins", "negative", "text"],
)
def test_empirical_variogram_bad_arguments(kwargs, match):
    X = np.random.default_rng(0).uniform(size=(6, 2))
    with pytest.raises((ValueError, TypeError), match=match):
        empirical_variogram(X, np.arange(6.0), **kwargs)


@pytest.fixture(scope="module")
def small_fit():
    """Exponential fit with a constant trend on 150 sites of the unit square."""
    X = np.random.default_rng(5).uniform(size=(150, 2))
    y = 3.0 + gs.simulate(
        X, {"variance": 1.0, "range": 0.15, "nugget": 0.1}, kernel="exponential", random_state=6
    )
    return X, y, gs.SpatialGP(kernel="exponential").fit(X, y)


def test_plot_variogram_draws_residual_points_and_the_model_curve(small_fit):
    X, y, est = small_fit
    ax = plot_variogram(est, n_bins=10)
    assert ax.get_xlabel() == "distance" and ax.get_ylabel() == "semivariance"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "empirical (GLS residuals)",
        "fitted model",
    ]
    assert "exponential" in ax.get_title() and f"{est.params_['variance']:.4g}" in ax.get_title()
    (points,) = by_gid(ax.collections, "empirical")
    expected = empirical_variogram(X, y - est.coef_[0], n_bins=10)
    np.testing.assert_allclose(
        points.get_offsets(), expected[["distance", "semivariance"]], rtol=1e-12
    )
    sizes = points.get_sizes() / expected["pairs"].to_numpy()
    np.testing.assert_allclose(sizes, sizes[0], rtol=1e-12)  # marker area proportional to pairs
    (line,) = by_gid(ax.lines, "model")
    h, gamma = line.get_xdata(), line.get_ydata()
    p = est.params_
    np.testing.assert_allclose(
        gamma, p["nugget"] + p["variance"] * (1 - np.exp(-h / p["range"])), rtol=1e-12
    )


def test_plot_variogram_of_other_data(small_fit):
    X, y, est = small_fit
    ax = plot_variogram(est, X[:80], y[:80], n_bins=6, max_distance=0.6)
    (points,) = by_gid(ax.collections, "empirical")
    expected = empirical_variogram(X[:80], y[:80] - est.coef_[0], n_bins=6, max_distance=0.6)
    np.testing.assert_allclose(
        points.get_offsets(), expected[["distance", "semivariance"]], rtol=1e-12
    )
    with pytest.raises(ValueError, match="both X and y"):
        plot_variogram(est, X[:80])


def test_plot_variogram_labels_km_for_lon_lat_fits():
    df = gs.datasets.load("north_american_rainfall").iloc[:150]
    est = gs.SpatialGP(kernel="exponential").fit(df[["lon", "lat"]], np.log(df["precipitation"]))
    ax = plot_variogram(est)
    assert ax.get_xlabel() == "distance (km)"
    assert " km" in ax.get_title()


def grid_field(name="tas", units="K", x="lon", y="lat"):
    xs, ys = np.linspace(-100, -90, 7), np.linspace(35, 40, 5)
    values = np.add.outer(np.arange(5.0), 10 * np.arange(7.0))
    return xr.DataArray(
        values, dims=(y, x), coords={y: ys, x: xs}, name=name, attrs={"units": units}
    )


@pytest.mark.skipif(HAS_CARTOPY, reason="the plain-axes path is the one without cartopy")
def test_plot_field_on_lon_lat():
    da = grid_field()
    sites = pd.DataFrame({"lat": [36.0, 38.0, 39.5], "lon": [-99.0, -95.0, -91.0]})
    ax = plot_field(da, sites=sites, title="temperature")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        "longitude",
        "latitude",
        "temperature",
    )
    (mesh,) = by_gid(ax.collections, "field")
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).reshape(5, 7), da.values)
    assert mesh.colorbar.ax.get_ylabel() == "tas (K)"
    (dots,) = by_gid(ax.collections, "sites")
    np.testing.assert_array_equal(dots.get_offsets(), sites[["lon", "lat"]].to_numpy())
    assert ax.get_aspect() == pytest.approx(1 / np.cos(np.radians(37.5)))


def test_plot_field_on_x_y_and_transposed_dimensions():
    da = grid_field(name="z", units="", x="x", y="y").transpose("x", "y")
    ax = plot_field(da)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "y")
    (mesh,) = by_gid(ax.collections, "field")
    np.testing.assert_array_equal(
        np.asarray(mesh.get_array()).reshape(5, 7), da.transpose("y", "x").values
    )
    assert mesh.colorbar.ax.get_ylabel() == "z"


@pytest.mark.skipif(HAS_CARTOPY, reason="checks the fallback without cartopy")
def test_plot_field_coastlines_without_cartopy():
    assert plot_field(grid_field(), coastlines="auto").get_xlabel() == "longitude"
    with pytest.warns(gs.GeostatWarning, match="cartopy"):
        plot_field(grid_field(), coastlines=True)


def test_plot_field_bad_input():
    da = grid_field().expand_dims(time=[1, 2])
    with pytest.raises(ValueError, match="2-D"):
        plot_field(da)
    with pytest.raises(ValueError, match="coastlines"):
        plot_field(grid_field(), coastlines="yes")
    with pytest.raises(ValueError, match="horizontal coordinates"):
        plot_field(xr.DataArray(np.zeros((2, 3)), dims=("a", "b")))
    with pytest.raises(TypeError, match="DataArray"):
        plot_field(np.zeros((2, 3)))


@pytest.fixture(scope="module")
def field_fit():
    """Exponential fit to 3 replicates (time) on a 9 x 12 lon/lat grid."""
    lon, lat = np.linspace(-105, -95, 12), np.linspace(35, 42, 9)
    grid = np.column_stack([a.ravel() for a in np.meshgrid(lon, lat)])
    days = gs.simulate(
        grid,
        {"variance": 1.0, "range": 300.0, "nugget": 0.05},
        kernel="exponential",
        n_samples=3,
        random_state=0,
    )
    field = xr.DataArray(
        days.T.reshape(3, 9, 12),
        dims=("time", "lat", "lon"),
        coords={"time": [1, 2, 3], "lat": lat, "lon": lon},
    )
    return field, gs.SpatialGP(kernel="exponential").fit(field)


def test_plot_kriging_draws_the_predictions(field_fit):
    field, est = field_fit
    template = xr.Dataset(coords={"lat": np.linspace(36, 41, 6), "lon": np.linspace(-104, -96, 8)})
    axes = plot_kriging(est, template, replicate=1)
    assert axes.shape == (2,)
    assert [ax.get_title() for ax in axes] == ["kriging mean", "kriging standard deviation"]
    mean, std = est.predict(template, return_std=True)
    for ax, expected in zip(axes, (mean, std), strict=True):
        (mesh,) = by_gid(ax.collections, "field")
        np.testing.assert_allclose(
            np.asarray(mesh.get_array()).reshape(6, 8),
            expected.isel(time=1).transpose("lat", "lon").values,
            rtol=1e-12,
        )
        (dots,) = by_gid(ax.collections, "sites")
        assert len(dots.get_offsets()) == 108
        assert ax.get_xlabel() == "longitude"
    default = plot_kriging(est, template, sites=False)
    (mesh,) = by_gid(default[0].collections, "field")
    np.testing.assert_allclose(
        np.asarray(mesh.get_array()).reshape(6, 8),
        mean.isel(time=-1).transpose("lat", "lon").values,
        rtol=1e-12,
    )
    assert not by_gid(default[0].collections, "sites")


def test_plot_profile_marks_the_profile_and_wald_intervals(small_fit):
    _, _, est = small_fit
    ax = plot_profile(est, "range", n_points=7)
    ci = est.confidence_intervals(method="profile").loc["range"]
    lines = by_gid(ax.lines, "profile interval")
    np.testing.assert_allclose(
        [line.get_xdata()[0] for line in lines], [ci["lower"], ci["upper"]], rtol=1e-12
    )
    (threshold,) = by_gid(ax.lines, "threshold")
    assert threshold.get_ydata()[0] == pytest.approx(
        est.loglik_ - 0.5 * stats.chi2.ppf(0.95, 1), rel=1e-12
    )
    (curve,) = by_gid(ax.lines, "profile")
    assert len(curve.get_xdata()) >= 7 and np.max(curve.get_ydata()) == pytest.approx(
        est.loglik_, abs=1e-6
    )
    (wald,) = by_gid(ax.patches, "wald")
    z = stats.norm.ppf(0.975)
    xs = wald.get_patch_transform().transform(wald.get_path().vertices)[
        :, 0
    ]  # a Polygon or a Rectangle
    assert xs.max() == pytest.approx(est.params_["range"] + z * est.stderr_["range"], rel=1e-12)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "range"
    assert ax.get_ylabel() == "profile log-likelihood"
    with pytest.raises(ValueError, match="parameter"):
        plot_profile(est, "smoothness")


def test_plot_profile_draws_the_values_already_profiled_instead_of_new_ones_near_them(monkeypatch):
    """After the interval, the curve's points near values its endpoint search profiled are
    those values: fewer maximizations than points, and every plotted value is the profile."""
    from geostat.optimize.intervals import ProfileLikelihood

    X = np.random.default_rng(5).uniform(size=(150, 2))
    y = 3.0 + gs.simulate(
        X, {"variance": 1.0, "range": 0.15, "nugget": 0.1}, kernel="exponential", random_state=6
    )
    est = gs.SpatialGP(kernel="exponential").fit(X, y)
    est.confidence_intervals(method="profile")
    profile = ProfileLikelihood.of(est)
    known = profile.profiled_values("range")
    maximized = []
    original = ProfileLikelihood._maximize
    monkeypatch.setattr(
        ProfileLikelihood,
        "_maximize",
        lambda self, name, value: maximized.append(value) or original(self, name, value),
    )
    ax = plot_profile(est, "range", n_points=15)
    (curve,) = by_gid(ax.lines, "profile")
    x, values = curve.get_xdata(), curve.get_ydata()
    inside = known[(known >= x.min()) & (known <= x.max())]
    assert inside.size >= 4  # the estimate, both endpoints and the search's trials
    assert np.isin(inside, x).all()
    assert len(maximized) <= 15 - (inside.size - 3)
    assert len(x) >= 15
    np.testing.assert_array_equal(values, [profile("range", v) for v in x])


def test_importing_geostat_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, geostat, geostat.plotting; print('matplotlib' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
