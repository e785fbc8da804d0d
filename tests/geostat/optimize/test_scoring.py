"""Fisher scoring through TLR (geostat.optimize.scoring): the stochastic score and
information at fixed probes against the dense exact ones, determinism, the fallback, and
the fitted optimum against the derivative-free and the exact ones."""

import functools
import logging

import numpy as np
import pytest
from scipy.spatial.distance import squareform
from scipy.stats import chi2

import geostat as gs
import geostat.estimator as estimator_module
import geostat.likelihood.tlr as tlr_module
import geostat.optimize.scoring as scoring
import geostat.optimize.search as search
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood, TLRLikelihood
from geostat.optimize import ParameterSpace
from geostat.optimize.objective import Objective
from geostat.optimize.polish import subsample_objective


def likelihoods(n, rng, reml=False, kernel="matern"):
    X = rng.uniform(size=(n, 2))
    F = np.column_stack([np.ones(n), X[:, 0]])
    y = gs.simulate(
        X,
        {"variance": 1.0, "range": 0.12, "smoothness": 1.2, "nugget": 0.05},
        kernel="matern",
        random_state=3,
        method="exact",
    ) + F @ np.array([0.5, -1.0])
    args = (X, y[:, None], F, get_kernel(kernel), get_distance("euclidean"), reml)
    return ExactLikelihood(*args), TLRLikelihood(*args, accuracy=1e-10, tile_size=128)


def probed(tlr, space, z, blocks):
    free = space.to_natural(z)
    theta = space.theta(free)
    eta = (
        free["ratio"]
        if space.profiled
        else space.natural(free)["nugget"] / space.natural(free)["variance"]
    )
    terms, traces = tlr.probe_traces(theta, eta, random_state=0)
    for _ in range(blocks):
        out = next(traces)
    return terms, out


@pytest.mark.parametrize(
    ("reml", "profiled"), [(False, True), (True, False)], ids=["ml-profiled", "reml-full"]
)
def test_stochastic_score_and_information_match_the_dense_ones(reml, profiled, rng):
    exact, tlr = likelihoods(400, rng, reml)
    kernel = exact.kernel
    space = ParameterSpace(kernel, bounds={} if profiled else {"nugget": (1e-6, 10.0)})
    values = {"range": 0.1, "smoothness": 1.0, "ratio": 0.06, "variance": 0.9, "nugget": 0.05}
    z = space.to_z({name: values[name] for name in space.names})
    terms, traces = probed(tlr, space, z, blocks=2)
    estimate = scoring.score_and_information(space, z, terms, traces)
    score, info, covariance = estimate.score, estimate.information, estimate.covariance
    # The exact score in the optimizer's coordinates (Objective: minus loglik per value).
    _, gradient = Objective(exact, space)(z)
    want = -gradient * exact.n_obs
    # Monte Carlo: the score error is about normal with the reported covariance, so its
    # Mahalanobis norm is below the chi-square quantile 1 - 1e-4 (fixed probes: the test
    # is deterministic; the quantile is its margin against a seed that happens to fail).
    # With variance and nugget both free, their scaling combination has the exact trace N:
    # no Monte Carlo error, a covariance singular up to rounding (eigenvalue ~1e-17 of
    # entries ~0.1), where only the TLR error (~1e-8) of that score component remains.
    # The norm is taken on the Monte Carlo directions (a pseudo-inverse, cutoff 1e-10
    # relative), and the error in the exact one against the TLR accuracy separately.
    error = score - want
    values, vectors = np.linalg.eigh(covariance)
    noisy = values > 1e-10 * values[-1]
    projected = vectors.T @ error
    assert np.sum(projected[noisy] ** 2 / values[noisy]) <= chi2.ppf(1 - 1e-4, int(np.sum(noisy)))
    assert np.all(np.abs(projected[~noisy]) <= 1e-6 * np.linalg.norm(want))
    assert scoring.monte_carlo_loss(info, covariance) > 0
    # The information over the estimated natural parameters, against the dense one,
    # within 4 reported relative standard errors (as the stochastic Fisher test).
    params = space.natural(space.to_natural(z), profiled_variance=terms.quadratic / terms.n_eff)
    got, relative = scoring.natural_information(space, params, traces)
    expected = exact.fisher_information(params, space.estimated)
    scale = np.sqrt(np.outer(np.diag(expected), np.diag(expected)))
    assert 0 < relative < 0.05
    assert np.max(np.abs(got - expected) / scale) <= 4 * relative


