"""The device path (issue 6): kernels, distances, covariance blocks and the dense likelihood
on an array back end, against the CPU path. NumPy stands in for the GPU; the CuPy cases of
the ``backend`` fixture run with ``-m gpu``."""

import subprocess
import sys

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import geostat as gs
import geostat.estimator
import geostat.kernels._base as kernel_base
from geostat.device import DeviceSites, device_backend, device_covariance_block
from geostat.device_likelihood import DeviceCholesky, DeviceExactLikelihood, device_exact_bytes
from geostat.distance import chordal, get_distance, great_circle
from geostat.kernels import Exponential, Gaussian, Matern, PoweredExponential
from geostat.likelihood import ExactLikelihood
from geostat.loglik import DEVICE_EXACT_MAX, make_likelihood, resolve_method
from geostat.solvers import covariance_block
from tlrcore.backends import NUMPY, NumpyBackend, cupy_available, get_backend

# 0, the smallest subnormal-free scales, the series/quadrature switch points of every
# smoothness, the 1e5 cut-off, and far beyond it.
U = np.concatenate([[0.0, 1e-300, 1e-200, 1e-12, 1e-8], np.logspace(-6, 3.2, 300), [1e4, 9.9e4, 1e5, 1.01e5, 1e9]])

KERNELS = {
    "exponential": (Exponential(), {}),
    "gaussian": (Gaussian(), {}),
    "powexp-1.3": (PoweredExponential(), {"power": 1.3}),
    "powexp-0.01": (PoweredExponential(), {"power": 0.01}),
    "powexp-fixed-2": (PoweredExponential(power=2.0), {}),
    **{f"matern-{nu}": (Matern(), {"smoothness": nu}) for nu in (0.5, 1.5, 2.5, 0.05, 0.3, 0.9, 1.0, 1.3, 3.7, 13.0, 40.0)},
    **{f"matern-fixed-{nu}": (Matern(nu), {}) for nu in (0.5, 2.5, 0.7, 2.0)},
}


def host(backend, a):
    return get_backend(backend).to_host(a)


# ---------------------------------------------------------------- kernels
@pytest.mark.parametrize("case", list(KERNELS))
def test_kernel_values_and_gradients_match_the_cpu(case, backend):
    kernel, shape = KERNELS[case]
    xp = get_backend(backend).xp
    d = U * 2.0
    m_cpu, g_cpu = kernel.correlation_and_gradient(d, 2.0, **shape)
    m, g = kernel.device_correlation_and_gradient(xp.asarray(d), 2.0, xp, **shape)
    # measured with NumPy standing in: M and dM/drange to 1.1e-15 relative (bit for bit for
    # closed forms); dM/dsmoothness to 3e-14 of its largest value (2.6e-13 at nu = 40) where
    # it crosses zero, which is the cancellation error of both paths
    np.testing.assert_allclose(host(backend, m), m_cpu, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(host(backend, kernel.device_correlation(xp.asarray(d), 2.0, xp, **shape)), m_cpu,
                               rtol=1e-13, atol=1e-300)
    assert set(g) == set(g_cpu)
    np.testing.assert_allclose(host(backend, g["range"]), g_cpu["range"], rtol=1e-13, atol=1e-300)
    for name in set(g_cpu) - {"range"}:
        np.testing.assert_allclose(host(backend, g[name]), g_cpu[name], rtol=1e-12,
                                   atol=2e-12 * np.abs(g_cpu[name]).max())
    assert host(backend, m)[0] == 1.0


@pytest.mark.parametrize("case", ["exponential", "gaussian", "powexp-1.3", "powexp-fixed-2", "matern-fixed-2.5"])
def test_numpy_device_closed_forms_equal_the_cpu_bit_for_bit(case):
    kernel, shape = KERNELS[case]
    m_cpu, g_cpu = kernel.correlation_and_gradient(U, 0.7, **shape)
    m, g = kernel.device_correlation_and_gradient(U, 0.7, np, **shape)
    assert np.array_equal(m, m_cpu) and all(np.array_equal(g[k], g_cpu[k]) for k in g_cpu)


def test_device_kernels_keep_shape_and_do_not_depend_on_chunking(monkeypatch):
    d = np.abs(np.random.default_rng(0).normal(size=(13, 17)))
    kernel = Matern()
    whole, grads = kernel.device_correlation_and_gradient(d, 0.3, np, smoothness=1.7)
    monkeypatch.setattr(kernel_base, "DEVICE_CHUNK", 10)
    chunked, chunked_grads = kernel.device_correlation_and_gradient(d, 0.3, np, smoothness=1.7)
    assert whole.shape == d.shape
    # the quadrature's matrix products differ only in rounding between block layouts
    np.testing.assert_allclose(chunked, whole, rtol=1e-15, atol=0)
    for name in grads:
        np.testing.assert_allclose(chunked_grads[name], grads[name], rtol=0, atol=1e-13 * np.abs(grads[name]).max())
    assert kernel.device_correlation(np.zeros((0, 3)), 1.0, np, smoothness=1.7).shape == (0, 3)


def test_device_kernel_argument_errors():
    with pytest.raises(ValueError, match="range"):
        Exponential().device_correlation(np.ones(3), 0.0, np)
    with pytest.raises(ValueError, match="smoothness"):
        Matern().device_correlation(np.ones(3), 1.0, np)


# ---------------------------------------------------------------- distances
def lonlat(n, seed):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(-106, -101, n), rng.uniform(37, 41, n)])


