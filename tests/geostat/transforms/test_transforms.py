"""Target transforms (geostat.transforms): the transform and its inverse, the Jacobian of
the likelihood, back-transformed predictions (against closed forms, SciPy's lognormal,
adaptive quadrature and simulation), Box-Cox lambda by maximum likelihood, model-file
dicts and bad input."""

import json
import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from geostat.errors import GeostatWarning
from geostat.transforms import BoxCox, Identity, Log, Transform, get_transform

LAMBDAS = (-1.0, -0.5, 0.0, 1e-9, 0.25, 0.5, 1.0, 2.0)
ALL = [Identity(), Log(), *(BoxCox(lmbda) for lmbda in LAMBDAS)]
IDS = [repr(t) for t in ALL]


def gaussian_profile(z):
    """The maximized i.i.d. Gaussian log-likelihood of the observed z (mean and variance
    estimated): ``-n/2 (log(2 pi sigma_hat^2) + 1)``."""
    z = z[~np.isnan(z)]
    return -0.5 * z.size * (math.log(2 * math.pi * np.var(z)) + 1.0)


# ------------------------------------------------------------------------- construction
@pytest.mark.parametrize(
    "spec, expected",
    [
        (None, Identity()),
        ("identity", Identity()),
        ("log", Log()),
        ("boxcox", BoxCox()),
        (BoxCox(0.3), BoxCox(0.3)),
    ],
)
def test_get_transform(spec, expected):
    transform = get_transform(spec)
    assert transform == expected and isinstance(transform, Transform)
    assert transform.n_estimated == (1 if spec == "boxcox" else 0)


@pytest.mark.parametrize("spec", ["sqrt", "Log", "", 3, 0.5, BoxCox, ["log"]])
def test_get_transform_refuses_other_values(spec):
    with pytest.raises(
        ValueError, match=r"target_transform must be None, 'identity', 'log', 'boxcox'"
    ):
        get_transform(spec)


def test_names():
    assert [t.name for t in (Identity(), Log(), BoxCox(0.5))] == ["identity", "log", "boxcox"]


# ------------------------------------------------------------------------- the transform
@pytest.mark.parametrize("transform", ALL, ids=IDS)
def test_round_trips_and_nan(transform):
    """``1 + lambda z = y^lambda`` is formed from z, which loses ``log10 max(1, y^-lambda)``
    digits: at most 4 for |lambda| <= 2 and y in [0.01, 100], hence rtol 1e-11."""
    y = np.concatenate([np.logspace(-2, 2, 25), [np.nan]])
    original = y.copy()
    z = transform.forward(y)
    np.testing.assert_allclose(transform.inverse(z), y, rtol=1e-11, equal_nan=True)
    assert np.isnan(z[-1]) and np.array_equal(
        y, original, equal_nan=True
    )  # NaN stays NaN; input untouched
    np.testing.assert_allclose(
        transform.forward(transform.inverse(z[:-1])), z[:-1], rtol=1e-12, atol=1e-12
    )


def test_box_cox_is_continuous_in_lambda_and_known_at_simple_values():
    y = np.array([0.5, 1.0, 2.0, 9.0])
    np.testing.assert_allclose(BoxCox(1e-12).forward(y), np.log(y), rtol=1e-10, atol=1e-15)
    np.testing.assert_array_equal(BoxCox(0.0).forward(y), np.log(y))
    np.testing.assert_allclose(BoxCox(1.0).forward(y), y - 1, rtol=1e-14)
    np.testing.assert_allclose(BoxCox(0.5).forward(y), 2 * (np.sqrt(y) - 1), rtol=1e-14)
    np.testing.assert_allclose(BoxCox(-1.0).forward(y), 1 - 1 / y, rtol=1e-14)


@pytest.mark.parametrize(
    "lmbda, z, limit",
    [(0.5, -2.0, 0.0), (0.5, -7.0, 0.0), (-0.5, 2.0, np.inf), (-0.5, 9.0, np.inf)],
)
def test_inverse_beyond_the_range_takes_the_limit(lmbda, z, limit):
    """The convention: 0 beyond the boundary for lambda > 0, +inf beyond the pole for lambda < 0."""
    assert BoxCox(lmbda).inverse([z])[0] == limit


@pytest.mark.parametrize("transform", ALL, ids=IDS)
def test_log_jacobian_equals_the_numerical_derivative(transform):
    """Central differences with step h = 1e-5 y: truncation error ~ h^2 g'''/(6 g') ~ 1e-10
    relative, rounding ~ 1e-16 g / h ~ 1e-11: rtol 1e-7 on the sum of 20 logs is ample."""
    y = np.concatenate([np.logspace(-2, 2, 20), [np.nan]])
    observed = y[:-1]
    h = 1e-5 * observed
    derivative = (transform.forward(observed + h) - transform.forward(observed - h)) / (2 * h)
    assert transform.log_jacobian(y) == pytest.approx(
        np.sum(np.log(derivative)), rel=1e-7, abs=1e-7
    )