class _Traces:
    """Per-probe traces, as :class:`~geostat.likelihood.stochastic_fisher.ProbeTraces`."""

    def __init__(self, traces):
        self.traces = traces
        self.n_probes = traces.shape[0]


def test_the_anchored_trace_estimate_is_unbiased_with_the_covariance_it_reports():
    """The anchor's mean plus the mean change over the first m probes, on Gaussian traces
    whose change is correlated with the anchor's: over 2,000 draws its mean is the new
    point's (within 4 standard errors), and both the covariance it reports (averaged) and its
    spread match ``m (1/m_a + c/m)^2 S + (m_a - m) S / m_a^2 + s^2 I / m`` for change
    ``c e + s f``. The averaged report errs by about ``sqrt(2 / m) / sqrt(2000)`` (3 %),
    the spread by ``sqrt(2 / 2000)`` (3 %): 15 % is five of them."""
    generator = np.random.default_rng(7)
    S = np.array([[4.0, 1.0], [1.0, 2.0]])
    root = np.linalg.cholesky(S)
    ma, m, c, s = 512, 64, 0.3, 0.1
    at_anchor, here = np.array([10.0, -3.0]), np.array([10.5, -2.5])
    estimates, reported = [], []
    for _ in range(2000):
        e = generator.standard_normal((ma, 2)) @ root.T
        f = generator.standard_normal((m, 2))
        anchor = _Traces(at_anchor + e)
        traces = _Traces(here + e[:m] + c * e[:m] + s * f)
        plain, anchored = scoring._trace_estimates(traces, anchor)
        assert plain[2] == m and anchored[2] == ma
        estimates.append(anchored[0])
        reported.append(anchored[1])
    want = m * (1 / ma + c / m) ** 2 * S + (ma - m) * S / ma**2 + s**2 * np.eye(2) / m
    estimates = np.array(estimates)
    spread = np.cov(estimates, rowvar=False)
    assert np.all(np.abs(estimates.mean(axis=0) - here) <= 4 * np.sqrt(np.diag(want) / 2000))
    np.testing.assert_allclose(np.mean(reported, axis=0), want, rtol=0.15)
    np.testing.assert_allclose(spread, want, rtol=0.15)


def test_a_point_near_the_anchor_is_estimated_with_few_probes_within_its_covariance(rng):
    """From traces of 512 probes at an anchor, a point 0.02 away in the log coordinates
    needs 64 probes of its own: the estimate rests on the anchor's, owes it most of its
    loss (four times less than that of its own 64 probes), and its score is the dense one
    within the reported covariance (chi-square quantile 1 - 1e-4)."""
    exact, tlr = likelihoods(400, rng)
    space = ParameterSpace(exact.kernel)
    z = space.to_z({"range": 0.1, "smoothness": 1.0, "ratio": 0.06})
    _, anchor = probed(tlr, space, z, blocks=8)
    near = z + 0.02
    terms, traces = probed(tlr, space, near, blocks=1)
    estimate = scoring.score_and_information(space, near, terms, traces, anchor)
    plain = scoring.score_and_information(space, near, terms, traces)
    assert (estimate.n_probes, plain.n_probes) == (512, 64)
    assert estimate.anchor_share > 0.8
    loss = scoring.monte_carlo_loss(estimate.information, estimate.covariance)
    assert 4 * loss < scoring.monte_carlo_loss(plain.information, plain.covariance)
    _, gradient = Objective(exact, space)(near)
    error = estimate.score + gradient * exact.n_obs
    k = error.size
    assert error @ np.linalg.solve(estimate.covariance, error) <= chi2.ppf(1 - 1e-4, k)


