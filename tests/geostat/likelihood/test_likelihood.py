"""Exact likelihood against dense references: scipy's multivariate normal, explicit GLS,
finite-difference gradients and an independent Fisher information."""

import numpy as np
import pytest
from problems import uniform_sites
from scipy.spatial.distance import cdist
from scipy.stats import multivariate_normal
from strategies import tlr_loglik_error_scale

import geostat as gs
from geostat import covariance
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood
from geostat.optimize import ParameterSpace
from geostat.optimize.objective import Objective

PARAMS = {
    "exponential": {"variance": 1.3, "range": 0.2, "nugget": 0.05},
    "matern": {"variance": 0.8, "range": 0.15, "smoothness": 1.3, "nugget": 0.02},
    "gaussian": {"variance": 1.1, "range": 0.3, "nugget": 0.1},
    "powered_exponential": {"variance": 0.9, "range": 0.25, "power": 1.4, "nugget": 0.03},
}


def dense_cov(kernel, X, params):
    kern = get_kernel(kernel)
    shape = {k: params[k] for k in kern.shape_names if k in params}
    C = params["variance"] * kern.correlation(cdist(X, X), params["range"], **shape)
    return C + params.get("nugget", 0.0) * np.eye(len(X))


def gls_reference(C, F, y):
    Ci = np.linalg.inv(C)
    beta = np.linalg.solve(F.T @ Ci @ F, F.T @ Ci @ y)
    return beta


@pytest.fixture
def sites(rng):
    return uniform_sites(120, seed=rng)


@pytest.mark.parametrize("kernel", list(PARAMS))
def test_no_trend_matches_multivariate_normal(kernel, sites, rng):
    params = PARAMS[kernel]
    C = dense_cov(kernel, sites, params)
    y = np.linalg.cholesky(C) @ rng.standard_normal(len(sites))
    expected = multivariate_normal(np.zeros(len(sites)), C).logpdf(y)
    got = gs.log_likelihood(sites, y, params, kernel=kernel, trend=None)
    assert got == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("trend", ["constant", "linear"])
def test_gls_trend_matches_multivariate_normal(trend, sites, rng):
    params = PARAMS["matern"]
    C = dense_cov("matern", sites, params)
    F = (
        np.ones((len(sites), 1))
        if trend == "constant"
        else np.column_stack([np.ones(len(sites)), sites])
    )
    y = F @ rng.normal(size=F.shape[1]) + np.linalg.cholesky(C) @ rng.standard_normal(len(sites))
    beta = gls_reference(C, F, y)
    expected = multivariate_normal(F @ beta, C).logpdf(y)
    assert gs.log_likelihood(sites, y, params, kernel="matern", trend=trend) == pytest.approx(
        expected, rel=1e-10
    )


def test_design_matrix_and_covariate_columns_agree(sites, rng):
    import pandas as pd

    params = PARAMS["exponential"]
    z = rng.normal(size=len(sites))
    y = rng.normal(size=len(sites))
    frame = pd.DataFrame({"x": sites[:, 0], "y": sites[:, 1], "elev": z})
    by_column = gs.log_likelihood(frame, y, params, kernel="exponential", trend=["elev"])
    design = np.column_stack([np.ones(len(sites)), z])
    by_design = gs.log_likelihood(sites, y, params, kernel="exponential", trend=design)
    assert by_column == pytest.approx(by_design, rel=1e-12)


def test_replicates_with_missing_sum_over_observed(sites, rng):
    params = PARAMS["exponential"]
    C = dense_cov("exponential", sites, params)
    Y = np.linalg.cholesky(C) @ rng.standard_normal((len(sites), 4)) + 3.0
    Y[rng.uniform(size=Y.shape) < 0.2] = np.nan
    Y[:, 1] = np.where(np.isnan(Y[:, 1]), 0.5, Y[:, 1])  # one complete replicate
    expected = 0.0
    for j in range(Y.shape[1]):
        obs = ~np.isnan(Y[:, j])
        Cj, Fj, yj = C[np.ix_(obs, obs)], np.ones((obs.sum(), 1)), Y[obs, j]
        expected += multivariate_normal(Fj @ gls_reference(Cj, Fj, yj), Cj).logpdf(yj)
    assert gs.log_likelihood(sites, Y, params, kernel="exponential") == pytest.approx(
        expected, rel=1e-10
    )


def test_reml_matches_explicit_formula(sites, rng):
    params = PARAMS["matern"]
    C = dense_cov("matern", sites, params)
    F = np.column_stack([np.ones(len(sites)), sites])
    y = np.linalg.cholesky(C) @ rng.standard_normal(len(sites))
    Ci = np.linalg.inv(C)
    P = Ci - Ci @ F @ np.linalg.solve(F.T @ Ci @ F, F.T @ Ci)
    n, p = F.shape
    expected = -0.5 * (
        (n - p) * np.log(2 * np.pi)
        + np.linalg.slogdet(C)[1]
        + np.linalg.slogdet(F.T @ Ci @ F)[1]
        + y @ P @ y
    )
    got = gs.log_likelihood(sites, y, params, kernel="matern", trend="linear", reml=True)
    assert got == pytest.approx(expected, rel=1e-10)


