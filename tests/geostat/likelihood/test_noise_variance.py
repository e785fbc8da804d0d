"""Known measurement-error variances (``noise_variance``): ``C = variance R + nugget I +
diag(noise)`` in the likelihood (exact, TLR, block Vecchia), its gradient and Fisher
information, the fit, kriging, model files and the checks of the input."""

import io
import pickle
import zipfile

import numpy as np
import pytest
import scipy.linalg
from model_files import rewrite_header
from problems import covariance, uniform_sites
from scipy.spatial.distance import cdist
from scipy.stats import multivariate_normal

import geostat as gs
from geostat.distance import get_distance
from geostat.errors import ModelFileError
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood, TLRLikelihood
from geostat.likelihood.stochastic_fisher import probe_traces
from geostat.likelihood.vecchia import BlockVecchiaLikelihood
from geostat.optimize import ParameterSpace
from geostat.optimize.objective import Objective

EXPONENTIAL = {"variance": 1.3, "range": 0.2, "nugget": 0.05}
MATERN = {"variance": 0.8, "range": 0.15, "smoothness": 1.3, "nugget": 0.02}
EUCLIDEAN = get_distance("euclidean")


def dense_cov(kernel, X, params, noise=None):
    """``variance R + nugget I + diag(noise)`` by scipy and the kernel's formula."""
    kern = get_kernel(kernel)
    shape = {k: params[k] for k in kern.shape_names if k in params}
    C = params["variance"] * kern.correlation(cdist(X, X), params["range"], **shape)
    C[np.diag_indices_from(C)] += params.get("nugget", 0.0) + (0.0 if noise is None else noise)
    return C


def gls_loglik(C, F, y):
    """``multivariate_normal.logpdf`` of `y` at its GLS trend under `C`."""
    Ci = np.linalg.inv(C)
    beta = np.linalg.solve(F.T @ Ci @ F, F.T @ Ci @ y)
    return multivariate_normal(F @ beta, C).logpdf(y)


@pytest.fixture
def sites(rng):
    return uniform_sites(150, seed=rng)


@pytest.fixture
def noise(sites, rng):
    """Heteroscedastic noise variances, zero (no known error) at every fifth site."""
    values = rng.uniform(0.05, 0.8, size=len(sites))
    values[::5] = 0.0
    return values


# ---------------------------------------------------------------------------- the likelihood
@pytest.mark.parametrize("kernel", ["exponential", "space-time"])
def test_covariance_blocks_and_entries_add_the_noise_on_the_diagonal(kernel, sites, noise, rng):
    from geostat.covariance import Sites
    from geostat.distance import model_distance
    from geostat.solvers import NUMPY

    if kernel == "space-time":
        kern = gs.SpaceTime(space="exponential", time="exponential", separability=0.0)
        params = {"variance": 1.3, "range": 0.2, "time_range": 0.5, "nugget": 0.05}
        coords = np.column_stack([sites, rng.integers(0, 3, size=len(sites))]).astype(float)
    else:
        kern, params, coords = get_kernel(kernel), EXPONENTIAL, sites
    distance = model_distance("euclidean", kern, coords)
    block = Sites(coords, distance, NUMPY).covariance_block(kern, params, diagonal=noise)
    everything = np.arange(len(sites))
    dense = block(everything, everything)
    without = Sites(coords, distance, NUMPY).covariance_block(kern, params)(everything, everything)
    off = ~np.eye(len(sites), dtype=bool)
    np.testing.assert_array_equal(dense[off], without[off])
    np.testing.assert_allclose(np.diag(dense), np.diag(without) + noise, rtol=1e-15)
    rows, cols = rng.permutation(len(sites))[:40], rng.permutation(len(sites))[:50]
    rows[:5] = cols[:5]  # some coinciding sites, in no order
    np.testing.assert_array_equal(block(rows, cols), dense[np.ix_(rows, cols)])
    np.testing.assert_array_equal(
        block.entries(rows[:, None], cols[None, :]), dense[np.ix_(rows, cols)]
    )
    np.testing.assert_array_equal(block.entries(rows, rows), np.diag(dense)[rows])