def test_probe_traces_are_deterministic_and_prefix_stable(rng):
    _, tlr = likelihoods(200, rng)
    space = ParameterSpace(tlr.kernel)
    z = space.to_z({"range": 0.1, "smoothness": 1.0, "ratio": 0.06})
    _, one = probed(tlr, space, z, blocks=1)
    _, two = probed(tlr, space, z, blocks=2)
    tlr.release_factors()
    _, again = probed(tlr, space, z, blocks=2)
    np.testing.assert_array_equal(two.traces, again.traces)
    np.testing.assert_array_equal(two.products, again.products)
    np.testing.assert_array_equal(two.traces[: one.n_probes], one.traces)


def test_blocks_without_products_give_the_same_traces(rng):
    """A block sent False computes no products (traces only, one solve instead of
    ``2 + #theta``); its traces are bit-identical to those of a full block, and the
    products stay those of the first blocks."""
    _, tlr = likelihoods(200, rng)
    space = ParameterSpace(tlr.kernel)
    free = space.to_natural(space.to_z({"range": 0.1, "smoothness": 1.0, "ratio": 0.06}))
    _, full = tlr.probe_traces(space.theta(free), free["ratio"], random_state=0)
    _, lean = tlr.probe_traces(space.theta(free), free["ratio"], random_state=0)
    want = [next(full) for _ in range(3)][-1]
    got = next(lean)
    got = lean.send(False)
    got = lean.send(False)
    np.testing.assert_array_equal(got.traces, want.traces)
    assert (got.n_probes, got.n_information_probes) == (3 * 64, 64)
    np.testing.assert_array_equal(got.products, want.products[:64])


def test_scoring_information_target_is_that_of_the_standard_errors():
    # The information scoring reports can serve the standard errors only if accurate within
    # search.FISHER_RTOL: that is its target.
    assert scoring.INFORMATION_RTOL == search.FISHER_RTOL


def test_derivatives_are_compressed_at_the_derivative_accuracy(rng):
    """``dR`` at ``max(accuracy, DERIVATIVE_ACCURACY)``, against the dense derivative within
    that relative Frobenius accuracy (the compression's contract ``||A - A_tlr||_F <=
    accuracy ||A||_F``)."""
    exact, tlr = likelihoods(300, rng)
    D = tlr.gradient_matrices(0, {"range": 0.1, "smoothness": 1.0}, ["range"])["range"]
    assert D.matrix.accuracy == max(tlr.accuracy, tlr_module.DERIVATIVE_ACCURACY) == 1e-6
    _, grads = exact.kernel.correlation_and_gradient(
        squareform(exact.distance.pairwise(exact.coords)), 0.1, smoothness=1.0
    )
    want = grads["range"]
    assert np.linalg.norm(D @ np.eye(tlr.n) - want) <= D.matrix.accuracy * np.linalg.norm(want)


@pytest.fixture(scope="module")
def field():
    rng = np.random.default_rng(11)
    n = 1500
    X = rng.uniform(size=(n, 2))
    y = 1.0 + gs.simulate(
        X,
        {"variance": 1.0, "range": 0.15, "smoothness": 1.5, "nugget": 0.05},
        kernel="matern",
        random_state=5,
        method="exact",
    )
    return X, y


def search_derivative_free(monkeypatch):
    """Make the fits that follow search by ``maximize_likelihood(..., search="polish")``."""
    monkeypatch.setattr(
        estimator_module,
        "maximize_likelihood",
        functools.partial(search.maximize_likelihood, search="polish"),
    )


def fit(X, y, method="tlr", **kwargs):
    return gs.SpatialGP(
        kernel="matern",
        smoothness=1.5,
        method=method,
        accuracy=1e-9,
        tile_size=256,
        random_state=0,
        **kwargs,
    ).fit(X, y)


