"""TLR likelihood, stochastic Fisher information, TLR maximum likelihood and kriging,
each against the dense exact path on the same data."""

import copy
import dataclasses
import sys

import numpy as np
import pytest

import geostat as gs
import geostat.estimator
import geostat.likelihood
import geostat.likelihood.tlr as tlr_module
import tlrcore
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood, TLRLikelihood
from geostat.optimize import accuracy

THETA = {"range": 0.12, "smoothness": 1.2}


def data(n, rng, replicates=2, missing=0.1, dim=2):
    X = rng.uniform(size=(n, dim))
    F = np.column_stack([np.ones(n), X[:, 0]])
    y = gs.simulate(
        X,
        {"variance": 1.0, **THETA, "nugget": 0.05},
        kernel="matern",
        n_samples=replicates,
        random_state=3,
        method="exact",
    ).reshape(n, replicates)
    y = y + F @ np.array([0.5, -1.0])[:, None]
    y[rng.uniform(size=y.shape) < missing] = np.nan
    return X, y, F


def pair(n, rng, reml=False, accuracy=1e-10, **kwargs):
    X, y, F = data(n, rng, **kwargs)
    args = (X, y, F, get_kernel("matern"), get_distance("euclidean"), reml)
    return ExactLikelihood(*args), TLRLikelihood(*args, accuracy=accuracy, tile_size=128)


@pytest.mark.parametrize("reml", [False, True], ids=["ml", "reml"])
def test_terms_and_gls_match_exact_with_replicates_and_missing_values(reml, rng):
    exact, tlr = pair(700, rng, reml=reml)
    assert len(tlr.groups) == 2  # two missing patterns: two factorizations
    want, got = exact.terms(THETA, 0.05), tlr.terms(THETA, 0.05)
    assert got.n_obs == want.n_obs and got.n_eff == want.n_eff
    assert got.logdet == pytest.approx(want.logdet, abs=1e-6)
    assert got.quadratic == pytest.approx(want.quadratic, rel=1e-8)
    assert got.logdet_trend == pytest.approx(want.logdet_trend, rel=1e-8)
    assert got.profiled_value() == pytest.approx(want.profiled_value(), abs=1e-6)
    params = {"variance": 0.9, **THETA, "nugget": 0.05}
    coef, cov = tlr.gls(params)
    coef_exact, cov_exact = exact.gls(params)
    np.testing.assert_allclose(coef, coef_exact, rtol=1e-7)
    np.testing.assert_allclose(cov, cov_exact, rtol=1e-7)


def test_factors_are_cached_for_the_last_two_parameters(rng, monkeypatch):
    """The last parameters' factors and, while small, those before them (the start of a
    step that did not increase the likelihood): returning to them factors nothing and
    counts no evaluation; a third set, a new accuracy or a size above the budget evicts."""
    _, tlr = pair(300, rng)
    first = tlr.factors(THETA, 0.05)
    assert tlr.factors(dict(THETA), 0.05) is first
    assert tlr.factors(THETA, 0.05, accuracy=1e-6) is not first
    assert tlr.factors(THETA, 0.05) is first  # another accuracy does not evict
    second = tlr.factors(THETA, 0.06)
    assert second is not first
    count = tlr.n_factorizations
    tlr.terms(THETA, 0.05)
    tlr.terms(THETA, 0.06)
    assert tlr.n_factorizations == count
    assert tlr.factors(THETA, 0.05) is first and tlr.factors(THETA, 0.06) is second
    tlr.factors(THETA, 0.07)
    assert tlr.factors(THETA, 0.05) is not first  # two sets later
    tlr.set_accuracy(1e-7)
    assert tlr.factors(THETA, 0.05) is not first
    monkeypatch.setattr(tlr_module, "PREVIOUS_FACTOR_BYTES", 0)
    third = tlr.factors(THETA, 0.05)
    tlr.factors(THETA, 0.06)
    assert tlr.factors(THETA, 0.05) is not third


