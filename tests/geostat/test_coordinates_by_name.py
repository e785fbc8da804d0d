"""Coordinates are never guessed: a fitted model reads an xarray template's coordinates by
the fitted names and in the fitted order, whatever the order of the template's dimensions
and whatever other position coordinates it carries; coordinates and covariates cannot
overlap; degree-like columns not named lon/lat are flagged; pandas observations are paired
with the sites by index label; singleton dimensions of a field are dropped."""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from strategies import PROPERTY_SETTINGS  # noqa: E402

import geostat as gs  # noqa: E402
from geostat.errors import GeostatWarning  # noqa: E402
from geostat.plotting import plot_kriging  # noqa: E402

xr = pytest.importorskip("xarray")

N_SITES = 100
#: Sites of each kind: lon/lat in Europe (|lon| <= 90, where a swap of lon and lat stays
#: within the valid ranges, so only reading by name catches it), x/y in km on a projected
#: grid.
EXTENT = {
    "lonlat": (("lon", 0.0, 20.0), ("lat", 40.0, 55.0)),
    "xy": (("x", 0.0, 500.0), ("y", 0.0, 400.0)),
}
RANGE = {"lonlat": 300.0, "xy": 150.0}


def sites_and_values(kind, seed=0):
    """``N_SITES`` random sites of `kind` (x-like column first) and one simulated field."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({name: rng.uniform(low, high, N_SITES) for name, low, high in EXTENT[kind]})
    y = gs.simulate(
        X,
        {"variance": 1.0, "range": RANGE[kind], "nugget": 0.05},
        kernel="exponential",
        random_state=seed + 1,
    )
    return X, y


def fit(kind, columns):
    """An exponential fit on the sites of `kind`, with the DataFrame's columns in `columns`
    order."""
    X, y = sites_and_values(kind)
    return gs.SpatialGP(kernel="exponential").fit(X[list(columns)], y)


def grid(kind, dims=None, aux=False):
    """A 4 x 5 template grid of `kind` inside the sites' extent, dimensions in `dims` order
    (x-like last by default); with `aux`, 2-D position coordinates of the other kind
    (the lon/lat of a projected grid, or the x/y of a lon/lat one)."""
    (xname, xlow, xhigh), (yname, ylow, yhigh) = EXTENT[kind]
    xs, ys = np.linspace(xlow + 1, xhigh - 1, 5), np.linspace(ylow + 1, yhigh - 1, 4)
    template = xr.DataArray(np.zeros((4, 5)), dims=(yname, xname), coords={yname: ys, xname: xs})
    if aux:
        xx, yy = np.meshgrid(xs, ys)
        other = {"lonlat": ("x", "y"), "xy": ("lon", "lat")}[kind]
        a, b = (-100.0 + xx / 80.0, 40.0 + yy / 111.0) if kind == "xy" else (80.0 * xx, 111.0 * yy)
        template = template.assign_coords(
            {other[0]: ((yname, xname), a), other[1]: ((yname, xname), b)}
        )
    return template if dims is None else template.transpose(*dims)


def grid_table(template, columns):
    """The template's cells as a sites table with `columns`, in the order of the template's
    dimensions (the order predictions on the template come in)."""
    coords = xr.broadcast(*(template[c] for c in columns))
    dims = [d for d in template.dims if any(d in c.dims for c in coords)]
    return pd.DataFrame(
        {c: a.transpose(*dims).values.ravel() for c, a in zip(columns, coords, strict=True)}
    )


@pytest.fixture(scope="module")
def models():
    """Fits on each kind of sites with the columns in either order."""
    return {
        (kind, columns): fit(kind, columns)
        for kind in EXTENT
        for columns in (
            tuple(n for n, *_ in EXTENT[kind]),
            tuple(n for n, *_ in EXTENT[kind])[::-1],
        )
    }


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


# ------------------------------------------------------------------ templates read by name
@pytest.mark.parametrize(
    "kind, columns", [("lonlat", ("lat", "lon")), ("xy", ("y", "x"))], ids=["lat-lon", "y-x"]
)
def test_a_model_fitted_on_lat_lon_or_y_x_columns_reads_a_grid_by_name(models, kind, columns):
    est = models[kind, columns]
    template = grid(kind)
    table = grid_table(template, columns)
    mean, std = est.predict(template, return_std=True)
    expected_mean, expected_std = est.predict(table, return_std=True)
    np.testing.assert_allclose(mean.values.ravel(), expected_mean.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(std.values.ravel(), expected_std.to_numpy(), rtol=1e-12)
    draws = est.sample_y(template, n_samples=2, random_state=0)
    np.testing.assert_allclose(
        draws.values.reshape(-1, 2),
        est.sample_y(table, n_samples=2, random_state=0).to_numpy(),
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    "kind, columns", [("lonlat", ("lat", "lon")), ("xy", ("y", "x"))], ids=["lat-lon", "y-x"]
)
def test_plot_kriging_of_a_lat_lon_or_y_x_model_draws_the_grid_and_sites_by_name(
    models, kind, columns
):
    est = models[kind, columns]
    template = grid(kind)
    mean_ax, _ = plot_kriging(est, template, coastlines=False)
    (mesh,) = [c for c in mean_ax.collections if c.get_gid() == "field"]
    expected = est.predict(grid_table(template, columns)).to_numpy()
    np.testing.assert_allclose(np.asarray(mesh.get_array()).ravel(), expected, rtol=1e-12)
    (dots,) = [c for c in mean_ax.collections if c.get_gid() == "sites"]
    X, _ = sites_and_values(kind)
    drawn = np.asarray(dots.get_offsets())
    np.testing.assert_allclose(
        np.sort(drawn, axis=0), np.sort(X.to_numpy(), axis=0)
    )  # (x-like, y-like)


def test_an_x_y_model_ignores_the_lon_lat_of_a_projected_grid(models):
    est = models["xy", ("x", "y")]
    template = grid(
        "xy", aux=True
    )  # x/y dimensions in km, and 2-D lon/lat as CF projected grids have
    mean = est.predict(template)
    np.testing.assert_allclose(
        mean.values.ravel(), est.predict(grid_table(template, ("x", "y"))).to_numpy(), rtol=1e-12
    )
    assert mean.lon.dims == ("y", "x")  # the auxiliary coordinates still label the output


def test_a_template_without_the_fitted_names_is_refused_with_the_rename(models):
    est = models["lonlat", ("lon", "lat")]
    with pytest.raises(
        ValueError,
        match=r"lacks the coordinate\(s\) \['lon', 'lat'\].*"
        r"X\.rename\(\{'longitude': 'lon', 'latitude': 'lat'\}\)",
    ):
        est.predict(grid("lonlat").rename(lon="longitude", lat="latitude"))
    with pytest.raises(ValueError, match=r"lacks the coordinate\(s\) \['x', 'y'\]"):
        models["xy", ("x", "y")].predict(grid("lonlat"))  # lon/lat are not the fitted x/y


def test_an_array_model_with_a_spherical_distance_reads_lon_lat():
    X, y = sites_and_values("lonlat")
    est = gs.SpatialGP(kernel="exponential", distance="chordal").fit(
        X.to_numpy(), y
    )  # column 0 is longitude
    template = grid("lonlat", aux=True)
    np.testing.assert_allclose(
        est.predict(template).values.ravel(),
        est.predict(grid_table(template, ("lon", "lat")).to_numpy()),
        rtol=1e-12,
    )
    three = gs.SpatialGP(kernel="exponential").fit(np.column_stack([X.to_numpy(), X.lon]), y)
    with pytest.raises(
        ValueError, match="3 coordinate column.*no column names.*fit it on a DataFrame"
    ):
        three.predict(template)


# ------------------------------------------------------------------ coordinates and covariates
def test_duplicate_coordinate_columns_are_refused():
    X, y = sites_and_values("lonlat")
    with pytest.raises(ValueError, match=r"duplicate column names \['lon'\]"):
        gs.SpatialGP(kernel="exponential").fit(pd.concat([X.lon, X.lon], axis=1), y)


@pytest.mark.parametrize(
    "kind, rename, trend",
    [
        ("lonlat", {}, ["lon"]),
        ("lonlat", {"lat": "Latitude"}, ["Latitude", "h"]),
        ("xy", {}, ["y"]),
    ],
    ids=["lon", "Latitude", "y"],
)
def test_a_trend_covariate_that_is_also_a_coordinate_is_refused(kind, rename, trend):
    X, y = sites_and_values(kind)
    X = X.rename(columns=rename).assign(h=np.linspace(0.0, 1.0, len(X)))
    with pytest.raises(
        ValueError, match=r"forms the position of X: as a trend covariate it would leave"
    ):
        gs.SpatialGP(kernel="exponential", trend=trend).fit(X, y)


def test_a_field_covariate_that_is_a_position_coordinate_is_refused():
    template = grid("lonlat")
    field = template + np.random.default_rng(0).normal(size=template.shape)
    with pytest.raises(ValueError, match=r"trend names \['lat'\], position coordinate\(s\) of X"):
        gs.SpatialGP(kernel="exponential", trend=["lat"]).fit(field)


def test_a_covariate_named_by_name_and_by_position_is_refused():
    X, y = sites_and_values("xy")
    X["h"] = np.linspace(0.0, 1.0, len(X))
    with pytest.raises(ValueError, match="trend names column 'h' of X twice"):
        gs.SpatialGP(kernel="exponential", trend=["h", 2]).fit(X, y)


@pytest.mark.parametrize("names", [("lon_deg", "lat_deg"), ("Longitude_E", "Latitude_N")])
def test_degree_like_columns_not_named_lon_lat_warn(names):
    X, y = sites_and_values("lonlat")
    X.columns = list(names)
    with pytest.warns(
        GeostatWarning, match="look like longitude and latitude in degrees.*distance='euclidean'"
    ):
        est = gs.SpatialGP(kernel="exponential").fit(X, y)
    assert est.distance_ == "euclidean"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gs.SpatialGP(kernel="exponential", distance="euclidean").fit(
            X, y
        )  # said explicitly: no warning
        gs.SpatialGP(kernel="exponential").fit(X * 100.0, y)  # beyond degrees: not flagged
    assert not [w for w in caught if "look like longitude" in str(w.message)]


# ------------------------------------------------------------------ pandas observations
def test_a_y_series_on_a_permuted_index_is_aligned_by_index():
    X, y = sites_and_values("lonlat")
    X.index = pd.Index(np.arange(N_SITES) * 10 + 7, name="station")
    y = pd.Series(y, index=X.index)
    reference = gs.SpatialGP(kernel="exponential").fit(X, y.to_numpy())
    shuffled = y.sample(frac=1.0, random_state=3)
    est = gs.SpatialGP(kernel="exponential").fit(X, shuffled)
    assert est.loglik_ == pytest.approx(reference.loglik_, rel=1e-12)
    assert est.params_["range"] == pytest.approx(reference.params_["range"], rel=1e-9)
    replicates = pd.DataFrame({"a": y, "b": 2.0 * y}).sample(frac=1.0, random_state=4)
    both = gs.SpatialGP(kernel="exponential").fit(X, replicates)
    np.testing.assert_allclose(
        both.coef_[:, 0], [reference.coef_[0], 2.0 * reference.coef_[0]], rtol=1e-6
    )
    # score pairs by label too (R^2 of a shuffled pairing would be far lower)
    assert reference.score(X, shuffled) == reference.score(X, y)


@pytest.mark.parametrize("case", ["other-labels", "repeated-labels"])
def test_x_and_y_with_different_indexes_are_refused(case):
    X, y = sites_and_values("lonlat")
    if case == "other-labels":
        y, match = pd.Series(y, index=X.index + 1000), r"100 label\(s\) of X's index are not in y's"
    else:
        X.index = np.repeat(np.arange(N_SITES // 2), 2)
        y, match = (
            pd.Series(y, index=X.index[::-1]),
            "same labels in another order, with some repeated",
        )
    with pytest.raises(ValueError, match=match + r".*y\.reindex\(X\.index\).*y\.to_numpy\(\)"):
        gs.SpatialGP(kernel="exponential").fit(X, y)


# ------------------------------------------------------------------ singleton dimensions
def test_a_field_with_singleton_time_and_level_dimensions_fits():
    template = grid("lonlat")
    values = np.random.default_rng(5).normal(size=(1, 1) + template.shape)
    da = xr.DataArray(
        values,
        dims=("time", "zlev", "lat", "lon"),
        coords={"time": ["1999-07"], "zlev": [0.0], "lat": template.lat, "lon": template.lon},
    )
    est = gs.SpatialGP(kernel="exponential", nugget=False).fit(da)  # a global SST file's layout
    reference = gs.SpatialGP(kernel="exponential", nugget=False).fit(da.isel(zlev=0, drop=True))
    assert est.loglik_ == pytest.approx(reference.loglik_, rel=1e-12)
    mean = est.predict(template)
    assert mean.dims == ("lat", "lon", "time") and list(mean.time.values) == ["1999-07"]
    days = xr.concat([da, da * 0.5 + 0.1, da * 2.0 - 0.3], dim="time").assign_coords(time=[1, 2, 3])
    ds = xr.Dataset({"sst": days, "depth": (("zlev", "lat", "lon"), np.abs(values[0]) + 1.0)})
    three = gs.SpatialGP(kernel="exponential", trend=["depth"]).fit(
        ds, y="sst"
    )  # covariate on zlev=1 too
    assert three.coef_.shape == (3, 2) and three._field.replicate_dim == "time"


def test_two_dimensions_longer_than_one_name_the_selection():
    template = grid("lonlat")
    da = xr.DataArray(
        np.ones((3, 2) + template.shape),
        dims=("time", "level", "lat", "lon"),
        coords={"lat": template.lat, "lon": template.lon},
    )
    with pytest.raises(
        ValueError, match=r"at most one longer than 1.*X\.isel\(level=0\) or X\.sel\(level="
    ):
        gs.SpatialGP().fit(da)


# ------------------------------------------------------------------ property: grid equals table
@settings(max_examples=40, **PROPERTY_SETTINGS)
@given(data=st.data())
def test_predictions_on_a_grid_equal_those_on_the_same_table(models, data):
    kind = data.draw(st.sampled_from(sorted(EXTENT)), label="kind")
    columns = data.draw(st.permutations([n for n, *_ in EXTENT[kind]]), label="fitted columns")
    est = models[kind, tuple(columns)]
    aux = data.draw(st.booleans(), label="other position coordinates")
    template = grid(kind, aux=aux)
    if data.draw(st.booleans(), label="singleton time"):
        template = template.expand_dims(time=[0])
    template = template.transpose(*data.draw(st.permutations(list(template.dims)), label="dims"))
    mean, std = est.predict(template, return_std=True)
    expected_mean, expected_std = est.predict(grid_table(template, columns), return_std=True)
    spatial = [d for d in template.dims if d != "time"]
    assert list(mean.dims) == spatial
    np.testing.assert_allclose(mean.values.ravel(), expected_mean.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(std.values.ravel(), expected_std.to_numpy(), rtol=1e-12)