@pytest.mark.slow
def test_scoring_optimum_matches_the_derivative_free_and_the_exact_ones(field, monkeypatch):
    X, y = field
    exact = fit(X, y, method="exact")
    scored = fit(X, y)
    search_derivative_free(monkeypatch)
    polished = fit(X, y)
    assert scored.converged_ and "Fisher scoring" in scored.result_.message
    assert scored.result_.n_probes > 0 and 0 < scored.result_.scoring_loss <= scoring.LOSS_TARGET
    assert scored.result_.n_evaluations < polished.result_.n_evaluations
    # Both TLR optima within 0.01 of the exact maximum, on the exact likelihood.
    for model in (scored, polished):
        assert exact.log_likelihood(model.params_) >= exact.loglik_ - 0.01
    for name in ("variance", "range", "nugget"):
        assert abs(scored.params_[name] - exact.params_[name]) <= 0.25 * exact.stderr_[name], name
        assert scored.stderr_[name] == pytest.approx(exact.stderr_[name], rel=0.05), name
    assert scored.loglik_error_ <= search.LOGLIK_TOLERANCE
    # The fit's own value: at 1,500 sites it differs from the one at 1e-8 by far less than 0.01.
    assert scored.result_.loglik_accuracy == pytest.approx(1e-9)
    assert scored.loglik_ == pytest.approx(
        exact.log_likelihood(scored.params_), abs=scored.loglik_error_ + 1e-6
    )


@pytest.mark.slow
def test_scoring_fit_is_bit_identical_when_repeated(field):
    X, y = field
    first, second = fit(X[:700], y[:700]), fit(X[:700], y[:700])
    assert first.params_ == second.params_ and first.loglik_ == second.loglik_


@pytest.mark.slow
def test_a_stall_falls_back_to_the_derivative_free_search(field, monkeypatch):
    X, y = field
    # A score of the wrong sign: no step increases the likelihood. The subsample of the
    # refinement is small, so that scoring starts away from the optimum.
    original = scoring.score_and_information

    def backwards(*args):
        estimate = original(*args)
        estimate.score = -estimate.score
        return estimate

    monkeypatch.setattr(scoring, "score_and_information", backwards)
    monkeypatch.setattr(
        search, "subsample_objective", lambda *args: subsample_objective(*args, refine_size=150)
    )
    model = fit(X[:700], y[:700])
    assert "no step increased the likelihood; derivative-free search" in model.result_.message
    assert model.converged_


def test_a_start_at_the_optimum_ends_without_the_derivative_free_search(field, monkeypatch):
    """With no more sites than the refinement's subsample, the exact refinement is already
    at the optimum: the scoring steps are Monte Carlo noise that no halving makes increase
    the likelihood, and the search ends there, within 0.01 of the derivative-free search's
    optimum and in fewer evaluations than that search."""
    X, y = field[0][:500], field[1][:500]
    scored = fit(X, y)
    assert "Fisher scoring converged" in scored.result_.message
    search_derivative_free(monkeypatch)
    polished = fit(X, y)
    assert scored.result_.n_evaluations < polished.result_.n_evaluations
    assert scored.loglik_ >= polished.loglik_ - 0.01


@pytest.mark.slow
def test_scoring_from_the_block_vecchia_fit_finds_the_exact_optimum_on_real_data(caplog):
    """3,000 co2 cells (real data: the model is an approximation, and a random subsample's
    optimum is far from the full-data one): scoring starts from the block Vecchia fit and
    ends, like the derivative-free search, within 0.01 of the exact maximum."""
    frame = gs.datasets.load("co2")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=3000, replace=False))
    lon, lat = np.radians(frame["lon"].to_numpy()[rows]), np.radians(frame["lat"].to_numpy()[rows])
    X = 6371.0 * np.column_stack(
        [np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)]
    )
    y = frame["co2"].to_numpy()[rows]
    exact = fit(X, y, method="exact")
    with caplog.at_level(logging.INFO, logger="geostat.optimize.progress"):
        scored = fit(X, y)
    assert "Fisher scoring converged" in scored.result_.message
    assert any("stage block Vecchia" in record.getMessage() for record in caplog.records)
    assert exact.log_likelihood(scored.params_) >= exact.loglik_ - 0.01