def with_close_pairs(points):
    return np.vstack([points, points[:4] + 1e-9])


DISTANCES = {
    "euclidean-2d": ("euclidean", lambda: with_close_pairs(np.random.default_rng(1).uniform(size=(60, 2))), cdist),
    "euclidean-3d-offset": ("euclidean", lambda: with_close_pairs(1e3 + np.random.default_rng(2).normal(size=(60, 3))),
                            cdist),
    "euclidean-1d": ("euclidean", lambda: np.random.default_rng(3).uniform(size=(40, 1)), cdist),
    "chordal": ("chordal", lambda: with_close_pairs(lonlat(60, 4)), chordal),
    "great-circle": ("great_circle", lambda: with_close_pairs(lonlat(60, 5)), great_circle),
}


@pytest.mark.parametrize("case", list(DISTANCES))
def test_distances_match_scipy(case, backend):
    name, make, reference = DISTANCES[case]
    coords = make()
    sites = DeviceSites(coords, get_distance(name), backend)
    rows, cols = np.arange(0, len(coords), 2), np.arange(len(coords))
    expected = reference(coords[rows], coords)
    got = host(backend, sites.distances(rows, cols))
    # measured with NumPy standing in: bit for bit equal to cdist / chordal / great_circle
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    full = host(backend, sites.distances())
    assert np.all(np.diagonal(full) == 0.0) and np.array_equal(full, full.T)


# ---------------------------------------------------------------- covariance blocks
BLOCK_CASES = {
    "matern-1.3-nugget": (Matern(), {"variance": 1.7, "range": 0.2, "smoothness": 1.3, "nugget": 0.3}, "euclidean"),
    "matern-2.5": (Matern(2.5), {"variance": 0.4, "range": 0.1, "nugget": 0.0}, "euclidean"),
    "powexp-chordal": (PoweredExponential(), {"variance": 2.0, "range": 150.0, "power": 1.5, "nugget": 0.1},
                       "chordal"),
    "exponential-great-circle": (Exponential(), {"variance": 1.0, "range": 300.0, "nugget": 0.2}, "great_circle"),
}


@pytest.mark.parametrize("case", list(BLOCK_CASES))
def test_block_generator_matches_covariance_block(case, backend):
    kernel, params, distance_name = BLOCK_CASES[case]
    coords = lonlat(900, 6) if distance_name != "euclidean" else np.random.default_rng(6).uniform(size=(900, 2))
    distance = get_distance(distance_name)
    cpu = covariance_block(coords, kernel, params, distance)
    device = device_covariance_block(coords, kernel, params, distance, backend)
    xp = get_backend(backend).xp
    rng = np.random.default_rng(7)
    column = np.arange(128, 256)
    blocks = {
        "tile-column": (np.arange(900), column),  # every row against one tile: diagonal inside
        "scattered": (rng.choice(900, 50, replace=False), rng.choice(900, 70, replace=False)),
        "device-indices": (xp.asarray(np.arange(100, 400)), xp.asarray(np.arange(300, 340))),
    }
    for rows, cols in blocks.values():
        expected = cpu(host(backend, rows), host(backend, cols))
        got = host(backend, device(rows, cols))
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-16 * params["variance"])