def test_factors_at_the_accuracy_left_serve_that_accuracy(rng):
    """After a new accuracy is set, the last parameters' factors at the accuracy left serve
    evaluations at that accuracy (the check at the end of a fit compares the two) without
    a factorization; other parameters do not use them, and releasing drops them."""
    _, tlr = pair(300, rng)
    old = tlr.accuracy
    first = tlr.factors(THETA, 0.05)
    value = tlr.terms(THETA, 0.05).profiled_value()
    tlr.set_accuracy(old / 10)
    count = tlr.n_factorizations
    assert tlr.terms(THETA, 0.05, accuracy=old).profiled_value() == value
    assert tlr.n_factorizations == count
    assert tlr.factors(THETA, 0.05, accuracy=old) is first
    assert tlr.factors(THETA, 0.05) is not first
    assert tlr.factors(THETA, 0.06, accuracy=old) is not first
    tlr.release_factors()
    assert tlr.factors(THETA, 0.05, accuracy=old) is not first


def test_gradient_request_and_bad_accuracy_are_refused(rng):
    _, tlr = pair(200, rng)
    with pytest.raises(ValueError, match="no analytic gradient"):
        tlr.terms(THETA, 0.05, gradient=True)
    X, y, F = data(50, rng)
    with pytest.raises(ValueError, match="accuracy"):
        TLRLikelihood(X, y, F, get_kernel("matern"), get_distance("euclidean"), accuracy=2.0)


def test_distance_extremes_match_the_dense_ones(rng):
    exact, tlr = pair(400, rng)
    assert tlr.min_distance == pytest.approx(exact.min_distance, rel=1e-12)
    assert tlr.max_distance == pytest.approx(exact.max_distance, rel=1e-12)


@pytest.mark.parametrize("reml", [False, True], ids=["ml", "reml"])
def test_stochastic_fisher_information_matches_the_exact_traces(reml, rng):
    exact, tlr = pair(600, rng, reml=reml, replicates=1, missing=0.0)
    params = {"variance": 0.9, **THETA, "nugget": 0.05}
    names = ["variance", "range", "smoothness", "nugget"]
    want = exact.fisher_information(params, names)
    got, error = tlr.fisher_information(params, names, return_error=True)
    assert 0 < error <= 0.02
    scale = np.sqrt(np.outer(np.diag(want), np.diag(want)))
    # Monte Carlo: within 4 of the reported relative standard errors (entrywise scaled).
    assert np.max(np.abs(got - want) / scale) <= 4 * error


@pytest.fixture(scope="module")
def fits():
    rng = np.random.default_rng(7)
    n = 2500
    X = rng.uniform(size=(n, 2))
    y = 2.0 + gs.simulate(
        X,
        {"variance": 1.0, "range": 0.1, "nugget": 0.05},
        kernel="exponential",
        random_state=4,
        method="exact",
    )
    kwargs = {"kernel": "exponential", "random_state": 0}
    exact = gs.SpatialGP(method="exact", **kwargs).fit(X, y)
    tlr = gs.SpatialGP(method="tlr", accuracy=1e-9, **kwargs).fit(X, y)
    return X, y, exact, tlr


def test_tlr_and_exact_estimates_agree_within_a_fraction_of_their_standard_errors(fits):
    _, _, exact, tlr = fits
    assert tlr.method_ == "tlr" and tlr.accuracy_ == 1e-9 and exact.method_ == "exact"
    assert tlr.converged_
    for name in ("variance", "range", "nugget"):
        assert abs(tlr.params_[name] - exact.params_[name]) <= 0.1 * exact.stderr_[name], name
        assert tlr.stderr_[name] == pytest.approx(exact.stderr_[name], rel=0.05), name
    assert abs(tlr.coef_[0] - exact.coef_[0]) <= 0.05 * exact.coef_stderr_[0]
    # The coefficient's standard error moves with the covariance parameters: about half
    # the relative change of the variance (s.e. 18% here), so the 0.1 s.e. allowed above
    # allows about 1%, and as much again from the range.
    assert tlr.coef_stderr_[0] == pytest.approx(exact.coef_stderr_[0], rel=0.03)
    # Fisher scoring stops where its Monte Carlo score vanishes: the expected loss there is
    # at most LOSS_TARGET = 0.002 and exponentially distributed (two coordinates), so
    # 0.01 is five times it (a chance of e^-5).
    assert tlr.loglik_ == pytest.approx(exact.loglik_, abs=0.01)
    assert 0 < tlr.loglik_error_ <= 1e-3 and exact.loglik_error_ == 0.0
    assert 0 < tlr.result_.fisher_relative_error <= 0.02
    # The TLR optimum is a maximum of the exact likelihood too.
    assert exact.log_likelihood(tlr.params_) == pytest.approx(exact.loglik_, abs=0.01)


