"""The TLR likelihood on the batched (GPU) path, with NumPy standing in for CuPy.

:class:`standin.StandIn` is NumPy flagged like the GPU back end, so the likelihood takes
the GPU code path: packed construction, batched Cholesky, factors of back-end arrays that
:class:`geostat.solvers.TLRFactor` brings to the host.
"""

import numpy as np
import pytest
from standin import StandIn
from strategies import tlr_loglik_error_scale

from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import ExactLikelihood, TLRLikelihood


def problem(n=1500, replicates=1, missing=0.0, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = rng.normal(size=(n, replicates))
    y[rng.uniform(size=y.shape) < missing] = np.nan
    return X, y, np.column_stack([np.ones(n), X[:, 0]])


PARAMS = {"variance": 1.3, "range": 0.1, "nugget": 0.02, "smoothness": 0.5}


@pytest.mark.parametrize(
    "kernel, replicates, missing",
    [
        ("exponential", 1, 0.0),
        ("matern", 1, 0.0),
        ("exponential", 3, 0.1),
    ],
    ids=["exp", "matern15", "replicates-missing"],
)
def test_batched_path_matches_exact_and_cpu_tlr(kernel, replicates, missing):
    X, y, F = problem(replicates=replicates, missing=missing)
    k = get_kernel(kernel, smoothness=1.5) if kernel == "matern" else get_kernel(kernel)
    params = dict(PARAMS, smoothness=1.5 if kernel == "matern" else 0.5)
    d = get_distance("euclidean")
    exact = ExactLikelihood(X, y, F, k, d).log_likelihood(params)
    batched = TLRLikelihood(X, y, F, k, d, accuracy=1e-8, tile_size=256, backend=StandIn())
    cpu = TLRLikelihood(X, y, F, k, d, accuracy=1e-8, tile_size=256)
    value = batched.log_likelihood(params)
    # The TLR error is tr(G E) with ||E||_F <= 2 accuracy ||C||_F; sigma is its spread for E
    # in a random direction (tlr_loglik_error_scale). The realized error changes with the
    # rounding of the BLAS kernels, within 0.04-0.3 sigma. Within 3 sigma of exact; two
    # independent evaluations within 3 sqrt(2) sigma.
    sigma = tlr_loglik_error_scale(X, y, F, k, params, 1e-8)
    assert abs(value - exact) <= 3 * sigma
    assert abs(value - cpu.log_likelihood(params)) <= 3 * np.sqrt(2) * sigma
    factor = batched.factors({"range": 0.1, "smoothness": params["smoothness"]}, 0.02 / 1.3)[0]
    assert type(factor.factor).__name__ == "PackedCholesky"
    assert isinstance(factor.solve(np.ones(factor.n)), np.ndarray)


def test_batched_path_shifts_on_failure():
    X, y, F = problem(n=800)
    k, d = get_kernel("gaussian"), get_distance("euclidean")
    params = {"variance": 1.0, "range": 0.3, "nugget": 0.0}
    raising = TLRLikelihood(
        X, y, F, k, d, accuracy=1e-4, tile_size=128, backend=StandIn(), on_failure="raise"
    )
    with pytest.raises(np.linalg.LinAlgError):
        raising.log_likelihood(params)
    shifting = TLRLikelihood(X, y, F, k, d, accuracy=1e-4, tile_size=128, backend=StandIn())
    assert np.isfinite(shifting.log_likelihood(params)) and shifting.n_safeguarded == 1


def test_spatialgp_tlr_on_the_gpu_path_fits_like_the_cpu(monkeypatch):
    import geostat
    import geostat as gs

    rng = np.random.default_rng(5)
    X = rng.uniform(size=(600, 2))
    y = gs.simulate(
        X, {"variance": 1.5, "range": 0.2, "nugget": 0.1}, kernel="exponential", random_state=2
    ).ravel()
    options = dict(kernel="exponential", n_starts=1, method="tlr", tile_size=128, accuracy=1e-8)
    cpu = gs.SpatialGP(**options).fit(X, y)
    monkeypatch.setattr(geostat.estimator, "get_backend", lambda device: StandIn())
    gpu = gs.SpatialGP(**options, device="gpu").fit(X, y)
    assert gpu._likelihood.backend.name == "standin" and gpu.method_ == "tlr"
    for name, value in cpu.params_.items():
        assert gpu.params_[name] == pytest.approx(value, rel=1e-4)  # two TLR factorizations at 1e-8
    assert gpu.loglik_ == pytest.approx(cpu.loglik_, rel=1e-8)
    np.testing.assert_allclose(gpu.predict(X[:7]), cpu.predict(X[:7]), rtol=1e-5)


def test_an_evaluation_moves_only_small_arrays_to_the_host():
    moved = []

    class Counting(StandIn):
        def to_host(self, a):
            moved.append(np.size(a))
            return super().to_host(a)

    X, y, F = problem(n=1200, replicates=2)
    likelihood = TLRLikelihood(
        X,
        y,
        F,
        get_kernel("exponential"),
        get_distance("euclidean"),
        accuracy=1e-8,
        tile_size=256,
        backend=Counting(),
    )
    likelihood.log_likelihood(PARAMS)
    moved.clear()
    likelihood.log_likelihood(dict(PARAMS, range=0.12))
    # per-tile error estimates and ranks (at most n_tiles), and the p x p, p x r GLS products
    assert moved and max(moved) <= 8


def test_a_cpu_evaluation_compresses_the_covariance_as_it_factors_it(monkeypatch):
    """The likelihood builds the covariance it factors and discards with deferred tile
    columns (``tlrcore.TLRMatrix.from_generator(..., deferred=True)``): the same value as
    an eager build, to the rounding of the factorization's arithmetic."""
    import tlrcore

    X, y, F = problem()
    k, d = get_kernel("exponential"), get_distance("euclidean")
    made = []
    build = tlrcore.TLRMatrix.from_generator.__func__

    def spied(cls, *args, **kwargs):
        matrix = build(cls, *args, **kwargs)
        made.append(matrix.deferred_columns[:])
        return matrix

    monkeypatch.setattr(tlrcore.TLRMatrix, "from_generator", classmethod(spied))
    deferred = TLRLikelihood(X, y, F, k, d, accuracy=1e-8, tile_size=256).log_likelihood(PARAMS)
    assert made == [list(range(1500 // 256))]  # 6 tile columns, the last with no tile below

    def eager(cls, *args, **kwargs):
        return build(cls, *args, **{**kwargs, "deferred": False})

    monkeypatch.setattr(tlrcore.TLRMatrix, "from_generator", classmethod(eager))
    value = TLRLikelihood(X, y, F, k, d, accuracy=1e-8, tile_size=256).log_likelihood(PARAMS)
    assert abs(deferred - value) <= 1e-10 * abs(value)