def test_log_jacobian_closed_forms():
    y = np.array([0.5, 2.0, np.nan, 7.0])
    total = np.log(0.5) + np.log(2.0) + np.log(7.0)
    assert Identity().log_jacobian(y) == 0.0
    assert Log().log_jacobian(y) == pytest.approx(-total, rel=1e-14)
    assert BoxCox(0.3).log_jacobian(y) == pytest.approx(-0.7 * total, rel=1e-14)
    assert Log().log_jacobian([np.nan]) == 0.0


# ------------------------------------------------------------------------- predictions
MU = np.array([-1.0, 0.0, 0.5, 2.0, 4.0])
S = np.array([0.05, 0.3, 1.0, 0.7, 2.0])


def test_lognormal_predictions_equal_scipy():
    reference = stats.lognorm(s=S, scale=np.exp(MU))
    t = Log()
    np.testing.assert_allclose(t.mean(MU, S), reference.mean(), rtol=1e-12)
    np.testing.assert_allclose(t.std(MU, S), reference.std(), rtol=1e-12)
    np.testing.assert_allclose(t.median(MU, S), reference.median(), rtol=1e-12)
    for q in (0.01, 0.25, 0.9):
        np.testing.assert_allclose(t.quantile(MU, S, q), reference.ppf(q), rtol=1e-12)
    low, high = t.interval(MU, S, 0.8)
    expected_low, expected_high = reference.interval(0.8)
    np.testing.assert_allclose(low, expected_low, rtol=1e-12)
    np.testing.assert_allclose(high, expected_high, rtol=1e-12)
    # Box-Cox at lambda = 0 is the same lognormal
    for method in ("mean", "std", "median"):
        np.testing.assert_allclose(
            getattr(BoxCox(0.0), method)(MU, S), getattr(t, method)(MU, S), rtol=1e-14
        )


def test_identity_predictions_are_the_gaussian_ones():
    t = Identity()
    np.testing.assert_array_equal(t.mean(MU, S), MU)
    np.testing.assert_array_equal(t.std(MU, S), S)
    np.testing.assert_allclose(t.quantile(MU, S, 0.975), MU + 1.959963984540054 * S, rtol=1e-14)


def test_predictions_broadcast_keep_nan_and_give_scalars_for_scalars():
    t = BoxCox(0.5)
    mean = t.mean(np.array([[0.0], [1.0]]), np.array([0.1, np.nan, 0.3]))
    assert (
        mean.shape == (2, 3) and np.isnan(mean[:, 1]).all() and np.isfinite(mean[:, [0, 2]]).all()
    )
    assert np.isnan(t.mean(np.nan, 1.0)) and np.isnan(t.median(0.0, np.nan))
    assert np.ndim(t.mean(0.0, 1.0)) == 0 and np.ndim(Log().quantile(0.0, 1.0, 0.5)) == 0
    assert t.std(1.0, 0.0) == 0.0 and t.mean(1.0, 0.0) == pytest.approx(t.inverse(1.0), rel=1e-14)


def _quad_moments(lmbda, mu, s):
    """Mean and standard deviation of max(1 + lambda Z, 0)^(1/lambda), Z ~ N(mu, s^2),
    lambda > 0, by adaptive quadrature over the range of g (relative accuracy 1e-12),
    the mass beyond the boundary at y = 0."""
    boundary = -1.0 / lmbda
    density = stats.norm(mu, s)
    inverse = lambda z: (1 + lmbda * z) ** (1 / lmbda)  # noqa: E731
    low, high = max(boundary, mu - 40 * s), mu + 40 * s
    mean = integrate.quad(
        lambda z: inverse(z) * density.pdf(z), low, high, epsabs=0, epsrel=1e-12, limit=500
    )[0]
    second = integrate.quad(
        lambda z: (inverse(z) - mean) ** 2 * density.pdf(z),
        low,
        high,
        epsabs=0,
        epsrel=1e-12,
        limit=500,
    )[0]
    return mean, math.sqrt(second + mean**2 * density.cdf(boundary))