@pytest.mark.parametrize("trend", ["constant", "linear"])
def test_exact_loglik_matches_the_dense_reference(trend, sites, noise, rng):
    C = dense_cov("matern", sites, MATERN, noise)
    F = (
        np.ones((len(sites), 1))
        if trend == "constant"
        else np.column_stack([np.ones(len(sites)), sites])
    )
    y = F @ rng.normal(size=F.shape[1]) + np.linalg.cholesky(C) @ rng.standard_normal(len(sites))
    expected = gls_loglik(C, F, y)
    got = gs.log_likelihood(sites, y, MATERN, kernel="matern", trend=trend, noise_variance=noise)
    assert got == pytest.approx(expected, rel=1e-10)


def test_replicates_with_missing_values_and_per_replicate_noise(sites, noise, rng):
    C = dense_cov("exponential", sites, EXPONENTIAL, noise)
    Y = np.linalg.cholesky(C) @ rng.standard_normal((len(sites), 3)) + 2.0
    Y[rng.uniform(size=Y.shape) < 0.2] = np.nan
    expected = 0.0
    for j in range(Y.shape[1]):
        seen = ~np.isnan(Y[:, j])
        expected += gls_loglik(C[np.ix_(seen, seen)], np.ones((seen.sum(), 1)), Y[seen, j])
    by_site = gs.log_likelihood(sites, Y, EXPONENTIAL, kernel="exponential", noise_variance=noise)
    # the same variances given per replicate, NaN where y is missing
    per_cell = np.where(np.isnan(Y), np.nan, noise[:, None])
    by_cell = gs.log_likelihood(
        sites, Y, EXPONENTIAL, kernel="exponential", noise_variance=per_cell
    )
    assert by_site == pytest.approx(expected, rel=1e-10)
    assert by_cell == by_site


def test_reml_matches_the_explicit_formula(sites, noise, rng):
    C = dense_cov("matern", sites, MATERN, noise)
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
    got = gs.log_likelihood(
        sites, y, MATERN, kernel="matern", trend="linear", reml=True, noise_variance=noise
    )
    assert got == pytest.approx(expected, rel=1e-10)


def test_zero_noise_is_no_noise(sites, rng):
    y = rng.normal(size=len(sites))
    without = gs.log_likelihood(sites, y, EXPONENTIAL, kernel="exponential")
    zero = gs.log_likelihood(
        sites, y, EXPONENTIAL, kernel="exponential", noise_variance=np.zeros(len(sites))
    )
    assert zero == pytest.approx(without, rel=1e-14)


def tlr_error_scale(C, F, y, accuracy):
    """Standard deviation of the TLR log-likelihood error at `accuracy` (as
    ``strategies.tlr_loglik_error_scale``, for a covariance `C` with the noise in it):
    ``sqrt(2) ||G||_F ||E||_F / n`` with ``||E||_F = 2 accuracy ||C||_F`` and
    ``G = (w w^T - C^-1) / 2``, ``w = C^-1 r`` for the GLS residual ``r``."""
    factor = scipy.linalg.cho_factor(C, lower=True)
    Ci = scipy.linalg.cho_solve(factor, np.eye(len(y)))
    CiF = Ci @ F
    w = Ci @ (y - F @ np.linalg.solve(F.T @ CiF, CiF.T @ y))
    G = 0.5 * (np.outer(w, w) - Ci)
    return np.sqrt(2) * np.linalg.norm(G) * 2 * accuracy * np.linalg.norm(C) / len(y)


@pytest.mark.parametrize("accuracy", [1e-6, 1e-9])
def test_tlr_loglik_matches_exact_within_its_accuracy(accuracy, rng):
    X = rng.uniform(size=(300, 2))
    noise = rng.uniform(0.01, 0.3, size=len(X))
    C = dense_cov("exponential", X, EXPONENTIAL, noise)
    y = np.linalg.cholesky(C) @ rng.standard_normal(len(X)) + 1.0
    exact = gs.log_likelihood(X, y, EXPONENTIAL, kernel="exponential", noise_variance=noise)
    tlr = gs.log_likelihood(
        X,
        y,
        EXPONENTIAL,
        kernel="exponential",
        noise_variance=noise,
        method="tlr",
        tile_size=64,
        accuracy=accuracy,
    )
    assert exact == pytest.approx(gls_loglik(C, np.ones((len(X), 1)), y), rel=1e-10)
    # a few standard deviations of the error, plus rounding of the exact value
    assert abs(tlr - exact) <= 5 * tlr_error_scale(
        C, np.ones((len(X), 1)), y, accuracy
    ) + 1e-10 * abs(exact)