def test_tlr_loglik_and_coefficients_equal_the_exact_ones_at_the_same_parameters(fits):
    """Where the optimizers may stop apart (above), the values at one point may not: the
    reported log-likelihood is within its estimated error (<= 1e-3 here) of the exact value
    at the TLR estimate, and the GLS coefficient and its standard error agree to the
    accuracy of the factor: a relative compression error of 1e-9, amplified by at most the
    conditioning of K (its smallest eigenvalue is above the nugget ratio 0.05), stays far
    below 1e-6 (measured 7.5e-10 and 7e-11)."""
    X, y, exact, tlr = fits
    p = tlr.params_
    assert tlr.loglik_ == pytest.approx(exact.log_likelihood(p), abs=max(tlr.loglik_error_, 1e-6))
    at_point = gs.SpatialGP(
        method="exact",
        kernel="exponential",
        nugget=p["nugget"],
        fixed={"variance": p["variance"], "range": p["range"]},
    ).fit(X, y)
    assert tlr.coef_[0] == pytest.approx(at_point.coef_[0], rel=1e-6)
    assert tlr.coef_stderr_[0] == pytest.approx(at_point.coef_stderr_[0], rel=1e-6)


def test_tlr_kriging_matches_exact_kriging(fits, rng):
    X, _, exact, tlr = fits
    new = rng.uniform(size=(300, 2))
    mean, std = tlr.predict(new, return_std=True)
    # Same parameters in both predictors, so the difference is the factor's alone.
    same = copy.deepcopy(exact)
    kriging = type(exact._kriging)(exact._likelihood, tlr.params_, tlr.result_.coef)
    same._solvers = dataclasses.replace(exact._solvers, kriging=kriging)
    mean_exact, std_exact = same.predict(new, return_std=True)
    np.testing.assert_allclose(mean, mean_exact, atol=1e-6)
    np.testing.assert_allclose(std, std_exact, atol=1e-6)


def test_tlr_kriging_interpolates_without_nugget(rng):
    X = rng.uniform(size=(600, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.2}, kernel="exponential", random_state=1, method="exact"
    )
    est = gs.SpatialGP(
        kernel="exponential", nugget=False, trend=None, method="tlr", accuracy=1e-10, tile_size=128
    ).fit(X, y)
    mean, std = est.predict(X[:50], return_std=True)
    np.testing.assert_allclose(mean, y[:50], atol=1e-5)
    assert np.max(std) <= 1e-3


def test_auto_switches_to_tlr_from_the_crossover(monkeypatch, rng):
    X = rng.uniform(size=(400, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.2, "nugget": 0.1}, kernel="exponential", random_state=1
    )
    monkeypatch.setitem(geostat.likelihood.EXACT_UP_TO, "numpy", 299)
    est = gs.SpatialGP(kernel="exponential").fit(X, y)
    # accuracy="auto": the accuracy of the last evaluations, one of the policy's decades
    assert est.method_ == "tlr" and accuracy.MOST_ACCURATE <= est.accuracy_ <= 1e-8
    assert np.log10(est.accuracy_) == pytest.approx(round(np.log10(est.accuracy_)))
    assert gs.SpatialGP(kernel="exponential", accuracy=1e-8).fit(X, y).accuracy_ == 1e-8
    assert gs.SpatialGP(kernel="exponential").fit(X[:200], y[:200]).method_ == "exact"


class _ScaledError:
    """A stand-in likelihood whose value at accuracy ``a`` is ``1000 + scale * a`` (the TLR
    error in proportion to the accuracy), failing to factor at accuracies `failing`."""

    def __init__(self, accuracy, scale, failing=()):
        self.accuracy, self.scale, self.failing, self.asked = accuracy, scale, failing, []

    def log_likelihood(self, params, accuracy=None):
        accuracy = self.accuracy if accuracy is None else accuracy
        self.asked.append(accuracy)
        if any(accuracy == pytest.approx(a) for a in self.failing):
            raise gs.NotPositiveDefiniteError("not positive definite", tile=0)
        return 1000.0 + self.scale * accuracy


