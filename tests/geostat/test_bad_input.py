"""Degenerate, extreme and malformed inputs: each gives the correct result, a named error,
or a warning (the contract of ``docs/errors.md``), never a silent wrong answer or a raw
error."""

import warnings

import numpy as np
import pandas as pd
import pytest

import geostat as gs
from geostat.solvers import NUMPY

EXP = {"variance": 1.0, "range": 0.2, "nugget": 0.05}


@pytest.fixture(scope="module")
def field():
    """An exponential field with nugget on 120 sites in the unit square."""
    X = np.random.default_rng(3).uniform(size=(120, 2))
    y = 2.0 + gs.simulate(X, EXP, kernel="exponential", random_state=4)
    return X, y


def fit(X, y, **settings):
    return gs.SpatialGP(**{"kernel": "exponential", "n_starts": 1, **settings}).fit(X, y)


# ---------------------------------------------------------------- one distance default
def test_log_likelihood_defaults_reproduce_the_estimator():
    frame = gs.datasets.load("north_american_rainfall").iloc[::6]
    X, y = frame[["lon", "lat"]], np.log(frame["precipitation"])
    est = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y)
    assert est.distance_ == "chordal"
    assert gs.log_likelihood(X, y, est.params_, kernel="exponential") == pytest.approx(
        est.loglik_, rel=1e-10
    )


def test_simulate_defaults_to_chordal_distance_on_lonlat_columns():
    frame = gs.datasets.load("north_american_rainfall").iloc[:200][["lon", "lat"]]
    params = {"variance": 1.0, "range": 500.0, "nugget": 0.1}
    draw = gs.simulate(frame, params, kernel="exponential", random_state=0)
    np.testing.assert_array_equal(
        draw, gs.simulate(frame, params, kernel="exponential", random_state=0, distance="chordal")
    )


# ---------------------------------------------------------------- replicates
def test_all_missing_replicate_is_refused_naming_it(field):
    X, y = field
    Y = pd.DataFrame({"day1": y, "day2": np.nan, "day3": y[::-1]})
    with pytest.raises(ValueError, match="'day2' has no observed values"):
        fit(X, Y)
    with pytest.raises(ValueError, match="column 1 has no observed values"):
        gs.log_likelihood(X, Y.to_numpy(), EXP, kernel="exponential")


def test_replicate_with_too_few_observations_is_named(field):
    X, y = field
    Y = np.column_stack([y, np.full(len(y), np.nan)])
    Y[0, 1] = 1.0
    with pytest.raises(ValueError, match="y column 1 .* 1 observed sites but the trend has 1"):
        fit(X, Y)


# ---------------------------------------------------------------- duplicate sites
@pytest.mark.parametrize("on_failure", ["shift", "step", "raise"])
@pytest.mark.parametrize(
    ("gap", "nugget"),
    [(1e-12, False), (0.0, 1e-300), (0.0, False), (1e-10, 1e-12)],
    ids=["near-twin-no-nugget", "twin-tiny-nugget", "twin-no-nugget", "near-twin-tiny-nugget"],
)
def test_near_duplicate_sites_without_a_nugget_are_refused(field, gap, nugget, on_failure):
    X, y = field
    X = X.copy()
    X[17] = X[5] + gap
    with pytest.raises(ValueError, match=r"duplicate sites: rows 5 and 17 .* nugget=True"):
        fit(X, y, nugget=nugget, on_failure=on_failure)


def test_the_duplicate_check_is_relative_to_the_site_spread(field):
    """Sites 1e-12 apart are twins in the unit square but not in a domain of 1e-9."""
    X, y = field
    X = 1e-9 * X
    X[17] = X[5] + 1e-12
    model = fit(X, y, nugget=False)
    assert np.isfinite(model.loglik_)
    with pytest.raises(ValueError, match="duplicate sites"):
        fit(X + np.where(np.arange(len(X))[:, None] == 17, X[5] - X[17], 0.0), y, nugget=False)