def _likelihood(sites, y, noise, reml=False, kernel="matern", design=None):
    design = np.column_stack([np.ones(len(sites)), sites[:, 0]]) if design is None else design
    return ExactLikelihood(sites, y, design, get_kernel(kernel), EUCLIDEAN, reml=reml, noise=noise)


GRADIENT_CASES = {
    "nugget": (True, {}, False),
    "no-nugget": (False, {}, False),
    "fixed-nugget": (0.05, {}, False),
    "fixed-range": (True, {"range": 0.2}, False),
    "reml": (True, {}, True),
}


@pytest.mark.parametrize("case", list(GRADIENT_CASES))
def test_analytic_gradient_matches_finite_differences(case, sites, noise, rng):
    nugget, fixed, reml = GRADIENT_CASES[case]
    y = rng.normal(size=(len(sites), 2))
    y[:5, 1] = np.nan
    lik = _likelihood(sites, y, noise, reml)
    space = ParameterSpace(
        get_kernel("matern"),
        nugget=nugget,
        fixed=fixed,
        max_distance=lik.max_distance,
        data_variance=1.0,
        known_noise=True,
    )
    assert not space.profiled and "variance" in space.names
    objective = Objective(lik, space)
    start = {"variance": 0.9, "range": 0.2, "smoothness": 1.2, "nugget": 0.08}
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
    # central differences of an objective of order 1: truncation O(h^2), rounding O(eps / h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_the_variance_is_not_profiled_with_known_noise(sites, noise, rng):
    lik = _likelihood(sites, rng.normal(size=(len(sites), 1)), noise)
    profiled = ParameterSpace(get_kernel("matern"), max_distance=lik.max_distance)
    with pytest.raises(ValueError, match="noise_ratio must be given"):
        Objective(lik, profiled).evaluate(
            profiled.to_z({"range": 0.2, "smoothness": 1.0, "ratio": 0.1})
        )
    with pytest.raises(ValueError, match="noise_ratio must be given"):
        lik.terms({"range": 0.2, "smoothness": 1.0}, 0.1)


def test_fisher_information_matches_the_dense_formula(sites, noise, rng):
    lik = _likelihood(
        sites, rng.normal(size=(len(sites), 1)), noise, design=np.ones((len(sites), 1))
    )
    names = ["variance", "range", "smoothness", "nugget"]
    info = lik.fisher_information(MATERN, names)
    Ci = np.linalg.inv(dense_cov("matern", sites, MATERN, noise))
    derivatives = []
    for name in names:
        h = 1e-6 * MATERN[name]
        up, down = {**MATERN, name: MATERN[name] + h}, {**MATERN, name: MATERN[name] - h}
        derivatives.append(
            (dense_cov("matern", sites, up, noise) - dense_cov("matern", sites, down, noise))
            / (2 * h)
        )
    expected = np.array(
        [[0.5 * np.trace(Ci @ A @ Ci @ B) for B in derivatives] for A in derivatives]
    )
    np.testing.assert_allclose(info, expected, rtol=1e-5)


def test_vecchia_with_every_earlier_site_conditioning_is_exact(sites, noise, rng):
    """Blocks conditioned on all the sites before them factor the joint density exactly
    (chain rule), so the block Vecchia likelihood equals the exact one: with known noise
    on the blocks and on their conditioning sites."""
    y = rng.normal(size=(len(sites), 1))
    lik = _likelihood(sites, y, noise, kernel="exponential", design=np.zeros((len(sites), 0)))
    vecchia = BlockVecchiaLikelihood(lik, block_size=32, conditioning=len(sites))
    theta, eta, nu = {"range": 0.2}, 0.05, 1 / 1.3
    exact, approximate = (
        lik.terms(theta, eta, gradient=True, noise_ratio=nu),
        vecchia.terms(theta, eta, gradient=True, noise_ratio=nu),
    )
    assert len(vecchia.blocks) > 1
    assert approximate.logdet == pytest.approx(exact.logdet, rel=1e-10)
    assert approximate.quadratic == pytest.approx(exact.quadratic, rel=1e-10)
    for name in ("range", "eye", "noise"):
        assert approximate.quad[name] == pytest.approx(exact.quad[name], rel=1e-9)
        assert approximate.trace[name] == pytest.approx(exact.trace[name], rel=1e-9)