# ---------------------------------------------------------------- the dense likelihood
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


def pair(data, kernel, trend, reml, backend, on_failure="shift"):
    X, Y, F = data
    design = F if trend else F[:, :0]
    args = (X, Y, design, gs.kernels.get_kernel(kernel), get_distance("euclidean"), reml, on_failure)
    return ExactLikelihood(*args), DeviceExactLikelihood(*args, backend=backend)


@pytest.mark.parametrize("case", list(LIKELIHOOD_CASES))
def test_device_likelihood_terms_match_exact(case, data, backend):
    kernel, theta, eta, trend, reml = LIKELIHOOD_CASES[case]
    cpu, device = pair(data, kernel, trend, reml, backend)
    expected, got = cpu.terms(theta, eta, gradient=True), device.terms(theta, eta, gradient=True)
    # measured with NumPy standing in: 3e-15 relative at most
    for field in ("logdet", "logdet_trend", "quadratic"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), rel=1e-10, abs=1e-12)
    assert (got.n_obs, got.n_eff) == (expected.n_obs, expected.n_eff)
    assert set(got.quad) == set(expected.quad) == {"range", *gs.kernels.get_kernel(kernel).free_shape, "eye"}
    for key in expected.quad:
        assert got.quad[key] == pytest.approx(expected.quad[key], rel=1e-10)
        assert got.trace[key] == pytest.approx(expected.trace[key], rel=1e-10)
    params = {"variance": 1.3, **theta, "nugget": 1.3 * eta}
    assert device.log_likelihood(params) == pytest.approx(cpu.log_likelihood(params), rel=1e-12)
    coef, coef_cov = device.gls(params)
    expected_coef, expected_cov = cpu.gls(params)
    np.testing.assert_allclose(coef, expected_coef, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(coef_cov, expected_cov, rtol=1e-10, atol=1e-14)
    names = ["variance", "range", *device.kernel.free_shape, "nugget"]
    np.testing.assert_allclose(device.fisher_information(params, names), cpu.fisher_information(params, names),
                               rtol=1e-10)
    assert device.loglik_error(params) == 0.0


def test_device_likelihood_bookkeeping(data):
    cpu, device = pair(data, "exponential", True, False, "numpy")
    for attribute in ("n", "n_obs", "n_eff", "n_coef", "n_replicates", "has_gradient", "method", "accuracy"):
        assert getattr(device, attribute) == getattr(cpu, attribute)
    assert device.min_distance == pytest.approx(cpu.min_distance, rel=1e-15)
    assert device.max_distance == pytest.approx(cpu.max_distance, rel=1e-15)
    sub = device.subset(np.arange(40))
    assert isinstance(sub, DeviceExactLikelihood) and sub.backend is device.backend and sub.n == 40


def gaussian_sites(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = gs.simulate(X, {"variance": 1.0, "range": 0.3, "nugget": 1e-4}, kernel="gaussian", random_state=seed)
    return X, y.reshape(-1, 1), np.ones((n, 1))


SINGULAR = {"variance": 1.0, "range": 0.3, "nugget": 0.0}  # the Gaussian correlation is numerically singular


def test_shift_policy_matches_the_cpu(backend):
    X, y, F = gaussian_sites()
    args = (X, y, F, Gaussian(), get_distance("euclidean"), False, "shift")
    cpu, device = ExactLikelihood(*args), DeviceExactLikelihood(*args, backend=backend)
    value = device.log_likelihood(SINGULAR)
    (factor,), (expected,) = device.factors({"range": 0.3}, 0.0), cpu.factors({"range": 0.3}, 0.0)
    assert device.n_safeguarded >= 1 and factor.shift == expected.shift > 0
    assert factor.relative_perturbation == pytest.approx(expected.relative_perturbation, rel=1e-12)
    # the likelihood of the model with the shift in the nugget, as on the CPU
    assert value == device.log_likelihood({**SINGULAR, "nugget": factor.shift})
    # cond(K + s I) = 6.7e11 amplifies the rounding of two different factorizations:
    # measured 4.6e-6 relative on the value, 2e-5 on the solve
    assert value == pytest.approx(cpu.log_likelihood(SINGULAR), rel=1e-4)
    np.testing.assert_allclose(factor.solve(y), expected.solve(y), rtol=0, atol=2e-4 * np.abs(expected.solve(y)).max())


@pytest.mark.parametrize("policy", ["raise", "step"])
def test_raise_and_step_policies_raise_from_the_device_likelihood(policy):
    X, y, F = gaussian_sites()
    lik = DeviceExactLikelihood(X, y, F, Gaussian(), get_distance("euclidean"), on_failure=policy, backend="numpy")
    with pytest.raises(gs.NotPositiveDefiniteError, match="leading minor"):
        lik.log_likelihood(SINGULAR)
    assert lik.n_safeguarded == 0


def test_device_cholesky_solves_host_and_device_arrays(rng):
    A = rng.normal(size=(30, 30))
    K = A @ A.T + 30 * np.eye(30)
    chol = DeviceCholesky(K, NUMPY)
    b = rng.normal(size=(30, 2))
    np.testing.assert_allclose(chol.solve(b), np.linalg.solve(K, b), rtol=1e-12)
    np.testing.assert_allclose(chol.inverse(), np.linalg.inv(K), rtol=1e-10, atol=1e-14)
    assert chol.logdet() == pytest.approx(np.linalg.slogdet(K)[1], rel=1e-13)
    np.testing.assert_allclose(chol.solve_lower(b), np.linalg.solve(np.linalg.cholesky(K), b), rtol=1e-12)


def test_memory_check_refuses_what_does_not_fit(data):
    class Small(NumpyBackend):
        def free_memory(self):
            return 2**20

    X, Y, F = data
    assert device_exact_bytes(150, 2) > 0.9 * Small().free_memory() > device_exact_bytes(100, 2)
    with pytest.raises(MemoryError, match="method='tlr'"):
        DeviceExactLikelihood(X, Y, F, Matern(), get_distance("euclidean"), backend=Small())
    assert resolve_method("auto", 150, Small(), n_gradients=2) == "tlr"
    assert resolve_method("auto", 100, Small(), n_gradients=2) == "exact"


# ---------------------------------------------------------------- wiring
def test_method_resolution_on_a_device():
    assert resolve_method("auto", 5000, NUMPY) == "exact"  # TLR from 4,096 sites on the CPU
    assert resolve_method("auto", 5000) == "tlr"
    assert resolve_method("auto", DEVICE_EXACT_MAX + 1, NUMPY) == "tlr"
    assert resolve_method("exact", 10**6, NUMPY) == "exact"


def test_make_likelihood_selects_the_device_likelihood(data):
    X, Y, F = data
    args = ("auto", X, Y, F, Exponential(), get_distance("euclidean"))
    assert isinstance(make_likelihood(*args, backend=NUMPY), DeviceExactLikelihood)
    assert isinstance(make_likelihood(*args), ExactLikelihood)


def test_spatialgp_device_path_fits_like_the_cpu(monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(120, 2))
    y = gs.simulate(X, {"variance": 1.5, "range": 0.2, "nugget": 0.1}, kernel="exponential", random_state=2).ravel()
    cpu = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y)
    monkeypatch.setattr(geostat.estimator, "device_backend", lambda device: NUMPY)
    device = gs.SpatialGP(kernel="exponential", n_starts=1, device="gpu").fit(X, y)
    assert isinstance(device._likelihood, DeviceExactLikelihood) and device.method_ == "exact"
    for name, value in cpu.params_.items():
        assert device.params_[name] == pytest.approx(value, rel=1e-6)
        assert device.stderr_[name] == pytest.approx(cpu.stderr_[name], rel=1e-5)
    assert device.loglik_ == pytest.approx(cpu.loglik_, rel=1e-10)
    np.testing.assert_allclose(device.predict(X[:7]), cpu.predict(X[:7]), rtol=1e-6)


@pytest.mark.skipif(cupy_available(), reason="CuPy and a GPU are available")
def test_gpu_without_cupy_names_the_fix(data):
    X, Y, _ = data
    with pytest.raises(ValueError, match=r"geostat\[gpu\].*device='cpu'"):
        device_backend("gpu")
    with pytest.raises(ValueError, match="device='gpu' needs CuPy"):
        gs.SpatialGP(device="gpu").fit(X, Y[:, 1])
    with pytest.raises(ValueError, match="device='gpu' needs CuPy"):
        gs.log_likelihood(X, Y[:, 1], {"variance": 1.0, "range": 0.1}, kernel="exponential", device="gpu")


def test_unknown_device_is_refused(data):
    X, Y, _ = data
    with pytest.raises(ValueError, match="device='tpu' is not one of"):
        gs.SpatialGP(device="tpu").fit(X, Y[:, 1])
    with pytest.raises(ValueError, match="device='cuda' is not one of"):
        gs.log_likelihood(X, Y[:, 1], {"variance": 1.0, "range": 0.1}, kernel="exponential", device="cuda")


def test_importing_geostat_does_not_import_cupy():
    code = "import sys, geostat; assert 'cupy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="CuPy or a GPU is not available")
def test_gpu_fit_and_log_likelihood_match_the_cpu():
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(400, 2))
    y = gs.simulate(X, {"variance": 1.5, "range": 0.2, "smoothness": 1.2, "nugget": 0.1}, kernel="matern",
                    random_state=2).ravel()
    params = {"variance": 1.5, "range": 0.2, "smoothness": 1.2, "nugget": 0.1}
    assert gs.log_likelihood(X, y, params, kernel="matern", device="gpu") == pytest.approx(
        gs.log_likelihood(X, y, params, kernel="matern"), rel=1e-10)
    cpu = gs.SpatialGP(kernel="matern", method="exact").fit(X, y)
    gpu = gs.SpatialGP(kernel="matern", method="exact", device="gpu").fit(X, y)
    assert gpu.loglik_ == pytest.approx(cpu.loglik_, rel=1e-8)
    for name, value in cpu.params_.items():
        assert gpu.params_[name] == pytest.approx(value, rel=1e-4)
    np.testing.assert_allclose(gpu.predict(X[:10]), cpu.predict(X[:10]), rtol=1e-5)