@pytest.mark.parametrize(
    ("site_unit", "data_unit"), [(1e-9, 1.0), (1e9, 1.0), (1e-9, 1e7), (1e9, 1e-7)]
)
def test_standard_errors_do_not_depend_on_the_units(field, site_unit, data_unit):
    """Sites in nanometres or in light years: the same fit, in those units. The information
    about the range (units^-2) and about the variance differ by many orders of magnitude:
    neither is called "not identified" (inf, with a warning) nor gets a wrong value."""
    X, y = field
    reference = fit(X, y, nugget=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaled = fit(site_unit * X, data_unit * y, nugget=False)
    unit = {"variance": data_unit**2, "range": site_unit}
    for name, factor in unit.items():
        # the optimizer runs in the same internal units either way: only rounding differs
        assert scaled.params_[name] / factor == pytest.approx(reference.params_[name], rel=1e-4)
        assert scaled.stderr_[name] / factor == pytest.approx(reference.stderr_[name], rel=1e-4)


def test_duplicate_sites_with_an_estimated_nugget_fit(field):
    X, y = field
    X = X.copy()
    X[17] = X[5]
    model = fit(X, y)
    assert model.params_["nugget"] > 0 and np.isfinite(model.loglik_)


# ---------------------------------------------------------------- data without variation
@pytest.mark.parametrize(
    ("settings", "values"),
    [
        ({}, np.ones(120)),
        ({"kernel": "matern"}, np.full(120, 5.0)),
        ({"nugget": False}, np.full(120, -2.0)),
        ({"trend": None}, np.zeros(120)),
        ({"method": "tlr"}, np.ones(120)),
    ],
    ids=["exponential", "matern", "no-nugget", "zero-no-trend", "tlr"],
)
def test_constant_y_is_refused(field, settings, values):
    X, _ = field
    with pytest.raises(ValueError, match="y is constant"):
        fit(X, values, **settings)


def test_y_explained_exactly_by_the_trend_is_refused(field):
    X, _ = field
    with pytest.raises(ValueError, match="explained by the trend to within rounding"):
        fit(X, 1.0 + 2.0 * X[:, 0] - 3.0 * X[:, 1], trend="linear")


# ---------------------------------------------------------------- magnitudes
@pytest.mark.parametrize("reml", [False, True], ids=["ml", "reml"])
@pytest.mark.parametrize(("offset", "unit"), [(1e6, 1.0), (1e9, 1e3)])
def test_a_covariate_far_from_zero_fits_like_the_same_covariate_near_zero(
    field, offset, unit, reml
):
    """A covariate ``offset + unit * x`` (a timestamp, an elevation in mm) spans the same
    trend space as ``x`` with the intercept: the same likelihood (ML and REML), slope,
    standard error and predictions. Its near-collinearity with the intercept must not be
    squared into F^T K^-1 F, which would cost the first case 5 digits of the
    log-likelihood and refuse the second as rank deficient."""
    X, y = field
    x = np.random.default_rng(7).uniform(size=len(X))
    y = y + 3.0 * x
    frames = [
        pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "covariate": shift + scale * x})
        for shift, scale in ((0.0, 1.0), (offset, unit))
    ]
    near, far = (fit(frame, y, trend=["covariate"], reml=reml) for frame in frames)
    # the covariate's own rounding (ulp(offset) / unit, at most 1.2e-10 of its spread) and
    # the optimizer's path: far below these bounds. REML's -1/2 log det(F^T K^-1 F) moves
    # by -log(unit) with the covariate's unit (not with its offset, a map of determinant 1).
    assert far.loglik_ == pytest.approx(near.loglik_ - (np.log(unit) if reml else 0.0), abs=1e-6)
    assert far.coef_[1] * unit == pytest.approx(near.coef_[1], rel=1e-5)
    assert far.coef_stderr_[1] * unit == pytest.approx(near.coef_stderr_[1], rel=1e-5)
    rng = np.random.default_rng(8)
    new_sites, new_x = rng.uniform(size=(5, 2)), rng.uniform(size=5)
    mean_near, std_near = near.predict(
        pd.DataFrame({"x": new_sites[:, 0], "y": new_sites[:, 1], "covariate": new_x}),
        return_std=True,
    )
    mean_far, std_far = far.predict(
        pd.DataFrame(
            {"x": new_sites[:, 0], "y": new_sites[:, 1], "covariate": offset + unit * new_x}
        ),
        return_std=True,
    )
    np.testing.assert_allclose(mean_far, mean_near, rtol=1e-6)
    np.testing.assert_allclose(std_far, std_near, rtol=1e-5)


