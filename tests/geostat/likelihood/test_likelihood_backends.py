"""One likelihood on every back end: NumPy, the GPU's code paths with NumPy standing in
(:class:`standin.StandIn`) and, with ``-m gpu``, CuPy; for every method.

Sites, distances and covariance blocks against SciPy; the exact and TLR likelihoods against
an independent dense NumPy reference; the wiring of ``device=`` and ``method="auto"``.
"""

import subprocess
import sys

import numpy as np
import pytest
from scipy.linalg import cho_factor, cho_solve
from scipy.spatial.distance import cdist
from standin import StandIn
from strategies import tlr_loglik_error_scale

import geostat as gs
import geostat.estimator
from geostat.covariance import Sites
from geostat.distance import chordal, get_distance, great_circle
from geostat.kernels import Exponential, Gaussian, Matern, PoweredExponential, get_kernel
from geostat.likelihood import (
    DEVICE_EXACT_MAX,
    TLR_FROM,
    ExactLikelihood,
    TLRLikelihood,
    make_likelihood,
    resolve_method,
)
from geostat.likelihood.dense import dense_bytes
from geostat.solvers import NUMPY, get_backend
from tlrcore.backends import NumpyBackend, cupy_available

BACKENDS = [
    pytest.param(NUMPY, id="numpy"),
    pytest.param(StandIn(), id="standin"),
    pytest.param("cupy", id="cupy", marks=pytest.mark.gpu),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """A back end object; CuPy only with ``-m gpu`` on a machine that has it."""
    if request.param == "cupy":
        if not cupy_available():
            pytest.skip("CuPy or a GPU is not available")
        return get_backend("gpu")
    return request.param


# ---------------------------------------------------------------- distances
def lonlat(n, seed):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(-106, -101, n), rng.uniform(37, 41, n)])


def with_close_pairs(points):
    return np.vstack([points, points[:4] + 1e-9])


DISTANCES = {
    "euclidean-2d": (
        "euclidean",
        lambda: with_close_pairs(np.random.default_rng(1).uniform(size=(60, 2))),
        cdist,
    ),
    "euclidean-3d-offset": (
        "euclidean",
        lambda: with_close_pairs(1e3 + np.random.default_rng(2).normal(size=(60, 3))),
        cdist,
    ),
    "euclidean-1d": ("euclidean", lambda: np.random.default_rng(3).uniform(size=(40, 1)), cdist),
    "chordal": ("chordal", lambda: with_close_pairs(lonlat(60, 4)), chordal),
    "great-circle": ("great_circle", lambda: with_close_pairs(lonlat(60, 5)), great_circle),
}


@pytest.mark.parametrize("case", list(DISTANCES))
def test_distances_match_scipy(case, backend):
    name, make, reference = DISTANCES[case]
    coords = make()
    sites = Sites(coords, get_distance(name), backend)
    rows, cols = np.arange(0, len(coords), 2), np.arange(len(coords))
    expected = reference(coords[rows], coords)
    got = backend.to_host(sites.distances(rows, cols))
    # The same sums in the same order as cdist / chordal / great_circle: rounding only.
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    full = backend.to_host(sites.distances())
    assert np.all(np.diagonal(full) == 0.0) and np.array_equal(full, full.T)


@pytest.mark.parametrize("case", list(DISTANCES))
def test_correlation_matrix_matches_the_kernel_on_all_pairs(case, backend):
    name, make, reference = DISTANCES[case]
    coords = make()
    kernel, theta = Matern(), {"range": 0.3 if name == "euclidean" else 200.0, "smoothness": 1.3}
    R, dR = Sites(coords, get_distance(name), backend).correlation(kernel, theta, gradient=True)
    expected, grads = kernel.correlation_and_gradient(
        reference(coords, coords), theta["range"], smoothness=1.3
    )
    np.fill_diagonal(expected, 1.0)
    np.testing.assert_allclose(backend.to_host(R), expected, rtol=1e-12, atol=1e-15)
    assert set(dR) == {"range", "smoothness"}
    for key, D in dR.items():
        # Near zero distance a derivative is a difference of terms of order one, so device
        # and host differ there by tens of ulp absolutely (3.6e-15 seen on an H100).
        np.testing.assert_allclose(
            backend.to_host(D),
            grads[key] - np.diag(np.diag(grads[key])),
            rtol=1e-10,
            atol=1e-13 * max(1.0, np.abs(grads[key]).max()),
        )