def test_vecchia_gradient_matches_finite_differences(sites, noise, rng):
    y = rng.normal(size=(len(sites), 1))
    lik = _likelihood(sites, y, noise, kernel="exponential")
    vecchia = BlockVecchiaLikelihood(lik, block_size=32, conditioning=16)
    space = ParameterSpace(
        get_kernel("exponential"), max_distance=lik.max_distance, known_noise=True
    )
    objective = Objective(vecchia, space)
    z = space.to_z({"variance": 0.9, "range": 0.2, "nugget": 0.08})
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


def test_tlr_probe_traces_estimate_the_exact_noise_terms(rng):
    """The quadratic forms of the probes are exact; their traces of ``N`` average to the
    exact ``tr(K^-1 N)`` within a few Monte Carlo standard errors."""
    X = rng.uniform(size=(200, 2))
    noise = rng.uniform(0.05, 0.5, size=len(X))
    y = rng.normal(size=(len(X), 1))
    F = np.ones((len(X), 1))
    args = (X, y, F, get_kernel("exponential"), EUCLIDEAN)
    exact = ExactLikelihood(*args, noise=noise)
    tlr = TLRLikelihood(*args, accuracy=1e-10, tile_size=64, noise=noise)
    theta, eta, nu = {"range": 0.2}, 0.05, 1 / 1.3
    expected = exact.terms(theta, eta, gradient=True, noise_ratio=nu)
    terms, factors, fits = tlr._evaluate(theta, eta, noise_ratio=nu)
    blocks = probe_traces(tlr, factors, fits, theta, eta, random_state=3, noise_ratio=nu)
    for _ in range(4):
        traces = next(blocks)
    assert traces.names == ["K", "eye", "noise", "range"]
    k = traces.names.index("noise")
    assert traces.quad[k] == pytest.approx(expected.quad["noise"], rel=1e-6)
    mean, error = (
        traces.traces[:, k].mean(),
        traces.traces[:, k].std(ddof=1) / np.sqrt(traces.n_probes),
    )
    assert abs(mean - expected.trace["noise"]) <= 4 * error


def test_tlr_fisher_information_matches_exact_within_its_monte_carlo_error(rng):
    X = rng.uniform(size=(200, 2))
    noise = rng.uniform(0.05, 0.5, size=len(X))
    args = (
        X,
        rng.normal(size=(len(X), 1)),
        np.ones((len(X), 1)),
        get_kernel("exponential"),
        EUCLIDEAN,
    )
    names = ["variance", "range", "nugget"]
    expected = ExactLikelihood(*args, noise=noise).fisher_information(EXPONENTIAL, names)
    info, relative = TLRLikelihood(
        *args, accuracy=1e-10, tile_size=64, noise=noise
    ).fisher_information(EXPONENTIAL, names, return_error=True)
    # the diagonal within four of its relative Monte Carlo standard errors
    np.testing.assert_allclose(np.diag(info), np.diag(expected), rtol=4 * relative)


# ---------------------------------------------------------------------------- fits
@pytest.fixture(scope="module")
def simulated():
    """300 sites of an exponential field without nugget, observed with heteroscedastic
    known noise (variances from 0.05 to 1, mean about 0.5, against a variance of 1)."""
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(300, 2))
    noise = rng.uniform(0.05, 1.0, size=len(X))
    field = np.linalg.cholesky(
        dense_cov("exponential", X, {"variance": 1.0, "range": 0.2})
    ) @ rng.standard_normal(300)
    return X, 2.0 + field + np.sqrt(noise) * rng.standard_normal(len(X)), noise


@pytest.fixture(scope="module")
def fitted(simulated):
    X, y, noise = simulated
    return gs.SpatialGP(kernel="exponential", method="exact").fit(X, y, noise_variance=noise)