def test_device_replicate_groups_go_through_the_batched_cholesky(data, monkeypatch):
    import tlrcore

    calls = []
    original = tlrcore.batched.cholesky

    def spy(mats, **kwargs):
        calls.append(len(mats))
        return original(mats, **kwargs)

    monkeypatch.setattr(tlrcore.batched, "cholesky", spy)
    cpu, device = pair(data, "exponential", True, False, NUMPY)
    theta = {"range": 0.2}
    assert len(device.groups) > 1
    expected = cpu.terms(theta, 0.1).logdet
    calls.clear()
    assert device.terms(theta, 0.1).logdet == pytest.approx(expected, rel=1e-12)
    assert calls and sum(calls) == len(device.groups)  # every group, in runs of at most n^2 entries


def test_device_replicate_group_that_fails_is_shifted_alone():
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(60, 2))
    X[30:] = X[:30] + 1e-13  # near-duplicate sites
    Y = rng.normal(size=(60, 2))
    Y[30:, 0] = np.nan  # group of replicate 0: 30 distinct sites, positive definite
    args = (X, Y, np.ones((60, 1)), gs.kernels.get_kernel("gaussian"), get_distance("euclidean"))
    device = DeviceExactLikelihood(*args, backend=NUMPY)
    cpu = ExactLikelihood(*args)
    theta = {"range": 0.5}
    got, expected = device.terms(theta, 0.0), cpu.terms(theta, 0.0)
    assert device.n_safeguarded == cpu.n_safeguarded == 1  # only the group with duplicates
    assert got.logdet == pytest.approx(expected.logdet, rel=1e-6)