# ---------------------------------------------------------------- covariance blocks
BLOCK_CASES = {
    "matern-1.3-nugget": (
        Matern(),
        {"variance": 1.7, "range": 0.2, "smoothness": 1.3, "nugget": 0.3},
        "euclidean",
    ),
    "matern-2.5": (Matern(2.5), {"variance": 0.4, "range": 0.1, "nugget": 0.0}, "euclidean"),
    "powexp-chordal": (
        PoweredExponential(),
        {"variance": 2.0, "range": 150.0, "power": 1.5, "nugget": 0.1},
        "chordal",
    ),
    "exponential-great-circle": (
        Exponential(),
        {"variance": 1.0, "range": 300.0, "nugget": 0.2},
        "great_circle",
    ),
}


@pytest.mark.parametrize("case", list(BLOCK_CASES))
def test_covariance_blocks_match_the_kernel(case, backend):
    kernel, params, distance_name = BLOCK_CASES[case]
    coords = (
        lonlat(900, 6)
        if distance_name != "euclidean"
        else np.random.default_rng(6).uniform(size=(900, 2))
    )
    distance = get_distance(distance_name)
    block = Sites(coords, distance, backend).covariance_block(kernel, params)
    shape = {k: params[k] for k in kernel.shape_names if k in params}
    rng = np.random.default_rng(7)
    blocks = {
        "tile-column": (np.arange(900), np.arange(128, 256)),  # diagonal entries inside
        "scattered": (rng.choice(900, 50, replace=False), rng.choice(900, 70, replace=False)),
    }
    for rows, cols in blocks.values():
        expected = params["variance"] * kernel.correlation(
            distance.cross(coords[rows], coords[cols]), params["range"], **shape
        )
        expected[rows[:, None] == cols[None, :]] += params["nugget"]
        got = backend.to_host(block(backend.xp.asarray(rows), backend.xp.asarray(cols)))
        # a costly kernel is interpolated (geostat.kernels.tabulation.RadialTable): within
        # 2e-13 of the variance (measured), with margin
        atol = (1e-12 if kernel.costly else 1e-16) * params["variance"]
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=atol)


# ---------------------------------------------------------------- the likelihood, every method
@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(150, 2))
    Y = rng.normal(size=(150, 3)) + 2.0
    Y[rng.uniform(size=Y.shape) < 0.15] = np.nan
    Y[:, 1] = rng.normal(size=150)  # one complete replicate: two groups share R
    F = np.column_stack([np.ones(150), X[:, 0]])
    return X, Y, F


LIKELIHOOD_CASES = {
    "matern-free-trend": ("matern", {"range": 0.15, "smoothness": 1.3}, 0.05, True, False),
    "matern-free-reml": ("matern", {"range": 0.15, "smoothness": 0.8}, 0.05, True, True),
    "exponential-no-trend": ("exponential", {"range": 0.2}, 0.1, False, False),
    "powexp-reml": ("powered_exponential", {"range": 0.2, "power": 1.4}, 0.02, True, True),
    "gaussian-trend": ("gaussian", {"range": 0.1}, 0.1, True, False),
}


def reference_loglik(X, Y, F, kernel, params, reml):
    """The log-likelihood summed over replicates, written out in dense NumPy."""
    shape = {k: params[k] for k in kernel.shape_names if k in params}
    C = params["variance"] * kernel.correlation(cdist(X, X), params["range"], **shape)
    C[np.diag_indices_from(C)] = params["variance"] + params["nugget"]
    total = 0.0
    for y in Y.T:
        seen = ~np.isnan(y)
        c, f, v = cho_factor(C[np.ix_(seen, seen)], lower=True), F[seen], y[seen]
        n, p = v.size, f.shape[1]
        beta = np.linalg.solve(f.T @ cho_solve(c, f), f.T @ cho_solve(c, v)) if p else np.zeros(0)
        r = v - f @ beta
        total += -0.5 * (
            r @ cho_solve(c, r)
            + 2 * np.log(np.diag(c[0])).sum()
            + (n - p * reml) * np.log(2 * np.pi)
        )
        if reml and p:
            total -= 0.5 * np.linalg.slogdet(f.T @ cho_solve(c, f))[1]
    return total