@pytest.mark.parametrize(
    "accuracy, scale, failing, asked, reported, own_change",
    [
        (1e-8, 1e5, (), [1e-7], 1e-8, 9e-3),  # change 9e-3 from 1e-7: the fit's own value
        # 0.09 from 1e-7, then 9e-3 to 1e-9: the distance to the value at 1e-9 (9e-3) and
        # that value's change (9e-3) measure the error at 1e-8 itself
        (1e-8, 1e6, (), [1e-7, 1e-9], 1e-9, 1.8e-2),
        (1e-8, 1e5, (1e-7,), [1e-7, 1e-9], 1e-9, None),  # the coarser one fails: finer rounds
        (0.5, 1e-3, (), [0.05], 0.05, None),  # no coarser accuracy than 0.5 * 10: finer only
    ],
)
def test_reported_loglik_checks_a_coarser_evaluation_first(
    accuracy, scale, failing, asked, reported, own_change
):
    from geostat.optimize.search import reported_loglik

    likelihood = _ScaledError(accuracy, scale, failing)
    loglik, error, got, own_error = reported_loglik(likelihood, {}, likelihood.log_likelihood({}))
    # The error of the value at the fit's own accuracy: its distance from the finest value
    # plus that value's change where finer ones were made, else the change from the coarser
    # one (overstated).
    finest = scale * reported
    expected = own_change if own_change else abs(scale * accuracy - finest) + 9 * finest
    assert own_error == pytest.approx(expected)
    assert likelihood.asked[1:] == pytest.approx(asked)
    assert got == pytest.approx(reported) and loglik == pytest.approx(1000.0 + scale * reported)
    # the change from the value ten times less accurate than the reported one
    assert error == pytest.approx(9 * scale * reported) and error <= 0.01


@pytest.mark.skipif(sys.platform != "linux", reason="the worker processes are forked on Linux only")
def test_a_cpu_fit_builds_in_worker_processes_and_leaves_them_idle_and_no_copies(monkeypatch, rng):
    from tlrcore.concurrency import processes as worker_processes

    monkeypatch.delenv("TLRCORE_PROCESSES", raising=False)  # the default
    monkeypatch.setenv("TLRCORE_NUM_THREADS", "2")
    monkeypatch.setattr(worker_processes, "_broken", False)
    submitted = []
    pool_of = worker_processes._get_pool

    class Counting:
        def submit(self, fn, *args):
            submitted.append(fn.__name__)
            return pool_of().submit(fn, *args)

    monkeypatch.setattr(worker_processes, "_get_pool", Counting)
    X, y, _ = data(
        600, rng, replicates=1, missing=0.0
    )  # above the pilot's 500 sites, as a real fit
    model = gs.SpatialGP(method="tlr", tile_size=128, smoothness=1.2).fit(X, y[:, 0])
    assert "_run" in submitted  # tile columns sent to the workers (processes.call)
    assert (
        worker_processes._holds == 0 and worker_processes._idle_timer is not None
    )  # stopping when idle
    likelihood = model._solvers.likelihood  # nor does the fit leave truncated copies behind
    assert (
        likelihood.coarser_accuracy is None
        and likelihood._coarser == {}
        and model.loglik_error_ <= 0.01
    )
    monkeypatch.setenv("TLRCORE_PROCESSES", "0")
    on_threads = gs.SpatialGP(method="tlr", tile_size=128, smoothness=1.2).fit(X, y[:, 0])
    assert on_threads.params_ == model.params_ and on_threads.loglik_ == model.loglik_


