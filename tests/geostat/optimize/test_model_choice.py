"""The likelihood-ratio test of nested covariance models (geostat.likelihood_ratio_test)
and the information criteria of a fit: statistics from the fits' log-likelihoods, the
null distributions of interior and edge restrictions, refusal of models that are not
nested, and p-values that are not absurd under a true separable space-time model."""

import copy
import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import geostat as gs

SPATIAL = {"variance": 1.0, "range": 0.2, "nugget": 0.1}
SPACE_TIME = {"variance": 1.0, "range": 0.5, "time_range": 10.0, "nugget": 0.02}


def _fit(X, y, **settings):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gs.GeostatWarning)  # estimates on a bound, at this small n
        return gs.SpatialGP(method="exact", n_starts=1, **settings).fit(X, y)


@pytest.fixture(scope="module")
def spatial():
    """150 sites of an anisotropic exponential field (ranges 0.2 and 0.05, along x)."""
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(150, 2))
    y = gs.simulate(X * [1.0, 4.0], SPATIAL, kernel="exponential", random_state=12).ravel()
    return X, y


@pytest.fixture(scope="module")
def isotropic_pair(spatial):
    X, y = spatial
    return _fit(X, y, kernel="exponential"), _fit(
        X, y, kernel="exponential", anisotropy="geometric"
    )


def _space_time_data(seed, separability):
    """30 sites at 10 times of a space-time field (exponential in space and time)."""
    rng = np.random.default_rng(seed)
    sites = rng.uniform(size=(30, 2))
    X = np.column_stack([np.repeat(sites, 10, axis=0), np.tile(np.arange(10.0), 30)])
    kernel = gs.SpaceTime(space="exponential", separability=separability)
    return X, gs.simulate(
        X, SPACE_TIME, kernel=kernel, random_state=seed + 1, method="exact"
    ).ravel()


def _separable_and_gneiting(X, y):
    return (
        _fit(X, y, kernel=gs.SpaceTime(space="exponential", separability=0.0)),
        _fit(X, y, kernel=gs.SpaceTime(space="exponential")),
    )


@pytest.fixture(scope="module")
def space_time_pair():
    X, y = _space_time_data(21, 1.0)
    return (X, y), _separable_and_gneiting(X, y)


def test_separable_against_gneiting_is_a_mixture_on_the_edge(space_time_pair):
    _, (separable, gneiting) = space_time_pair
    test = gs.likelihood_ratio_test(separable, gneiting)
    assert test.statistic == 2.0 * (gneiting.loglik_ - separable.loglik_)
    assert test.df == 1 == gneiting.n_params_ - separable.n_params_
    assert test.restricted == ("separability",) and test.boundary == (True,)
    assert test.null_distribution == "0.5 chi2(0) + 0.5 chi2(1)" and test.weights == (
        (0.5, 0),
        (0.5, 1),
    )
    assert 0.0 <= test.p_value <= 1.0
    if test.statistic > 0:
        assert math.isclose(
            test.p_value, 0.5 * math.erfc(math.sqrt(test.statistic / 2.0)), rel_tol=1e-12
        )
    assert (
        test.p_value < 0.05
    )  # separability 1 in the data (the test has little power at 300 values)


def test_isotropic_against_geometric_anisotropy_is_chi2_with_2_df(isotropic_pair):
    isotropic, anisotropic = isotropic_pair
    test = gs.likelihood_ratio_test(isotropic, anisotropic)
    assert test.statistic == 2.0 * (anisotropic.loglik_ - isotropic.loglik_) > 0
    assert test.df == 2 and test.null_distribution == "chi2(2)" and test.weights == ((1.0, 2),)
    assert test.restricted == ("anisotropy_ratio", "anisotropy_angle") and test.boundary == (
        True,
        False,
    )
    assert math.isclose(
        test.p_value, math.exp(-test.statistic / 2.0), rel_tol=1e-12
    )  # chi2(2) survival
    assert test.p_value < 0.01  # ratio 0.25 in the data


def test_isotropic_against_a_fixed_angle_is_a_mixture(spatial, isotropic_pair):
    X, y = spatial
    fixed_angle = _fit(X, y, kernel=gs.Anisotropic(gs.Exponential(), angle=0.0))
    test = gs.likelihood_ratio_test(isotropic_pair[0], fixed_angle)
    assert test.restricted == ("anisotropy_ratio",) and test.boundary == (True,)
    assert test.null_distribution == "0.5 chi2(0) + 0.5 chi2(1)"


def test_interior_and_edge_restrictions_of_one_kernel(spatial):
    X, y = spatial
    exponential = _fit(X, y, kernel="exponential", nugget=False)
    matern = _fit(X, y, kernel="matern")
    test = gs.likelihood_ratio_test(
        exponential, matern
    )  # smoothness 0.5 (interior), nugget 0 (edge)
    assert set(test.restricted) == {"smoothness", "nugget"} and test.df == 2
    assert dict(zip(test.restricted, test.boundary, strict=True)) == {
        "smoothness": False,
        "nugget": True,
    }
    assert test.null_distribution == "0.5 chi2(1) + 0.5 chi2(2)"
    assert 0.0 <= test.p_value <= 1.0