def likelihood(method, data, kernel, trend, reml, backend, on_failure="shift"):
    X, Y, F = data
    design = F if trend else F[:, :0]
    args = (X, Y, design, get_kernel(kernel), get_distance("euclidean"), reml)
    if method == "exact":
        return ExactLikelihood(*args, on_failure, backend)
    return TLRLikelihood(*args, accuracy=1e-9, tile_size=64, on_failure=on_failure, backend=backend)


@pytest.mark.parametrize("method", ["exact", "tlr"])
@pytest.mark.parametrize("case", list(LIKELIHOOD_CASES))
def test_log_likelihood_matches_the_dense_reference(case, method, data, backend):
    kernel, theta, eta, trend, reml = LIKELIHOOD_CASES[case]
    lik = likelihood(method, data, kernel, trend, reml, backend)
    params = {"variance": 1.3, **theta, "nugget": 1.3 * eta}
    X, Y, F = data
    expected = reference_loglik(X, Y, F if trend else F[:, :0], lik.kernel, params, reml)
    if method == "exact":
        # rounding of a Cholesky factorization of a matrix with cond ~1e4, ~1e-12 relative
        assert lik.log_likelihood(params) == pytest.approx(expected, rel=1e-10)
    else:
        # the TLR error is tr(G E) with ||E||_F <= 2 accuracy ||C||_F
        # (strategies.tlr_loglik_error_scale)
        sigma = tlr_loglik_error_scale(
            X, Y, F if trend else F[:, :0], lik.kernel, params, 1e-9, reml=reml
        )
        assert abs(lik.log_likelihood(params) - expected) <= 3 * sigma + 1e-9 * abs(expected)
    coef, coef_cov = lik.gls(params)
    assert coef.shape == (3, F.shape[1] if trend else 0) and np.all(np.isfinite(coef_cov))


@pytest.mark.parametrize("case", list(LIKELIHOOD_CASES))
def test_exact_terms_and_information_agree_across_back_ends(case, data, backend):
    kernel, theta, eta, trend, reml = LIKELIHOOD_CASES[case]
    cpu, other = (likelihood("exact", data, kernel, trend, reml, b) for b in (NUMPY, backend))
    expected, got = cpu.terms(theta, eta, gradient=True), other.terms(theta, eta, gradient=True)
    # Different LAPACK paths (dpotri against triangular solves) on a matrix of cond ~1e4:
    # rounding of order cond * eps ~ 1e-12 relative.
    for field in ("logdet", "logdet_trend", "quadratic"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), rel=1e-10, abs=1e-12)
    assert (got.n_obs, got.n_eff) == (expected.n_obs, expected.n_eff)
    assert set(got.quad) == set(expected.quad) == {"range", *get_kernel(kernel).free_shape, "eye"}
    for key in expected.quad:
        assert got.quad[key] == pytest.approx(expected.quad[key], rel=1e-10)
        assert got.trace[key] == pytest.approx(expected.trace[key], rel=1e-10)
    params = {"variance": 1.3, **theta, "nugget": 1.3 * eta}
    names = ["variance", "range", *other.kernel.free_shape, "nugget"]
    np.testing.assert_allclose(
        other.fisher_information(params, names), cpu.fisher_information(params, names), rtol=1e-10
    )
    np.testing.assert_allclose(other.gls(params)[0], cpu.gls(params)[0], rtol=1e-10, atol=1e-12)
    assert other.loglik_error(params) == 0.0


def test_likelihood_bookkeeping_is_the_same_on_every_back_end(data, backend):
    cpu, other = (
        likelihood("exact", data, "exponential", True, False, b) for b in (NUMPY, backend)
    )
    for attribute in (
        "n",
        "n_obs",
        "n_eff",
        "n_coef",
        "n_replicates",
        "has_gradient",
        "method",
        "accuracy",
    ):
        assert getattr(other, attribute) == getattr(cpu, attribute)
    assert other.min_distance == cpu.min_distance and other.max_distance == cpu.max_distance
    sub = other.subset(np.arange(40))
    assert isinstance(sub, ExactLikelihood) and sub.backend is other.backend and sub.n == 40


# ---------------------------------------------------------------- failure policies
def gaussian_sites(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.3, "nugget": 1e-4}, kernel="gaussian", random_state=seed
    )
    return X, y.reshape(-1, 1), np.ones((n, 1))


