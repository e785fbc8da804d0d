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
def test_stochastic_score_and_information_match_the_dense_ones(reml, profiled, rng, monkeypatch):
    """The Monte Carlo estimates against the dense ones, with the derivatives compressed
    at the likelihood's accuracy. At the default ``DERIVATIVE_ACCURACY`` the control
    variate (ML) leaves a bias of the compression (a share of ``tr(K^-1 E)``) that its
    small Monte Carlo error no longer hides; its log-likelihood loss ``1/2 b^T I^-1 b``
    must stay far below the scoring's loss target."""
    exact, tlr = likelihoods(400, rng, reml)
    kernel = exact.kernel
    space = ParameterSpace(kernel, bounds={} if profiled else {"nugget": (1e-6, 10.0)})
    values = {"range": 0.1, "smoothness": 1.0, "ratio": 0.06, "variance": 0.9, "nugget": 0.05}
    z = space.to_z({name: values[name] for name in space.names})
    # The exact score in the optimizer's coordinates (Objective: minus loglik per value).
    _, gradient = Objective(exact, space)(z)
    want = -gradient * exact.n_obs
    terms, traces = probed(tlr, space, z, blocks=2)
    default = scoring.score_and_information(space, z, terms, traces)
    bias = default.score - want
    if tlr.control_variate(0) is not None:  # ML: under REML with a trend, plain probes
        loss = 0.5 * bias @ np.linalg.solve(default.information, bias)
        assert loss < 1e-3 * scoring.LOSS_TARGET
    monkeypatch.setattr(tlr_module, "DERIVATIVE_ACCURACY", tlr.accuracy)
    terms, traces = probed(tlr, space, z, blocks=2)
    estimate = scoring.score_and_information(space, z, terms, traces)
    score, info, covariance = estimate.score, estimate.information, estimate.covariance
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


def _co2_true_cells(n):
    """`n` random cells of the smooth ``co2_true`` field as 3-D coordinates in km."""
    frame = gs.datasets.load("co2")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=n, replace=False))
    lon, lat = (np.radians(frame[name].to_numpy()[rows]) for name in ("lon", "lat"))
    X = 6371.0 * np.column_stack(
        [np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)]
    )
    return X, frame["co2_true"].to_numpy()[rows, None]


@pytest.mark.parametrize(
    ("case", "theta", "eta", "reduction"),
    [
        ("simulated", {"range": 0.1, "smoothness": 1.0}, 0.06, 100.0),
        ("simulated REML", {"range": 0.1, "smoothness": 1.0}, 0.06, 100.0),
        ("co2_true", {"range": 468.0}, 3e-3, 4.0),
    ],
)
def test_control_variate_traces_are_unbiased_and_far_less_variable(
    case, theta, eta, reduction, rng, monkeypatch
):
    """128 probes with the block Vecchia control variate and without (Hutchinson's plain
    average, the same probes), against the dense traces: both within 4 of their standard
    errors, and those of the control variate `reduction` times smaller (measured: about
    2,000 times on 400 simulated sites with a nugget of 0.06 of the variance, 10 and 30
    times for the range and ``tr(K^-1)`` on 2,048 cells of the smooth ``co2_true`` field,
    Matérn 2.5, where the TLR error of ``K^-1`` is a larger share of the difference).
    Under REML with a linear trend the traces are those of the projection ``P`` (the
    dense REML traces), the probes projected and the control variate's mean less the
    projection's share."""
    if case.startswith("simulated"):
        exact, tlr = likelihoods(400, rng, reml=case.endswith("REML"))
    else:
        X, y = _co2_true_cells(2048)
        args = (X, y, np.ones((2048, 1)), get_kernel("matern", 2.5), get_distance("euclidean"))
        exact, tlr = ExactLikelihood(*args), TLRLikelihood(*args, accuracy=1e-9, tile_size=256)
    want = exact.terms(theta, eta, gradient=True).trace
    errors = {}
    for control in (True, False):
        if not control:
            monkeypatch.setattr(tlr, "control_variate", lambda index: None)
        _, blocks = tlr.probe_traces(theta, eta)
        for _ in range(2):
            traces = next(blocks)
        assert traces.n_probes == 128
        for k, name in enumerate(traces.names[1:], start=1):
            mean = traces.traces[:, k].mean()
            error = traces.traces[:, k].std(ddof=1) / np.sqrt(traces.n_probes)
            assert abs(mean - want[name]) <= 4 * error, (control, name)
            errors[control, name] = error
    for name in traces.names[1:]:
        assert errors[True, name] * reduction <= errors[False, name], name


def test_a_control_variate_that_reduces_too_little_is_dropped_for_the_plain_traces(
    rng, monkeypatch
):
    """Demanding an infinite reduction drops the control variate after the first block:
    every trace is then the plain probes' own, bit for bit (the same operations), as with
    the decision passed on as made (``control``); passed on as kept, it is kept."""
    from geostat.likelihood import stochastic_fisher

    _, tlr = likelihoods(400, rng)
    theta, eta = {"range": 0.1, "smoothness": 1.0}, 0.06

    def traces(control=None):
        _, blocks = tlr.probe_traces(theta, eta, control=control)
        return [next(blocks) for _ in range(2)][-1]

    kept = traces()
    monkeypatch.setattr(stochastic_fisher, "CONTROL_MIN_REDUCTION", np.inf)
    dropped, as_kept, as_dropped = traces(), traces((True,)), traces((False,))
    assert kept.controlled == as_kept.controlled == (True,)
    assert dropped.controlled == as_dropped.controlled == (False,)
    np.testing.assert_array_equal(as_kept.traces, kept.traces)
    monkeypatch.setattr(tlr, "control_variate", lambda index: None)
    plain = traces()
    assert plain.controlled == (False,)
    for other in (dropped, as_dropped):
        np.testing.assert_array_equal(other.traces, plain.traces)


