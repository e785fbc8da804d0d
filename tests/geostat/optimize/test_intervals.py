"""Confidence intervals of SpatialGP: Wald, log-Wald and profile likelihood."""

import math
import warnings

import numpy as np
import pytest
from scipy import optimize, stats
from sklearn.exceptions import NotFittedError

import geostat as gs
from geostat.optimize import intervals
from geostat.optimize.intervals import LOG_XTOL, ROOT_TOL, ProfileLikelihood, profile_loglik

CHI2 = stats.chi2.ppf(0.95, 1)
Z = stats.norm.ppf(0.975)
#: Deviance tolerance at a profile endpoint re-evaluated from scratch: Brent stops within
#: LOG_XTOL of the root in log theta, where the deviance changes by at most
#: 2 CHI2 / |log(endpoint / estimate)| per unit (a quadratic profile in log theta; the
#: half-widths here are at least 0.25), about 0.003, or at a signed root within ROOT_TOL
#: of the critical value, a deviance within 2 * 1.96 * ROOT_TOL = 0.002; the profile
#: maximizations agree to about 1e-6. Three times the larger, rounded up.
DEVIANCE_TOL = 0.01


@pytest.fixture(scope="module")
def data():
    """Exponential field with a nugget on 200 sites of the unit square."""
    rng = np.random.default_rng(13)
    X = rng.uniform(size=(200, 2))
    y = 1.0 + gs.simulate(
        X, {"variance": 1.0, "range": 0.1, "nugget": 0.2}, kernel="exponential", random_state=5
    )
    return X, y


@pytest.fixture(scope="module")
def fitted(data):
    return gs.SpatialGP(kernel="exponential").fit(*data)


@pytest.fixture(scope="module")
def profile(fitted):
    return fitted.confidence_intervals()


def test_wald_is_estimate_plus_minus_z_stderr(fitted):
    ci = fitted.confidence_intervals(method="wald")
    assert list(ci.index) == ["variance", "range", "nugget"]
    assert list(ci.columns) == ["estimate", "lower", "upper", "one_sided"]
    assert not ci["one_sided"].any()
    assert Z == pytest.approx(1.96, abs=1e-4)
    for name, row in ci.iterrows():
        assert row["estimate"] == fitted.params_[name]
        assert row["lower"] == pytest.approx(
            fitted.params_[name] - Z * fitted.stderr_[name], rel=1e-14
        )
        assert row["upper"] == pytest.approx(
            fitted.params_[name] + Z * fitted.stderr_[name], rel=1e-14
        )
    assert ci.attrs == {"level": 0.95, "method": "wald"}


def test_log_wald_is_positive_and_the_delta_method_on_the_log_scale(fitted):
    ci = fitted.confidence_intervals(level=0.9, method="log-wald")
    z = stats.norm.ppf(0.95)
    for name, row in ci.iterrows():
        half = z * fitted.stderr_[name] / row["estimate"]
        assert 0 < row["lower"] < row["estimate"] < row["upper"]
        assert np.log(row["upper"] / row["estimate"]) == pytest.approx(half, rel=1e-12)
        assert np.log(row["estimate"] / row["lower"]) == pytest.approx(half, rel=1e-12)


def test_profile_endpoints_are_where_the_deviance_is_the_chi2_quantile(fitted, profile):
    assert list(profile.columns) == ["estimate", "lower", "upper", "at_bound", "one_sided"]
    assert not profile["at_bound"].any() and not profile["one_sided"].any()
    for name, row in profile.iterrows():
        assert 0 < row["lower"] < row["estimate"] < row["upper"]
        deviance = 2 * (fitted.loglik_ - profile_loglik(fitted, name, [row["lower"], row["upper"]]))
        np.testing.assert_allclose(deviance, CHI2, atol=DEVIANCE_TOL, err_msg=name)


def test_profile_is_maximal_at_the_estimate(fitted):
    for name in ("variance", "range", "nugget"):
        estimate = fitted.params_[name]
        values = profile_loglik(fitted, name, estimate * np.array([0.8, 1 - 1e-6, 1 + 1e-6, 1.25]))
        # a relative step of 1e-6 changes a smooth maximum by O(1e-12 n): nothing
        np.testing.assert_allclose(values[1:3], fitted.loglik_, atol=1e-6)
        assert np.all(values[[0, 3]] < fitted.loglik_ - 1e-3)