@pytest.mark.parametrize("scale", [1e-150, 1e-20, 3.0, 1e120])
def test_fit_is_equivariant_under_scaling_of_y(field, scale):
    """Fitting s y gives s^2 times the variance and nugget, s times the trend, the same
    range, and a log-likelihood lower by n log s (all to rounding)."""
    X, y = field
    base, scaled = fit(X, y), fit(X, scale * y)
    for name in ("variance", "nugget"):
        assert scaled.params_[name] == pytest.approx(scale**2 * base.params_[name], rel=1e-8)
        assert scaled.stderr_[name] == pytest.approx(scale**2 * base.stderr_[name], rel=1e-6)
    assert scaled.params_["range"] == pytest.approx(base.params_["range"], rel=1e-8)
    assert scaled.coef_ == pytest.approx(scale * base.coef_, rel=1e-8)
    assert scaled.loglik_ == pytest.approx(
        base.loglik_ - len(y) * np.log(scale), rel=1e-10, abs=1e-8
    )
    assert scaled.log_likelihood(scaled.params_) == pytest.approx(
        scaled.loglik_, rel=1e-10, abs=1e-8
    )
    new = np.array([[0.5, 0.5], [0.1, 0.9], [1.2, -0.1]])
    mean, std = scaled.predict(new, return_std=True)
    base_mean, base_std = base.predict(new, return_std=True)
    np.testing.assert_allclose(mean, scale * base_mean, rtol=1e-8)
    np.testing.assert_allclose(std, scale * base_std, rtol=1e-6)


@pytest.mark.parametrize("scale", [1e-150, 1e150])
def test_log_likelihood_of_extreme_magnitudes(field, scale):
    X, y = field
    params = {**EXP, "variance": scale**2 * EXP["variance"], "nugget": scale**2 * EXP["nugget"]}
    value = gs.log_likelihood(X, scale * y, params, kernel="exponential")
    expected = gs.log_likelihood(X, y, EXP, kernel="exponential") - len(y) * np.log(scale)
    assert value == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("variance", [1e-300, 1e300])
def test_simulate_at_extreme_variances(field, variance):
    X, _ = field
    unit = gs.simulate(X, EXP, kernel="exponential", random_state=1)
    draw = gs.simulate(
        X,
        {**EXP, "variance": variance, "nugget": variance * EXP["nugget"]},
        kernel="exponential",
        random_state=1,
    )
    np.testing.assert_allclose(draw, np.sqrt(variance) * unit, rtol=1e-12)


# ---------------------------------------------------------------- memory refused up front
@pytest.fixture
def one_gib(monkeypatch):
    monkeypatch.setattr(NUMPY, "free_memory", lambda: 2**30)


def test_exact_simulation_too_large_is_refused_up_front(one_gib):
    X = np.random.default_rng(0).uniform(size=(30_000, 2))
    with pytest.raises(
        MemoryError, match=r"exact simulation at n = 30,000 sites needs about 26.8 GiB"
    ):
        gs.simulate(X, EXP, kernel="exponential", method="exact")


def test_conditional_simulation_too_large_is_refused_up_front(field, one_gib):
    X, y = field
    model = fit(X, y)
    new = np.random.default_rng(0).uniform(size=(30_000, 2))
    with pytest.raises(MemoryError, match="conditional simulation at m = 30,000 sites needs about"):
        model.sample_y(new)


# ---------------------------------------------------------------- arguments named
@pytest.mark.parametrize("seed", ["abc", 1.5, -1, True], ids=["str", "float", "negative", "bool"])
def test_random_state_must_be_a_seed_or_a_generator(field, seed):
    X, y = field
    with pytest.raises((TypeError, ValueError), match="random_state"):
        fit(X, y, random_state=seed)
    with pytest.raises((TypeError, ValueError), match="random_state"):
        gs.simulate(X, EXP, kernel="exponential", random_state=seed)
    with pytest.raises((TypeError, ValueError), match="random_state"):
        fit(X, y).sample_y(X[:3], random_state=seed)


def test_random_state_accepts_generators_and_legacy_random_states(field):
    X, y = field
    model = fit(X, y)
    a = model.sample_y(X[:3], random_state=np.random.RandomState(5))
    b = model.sample_y(X[:3], random_state=np.random.RandomState(5))
    np.testing.assert_array_equal(a, b)
    assert np.all(np.isfinite(model.sample_y(X[:3], random_state=np.random.default_rng(1))))


def test_non_numeric_column_is_named(field):
    X, y = field
    frame = pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "station": [f"s{i}" for i in range(len(X))]})
    with pytest.raises(ValueError, match="non-numeric column.*'station'"):
        fit(frame, y)
    with pytest.raises(ValueError, match="non-numeric column.*'station'"):
        fit(frame, y, trend=["station"])
    with pytest.raises(ValueError, match="non-numeric column.*'station'"):
        gs.log_likelihood(frame, y, EXP, kernel="exponential")