def test_known_noise_keeps_the_nugget_near_zero_where_ignoring_it_does_not(simulated, fitted):
    X, y, noise = simulated
    ignored = gs.SpatialGP(kernel="exponential", method="exact").fit(X, y)
    assert fitted.converged_ and ignored.converged_
    # the true nugget is 0: within three standard errors of it with the noise known ...
    assert fitted.params_["nugget"] <= 3 * fitted.stderr_["nugget"]
    # ... while ignoring the noise the nugget absorbs it (its mean, 0.52)
    assert abs(ignored.params_["nugget"] - noise.mean()) <= 3 * ignored.stderr_["nugget"]
    assert ignored.params_["nugget"] - fitted.params_["nugget"] > 3 * ignored.stderr_["nugget"]


def test_the_fit_maximizes_the_likelihood_with_the_noise(simulated, fitted):
    X, y, noise = simulated
    value = gs.log_likelihood(X, y, fitted.params_, kernel="exponential", noise_variance=noise)
    assert value == pytest.approx(fitted.loglik_, rel=1e-10)
    assert fitted.log_likelihood(fitted.params_) == pytest.approx(fitted.loglik_, rel=1e-10)
    np.testing.assert_array_equal(fitted.noise_variance_, noise)
    for name in ("variance", "range"):  # a small move of a free parameter lowers it
        moved = {**fitted.params_, name: fitted.params_[name] * 1.01}
        assert (
            gs.log_likelihood(X, y, moved, kernel="exponential", noise_variance=noise)
            < fitted.loglik_
        )


def test_nugget_false_leaves_only_the_known_noise(simulated):
    X, y, noise = simulated
    est = gs.SpatialGP(kernel="exponential", nugget=False, method="exact").fit(
        X, y, noise_variance=noise
    )
    assert est.params_["nugget"] == 0.0 and "nugget" not in est.result_.estimated
    assert est.loglik_ == pytest.approx(
        gs.log_likelihood(X, y, est.params_, kernel="exponential", noise_variance=noise), rel=1e-10
    )


def test_tlr_fit_agrees_with_the_exact_one(simulated, fitted):
    X, y, noise = simulated
    est = gs.SpatialGP(kernel="exponential", method="tlr", tile_size=64).fit(
        X, y, noise_variance=noise
    )
    assert est.method_ == "tlr" and est.converged_
    # Fisher scoring stops within a predicted gain of about 1e-3 of the maximum: a few
    # hundredths of a standard error from it (sqrt(2 gain))
    for name in ("variance", "range"):
        assert abs(est.params_[name] - fitted.params_[name]) <= 0.2 * fitted.stderr_[name]
    assert abs(est.params_["nugget"] - fitted.params_["nugget"]) <= 0.2 * fitted.stderr_["nugget"]
    assert est.loglik_ == pytest.approx(fitted.loglik_, abs=0.02)
    # kriging through the TLR factors at the estimate, with the noise in them
    mean, std = est.predict(X[:20], return_std=True)
    ref_mean, ref_std = kriging_reference(X, y, noise, est.params_, est.coef_, X[:20])
    np.testing.assert_allclose(mean, ref_mean, atol=1e-4 * np.std(y))
    np.testing.assert_allclose(std, ref_std, atol=1e-4 * np.std(y))


def kriging_reference(X, y, noise, params, coef, new):
    """Universal kriging of the latent process at `new` (constant trend), from dense
    matrices: the noise enters only through ``C``."""
    C = dense_cov("exponential", X, params, noise)
    c0 = covariance(new, X, range_=params["range"], variance=params["variance"])
    F, f0 = np.ones((len(X), 1)), np.ones((len(new), 1))
    Ci = np.linalg.inv(C)
    mean = f0 @ coef + c0 @ Ci @ (y - F @ coef)
    u = f0.T - F.T @ Ci @ c0.T
    var = (
        params["variance"]
        - np.einsum("ij,ji->i", c0, Ci @ c0.T)
        + np.einsum("ij,ij->j", u, np.linalg.solve(F.T @ Ci @ F, u))
    )
    return mean, np.sqrt(var)