@pytest.mark.parametrize("lmbda", [2.0, 1.7, 1.0, 0.5, 0.3, 0.05])
@pytest.mark.parametrize("distance", [-3.0, 0.0, 1.5, 4.0, 6.9, 7.1, 12.0])
def test_box_cox_moments_equal_adaptive_quadrature(lmbda, distance):
    """Accurate to about 1e-8 relative (closed form near the boundary, Gauss–Hermite away
    from it): checked with rtol 1e-7 against quadrature to 1e-12, `distance` being that
    of the boundary below mu in standard deviations."""
    s = 0.7
    mu = (distance * lmbda * s - 1) / lmbda
    mean, std = _quad_moments(lmbda, mu, s)
    assert BoxCox(lmbda).mean(mu, s) == pytest.approx(mean, rel=1e-7)
    assert BoxCox(lmbda).std(mu, s) == pytest.approx(std, rel=1e-7)


def test_box_cox_moments_at_lambda_one_and_one_half_in_closed_form():
    """lambda = 1: Y = (1 + Z)_+, whose moments are the normal partial expectations
    s (a Phi(a) + phi(a)) and s^2 ((a^2 + 1) Phi(a) + a phi(a)), a = (1 + mu) / s;
    lambda = 1/2 far from the boundary: Y = (1 + Z/2)^2, mean (1 + mu/2)^2 + s^2/4."""
    mu, s = np.array([-2.0, -1.0, 0.0, 1.5]), np.array([0.5, 1.0, 2.0, 0.4])
    a = (1 + mu) / s
    first = s * (a * stats.norm.cdf(a) + stats.norm.pdf(a))
    second = s**2 * ((a**2 + 1) * stats.norm.cdf(a) + a * stats.norm.pdf(a))
    np.testing.assert_allclose(BoxCox(1.0).mean(mu, s), first, rtol=1e-9)
    np.testing.assert_allclose(BoxCox(1.0).std(mu, s), np.sqrt(second - first**2), rtol=1e-8)
    mu, s = np.array([10.0, 40.0]), np.array([0.5, 3.0])  # boundary at z = -2: 24 and 14 sd away
    np.testing.assert_allclose(BoxCox(0.5).mean(mu, s), (1 + mu / 2) ** 2 + s**2 / 4, rtol=1e-13)


def test_box_cox_mean_agrees_with_simulation():
    """A Monte Carlo mean of 200,000 draws of g^{-1}(Z): within 5 standard errors."""
    lmbda, mu, s, n = 0.3, 0.2, 0.8, 200_000
    draws = BoxCox(lmbda).inverse(np.random.default_rng(3).normal(mu, s, n))
    error = draws.std() / math.sqrt(n)
    assert abs(BoxCox(lmbda).mean(mu, s) - draws.mean()) < 5 * error


def test_box_cox_moments_for_negative_lambda():
    """The pole beyond the rule's nodes: the moments of Z short of the pole; within them: +inf."""
    lmbda, mu, s = -0.05, 0.0, 0.3  # pole at z = 20, 67 standard deviations above mu
    pole = -1 / lmbda
    density = stats.norm(mu, s)
    inverse = lambda z: (1 + lmbda * z) ** (1 / lmbda)  # noqa: E731
    mean = integrate.quad(
        lambda z: inverse(z) * density.pdf(z), mu - 40 * s, mu + 40 * s, epsabs=0, epsrel=1e-12
    )[0]
    assert mu + 40 * s < pole
    assert BoxCox(lmbda).mean(mu, s) == pytest.approx(mean, rel=1e-10)
    near = BoxCox(-0.5)  # pole at z = 2
    assert near.mean(0.0, 0.5) == np.inf and near.std(0.0, 0.5) == np.inf
    assert near.median(0.0, 0.5) == 1.0 and near.quantile(0.0, 0.5, 0.999999999) == np.inf


def test_moments_are_computed_by_blocks_of_any_size():
    mu = np.linspace(-1, 3, 20_000).reshape(100, 200)
    t = BoxCox(0.5)
    np.testing.assert_array_equal(t.mean(mu, 0.4)[37], t.mean(mu[37], 0.4))


@pytest.mark.parametrize("transform", [Log(), BoxCox(0.5)], ids=["log", "boxcox"])
def test_prediction_intervals_cover_at_their_level(transform):
    """Data simulated from the model with known (mu, s): the 90% interval covers a
    binomial fraction; 4 binomial standard errors (n = 4000: 0.019)."""
    rng = np.random.default_rng(7)
    n = 4000
    mu, s = rng.uniform(0.5, 2.0, n), rng.uniform(0.1, 0.6, n)
    y = transform.inverse(mu + s * rng.normal(size=n))
    low, high = transform.interval(mu, s, 0.9)
    covered = np.mean((low <= y) & (y <= high))
    assert abs(covered - 0.9) < 4 * math.sqrt(0.9 * 0.1 / n)
    below_median = np.mean(y < transform.median(mu, s))
    assert abs(below_median - 0.5) < 4 * math.sqrt(0.25 / n)