def test_nan_or_infinite_sites_are_refused_naming_the_column_and_rows(field):
    X, y = field
    frame = pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "elevation": np.arange(len(X), dtype=float)})
    frame.loc[[4, 9], "elevation"] = np.nan
    with pytest.raises(
        ValueError,
        match=r"X contains NaN or infinite values in column 'elevation' \(row\(s\) 4, 9\)",
    ):
        fit(frame, y, trend=["elevation"])
    model = fit(X, y)
    sites = X[:3].copy()
    sites[1, 0] = np.inf
    with pytest.raises(ValueError, match=r"column 0 \(row\(s\) 1\); .*drop those rows"):
        model.predict(sites)
    # missing observations stay allowed: NaN in y drops the site from the likelihood
    y_missing = pd.Series(y).where(np.arange(len(y)) != 7)
    assert np.isfinite(fit(X, y_missing).loglik_)


def test_ragged_input_is_refused_naming_the_argument():
    with pytest.raises(ValueError, match="X is ragged"):
        fit([[0.0, 1.0], [2.0], [3.0, 4.0], [5.0, 6.0]], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="y is ragged"):
        gs.log_likelihood([[0.0], [1.0]], [[1.0, 2.0], [3.0]], EXP, kernel="exponential")


def test_complex_y_is_refused(field):
    X, y = field
    with pytest.raises(ValueError, match="Complex data not supported: y"):
        fit(X, y + 1j)


@pytest.mark.parametrize("tile_size", [1, 16, 0])
def test_tile_size_below_the_minimum_is_refused(field, tile_size):
    X, y = field
    with pytest.raises(ValueError, match="tile_size"):
        fit(X, y, method="tlr", tile_size=tile_size)
    with pytest.raises(ValueError, match="tile_size"):
        gs.log_likelihood(X, y, EXP, kernel="exponential", method="tlr", tile_size=tile_size)
    with pytest.raises(ValueError, match="tile_size"):
        gs.simulate(X, EXP, kernel="exponential", method="tlr", tile_size=tile_size)


def test_inputs_are_not_modified(field):
    X, y = field
    frame = pd.DataFrame(X, columns=["lon", "lat"])
    Y = np.column_stack([y, y])
    Y[3, 1] = np.nan
    saved = frame.copy(), Y.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)
        model = fit(frame, Y, distance="euclidean")
        model.predict(frame, return_std=True)
        model.sample_y(frame.iloc[:5])
    pd.testing.assert_frame_equal(frame, saved[0])
    np.testing.assert_array_equal(Y, saved[1])


# ---------------------------------------------------------------- bounds honoured or refused
@pytest.mark.parametrize(
    ("name", "pair"), [("nugget", (0.2, 10.0)), ("variance", (3.0, 10.0)), ("nugget", (1e-6, 1e-4))]
)
def test_bounds_on_the_variance_or_nugget_are_honoured(field, name, pair):
    """Bounds on the variance and the nugget hold also while the variance is profiled, and
    a nugget bounded away from zero is reported within its bounds, not as 0.0."""
    X, y = field
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)
        model = fit(X, y, bounds={name: pair})
    assert pair[0] * (1 - 1e-9) <= model.params_[name] <= pair[1] * (1 + 1e-9)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (
            {"bounds": {"nugget": (0.1, 1.0)}, "nugget": False},
            r"bounds\['nugget'\] is given but nugget is held",
        ),
        (
            {"bounds": {"variance": (0.1, 1.0)}, "fixed": {"variance": 1.0}},
            r"bounds\['variance'\] is given",
        ),
        ({"bounds": {"range": (0.1, 1.0)}, "fixed": {"range": 0.2}}, r"bounds\['range'\] is given"),
        ({"bounds": {"range": "wide"}}, r"bounds\['range'\] must be a pair of numbers"),
        ({"bounds": {"range": (1.0,)}}, r"bounds\['range'\] must be a pair of numbers"),
    ],
    ids=["nugget-held", "variance-fixed", "range-fixed", "not-a-pair", "one-number"],
)
def test_bounds_for_a_held_parameter_or_malformed_are_refused(field, settings, match):
    X, y = field
    with pytest.raises(ValueError, match=match):
        fit(X, y, **settings)