SINGULAR = {
    "variance": 1.0,
    "range": 0.3,
    "nugget": 0.0,
}  # the Gaussian correlation is numerically singular


def test_shift_policy_is_the_same_on_every_back_end(backend):
    X, y, F = gaussian_sites()
    args = (X, y, F, Gaussian(), get_distance("euclidean"), False, "shift")
    cpu, other = ExactLikelihood(*args), ExactLikelihood(*args, backend=backend)
    value = other.log_likelihood(SINGULAR)
    (factor,), (expected,) = other.factors({"range": 0.3}, 0.0), cpu.factors({"range": 0.3}, 0.0)
    assert other.n_safeguarded >= 1 and factor.shift == expected.shift > 0
    assert factor.relative_perturbation == pytest.approx(expected.relative_perturbation, rel=1e-12)
    # the likelihood of the model with the shift in the nugget
    assert value == other.log_likelihood({**SINGULAR, "nugget": factor.shift})
    # cond(K + s I) = 6.7e11 amplifies the rounding of two different factorizations:
    # measured 4.6e-6 relative on the value, 2e-5 on the solve
    assert value == pytest.approx(cpu.log_likelihood(SINGULAR), rel=1e-4)
    np.testing.assert_allclose(
        factor.solve(y), expected.solve(y), rtol=0, atol=2e-4 * np.abs(expected.solve(y)).max()
    )


@pytest.mark.parametrize("policy", ["raise", "step"])
def test_raise_and_step_policies_raise(policy, backend):
    X, y, F = gaussian_sites()
    lik = ExactLikelihood(
        X, y, F, Gaussian(), get_distance("euclidean"), on_failure=policy, backend=backend
    )
    with pytest.raises(gs.NotPositiveDefiniteError, match="leading minor"):
        lik.log_likelihood(SINGULAR)
    assert lik.n_safeguarded == 0


def test_replicate_groups_go_through_the_batched_cholesky(data, monkeypatch, backend):
    import tlrcore

    calls = []
    original = tlrcore.batched.cholesky

    def spy(mats, **kwargs):
        calls.append(len(mats))
        return original(mats, **kwargs)

    monkeypatch.setattr(tlrcore.batched, "cholesky", spy)
    cpu, other = (
        likelihood("exact", data, "exponential", True, False, b) for b in (NUMPY, backend)
    )
    theta = {"range": 0.2}
    assert len(other.groups) > 1
    expected = cpu.terms(theta, 0.1).logdet
    calls.clear()
    assert other.terms(theta, 0.1).logdet == pytest.approx(expected, rel=1e-12)
    assert calls and sum(calls) == len(other.groups)  # every group, in runs of at most n^2 entries


def test_replicate_group_that_fails_is_shifted_alone(backend):
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(60, 2))
    X[30:] = X[:30] + 1e-13  # near-duplicate sites
    Y = rng.normal(size=(60, 2))
    Y[30:, 0] = np.nan  # group of replicate 0: 30 distinct sites, positive definite
    args = (X, Y, np.ones((60, 1)), get_kernel("gaussian"), get_distance("euclidean"))
    other, cpu = ExactLikelihood(*args, backend=backend), ExactLikelihood(*args)
    theta = {"range": 0.5}
    got, expected = other.terms(theta, 0.0), cpu.terms(theta, 0.0)
    assert other.n_safeguarded == cpu.n_safeguarded == 1  # only the group with duplicates
    assert got.logdet == pytest.approx(expected.logdet, rel=1e-6)


# ---------------------------------------------------------------- memory and method choice
def test_memory_check_refuses_what_does_not_fit(data):
    class Small(NumpyBackend):
        def free_memory(self):
            return 2**20

    X, Y, F = data
    assert dense_bytes(150, 2) > 0.9 * Small().free_memory() > dense_bytes(100, 2)
    with pytest.raises(MemoryError, match="method='tlr'"):
        ExactLikelihood(X, Y, F, Matern(), get_distance("euclidean"), backend=Small())
    assert resolve_method("auto", 150, Small(), n_gradients=2) == "tlr"
    assert resolve_method("auto", 100, Small(), n_gradients=2) == "exact"