def test_profile_of_range_equals_fits_with_the_range_fixed(data, fitted):
    X, y = data
    grid = fitted.params_["range"] * np.array([0.5, 0.8, 1.3, 2.0])
    brute = [gs.SpatialGP(kernel="exponential", fixed={"range": r}).fit(X, y).loglik_ for r in grid]
    # both maximize over variance and nugget to within ~1e-7 in the log-likelihood
    np.testing.assert_allclose(profile_loglik(fitted, "range", grid), brute, atol=1e-4)


def test_profile_leaves_a_nugget_estimated_at_zero_when_holding_the_range_makes_one_better():
    """Found by the coverage study (replication 14): the nugget is estimated at 0, and at
    the true range a positive nugget is better by 0.69 in log-likelihood; a warm start on
    the nugget's floor cannot see that (zero gradient in its logarithm)."""
    rng = np.random.default_rng([0, 14])
    X = rng.uniform(size=(250, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.1, "nugget": 0.1}, kernel="exponential", random_state=rng
    )
    est = gs.SpatialGP(kernel="exponential").fit(X, y)
    assert est.params_["nugget"] == 0.0
    grid = [0.1, 0.15]
    brute = [gs.SpatialGP(kernel="exponential", fixed={"range": r}).fit(X, y) for r in grid]
    assert min(b.params_["nugget"] for b in brute) > 0.01
    np.testing.assert_allclose(
        profile_loglik(est, "range", grid), [b.loglik_ for b in brute], atol=1e-4
    )


def test_profile_of_the_variance_has_its_closed_form():
    """Range fixed, no nugget: l_p(v) = l_hat - n/2 (s - 1 - log s), s = v_hat / v; the
    log-Wald interval (se = v_hat sqrt(2 / n)) agrees to O(1/n)."""
    n = 300
    X = np.random.default_rng(5).uniform(size=(n, 2))
    y = gs.simulate(X, {"variance": 2.0, "range": 0.1}, kernel="exponential", random_state=6)
    est = gs.SpatialGP(kernel="exponential", nugget=False, fixed={"range": 0.1}).fit(X, y)
    v_hat = est.params_["variance"]
    assert est.stderr_["variance"] == pytest.approx(v_hat * np.sqrt(2 / n), rel=1e-8)

    def excess(s):
        return n * (s - 1 - np.log(s)) - CHI2

    s_low, s_high = optimize.brentq(excess, 1e-3, 1.0), optimize.brentq(excess, 1.0, 10.0)
    ci = est.confidence_intervals()
    assert ci.loc["variance", "lower"] == pytest.approx(v_hat / s_high, rel=2 * LOG_XTOL)
    assert ci.loc["variance", "upper"] == pytest.approx(v_hat / s_low, rel=2 * LOG_XTOL)
    wald = est.confidence_intervals(method="log-wald")
    np.testing.assert_allclose(ci[["lower", "upper"]], wald[["lower", "upper"]], rtol=0.02)


def test_a_bound_reached_inside_the_threshold_is_the_endpoint(data):
    est = gs.SpatialGP(kernel="exponential", bounds={"range": (0.01, 0.12)}).fit(*data)
    assert est.params_["range"] < 0.12
    ci = est.confidence_intervals()
    assert ci.loc["range", "upper"] == pytest.approx(0.12, rel=1e-12)
    assert ci.loc["range", "at_bound"]
    assert not ci.loc["variance", "at_bound"]


def test_a_nugget_estimated_at_zero_has_lower_endpoint_zero():
    """Its interval is one-sided: the upper end at the chi-bar-squared quantile
    chi2_1(0.90) (tests/geostat/optimize/test_intervals_at_bound.py tests that rule)."""
    X = np.random.default_rng(1).uniform(size=(160, 2))
    y = gs.simulate(X, {"variance": 1.0, "range": 0.2, "smoothness": 1.5}, random_state=0)
    est = gs.SpatialGP(smoothness=1.5).fit(X, y)
    assert est.params_["nugget"] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ci = est.confidence_intervals()
    assert (
        ci.loc["nugget", "lower"] == 0.0
        and ci.loc["nugget", "at_bound"]
        and ci.loc["nugget", "one_sided"]
    )
    upper = ci.loc["nugget", "upper"]
    assert upper > 0
    deviance = 2 * (est.loglik_ - profile_loglik(est, "nugget", [upper])[0])
    assert deviance == pytest.approx(stats.chi2.ppf(0.90, 1), abs=DEVIANCE_TOL)
    log_wald = est.confidence_intervals(method="log-wald")  # the profile's, computed above
    assert (log_wald.loc["nugget", "lower"], log_wald.loc["nugget", "upper"]) == (0.0, upper)