# ---------------------------------------------------------------- more of the catalogue
def test_duplicate_column_names_are_refused(field):
    X, y = field
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        fit(pd.DataFrame(X, columns=["a", "a"]), y)


@pytest.mark.parametrize(("factor", "word"), [(1e300, "overflow"), (1e-300, "underflow")])
def test_coordinates_whose_squared_distances_leave_double_precision_are_refused(
    field, factor, word
):
    X, y = field
    with pytest.raises(ValueError, match=f"X coordinates .* would {word}"):
        fit(factor * X, y)
    model = fit(X, y)
    with pytest.raises(ValueError, match="X coordinates reach"):
        model.predict(np.array([[1e300, 0.0]]))


@pytest.mark.parametrize(
    ("factor", "match"), [(1e200, "would overflow"), (1e-170, "would underflow")]
)
def test_y_beyond_what_a_variance_can_hold_is_refused(field, factor, match):
    X, y = field
    with pytest.raises(ValueError, match=f"y .*{match} double precision"):
        fit(X, factor * y)


def test_sites_all_at_one_place_are_refused(field):
    _, y = field
    with pytest.raises(ValueError, match="all sites of X are at the same place"):
        fit(np.zeros((len(y), 2)), y)


@pytest.mark.parametrize("name", ["fixed", "bounds"])
def test_fixed_and_bounds_must_be_dicts(field, name):
    X, y = field
    with pytest.raises(TypeError, match=f"{name} must be a dict"):
        fit(X, y, **{name: [("range", 0.1)]})


def test_log_likelihood_checks_reml_ordering_and_design(field):
    X, y = field
    with pytest.raises(TypeError, match="reml must be True or False"):
        gs.log_likelihood(X, y, EXP, kernel="exponential", reml="yes")
    with pytest.raises(ValueError, match="ordering='hilbert' is not one of"):
        gs.log_likelihood(X, y, EXP, kernel="exponential", method="tlr", ordering="hilbert")
    with pytest.raises(ValueError, match="design matrix must be 2-D"):
        gs.log_likelihood(X, y, EXP, kernel="exponential", trend=np.ones((len(y), 1, 1)))


def test_score_of_a_replicate_without_observations_is_refused(field):
    X, y = field
    with pytest.raises(ValueError, match="y has no observed values"):
        fit(X, y).score(X, np.full(len(y), np.nan))


def test_fixed_nugget_far_above_the_data_variance_is_refused(field):
    X, y = field
    with pytest.raises(ValueError, match=r"nugget=0.1 is .* times the variance of y"):
        fit(X, 1e-10 * y, nugget=0.1)
    assert np.isfinite(
        fit(X, y, nugget=10.0).loglik_
    )  # a large nugget of the data's own order is a model


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.empty((0, 2)), "X has 0 rows"),
        (np.empty((120, 0)), r"X has 0 feature\(s\)"),
        (np.full((120, 2), "a").astype(object), "X must hold numbers; row 0, column 0 is 'a'"),
    ],
    ids=["no-rows", "no-columns", "strings"],
)
def test_empty_or_string_X_is_refused_naming_X(field, X, match):
    with pytest.raises(ValueError, match=match):
        fit(X, field[1][: len(X)])


# ---------------------------------------------------------------- nugget far above the variance
@pytest.mark.parametrize("variance", [1e-150, 1e-140])
def test_tlr_with_a_nugget_beyond_the_factorizations_range_is_refused_by_name(field, variance):
    """The TLR likelihood and draws factor ``R + (nugget / variance) I``: past the range in
    which tile norms stay finite (about 1e137 / n) the parameters are named, where the
    exact method still answers."""
    X, y = field
    params = {"variance": variance, "range": 0.2, "nugget": 0.1}
    for call in (
        lambda method: gs.log_likelihood(X, y, params, kernel="exponential", method=method),
        lambda method: gs.simulate(X, params, kernel="exponential", method=method, random_state=0),
    ):
        with pytest.raises(ValueError, match=r"params: the nugget .* times the variance"):
            call("tlr")
        assert np.all(np.isfinite(call("exact")))


def test_tlr_with_a_large_nugget_inside_the_range_agrees_with_exact(field):
    X, y = field
    params = {"variance": 1e-6, "range": 0.2, "nugget": 0.1}
    exact = gs.log_likelihood(X, y, params, kernel="exponential", method="exact")
    tlr = gs.log_likelihood(X, y, params, kernel="exponential", method="tlr", accuracy=1e-10)
    assert tlr == pytest.approx(exact, abs=1e-6)