# ------------------------------------------------------------------------- Box-Cox lambda
@pytest.mark.parametrize("lmbda, mu, sd", [(0.0, 1.0, 0.5), (0.5, 2.0, 1.0), (1.0, 2.0, 0.8)])
def test_box_cox_lambda_by_maximum_likelihood(lmbda, mu, sd):
    """n = 500 draws of g^{-1}(N(mu, sd^2)): the estimate within 4 standard errors of the
    truth (the standard error from the curvature of the profile log-likelihood), and
    equal to SciPy's ``boxcox_normmax(method="mle")``, which maximizes the same
    likelihood, to 1e-4."""
    y = BoxCox(lmbda).inverse(np.random.default_rng(1).normal(mu, sd, 500))
    estimate = BoxCox.estimate(y, gaussian_profile)
    assert isinstance(estimate, BoxCox) and estimate.n_estimated == 0

    def loglik(value):
        return gaussian_profile(BoxCox(value).forward(y)) + BoxCox(value).log_jacobian(y)

    h = 1e-3
    curvature = (
        loglik(estimate.lmbda + h) - 2 * loglik(estimate.lmbda) + loglik(estimate.lmbda - h)
    ) / h**2
    assert curvature < 0
    assert abs(estimate.lmbda - lmbda) < 4 / math.sqrt(-curvature)
    assert estimate.lmbda == pytest.approx(stats.boxcox_normmax(y, method="mle"), abs=1e-4)


def test_box_cox_estimate_ignores_missing_values_and_resolve_uses_it():
    y = Log().inverse(np.random.default_rng(2).normal(1.0, 0.5, 200))
    with_missing = np.concatenate([y, [np.nan, np.nan]])
    original = with_missing.copy()
    assert BoxCox.estimate(with_missing, gaussian_profile) == BoxCox.estimate(y, gaussian_profile)
    assert np.array_equal(with_missing, original, equal_nan=True)
    assert BoxCox().resolve(y, gaussian_profile) == BoxCox.estimate(y, gaussian_profile)
    for fixed in (Identity(), Log(), BoxCox(0.2)):
        assert fixed.resolve(y, gaussian_profile) is fixed


def test_box_cox_estimate_on_a_bound_warns():
    y = BoxCox(1.0).inverse(np.random.default_rng(4).normal(3.0, 0.5, 300))
    with pytest.warns(GeostatWarning, match="lies on a bound"):
        estimate = BoxCox.estimate(y, gaussian_profile, bounds=(-1.0, 0.0))
    assert estimate.lmbda == pytest.approx(0.0, abs=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BoxCox.estimate(y, gaussian_profile)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda y: BoxCox.estimate(y, "not a function"),
            TypeError,
            "profile_loglik must be a function",
        ),
        (
            lambda y: BoxCox.estimate(y, gaussian_profile, bounds=(2, 1)),
            ValueError,
            "finite with low < high",
        ),
        (
            lambda y: BoxCox.estimate(y, gaussian_profile, bounds=(0, np.inf)),
            ValueError,
            "bounds must be finite",
        ),
        (
            lambda y: BoxCox.estimate(y, gaussian_profile, bounds=3),
            ValueError,
            "bounds must be two numbers",
        ),
        (
            lambda y: BoxCox.estimate(y, lambda z: np.nan),
            ValueError,
            "profile_loglik gave no finite log-likelihood",
        ),
        (lambda y: BoxCox.estimate(-y, gaussian_profile), ValueError, "y has 50 value"),
    ],
    ids=[
        "not-callable",
        "reversed-bounds",
        "infinite-bound",
        "scalar-bounds",
        "no-finite-loglik",
        "negative-y",
    ],
)
def test_box_cox_estimate_bad_input(call, error, match):
    y = np.random.default_rng(0).uniform(1, 2, 50)
    with pytest.raises(error, match=match):
        call(y)


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("transform", [Log(), BoxCox(0.5)], ids=["log", "boxcox"])
def test_non_positive_y_is_refused_with_the_fix(transform):
    y = np.array([1.0, 0.0, -2.0, np.nan, 3.0])
    for call in (transform.forward, transform.log_jacobian):
        with pytest.raises(ValueError) as raised:
            call(y)
        message = str(raised.value)
        assert message.startswith("y has 2 value(s) <= 0 (the smallest -2)")
        assert "offset" in message and "target_transform=None" in message


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda t: t.mean(0.0, -1.0), "s is a standard deviation and must be >= 0; got -1"),
        (lambda t: t.std([0.0, 1.0], [1.0, 2.0, 3.0]), "mu and s must have shapes that broadcast"),
        (
            lambda t: t.quantile(0.0, 1.0, 1.0),
            "q must hold probabilities strictly between 0 and 1; got 1",
        ),
        (lambda t: t.quantile(0.0, 1.0, [0.5, -0.1]), "got -0.1"),
        (lambda t: t.interval(0.0, 1.0, 90), r"level must be a number in \(0, 1\)"),
        (lambda t: t.interval(0.0, 1.0, True), "level must be a number"),
        (lambda t: t.mean("a", 1.0), "mu must hold numbers"),
        (lambda t: t.forward(["x"]), "y must hold numbers"),
    ],
    ids=[
        "negative-s",
        "shapes",
        "q-one",
        "q-negative",
        "level-percent",
        "level-bool",
        "mu-text",
        "y-text",
    ],
)
@pytest.mark.parametrize(
    "transform", [Identity(), Log(), BoxCox(0.5)], ids=["identity", "log", "boxcox"]
)
def test_bad_arguments_are_named(transform, call, match):
    with pytest.raises(ValueError, match=match):
        call(transform)