def test_the_control_variate_is_kept_for_the_fit_and_freed_after(rng):
    """Kept across a change of accuracy (it does not depend on it), freed by the fit's end."""
    _, tlr = likelihoods(400, rng)
    with tlr.fitting():
        variate = tlr.control_variate(0)
        tlr.set_accuracy(tlr.accuracy / 10)
        assert tlr.control_variate(0) is variate
    assert tlr.control_variate(0) is not variate


def test_the_reduction_is_taken_in_the_least_reduced_direction():
    """Variances divided by 10 in every direction keep the control variate; not at all, or
    by 100 along the sum of the two traces and not along their difference (each column's
    variance then falls about 20-fold), drop it; a direction with no variance left keeps
    it."""
    from geostat.likelihood.stochastic_fisher import _reduces

    u, v = np.random.default_rng(0).normal(size=(2, 256, 1))
    along, across = np.array([[1.0, 1.0]]), np.array([[1.0, -1.0]])
    plain = 10.0 * u * along + v * across
    assert _reduces(plain, plain / np.sqrt(10))
    assert not _reduces(plain, plain)
    reduced = u * along + v * across
    assert np.all(np.var(plain, axis=0) >= 15 * np.var(reduced, axis=0))
    assert not _reduces(plain, reduced)
    assert _reduces(plain, np.zeros_like(plain))


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


def test_a_point_near_the_anchor_is_estimated_with_few_probes_within_its_covariance(
    rng, monkeypatch
):
    """From traces of 512 plain probes (no control variate, as under REML with a trend) at
    an anchor, a point 0.02 away in the log coordinates needs 64 probes of its own: the
    estimate rests on the anchor's, owes it most of its loss (four times less than that of
    its own 64 probes), and its score is the dense one within the reported covariance
    (chi-square quantile 1 - 1e-4)."""
    exact, tlr = likelihoods(400, rng)
    monkeypatch.setattr(tlr, "control_variate", lambda index: None)
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


def test_the_ratio_floor_of_the_search_space_is_a_zero_nugget():
    space = ParameterSpace(get_kernel("matern", smoothness=1.5), max_distance=1.0)
    zero = space.with_zero_floor()
    floor = space.natural_bounds["ratio"][0]
    assert zero.zero_floor and not space.zero_floor and zero.names == space.names
    for ratio, expected in ((floor, 0.0), (1e-6, 1e-6)):
        free = {"range": 0.2, "ratio": ratio}
        assert zero.point(free)[1] == expected and space.point(free)[1] == ratio
        assert zero.natural(free, profiled_variance=2.0)["nugget"] == 2.0 * expected
    # the floor as the optimizer reaches it, through the log coordinate
    z = zero.to_z({"range": 0.2, "ratio": floor})
    assert zero.point(zero.to_natural(z))[1] == 0.0
    held = ParameterSpace(get_kernel("matern", smoothness=1.5), nugget=0.1)
    assert held.with_zero_floor() is held  # no ratio searched


def test_a_nugget_whose_maximum_is_zero_is_scored_at_zero(monkeypatch):
    """1,500 cells of the smooth real field ``co2_true`` (Matern 1.5: its exact maximum has
    a zero nugget): scoring meets the ratio's floor as a zero nugget, so the estimate is
    the search's own last point. No covariance is factored at the floor's ratio, no zero
    nugget is tried after the search, and the standard errors take scoring's information
    (no estimate of their own); the estimate lies within its bound of the exact maximum."""
    frame = gs.datasets.load("co2")
    rows = np.sort(np.random.default_rng(0).choice(len(frame), size=1500, replace=False))
    X, y = frame[["lon", "lat"]].iloc[rows], frame["co2_true"].to_numpy()[rows]
    exact = gs.SpatialGP(smoothness=1.5, method="exact").fit(X, y)
    assert exact.params_["nugget"] == 0.0
    etas, informations = [], []
    factor, information = TLRLikelihood._factor, TLRLikelihood.fisher_information

    def factored(self, index, block, accuracy, key):
        etas.append(key[1])
        return factor(self, index, block, accuracy, key)

    def own_information(self, *args, **kwargs):
        informations.append(args)
        return information(self, *args, **kwargs)

    monkeypatch.setattr(TLRLikelihood, "_factor", factored)
    monkeypatch.setattr(TLRLikelihood, "fisher_information", own_information)
    model = gs.SpatialGP(smoothness=1.5, method="tlr", tile_size=256).fit(X, y)
    assert model.params_["nugget"] == 0.0 and "nugget" in model.result_.at_bounds
    assert "Fisher scoring converged" in model.result_.message
    floor = ParameterSpace(get_kernel("matern")).natural_bounds["ratio"][0]
    assert 0.0 in etas and not any(0 < eta <= 1.01 * floor for eta in etas), etas
    assert not informations and np.isfinite(model.stderr_["range"])
    gap = exact.loglik_ - exact.log_likelihood(model.params_)
    assert -1e-6 <= gap <= model.result_.gap_bound, (gap, model.result_.gap_bound)
