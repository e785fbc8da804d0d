"""The likelihood's policy for covariances that are not positive definite (on_failure)."""

import warnings

import numpy as np
import pytest
from problems import covariance

import geostat as gs
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood, TLRLikelihood
from geostat.likelihood.failure import dense_shifts
from geostat.solvers import DenseCholesky


def gaussian_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.3, "nugget": 1e-4}, kernel="gaussian", random_state=seed
    )
    return X, y.ravel()


def likelihood(kind, X, y, on_failure, accuracy=1e-4):
    design = np.ones((X.shape[0], 1))
    args = (X, y[:, None], design, get_kernel("gaussian"), get_distance("euclidean"))
    if kind == "exact":
        return ExactLikelihood(*args, on_failure=on_failure)
    return TLRLikelihood(*args, accuracy=accuracy, tile_size=100, on_failure=on_failure)


PARAMS = {"variance": 1.0, "range": 0.3, "nugget": 0.0}


@pytest.mark.parametrize("kind", ["exact", "tlr"])
def test_raise_and_step_policies_raise_from_the_likelihood(kind):
    X, y = gaussian_data()
    for policy in ("raise", "step"):
        with pytest.raises(gs.NotPositiveDefiniteError):
            likelihood(kind, X, y, policy).log_likelihood(PARAMS)


@pytest.mark.parametrize("kind", ["exact", "tlr"])
def test_shift_policy_equals_the_likelihood_with_the_shift_in_the_nugget(kind):
    X, y = gaussian_data()
    lik = likelihood(kind, X, y, "shift")
    value = lik.log_likelihood(PARAMS)
    (factor,) = lik.factors({"range": 0.3}, 0.0)
    assert lik.n_safeguarded >= 1 and factor.shift > 0
    correlation = covariance(X, kernel="gaussian", range_=0.3)
    expected = factor.shift * np.sqrt(X.shape[0]) / np.linalg.norm(correlation)
    assert factor.relative_perturbation == pytest.approx(expected, rel=1e-3)
    # the same value as the exact likelihood of the model with that nugget
    exact = likelihood("exact", X, y, "raise").log_likelihood({**PARAMS, "nugget": factor.shift})
    # measured: identical (exact); 1.8e-3 relative (TLR at accuracy 1e-4)
    tolerance = 1e-12 * abs(exact) if kind == "exact" else 5e-3 * abs(exact)
    assert value == pytest.approx(exact, abs=tolerance)


def test_compensate_policy_factors_with_compensation_and_reports_it():
    X, y = gaussian_data()
    lik = likelihood("tlr", X, y, "compensate")
    assert np.isfinite(lik.log_likelihood(PARAMS))
    (factor,) = lik.factors({"range": 0.3}, 0.0)
    assert (
        lik.n_safeguarded >= 1
        and factor.factor.compensated_tiles
        and factor.relative_perturbation > 0
    )
    # tlrcore's contract for the block-form compensated factor (tlrcore.cholesky.safeguards):
    # ||L L^T - A_tlr||_F <= (1 + 1 / sqrt(n_t) + 1.25 sqrt(b)) accuracy ||A_tlr||_F
    # (b = 100, n_t = 6: 13.9 accuracy), and A_tlr is within one more accuracy of K; twice
    # that leaves room for the estimate of ||A||_F.
    K = covariance(X, kernel="gaussian", range_=0.3)[np.ix_(factor.perm, factor.perm)]
    L = factor.to_dense()
    bound = 2 * (1 + 1 / np.sqrt(6) + 1.25 * np.sqrt(100) + 1) * 1e-4
    assert np.linalg.norm(L @ L.T - K) <= bound * np.linalg.norm(K)


@pytest.mark.parametrize("policy", ["shift", "compensate"])
def test_positive_definite_covariance_is_never_shifted(policy):
    X, y = gaussian_data()
    for kind in ("exact", "tlr"):
        lik = likelihood(kind, X, y, policy, accuracy=1e-8)
        lik.log_likelihood({**PARAMS, "nugget": 0.1})
        assert lik.n_safeguarded == 0


def test_dense_factor_rebuilds_the_matrix_it_overwrote():
    M = np.ones((50, 50)) + 1e-3 * np.eye(50)
    M[:2, :2] = [[1.0, 1.0], [1.0, 1.0]]  # singular leading block
    reference = M.copy()
    chol = DenseCholesky(M.copy(), overwrite=True, shifts=dense_shifts(1.0))
    assert chol.shift in dense_shifts(1.0)
    np.testing.assert_allclose(chol.L @ chol.L.T, reference + chol.shift * np.eye(50), atol=1e-12)
    with pytest.raises(gs.NotPositiveDefiniteError):
        DenseCholesky(M.copy(), overwrite=True)


@pytest.mark.parametrize(("method", "accuracy"), [("exact", 1e-8), ("tlr", 1e-4)])
def test_spatialgp_fits_a_singular_covariance_and_reports_the_shift(method, accuracy):
    X, y = gaussian_data(500)
    # range held where the correlation matrix is numerically singular
    model = gs.SpatialGP(
        kernel="gaussian",
        nugget=False,
        method=method,
        accuracy=accuracy,
        tile_size=100,
        fixed={"range": 0.3},
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    perturbation = [w for w in caught if issubclass(w.category, gs.PerturbationWarning)]
    assert model.n_safeguarded_ > 0 and model.shift_ > 0 and model.perturbation_ > 0
    # Exact: ||E||_F / ||K||_F is ~1e-11, but the variance runs up to ~1e6 times the data's
    # and the shift with it, to ~1e-4 of the data variance; TLR: above the accuracy.
    assert perturbation and model.shift_ > 1e-8 * np.var(y)
    assert np.isfinite(model.loglik_) and np.all(np.isfinite(model.predict(X[:5])))


def test_spatialgp_step_and_raise_policies():
    X, y = gaussian_data(300)
    with pytest.raises(gs.NotPositiveDefiniteError):
        gs.SpatialGP(kernel="gaussian", nugget=False, method="exact", on_failure="raise").fit(X, y)
    with pytest.raises(ValueError, match="on_failure must be one of"):
        gs.SpatialGP(on_failure="jitter").fit(X, y)


def test_spatialgp_with_a_nugget_needs_no_safeguard():
    X, y = gaussian_data(300)
    model = gs.SpatialGP(kernel="exponential").fit(X, y)
    assert model.perturbation_ == 0.0 and model.shift_ == 0.0 and model.n_safeguarded_ == 0


def test_unsettled_tlr_loglik_warns():
    from geostat.estimator import _warn_if_loglik_unsettled

    with pytest.warns(gs.GeostatWarning, match="did not settle"):
        _warn_if_loglik_unsettled(9.3e9, 1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_if_loglik_unsettled(0.005, 1e-9)
        _warn_if_loglik_unsettled(0.0, None)


@pytest.mark.slow
def test_near_singular_tlr_fit_says_its_loglik_is_unreliable():
    # benchmarks/tlr_safeguards.py part 3: a Gaussian field with a nugget of 1e-6 of its
    # variance, fitted without nugget at accuracy 1e-6; the shifted TLR likelihood at the
    # estimate does not settle (measured: error 9e9 at accuracy 1e-14).
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(2000, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.2, "nugget": 1e-6}, kernel="gaussian", random_state=1
    ).ravel()
    model = gs.SpatialGP(kernel="gaussian", nugget=False, method="tlr", accuracy=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    unsettled = [w for w in caught if "did not settle" in str(w.message)]
    # 12 orders of magnitude above the target 0.01: no machine's rounding settles it
    assert model.loglik_error_ > 0.01 and unsettled