GRADIENT_CASES = {
    "profiled-nugget": ("matern", True, {}, False),
    "profiled-no-nugget": ("exponential", False, {}, False),
    "fixed-nugget": ("matern", 0.05, {}, False),
    "fixed-variance": ("exponential", True, {"variance": 1.2}, False),
    "reml": ("matern", True, {}, True),
    "power": ("powered_exponential", True, {}, False),
    "gaussian-fixed-range": ("gaussian", True, {"range": 0.3}, False),
}


@pytest.mark.parametrize("case", list(GRADIENT_CASES))
def test_objective_gradient_matches_finite_differences(case, sites, rng):
    kernel, nugget, fixed, reml = GRADIENT_CASES[case]
    kern = get_kernel(kernel)
    y = rng.normal(size=(len(sites), 2))
    y[:5, 1] = np.nan
    F = np.column_stack([np.ones(len(sites)), sites[:, 0]])
    lik = ExactLikelihood(sites, y, F, kern, get_distance("euclidean"), reml=reml)
    space = ParameterSpace(
        kern, nugget=nugget, fixed=fixed, max_distance=lik.max_distance, data_variance=1.0
    )
    objective = Objective(lik, space)
    start = {
        "variance": 0.9,
        "range": 0.2,
        "smoothness": 1.2,
        "power": 1.3,
        "ratio": 0.1,
        "nugget": 0.08,
    }
    z = space.to_z({k: start[k] for k in space.names})
    _, grad = objective(z)
    h = 1e-6
    numeric = [
        (
            objective.evaluate(z + h * e, gradient=False)
            - objective.evaluate(z - h * e, gradient=False)
        )
        / (2 * h)
        for e in np.eye(len(z))
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_fisher_information_matches_dense_formula(sites, rng):
    params = PARAMS["matern"]
    kern = get_kernel("matern")
    y = rng.normal(size=(len(sites), 1))
    lik = ExactLikelihood(sites, y, np.ones((len(sites), 1)), kern, get_distance("euclidean"))
    names = ["variance", "range", "smoothness", "nugget"]
    info = lik.fisher_information(params, names)
    C = dense_cov("matern", sites, params)
    Ci = np.linalg.inv(C)
    derivs = []
    for name in names:
        h = 1e-6 * params[name]
        up, down = dict(params), dict(params)
        up[name] += h
        down[name] -= h
        derivs.append((dense_cov("matern", sites, up) - dense_cov("matern", sites, down)) / (2 * h))
    expected = np.array([[0.5 * np.trace(Ci @ A @ Ci @ B) for B in derivs] for A in derivs])
    np.testing.assert_allclose(info, expected, rtol=1e-5)


def test_not_positive_definite_is_reported(rng):
    X = np.repeat(rng.uniform(size=(10, 2)), 2, axis=0)
    with pytest.raises(gs.NotPositiveDefiniteError) as info:
        gs.log_likelihood(
            X, rng.normal(size=20), {"variance": 1.0, "range": 0.1}, kernel="exponential"
        )
    assert info.value.tile == 0
    assert "nugget" in str(info.value)


@pytest.mark.parametrize(
    "params, error",
    [
        ({"variance": -1.0, "range": 0.1}, ValueError),
        ({"variance": 1.0, "range": 0.0}, ValueError),
        ({"variance": 1.0, "range": np.inf}, ValueError),
        ({"variance": 1.0, "range": 0.1, "nugget": -0.1}, ValueError),
        ({"variance": 1.0}, ValueError),
        ({"variance": 1.0, "range": 0.1, "sill": 2.0}, ValueError),
        ({"variance": "1", "range": 0.1}, TypeError),
        ([1.0, 0.1], TypeError),
    ],
    ids=[
        "negative-variance",
        "zero-range",
        "infinite-range",
        "negative-nugget",
        "missing-range",
        "unknown-key",
        "string",
        "list",
    ],
)
def test_bad_params_raise(params, error, sites, rng):
    with pytest.raises(error, match="params"):
        gs.log_likelihood(sites, rng.normal(size=len(sites)), params, kernel="exponential")


def test_inputs_are_not_mutated(sites, rng):
    y = rng.normal(size=len(sites))
    y[3] = np.nan
    X0, y0 = sites.copy(), y.copy()
    gs.log_likelihood(sites, y, PARAMS["exponential"], kernel="exponential")
    np.testing.assert_array_equal(sites, X0)
    np.testing.assert_array_equal(y, y0)


@pytest.mark.parametrize("smoothness", [None, 0.7, 4.2])
def test_tabulated_kernel_path_matches_direct_evaluation(smoothness, rng, monkeypatch):
    X = rng.uniform(size=(700, 2))  # 244,650 pairs: above the tabulation threshold
    y = rng.normal(size=(700, 1))
    kern = get_kernel("matern", smoothness)
    theta = {"range": 0.12, "smoothness": 1.7 if smoothness is None else smoothness}
    tables = []

    class Spy(covariance.LogDistanceTable):
        def evaluate(self, *args):
            tables.append(self)
            return super().evaluate(*args)

    monkeypatch.setattr(covariance, "LogDistanceTable", Spy)
    R, dR = ExactLikelihood(X, y, np.ones((700, 1)), kern, get_distance("euclidean")).correlation(
        theta, gradient=True
    )
    assert tables
    monkeypatch.setattr(covariance, "TABULATE_PAIRS", (0, 0))
    direct = ExactLikelihood(X, y, np.ones((700, 1)), kern, get_distance("euclidean"))
    R0, dR0 = direct.correlation(theta, gradient=True)
    assert len(tables) == 1
    np.testing.assert_allclose(R, R0, rtol=0, atol=1e-12)
    for name in dR0:
        np.testing.assert_allclose(
            dR[name], dR0[name], rtol=0, atol=1e-11 * np.abs(dR0[name]).max()
        )


@pytest.mark.parametrize(
    "kernel, params, trend, reml",
    [
        ("exponential", {"variance": 1.3, "range": 0.1, "nugget": 0.05}, "constant", False),
        (
            "matern",
            {"variance": 0.8, "range": 0.08, "smoothness": 1.5, "nugget": 0.01},
            "linear",
            False,
        ),
        # slow: every entry a Bessel quadrature; TLR with a general smoothness is also
        # checked against dense by test_tlr_covariance (matern08), REML by test_tlr_fit
        pytest.param(
            "matern",
            {"variance": 0.8, "range": 0.08, "smoothness": 0.9, "nugget": 0.01},
            "linear",
            True,
            marks=pytest.mark.slow,
        ),
    ],
    ids=["exp-constant", "matern15-linear", "matern09-reml"],
)
def test_tlr_loglik_converges_to_exact(kernel, params, trend, reml):
    rng = np.random.default_rng(9)
    X = rng.uniform(size=(2500, 2))
    y = np.column_stack([rng.normal(size=2500), rng.normal(size=2500)])
    y[rng.uniform(size=y.shape) < 0.05] = np.nan
    exact = gs.log_likelihood(X, y, params, kernel=kernel, trend=trend, reml=reml)

    def error(accuracy):
        tlr = gs.log_likelihood(
            X,
            y,
            params,
            kernel=kernel,
            trend=trend,
            reml=reml,
            method="tlr",
            accuracy=accuracy,
            tile_size=256,
        )
        return abs(tlr - exact)

    loose, tight = error(1e-6), error(1e-9)
    # To first order the error is tr(G E), linear in the accuracy (1000x between the two):
    # at least 100x smaller at 1e-9 (measured 360-1900x). Its size: within 3 sigma, sigma
    # the spread of tr(G E) for ||E||_F = 2 accuracy ||C||_F in a random direction
    # (tlr_loglik_error_scale; measured 0.03-0.24 sigma).
    assert tight <= loose / 100
    F = np.ones((len(X), 1)) if trend == "constant" else np.column_stack([np.ones(len(X)), X])
    sigma = tlr_loglik_error_scale(X, y, F, get_kernel(kernel), params, 1e-6, reml=reml)
    assert loose <= 3 * sigma and tight <= 3 * sigma / 1000


def test_method_auto_and_bad_method(sites, rng):
    y = rng.normal(size=len(sites))
    params = PARAMS["exponential"]
    assert gs.log_likelihood(
        sites, y, params, kernel="exponential", method="auto"
    ) == gs.log_likelihood(sites, y, params, kernel="exponential")
    with pytest.raises(ValueError, match="method"):
        gs.log_likelihood(sites, y, params, kernel="exponential", method="fast")


def test_standard_errors_of_a_parameter_without_information_are_inf_without_overflow():
    import warnings

    from geostat.optimize.search import standard_errors

    class NoInformationOnRange:
        def fisher_information(self, params, names, return_error=False):
            return np.array([[4.0, 1e-3], [1e-3, 0.0]]), 0.0

    params = {"variance": 1.0, "range": 0.3, "nugget": 0.0}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stderr, covariance, _ = standard_errors(
            NoInformationOnRange(), params, ["variance", "range"]
        )
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert stderr["range"] == np.inf and np.isfinite(stderr["variance"])