def test_the_check_evaluation_factors_a_truncated_copy_instead_of_building(monkeypatch, rng):

    exact, tlr = pair(400, rng, accuracy=1e-9, replicates=1, missing=0.0)
    params = {"variance": 1.0, **THETA, "nugget": 0.05}
    fresh = tlr.log_likelihood(params, accuracy=1e-8)  # built at 1e-8
    builds = []
    real_build = tlr_module.tlr_matrix
    monkeypatch.setattr(
        tlr_module, "tlr_matrix", lambda *a, **k: builds.append(a[3]) or real_build(*a, **k)
    )
    tlr.keep_coarser(1e-8)
    own = tlr.log_likelihood(params)
    assert builds == [1e-9]
    (_, kept) = tlr._coarser[0]  # the build's own tiles, not yet truncated
    assert kept.accuracy == 1e-9 and kept.diagonal.nbytes > 0  # kept past the factorization
    from_copy = tlr.log_likelihood(params, accuracy=1e-8)
    assert builds == [1e-9]  # the copy, not a new build
    # the copy is another matrix than the build, as close to the exact one as a build at 1e-8
    # (both meet the 1e-8 contract; their log-likelihood errors, a few 1e-6 here, are of one
    # order; a factor 10 of margin)
    assert from_copy != own
    target = exact.log_likelihood(params)
    assert abs(from_copy - target) <= 10 * max(abs(fresh - target), 1e-7)
    assert tlr.log_likelihood(params, accuracy=1e-8) == fresh  # the copy is used once, then builds
    assert builds == [1e-9, 1e-8]
    tlr.log_likelihood({**params, "range": 0.1})  # another evaluation replaces the copy
    (key, accuracy), _ = tlr._coarser[0]
    assert dict(key[0])["range"] == 0.1 and accuracy == 1e-8
    monkeypatch.setattr(tlr_module, "CHECK_COPY_BYTES", 0)  # too large a matrix: no copy
    tlr.log_likelihood({**params, "range": 0.11})
    assert tlr._coarser == {}
    monkeypatch.undo()
    truncate = tlrcore.TLRMatrix.truncated

    def truncating_nothing(matrix, accuracy):
        copy = truncate(matrix, accuracy)
        copy.truncation_error = (
            0.0  # as if every tile's spectrum had a gap: the copy would equal the build
        )
        return copy

    monkeypatch.setattr(tlrcore.TLRMatrix, "truncated", truncating_nothing)
    monkeypatch.setattr(
        tlr_module, "tlr_matrix", lambda *a, **k: builds.append(a[3]) or real_build(*a, **k)
    )
    builds.clear()
    tlr.log_likelihood({**params, "range": 0.12})
    tlr.log_likelihood({**params, "range": 0.12}, accuracy=1e-8)
    assert builds == [
        1e-9,
        1e-8,
    ]  # a copy that would not move from the build: the check builds anew
    tlr.keep_coarser(None)
    with pytest.raises(ValueError, match="coarser than the likelihood's"):
        tlr.keep_coarser(1e-10)


@pytest.mark.parametrize("method", ["exact", "tlr"])
def test_a_fit_runs_with_blas_on_one_thread_and_restores_it_after(monkeypatch, rng, method):
    """Between its steps, a multithreaded BLAS call left OpenBLAS threads spinning on the
    cores that the next step's threads and worker processes needed (Likelihood.fitting)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    seen = []
    maximize = geostat.estimator.maximize_likelihood

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return maximize(*args, **kwargs)

    monkeypatch.setattr(geostat.estimator, "maximize_likelihood", spy)
    X, y, _ = data(300, rng, replicates=1, missing=0.0)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        gs.SpatialGP(method=method, tile_size=128, smoothness=1.5).fit(X, y[:, 0])
        assert blas_threads() == before
    assert seen and all(n == 1 for n in seen[0])


@pytest.mark.parametrize("method", ["exact", "tlr"])
def test_a_tlr_fit_keeps_new_arrays_off_huge_pages_and_restores_numpys_advice(
    monkeypatch, rng, method
):
    """The probe blocks of the scoring iterations are made outside the tile pools: the TLR
    likelihood's fitting context turns NumPy's huge-page advice off for the whole fit
    (tlrcore.concurrency.heap.small_pages); the exact fit's dense factors keep it."""
    multiarray = pytest.importorskip("numpy._core.multiarray")
    if (
        not hasattr(multiarray, "_get_madvise_hugepage")
        or not tlrcore.concurrency.heap._tuning_enabled()
    ):
        pytest.skip("no huge-page switch in this NumPy, or allocator tuning off here")
    seen = []
    maximize = geostat.estimator.maximize_likelihood

    def spy(*args, **kwargs):
        seen.append(multiarray._get_madvise_hugepage())
        return maximize(*args, **kwargs)

    monkeypatch.setattr(geostat.estimator, "maximize_likelihood", spy)
    X, y, _ = data(300, rng, replicates=1, missing=0.0)
    before = multiarray._set_madvise_hugepage(True)
    try:
        gs.SpatialGP(method=method, tile_size=128, smoothness=1.5).fit(X, y[:, 0])
        assert multiarray._get_madvise_hugepage()
    finally:
        multiarray._set_madvise_hugepage(before)
    assert seen == [method == "exact"]