def test_tlr_profile_uses_the_tlr_likelihood_and_agrees_with_exact():
    X = np.random.default_rng(1).uniform(size=(160, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.1, "nugget": 0.1}, kernel="exponential", random_state=2
    )
    exact = gs.SpatialGP(kernel="exponential").fit(X, y)
    tlr = gs.SpatialGP(kernel="exponential", method="tlr", tile_size=40).fit(X, y)
    assert tlr.method_ == "tlr"
    profile = ProfileLikelihood(tlr)
    assert profile.likelihood is tlr._likelihood
    lower, upper, at_bound = profile.interval("range", 0.95)
    expected = exact.confidence_intervals().loc["range"]
    # TLR values at accuracy 1e-8 and a derivative-free search stopped at 0.05 standard
    # errors: log-likelihoods within ~1e-3, endpoints within ~1e-4 relative
    assert (lower, upper, at_bound) == pytest.approx(
        (expected["lower"], expected["upper"], False), rel=5e-3
    )


def test_profiling_leaves_the_estimator_as_it_was(data, fitted, profile):
    X, _ = data
    again = gs.SpatialGP(kernel="exponential").fit(*data)
    assert fitted.params_ == again.params_ and fitted.loglik_ == again.loglik_
    np.testing.assert_array_equal(fitted.predict(X[:5]), again.predict(X[:5]))


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, "x", True, None], ids=repr)
def test_bad_level(fitted, level):
    with pytest.raises(ValueError, match="level"):
        fitted.confidence_intervals(level=level)


@pytest.mark.parametrize("method", ["bogus", "Wald", None], ids=repr)
def test_bad_method(fitted, method):
    with pytest.raises(ValueError, match="method"):
        fitted.confidence_intervals(method=method)


def test_profile_loglik_refuses_bad_arguments(fitted):
    with pytest.raises(ValueError, match="parameter='smoothness'"):
        profile_loglik(fitted, "smoothness", [0.5])
    with pytest.raises(ValueError, match="values"):
        profile_loglik(fitted, "range", [-0.1])
    with pytest.raises(ValueError, match="values"):
        profile_loglik(fitted, "range", [])


def test_unfitted_estimator_raises_not_fitted():
    with pytest.raises(NotFittedError):
        gs.SpatialGP().confidence_intervals()
    with pytest.raises(NotFittedError):
        profile_loglik(gs.SpatialGP(), "range", [1.0])


def test_intervals_need_no_warnings(fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted.confidence_intervals(level=0.8, method="profile")


def test_the_profile_is_kept_with_the_fit_and_serves_later_intervals_and_plots(data, monkeypatch):
    """Intervals, profiles and plots of one fit share one ProfileLikelihood: an interval
    asked for again (here by plot_profile) runs no maximization; a new fit starts afresh."""
    import matplotlib

    matplotlib.use("Agg")
    from geostat import plotting

    est = gs.SpatialGP(kernel="exponential").fit(*data)
    first = est.confidence_intervals()
    profile = ProfileLikelihood.of(est)
    assert ProfileLikelihood.of(est) is profile
    maximized = []
    original = ProfileLikelihood._maximize
    monkeypatch.setattr(
        ProfileLikelihood,
        "_maximize",
        lambda self, name, value: maximized.append(name) or original(self, name, value),
    )
    again = est.confidence_intervals()
    assert again.equals(first) and maximized == []
    plotting.plot_profile(est, "range", n_points=3)
    assert len(maximized) <= 3  # the curve's points only, not the interval again
    est.fit(*data)
    assert ProfileLikelihood.of(est) is not profile


def test_an_endpoint_search_ends_at_the_first_value_close_enough_to_the_critical_one():
    """Each value of `excess` is a profile maximization: once one is within ROOT_TOL of
    zero, Brent's method is not asked for more digits of theta."""
    calls = []

    def signed_root(theta):  # nearly linear in log theta, with its root at 2
        return 12.5 * math.log(2.0 / theta) + math.log(2.0 / theta) ** 2

    def excess(theta):
        calls.append(theta)
        return signed_root(theta)

    root = intervals._root(excess, 1.0, 5.0)
    values = [signed_root(theta) for theta in calls]  # Brent alone asks for one more
    assert root == calls[-1] and abs(values[-1]) <= ROOT_TOL
    assert all(abs(value) > ROOT_TOL for value in values[:-1])