def test_kriging_at_the_training_sites_matches_the_dense_reference(simulated, fitted):
    X, y, noise = simulated
    C = dense_cov("exponential", X, fitted.params_, noise)
    Ci = np.linalg.inv(C)
    F = np.ones((len(X), 1))
    np.testing.assert_allclose(
        fitted.coef_, np.linalg.solve(F.T @ Ci @ F, F.T @ Ci @ y), rtol=1e-10
    )
    mean, std = fitted.predict(X, return_std=True)
    ref_mean, ref_std = kriging_reference(X, y, noise, fitted.params_, fitted.coef_, X)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std, ref_std, rtol=1e-8)
    # with known noise the predictor smooths: it does not interpolate the data
    assert np.max(np.abs(mean - y)) > 0.1


def test_scaling_y_scales_the_estimates(simulated, fitted):
    """``y * c`` with ``noise * c^2`` has the variance and nugget times ``c^2`` and the
    log-likelihood less ``N log c``. For ``c = 2^10`` the fitting units are the same
    numbers (the data scale is a power of two): equal bit for bit. For ``c = 1e3`` they
    differ by rounding, and the optimizer stops within its tolerance of the same
    optimum."""
    X, y, noise = simulated
    for c, rel in ((2.0**10, 0.0), (1e3, 1e-5)):
        est = gs.SpatialGP(kernel="exponential", method="exact").fit(
            X, y * c, noise_variance=noise * c**2
        )
        assert est.params_["range"] == pytest.approx(fitted.params_["range"], rel=rel)
        assert est.params_["variance"] == pytest.approx(fitted.params_["variance"] * c**2, rel=rel)
        assert est.params_["nugget"] == pytest.approx(
            fitted.params_["nugget"] * c**2, rel=rel, abs=rel * fitted.params_["variance"] * c**2
        )
        assert est.loglik_ == pytest.approx(
            fitted.loglik_ - len(y) * np.log(c), rel=max(rel, 1e-15)
        )


def test_fits_repeat_bit_for_bit_and_leave_the_inputs_unchanged(simulated, fitted):
    X, y, noise = simulated
    copies = X.copy(), y.copy(), noise.copy()
    again = gs.SpatialGP(kernel="exponential", method="exact").fit(X, y, noise_variance=noise)
    assert again.params_ == fitted.params_ and again.loglik_ == fitted.loglik_
    for given, copy in zip((X, y, noise), copies, strict=True):
        np.testing.assert_array_equal(given, copy)
    assert fitted.noise_variance_ is not noise


def test_pickled_model_predicts_the_same(simulated, fitted):
    X, _, _ = simulated
    copy = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(copy.predict(X[:10]), fitted.predict(X[:10]))


def test_replicates_share_the_noise_of_their_site(rng):
    X = rng.uniform(size=(80, 2))
    noise = rng.uniform(0.05, 0.3, size=len(X))
    Y = gs.simulate(
        X, {"variance": 1.0, "range": 0.2}, kernel="exponential", n_samples=3, random_state=2
    )
    Y = Y + np.sqrt(noise)[:, None] * rng.standard_normal(Y.shape)
    Y[:4, 1] = np.nan
    by_site = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, Y, noise_variance=noise)
    by_cell = gs.SpatialGP(kernel="exponential", n_starts=1).fit(
        X, Y, noise_variance=np.tile(noise[:, None], 3)
    )
    assert by_cell.params_ == by_site.params_
    different = np.tile(noise[:, None], 3)
    different[7, 2] *= 2
    with pytest.raises(ValueError, match=r"noise_variance gives site \(row\) 7 the variances"):
        gs.SpatialGP(kernel="exponential").fit(X, Y, noise_variance=different)


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "change, match",
    [
        (lambda v: v[:-1], r"noise_variance must have shape \(40,\), \(40, 1\)"),
        (lambda v: np.stack([v, v, v], axis=1), r"noise_variance must have shape"),
        (
            lambda v: np.where(np.arange(v.size) == 3, -0.1, v),
            "noise_variance must hold finite, non-negative.*row 3",
        ),
        (
            lambda v: np.where(np.arange(v.size) == 5, np.nan, v),
            "noise_variance must hold finite.*row 5",
        ),
        (
            lambda v: np.where(np.arange(v.size) == 5, np.inf, v),
            "noise_variance must hold finite.*row 5",
        ),
        (lambda v: v.astype(str), "noise_variance must be real numbers"),
        (lambda v: v + 1j, "noise_variance must be real numbers"),
    ],
    ids=["short", "three-columns", "negative", "nan", "inf", "strings", "complex"],
)
def test_bad_noise_variance_is_refused_naming_it(change, match, rng):
    X = rng.uniform(size=(40, 2))
    y = rng.normal(size=len(X))
    bad = change(rng.uniform(0.1, 0.2, size=len(X)))
    with pytest.raises(ValueError, match=match):
        gs.SpatialGP(kernel="exponential").fit(X, y, noise_variance=bad)
    with pytest.raises(ValueError, match=match):
        gs.log_likelihood(X, y, EXPONENTIAL, kernel="exponential", noise_variance=bad)