@pytest.mark.parametrize("lmbda", [np.nan, np.inf, "0.5", True, [0.5]])
def test_bad_lambda_is_refused(lmbda):
    with pytest.raises(ValueError, match="lmbda must be a finite number"):
        BoxCox(lmbda)


def test_a_box_cox_transform_without_lambda_says_how_to_get_one():
    for call in (
        lambda t: t.forward([1.0]),
        lambda t: t.mean(0.0, 1.0),
        lambda t: t.log_jacobian([1.0]),
    ):
        with pytest.raises(ValueError, match=r"no lmbda yet.*BoxCox\.estimate"):
            call(BoxCox())


# ------------------------------------------------------------------------- model files
@pytest.mark.parametrize("transform", [*ALL, BoxCox()], ids=[*IDS, "boxcox-to-estimate"])
def test_dict_round_trip_through_json(transform):
    state = transform.to_dict()
    assert all(isinstance(v, (str, float)) for v in state.values()) and isinstance(
        state["name"], str
    )
    loaded = Transform.from_dict(json.loads(json.dumps(state)))
    assert loaded == transform and type(loaded) is type(transform)
    assert type(transform).from_dict(state) == transform


@pytest.mark.parametrize(
    "state, match",
    [
        (["log"], "stored as a dict"),
        ("log", "stored as a dict"),
        (None, "stored as a dict"),
        ({}, "field 'name' must be one of"),
        ({"name": "sqrt"}, "field 'name' must be one of .*got 'sqrt'"),
        ({"name": 1}, "field 'name' must be one of"),
        ({"name": ["log"]}, "field 'name' must be one of"),
        ({"name": "x" * 10_000}, r"got 'xxxx.*\.\.\.\.$"),
        ({"name": "log", "lmbda": 0.5}, r"unknown field\(s\) 'lmbda'; it has only \['name'\]"),
        ({"name": "boxcox", "lmbda": 0.5, "shift": 1.0}, r"unknown field\(s\) 'shift'"),
        ({"name": "boxcox", "lmbda": None}, "field 'lmbda' must be a finite number"),
        ({"name": "boxcox", "lmbda": "0.5"}, "field 'lmbda' must be a finite number"),
        ({"name": "boxcox", "lmbda": True}, "field 'lmbda' must be a finite number"),
        ({"name": "boxcox", "lmbda": float("nan")}, "field 'lmbda' must be a finite number"),
        ({"name": "boxcox", "lmbda": 1e400}, "field 'lmbda' must be a finite number"),
        ({"name": "boxcox", "lmbda": {"$array": "x"}}, "field 'lmbda' must be a finite number"),
    ],
    ids=[
        "list",
        "string",
        "none",
        "no-name",
        "unknown-name",
        "number-name",
        "list-name",
        "huge-name",
        "log-with-lambda",
        "extra-field",
        "null-lambda",
        "text-lambda",
        "bool-lambda",
        "nan-lambda",
        "inf-lambda",
        "object-lambda",
    ],
)
def test_hostile_dicts_are_refused_naming_the_field(state, match):
    with pytest.raises(ValueError, match=match):
        Transform.from_dict(state)


def test_from_dict_on_a_subclass_requires_that_transform():
    with pytest.raises(ValueError, match="field 'name' is 'log', not a BoxCox transform"):
        BoxCox.from_dict({"name": "log"})