def test_method_resolution_by_back_end():
    assert (
        resolve_method("auto", TLR_FROM - 1) == "exact"
        and resolve_method("auto", TLR_FROM) == "tlr"
    )
    assert resolve_method("auto", 5000, StandIn()) == "exact"  # a GPU's threshold
    assert resolve_method("auto", DEVICE_EXACT_MAX + 1, StandIn()) == "tlr"
    assert resolve_method("exact", 10**6) == "exact"


def test_make_likelihood_on_a_back_end(data):
    X, Y, F = data
    args = ("auto", X, Y, F, Exponential(), get_distance("euclidean"))
    standin = StandIn()
    lik = make_likelihood(*args, backend=standin)
    assert isinstance(lik, ExactLikelihood) and lik.backend is standin
    assert make_likelihood(*args).backend is NUMPY
    assert isinstance(make_likelihood("tlr", *args[1:], backend=standin), TLRLikelihood)


# ---------------------------------------------------------------- wiring of device=
def test_spatialgp_on_the_standin_fits_like_the_cpu(monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(120, 2))
    y = gs.simulate(
        X, {"variance": 1.5, "range": 0.2, "nugget": 0.1}, kernel="exponential", random_state=2
    ).ravel()
    cpu = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y)
    monkeypatch.setattr(geostat.estimator, "get_backend", lambda device: StandIn())
    other = gs.SpatialGP(kernel="exponential", n_starts=1, device="gpu").fit(X, y)
    assert other._likelihood.backend.name == "standin" and other.method_ == "exact"
    for name, value in cpu.params_.items():
        assert other.params_[name] == pytest.approx(value, rel=1e-6)
        assert other.stderr_[name] == pytest.approx(cpu.stderr_[name], rel=1e-5)
    assert other.loglik_ == pytest.approx(cpu.loglik_, rel=1e-10)
    np.testing.assert_allclose(other.predict(X[:7]), cpu.predict(X[:7]), rtol=1e-6)


@pytest.mark.skipif(cupy_available(), reason="CuPy and a GPU are available")
def test_gpu_without_cupy_names_the_fix(data):
    X, Y, _ = data
    with pytest.raises(ValueError, match=r"geostat-tlr\[gpu\].*device='cpu'"):
        get_backend("gpu")
    with pytest.raises(ValueError, match="device='gpu' needs CuPy"):
        gs.SpatialGP(device="gpu").fit(X, Y[:, 1])
    with pytest.raises(ValueError, match="device='gpu' needs CuPy"):
        gs.log_likelihood(
            X, Y[:, 1], {"variance": 1.0, "range": 0.1}, kernel="exponential", device="gpu"
        )


def test_unknown_device_is_refused(data):
    X, Y, _ = data
    with pytest.raises(ValueError, match="device='tpu' is not one of"):
        gs.SpatialGP(device="tpu").fit(X, Y[:, 1])
    with pytest.raises(ValueError, match="device='cuda' is not one of"):
        gs.log_likelihood(
            X, Y[:, 1], {"variance": 1.0, "range": 0.1}, kernel="exponential", device="cuda"
        )


def test_importing_geostat_does_not_import_cupy():
    code = "import sys, geostat; assert 'cupy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="CuPy or a GPU is not available")
def test_gpu_fit_and_log_likelihood_match_the_cpu():
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(400, 2))
    y = gs.simulate(
        X,
        {"variance": 1.5, "range": 0.2, "smoothness": 1.2, "nugget": 0.1},
        kernel="matern",
        random_state=2,
    ).ravel()
    params = {"variance": 1.5, "range": 0.2, "smoothness": 1.2, "nugget": 0.1}
    assert gs.log_likelihood(X, y, params, kernel="matern", device="gpu") == pytest.approx(
        gs.log_likelihood(X, y, params, kernel="matern"), rel=1e-10
    )
    cpu = gs.SpatialGP(kernel="matern", method="exact").fit(X, y)
    gpu = gs.SpatialGP(kernel="matern", method="exact", device="gpu").fit(X, y)
    assert gpu.loglik_ == pytest.approx(cpu.loglik_, rel=1e-8)
    for name, value in cpu.params_.items():
        assert gpu.params_[name] == pytest.approx(value, rel=1e-4)
    np.testing.assert_allclose(gpu.predict(X[:10]), cpu.predict(X[:10]), rtol=1e-5)