def _noisy_field(rng, xr):
    """Three months of a 6 x 7 grid with two cells never observed and one month-cell gap,
    and per-cell error variances (a DataArray over the grid only)."""
    coords = {"y": np.arange(6.0), "x": np.arange(7.0), "month": [1, 2, 3]}
    values = rng.normal(size=(6, 7, 3)) + np.linspace(0, 2, 42).reshape(6, 7, 1)
    values[0, 0, :] = values[5, 6, :] = np.nan
    values[2, 3, 1] = np.nan
    da = xr.DataArray(values, dims=("y", "x", "month"), coords=coords, name="tas")
    noise = xr.DataArray(
        rng.uniform(0.05, 0.3, size=(6, 7)),
        dims=("y", "x"),
        coords={"y": coords["y"], "x": coords["x"]},
    )
    return da, noise


def test_a_field_takes_its_noise_as_a_dataarray_or_a_variable_like_the_table(rng):
    xr = pytest.importorskip("xarray")
    da, noise = _noisy_field(rng, xr)
    X, y, _ = gs.data.table_from_field(da)
    rows = gs.data.table_from_field(noise.broadcast_like(da).where(da.notnull()))[1]
    table = gs.SpatialGP(kernel="exponential", method="exact").fit(X, y, noise_variance=rows)
    on_field = gs.SpatialGP(kernel="exponential", method="exact").fit(da, noise_variance=noise)
    by_name = gs.SpatialGP(kernel="exponential", method="exact").fit(
        xr.Dataset({"tas": da, "tas_var": noise}), y="tas", noise_variance="tas_var"
    )
    assert len(X) == 40 and on_field.noise_variance_.shape == (40,)
    for fitted in (on_field, by_name):
        assert fitted.params_ == table.params_ and fitted.loglik_ == table.loglik_
        assert np.array_equal(fitted.noise_variance_, table.noise_variance_)
    ignored = gs.SpatialGP(kernel="exponential", method="exact").fit(da)
    assert ignored.loglik_ != table.loglik_  # the noise entered the likelihood


@pytest.mark.parametrize(
    "change, error, match",
    [
        (lambda n, da: n.values, TypeError, "DataArray of variances"),
        (lambda n, da: "missing", ValueError, "names no data variable"),
        (lambda n, da: n.assign_coords(x=n.x + 0.5), ValueError, "coordinates differ"),
        (lambda n, da: n.expand_dims(member=2), ValueError, "lacks"),
        (lambda n, da: n.where(n.x != 3.0), ValueError, "NaN at 17 observed value"),
        (lambda n, da: n.broadcast_like(da) * da.month, ValueError, "different replicates"),
    ],
    ids=["array", "no-variable", "other-coordinates", "extra-dimension", "nan", "per-month"],
)
def test_a_bad_field_noise_is_refused_naming_it(change, error, match, rng):
    xr = pytest.importorskip("xarray")
    da, noise = _noisy_field(rng, xr)
    with pytest.raises(error, match=match) as raised:
        gs.SpatialGP(kernel="exponential").fit(da, noise_variance=change(noise, da))
    assert "noise_variance" in str(raised.value)


def test_an_xarray_noise_with_a_table_is_refused_naming_it(rng):
    xr = pytest.importorskip("xarray")
    X = rng.uniform(size=(40, 2))
    with pytest.raises(TypeError, match="noise_variance is an xarray object but X is a table"):
        gs.SpatialGP(kernel="exponential").fit(
            X, rng.normal(size=40), noise_variance=xr.DataArray(np.ones(40))
        )