def test_information_criteria_agree_with_the_log_likelihood(isotropic_pair, space_time_pair):
    for model in (*isotropic_pair, *space_time_pair[1]):
        k = len(model.result_.estimated) + np.size(model.coef_)
        n_observed = np.sum(~np.isnan(model._training.y))
        assert model.n_params_ == k
        assert model.aic_ == 2 * model.n_params_ - 2 * model.loglik_
        assert math.isclose(model.bic_, k * math.log(n_observed) - 2 * model.loglik_, rel_tol=1e-14)


def test_a_negative_statistic_warns_and_gives_p_1(isotropic_pair):
    isotropic, anisotropic = isotropic_pair
    worse = copy.copy(anisotropic)
    worse.loglik_ = isotropic.loglik_ - 0.5
    with pytest.warns(
        gs.GeostatWarning, match="below the small model's.*local optimum.*p-value is set to 1"
    ):
        test = gs.likelihood_ratio_test(isotropic, worse)
    assert test.statistic == -1.0 and test.p_value == 1.0


# ---------------------------------------------------------------------------- not nested
def test_replicates_against_space_time_are_refused_pointing_to_aic(space_time_pair):
    (X, y), (separable, _) = space_time_pair
    replicates = _fit(X[::10, :2], y.reshape(30, 10), kernel="exponential")
    for small, big in ((replicates, separable), (separable, replicates)):
        with pytest.raises(
            ValueError, match="independent replicates.*space-time.*not nested.*aic_ or bic_"
        ):
            gs.likelihood_ratio_test(small, big)


def test_models_of_different_data_trend_or_reml_are_refused(spatial, isotropic_pair):
    X, y = spatial
    isotropic, anisotropic = isotropic_pair
    other = _fit(X, y + 0.25 * X[:, 0], kernel="exponential", anisotropy="geometric")
    with pytest.raises(ValueError, match="different data.*fit both on the same X and y"):
        gs.likelihood_ratio_test(isotropic, other)
    linear = _fit(X, y, kernel="exponential", anisotropy="geometric", trend="linear")
    with pytest.raises(ValueError, match="different trends.*same trend"):
        gs.likelihood_ratio_test(isotropic, linear)
    reml = _fit(X, y, kernel="exponential", anisotropy="geometric", reml=True)
    with pytest.raises(ValueError, match="reml=False and big reml=True.*same reml"):
        gs.likelihood_ratio_test(isotropic, reml)


def test_models_that_are_not_nested_are_refused_saying_why(spatial, isotropic_pair):
    X, y = spatial
    isotropic, anisotropic = isotropic_pair
    with pytest.raises(
        ValueError,
        match="small is anisotropic and big isotropic.*likelihood_ratio_test\\(isotropic",
    ):
        gs.likelihood_ratio_test(anisotropic, isotropic)
    gaussian = _fit(X, y, kernel="gaussian")
    with pytest.raises(ValueError, match="different families.*not nested.*aic_ or bic_"):
        gs.likelihood_ratio_test(isotropic, gaussian)
    smooth = _fit(X, y, kernel=gs.Matern(smoothness=1.5))
    with pytest.raises(
        ValueError, match="big fixes smoothness at 1.5 and small has 0.5.*aic_ or bic_"
    ):
        gs.likelihood_ratio_test(isotropic, smooth)
    no_nugget = _fit(X, y, kernel="exponential", nugget=False)
    with pytest.raises(ValueError, match=r"small estimates \['nugget'\], which big fixes"):
        gs.likelihood_ratio_test(isotropic, no_nugget)
    with pytest.raises(ValueError, match="estimate the same parameters: there is nothing to test"):
        gs.likelihood_ratio_test(isotropic, isotropic)


def test_arguments_that_are_not_fitted_models_are_refused(isotropic_pair):
    with pytest.raises(TypeError, match="small must be a fitted geostat.SpatialGP; got str"):
        gs.likelihood_ratio_test("model", isotropic_pair[1])
    with pytest.raises(NotFittedError):
        gs.likelihood_ratio_test(isotropic_pair[0], gs.SpatialGP())


# ---------------------------------------------------------------------------- calibration
def test_p_values_under_a_true_separable_model_are_not_absurd():
    """Five data sets of a separable field: the p-values of separable against Gneiting lie
    in [0, 1], at most one falls below 0.05, and no statistic is negative beyond rounding
    (the Gneiting fit contains the separable one). Under the null the statistic is 0 about
    half the time (0.5 chi2(0) + 0.5 chi2(1)), so the median p-value is large."""
    p_values, statistics = [], []
    for seed in range(5):
        X, y = _space_time_data(100 + 7 * seed, 0.0)
        with warnings.catch_warnings():
            warnings.simplefilter(
                "error", gs.GeostatWarning
            )  # a negative statistic's warning fails the test
            warnings.filterwarnings("ignore", "the estimate of", gs.GeostatWarning)
            test = gs.likelihood_ratio_test(*_separable_and_gneiting(X, y))
        p_values.append(test.p_value)
        statistics.append(test.statistic)
    assert all(0.0 <= p <= 1.0 for p in p_values)
    assert sum(p < 0.05 for p in p_values) <= 1, (p_values, statistics)
    assert np.median(p_values) > 0.2 and max(statistics) < 10, (p_values, statistics)
