"""Tests of geostat.distance."""

import math
import warnings

import numpy as np
import pytest
from scipy.spatial.distance import cdist, pdist, squareform

from geostat.distance import (
    CHORDAL,
    EARTH_RADIUS_KM,
    EUCLIDEAN,
    GREAT_CIRCLE,
    Distance,
    check_lonlat,
    chordal,
    euclidean,
    get_distance,
    great_circle,
    lonlat_to_xyz,
    resolve_distance,
    warn_if_invalid_on_sphere,
)
from geostat.kernels import Exponential, Matern

R = EARTH_RADIUS_KM


def random_lonlat(n, seed):
    rng = np.random.default_rng(seed)
    lon = rng.uniform(-180, 360, n)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    return np.column_stack([lon, lat])


def test_euclidean_matches_cdist():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(20, 3)), rng.normal(size=(7, 3))
    np.testing.assert_allclose(euclidean(a, b), cdist(a, b), rtol=1e-15)
    np.testing.assert_allclose(euclidean(a), cdist(a, a), rtol=1e-15)
    np.testing.assert_allclose(
        euclidean(np.arange(4.0)), np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    )
    with pytest.raises(ValueError, match="columns"):
        euclidean(a, b[:, :2])


def test_chordal_and_great_circle_identity():
    a, b = random_lonlat(40, 1), random_lonlat(30, 2)
    gc = great_circle(a, b)
    np.testing.assert_allclose(chordal(a, b), 2 * R * np.sin(gc / (2 * R)), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(cdist(lonlat_to_xyz(a), lonlat_to_xyz(b)), chordal(a, b), rtol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(lonlat_to_xyz(a), axis=1), R, rtol=1e-15)


@pytest.mark.parametrize(
    "a, b, gc_km, chord_km",
    [
        pytest.param(
            (0, 0),
            (1, 0),
            2 * math.pi * R / 360,
            2 * R * math.sin(math.radians(0.5)),
            id="equator-1deg",
        ),
        pytest.param((0, 90), (0, -90), math.pi * R, 2 * R, id="poles-antipodal"),
        pytest.param((10, 20), (190, -20), math.pi * R, 2 * R, id="antipodal"),
        pytest.param((-180, 0), (180, 0), 0.0, 0.0, id="dateline-same-point"),
        pytest.param((0, 0), (360, 0), 0.0, 0.0, id="0-360-same-point"),
        pytest.param((0, 0), (0, 1e-9), math.radians(1e-9) * R, math.radians(1e-9) * R, id="tiny"),
    ],
)
def test_known_distances(a, b, gc_km, chord_km):
    assert great_circle([a], [b])[0, 0] == pytest.approx(gc_km, rel=1e-12, abs=1e-9)
    assert chordal([a], [b])[0, 0] == pytest.approx(chord_km, rel=1e-9, abs=1e-9)


def test_equator_one_degree_is_111_km():
    assert great_circle([[0, 0]], [[1, 0]])[0, 0] == pytest.approx(111.19, abs=0.005)


def test_great_circle_stable_near_antipode():
    # 1e-7 degrees short of antipodal: pi R - distance must be resolved accurately.
    eps = 1e-7
    d = great_circle([[0, 0]], [[180 - eps, 0]])[0, 0]
    assert math.pi * R - d == pytest.approx(math.radians(eps) * R, rel=1e-6)


@pytest.mark.parametrize("distance", [EUCLIDEAN, CHORDAL, GREAT_CIRCLE], ids=lambda d: d.name)
def test_symmetric_zero_diagonal_and_pairwise(distance):
    x = random_lonlat(25, 3)
    full = distance.cross(x, x)
    np.testing.assert_allclose(full, full.T, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(np.diag(full), 0.0)
    condensed = distance.pairwise(x)
    assert condensed.shape == (25 * 24 // 2,)
    np.testing.assert_allclose(condensed, squareform(full, checks=False), rtol=1e-12, atol=1e-9)


def test_great_circle_pairwise_blocks(monkeypatch):
    import geostat.distance as module

    x = random_lonlat(53, 4)
    expected = squareform(great_circle(x), checks=False)
    monkeypatch.setattr(module, "_BLOCK_PAIRS", 100)  # several rows per block, ragged end
    np.testing.assert_allclose(GREAT_CIRCLE.pairwise(x), expected, rtol=1e-14, atol=1e-12)
    assert GREAT_CIRCLE.pairwise(x[:1]).shape == (0,)


def test_embed():
    x = random_lonlat(10, 5)
    np.testing.assert_array_equal(EUCLIDEAN.embed(x), x)
    assert EUCLIDEAN.embed(x) is not x
    np.testing.assert_allclose(pdist(CHORDAL.embed(x)), CHORDAL.pairwise(x))
    assert GREAT_CIRCLE.embed(x) is None


def test_get_distance():
    assert get_distance("Chordal") is CHORDAL
    assert get_distance("great_circle") is GREAT_CIRCLE
    assert get_distance(EUCLIDEAN) is EUCLIDEAN
    assert Distance("chordal") == CHORDAL and repr(CHORDAL) == "Distance('chordal')"
    with pytest.raises(ValueError, match="euclidean"):
        get_distance("auto")
    with pytest.raises(ValueError, match="great_circle"):
        get_distance("haversine")
    with pytest.raises(TypeError):
        get_distance(3)


@pytest.mark.parametrize(
    "spec, names, expected",
    [
        pytest.param("auto", ["lon", "lat"], ("chordal", (0, 1)), id="auto-lon-lat"),
        pytest.param("auto", ["Latitude", "Longitude"], ("chordal", (1, 0)), id="auto-lat-lon"),
        pytest.param("auto", ["LNG", "lat"], ("chordal", (0, 1)), id="auto-lng"),
        pytest.param("auto", ["x", "y"], ("euclidean", None), id="auto-xy"),
        pytest.param("auto", None, ("euclidean", None), id="auto-unnamed"),
        pytest.param("AUTO", ["lon", "lon"], ("euclidean", None), id="auto-duplicate-lon"),
        pytest.param("chordal", None, ("chordal", (0, 1)), id="chordal-unnamed"),
        pytest.param("chordal", ["lat", "lon"], ("chordal", (1, 0)), id="chordal-named"),
        pytest.param(
            "great_circle", ["a", "b"], ("great_circle", (0, 1)), id="great-circle-other-names"
        ),
        pytest.param("euclidean", ["lon", "lat"], ("euclidean", None), id="euclidean-explicit"),
    ],
)
def test_resolve_distance(spec, names, expected):
    assert resolve_distance(spec, names) == expected


def test_resolve_distance_errors_and_warning():
    with pytest.raises(ValueError, match="auto"):
        resolve_distance("manhattan", None)
    with pytest.raises(TypeError):
        resolve_distance(None, None)
    with pytest.warns(UserWarning, match="euclidean"):
        assert resolve_distance("auto", ["lon", "lat", "elevation"]) == ("euclidean", None)


@pytest.mark.parametrize(
    "coords, match",
    [
        pytest.param([[0.0, 95.0]], "latitude", id="latitude-95"),
        pytest.param([[0.0, -90.5]], "latitude", id="latitude-below"),
        pytest.param([[400.0, 0.0]], "longitude", id="longitude-400"),
        pytest.param([[0.0, 0.0, 1.0]], "2 columns", id="three-columns"),
        pytest.param([[np.nan, 0.0]], "NaN", id="nan"),
    ],
)
def test_check_lonlat_errors(coords, match):
    with pytest.raises(ValueError, match=match) as info:
        check_lonlat(coords, argname="X_train")
    assert "X_train" in str(info.value)


def test_check_lonlat_accepts_valid():
    x = np.array([[-180.0, -90.0], [360.0, 90.0]])
    out = check_lonlat(x)
    np.testing.assert_array_equal(out, x)
    with pytest.raises(ValueError, match="euclidean"):
        check_lonlat([[0.0, 95.0]])
    with pytest.raises(ValueError):
        chordal([[0.0, 95.0]])


def test_warn_if_invalid_on_sphere():
    with pytest.warns(UserWarning, match="chordal"):
        warn_if_invalid_on_sphere("great_circle", Matern(1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_invalid_on_sphere("great_circle", Exponential())
        warn_if_invalid_on_sphere("chordal", Matern(1.5))
        warn_if_invalid_on_sphere(CHORDAL, Matern())


@pytest.mark.parametrize(
    "name,dim",
    [
        ("euclidean", 1),
        ("euclidean", 2),
        ("euclidean", 3),
        ("euclidean", 5),
        ("chordal", 2),
        ("great_circle", 2),
    ],
)
def test_distance_extremes_match_all_pairs(name, dim):
    from geostat.distance import distance_extremes, get_distance

    rng = np.random.default_rng(dim)
    if name == "euclidean":
        X = rng.normal(size=(500, dim))
        X[7] = X[3] + 1e-9
    else:
        X = np.column_stack([rng.uniform(-180, 180, 500), rng.uniform(-80, 80, 500)])
    dist = get_distance(name)
    pairs = dist.pairwise(X)
    smallest, largest = distance_extremes(X, dist)
    assert smallest == pytest.approx(pairs.min(), rel=1e-9, abs=1e-12)
    if dim <= 3:
        assert largest == pytest.approx(pairs.max(), rel=1e-12)
    else:
        assert pairs.max() / 2 <= largest <= pairs.max() * (1 + 1e-12)
    assert distance_extremes(X[:1], dist) == (np.inf, 0.0)


def test_the_sphere_warning_uses_the_given_shape_and_points_at_the_caller():
    import geostat as gs

    X = np.column_stack([np.linspace(-100, 100, 40), np.linspace(-60, 60, 40)])
    smooth = {"variance": 1.0, "range": 3000.0, "smoothness": 1.5, "nugget": 0.1}
    rough = {**smooth, "smoothness": 0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = gs.simulate(X, rough, distance="great_circle", random_state=0)  # valid: no warning
        gs.log_likelihood(X, y, rough, distance="great_circle")
    for call in (
        lambda: gs.log_likelihood(X, y, smooth, distance="great_circle"),
        lambda: gs.simulate(X, smooth, distance="great_circle", random_state=0),
    ):
        with pytest.warns(
            gs.GeostatWarning, match=r"Matern\(smoothness=1.5\) is not guaranteed"
        ) as caught:
            call()
        sphere = [w for w in caught if "great-circle" in str(w.message)]
        assert sphere[0].filename == __file__


def test_largest_distance_of_a_large_hull_comes_from_sweeps():
    """Points on a sphere in 3-D are all vertices of their hull: beyond EXACT_HULL of them
    the farthest pair is not searched among all pairs (2 billion at 65,536 sites) but by
    farthest-point sweeps, a lower estimate (here within 1e-3 of the true value)."""
    from geostat.distance import EXACT_HULL, distance_extremes, get_distance

    rng = np.random.default_rng(0)
    X = rng.normal(size=(EXACT_HULL + 500, 3))
    X *= 6371.0 / np.linalg.norm(X, axis=1, keepdims=True)
    largest = distance_extremes(X, get_distance("euclidean"))[1]
    true = get_distance("euclidean").pairwise(X).max()
    assert (1 - 1e-3) * true <= largest <= true