def test_duplicate_sites_need_a_diagonal(rng):
    X = rng.uniform(size=(40, 2))
    X[7] = X[3]
    y = rng.normal(size=len(X))
    noise = np.full(len(X), 0.1)
    est = gs.SpatialGP(kernel="exponential", nugget=False, n_starts=1).fit(
        X, y, noise_variance=noise
    )
    assert est.params_["nugget"] == 0.0
    noise[[3, 7]] = 0.0
    with pytest.raises(ValueError, match="duplicate sites: rows 3 and 7.*no known noise_variance"):
        gs.SpatialGP(kernel="exponential", nugget=False).fit(X, y, noise_variance=noise)


def test_a_pandas_noise_is_paired_by_label(rng):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(rng.uniform(size=(50, 2)), columns=["x", "y"])
    noise = pd.Series(rng.uniform(0.01, 0.1, size=50), index=X.index)
    field = gs.simulate(X.to_numpy(), EXPONENTIAL, kernel="exponential", random_state=5).ravel()
    y = pd.Series(field + np.sqrt(noise.to_numpy()) * rng.standard_normal(50), index=X.index)
    shuffled = noise.iloc[rng.permutation(50)]
    a = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y, noise_variance=noise)
    b = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y, noise_variance=shuffled)
    assert a.params_ == b.params_


# ---------------------------------------------------------------------------- model files
def test_model_file_round_trip_keeps_the_noise(fitted, simulated, tmp_path):
    X, _, _ = simulated
    path = tmp_path / "model.npz"
    fitted.save(path)
    loaded = gs.load(path)
    np.testing.assert_array_equal(loaded.noise_variance_, fitted.noise_variance_)
    mean, std = loaded.predict(X[:10], return_std=True)
    expected_mean, expected_std = fitted.predict(X[:10], return_std=True)
    np.testing.assert_array_equal(mean, expected_mean)
    np.testing.assert_array_equal(std, expected_std)
    assert loaded.log_likelihood(fitted.params_) == fitted.log_likelihood(fitted.params_)


def test_a_version_2_file_without_noise_still_loads(rng, tmp_path):
    X = rng.uniform(size=(40, 2))
    y = gs.simulate(X, EXPONENTIAL, kernel="exponential", random_state=4).ravel()
    est = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y)
    path = tmp_path / "model.npz"
    est.save(path)

    def as_version_2(header):
        header["version"] = 2
        fields = header["fitted"]["_training"]["$record"][1]
        assert fields.pop("noise") is None
        header["fitted"].pop("transform_")  # the other additions of version 3
        assert header["fitted"]["_scale"]["$record"][1].pop("log_jacobian") == 0.0

    rewrite_header(path, as_version_2)
    loaded = gs.load(path)
    assert loaded.noise_variance_ is None
    np.testing.assert_array_equal(loaded.predict(X[:5]), est.predict(X[:5]))


NOISE = "arrays/fitted._training.noise.npy"


def _with_noise(path, values):
    """Rewrite the model file `path` with `values` as its training noise."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, values)
    members[NOISE] = buffer.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.parametrize(
    "change, match",
    [
        (
            lambda v: np.where(np.arange(v.size) == 2, -1.0, v),
            "_training.noise holds negative variances",
        ),
        (
            lambda v: np.where(np.arange(v.size) == 2, np.nan, v),
            "_training.noise holds non-finite values",
        ),
        (lambda v: v[:-1], r"_training.noise is not a float64 array of shape \(300,\)"),
        (lambda v: v.astype(np.float32), r"_training.noise is not a float64 array"),
    ],
    ids=["negative", "nan", "short", "float32"],
)
def test_a_hostile_noise_is_refused(fitted, tmp_path, change, match):
    path = tmp_path / "model.npz"
    fitted.save(path)
    with zipfile.ZipFile(path) as archive:
        noise = np.lib.format.read_array(io.BytesIO(archive.read(NOISE)))
    _with_noise(path, change(noise))
    with pytest.raises(ModelFileError, match=f"{path}.*{match}"):
        gs.load(path)


def test_models_of_different_noise_are_not_compared(simulated, fitted):
    X, y, noise = simulated
    ignored = gs.SpatialGP(kernel="exponential", method="exact").fit(X, y)
    with pytest.raises(ValueError, match="different known noise variances"):
        gs.likelihood_ratio_test(ignored, fitted)
