"""The GPU path on the strict device stand-in (:mod:`strict_device`): no hidden host round trip.

The device arrays of :class:`strict_device.StrictBackend` raise, as CuPy's do, on an implicit
conversion to NumPy and on operations mixed with host arrays, so a host round trip hidden in
the packed build, factorization, solves or the TLR likelihood fails here on the CPU. The
results are compared with SciPy on the densified matrix, with the tolerances of
``test_batched_tlr.py``.
"""

import numpy as np
import problems
import pytest
import scipy.linalg
from problems import grid_sorted_sites
from strict_device import IMPLICIT, DeviceArray, StrictBackend

import tlrcore as tlr
from tlrcore.backends import NUMPY, get_backend, register_array_type


def generator(X, backend, **kw):
    """An exponential (or ``kernel=``) covariance generator returning device arrays."""
    kw.setdefault("range_", 0.1)
    kw.setdefault("nugget", 1e-2)
    host = problems.generator(X, **kw)

    def block(rows, cols):
        return backend.asarray(host(rows, cols))

    return block


def dense(X, **kw):
    kw.setdefault("range_", 0.1)
    kw.setdefault("nugget", 1e-2)
    idx = np.arange(X.shape[0])
    return problems.generator(X, **kw)(idx, idx)


# --- the stand-in itself ------------------------------------------------------------------


def test_device_arrays_refuse_the_host_as_cupy_does():
    B = StrictBackend()
    xp = B.xp
    a = xp.ones((3, 4))
    host = np.ones(4)
    refused = {
        "asarray": lambda: np.asarray(a),
        "numpy function": lambda: np.sum(a),
        "numpy ufunc": lambda: np.exp(a),
        "mixed operand": lambda: a + host,
        "mixed operand, reflected": lambda: host * a,
        "mixed in xp": lambda: xp.maximum(a, host),
        "host index": lambda: a[np.array([0, 1])],
        "list index": lambda: a[[0, 1]],
        "host value": lambda: a.__setitem__(0, host),
        "host in linear algebra": lambda: B.solve_triangular(np.eye(3), a),
    }
    for what, operation in refused.items():
        with pytest.raises(TypeError):
            operation()
            pytest.fail(what)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    assert IMPLICIT.startswith("Implicit conversion to a NumPy array is not allowed")
    assert not isinstance(a, np.ndarray) and get_backend(a) is B and get_backend(B) is B
    # scalars are fine, and moves are explicit
    assert float((2.0 * a + np.float64(1.0)).sum()) == 36.0
    assert np.array_equal(B.to_host(a[xp.asarray(np.array([0, 2]))]), np.ones((2, 4)))


def test_counters():
    B = StrictBackend()
    xp = B.xp
    a = xp.zeros((4, 3))  # one launch, one allocation
    assert (B.counts.launches, B.counts.allocations) == (1, 1)
    B.counts.reset()
    _ = a[1:], a.T, a.reshape(12), a[0, 1], xp.asarray(a)  # views
    assert B.counts.launches == B.counts.allocations == 0
    a[1:] = 1.0  # a launch, no allocation
    b = a @ a.T  # a launch and an allocation
    assert (B.counts.launches, B.counts.allocations) == (2, 1)
    c = xp.asarray(np.arange(3.0))  # an upload
    assert B.counts.uploads == 1 and B.counts.syncs == 0
    float(b[0, 0]), int(c[1]), bool(c[2] > 0), B.to_host(c), c.get()
    assert B.counts.syncs == 5
    _ = a[a > 0]  # a boolean mask: the result's size is read back
    assert B.counts.syncs == 6
    before = B.counts.snapshot()
    e = xp.empty((3, 3))  # an allocation only
    assert isinstance(e, DeviceArray)
    assert ((B.counts - before).launches, (B.counts - before).allocations) == (0, 1)
    before = B.counts.snapshot()
    B.eigh(xp.zeros((2, 40, 40)))  # CuPy's back end solves these on the host
    assert ((B.counts - before).syncs, (B.counts - before).uploads) == (1, 1)
    before = B.counts.snapshot()
    B.eigh_stacks([xp.zeros((2, 40, 40)), xp.zeros((3, 16, 16)), xp.zeros((1, 48, 48))], False)
    assert ((B.counts - before).syncs, (B.counts - before).uploads) == (1, 1)  # all together
    before = B.counts.snapshot()
    B.eigh(xp.zeros((2, 16, 16)))  # on the device, whose info CuPy reads to raise on failure
    assert ((B.counts - before).syncs, (B.counts - before).uploads) == (1, 0)


def test_registration_keeps_the_real_back_ends():
    assert get_backend(np.ones(2)) is NUMPY
    with pytest.raises(ValueError, match="back end already"):
        register_array_type(np.ndarray, lambda a: NUMPY)
    with pytest.raises(TypeError):
        get_backend([1.0])


# --- the packed path --------------------------------------------------------------------------

CASES = {
    "exp2d-ragged": (900, 2, 128, "exponential"),
    "matern15-2d": (1024, 2, 256, "matern15"),
    "exp1d-small-tiles": (300, 1, 32, "exponential"),
    "single-tile": (200, 2, 200, "exponential"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("accuracy", [1e-6, 1e-10], ids=lambda a: f"acc{a:.0e}")
def test_build_factor_logdet_and_solves_match_scipy(case, accuracy, rng):
    n, d, tile, kernel = CASES[case]
    B = StrictBackend()
    X = grid_sorted_sites(n, d)
    M = dense(X, kernel=kernel)
    A = tlr.TLRMatrix.from_generator(
        generator(X, B, kernel=kernel), n, tile, accuracy=accuracy, backend=B
    )
    assert A.packed is not None and A.backend is B
    assert isinstance(A.packed.diagonal, DeviceArray)
    norm = np.linalg.norm(M)
    assert np.linalg.norm(A.to_dense() - M) <= accuracy * norm
    F = tlr.cholesky(A)
    assert type(F).__name__ == "PackedCholesky"
    L = F.to_dense()
    assert np.allclose(np.triu(L, 1), 0.0)
    assert np.linalg.norm(L @ L.T - M) <= 2 * accuracy * norm
    assert abs(F.logdet() - np.linalg.slogdet(M)[1]) <= accuracy * n
    b, Bm = rng.normal(size=n), rng.normal(size=(n, 3))
    exact = scipy.linalg.cho_solve(scipy.linalg.cho_factor(M, lower=True), Bm)
    cond = np.linalg.cond(M)
    solved = F.solve(Bm)
    assert isinstance(solved, DeviceArray)  # device results; the caller moves them
    np.testing.assert_allclose(
        B.to_host(solved), exact, rtol=0, atol=50 * accuracy * cond * np.abs(exact).max()
    )
    np.testing.assert_allclose(
        B.to_host(F.solve_lower(B.asarray(b))),
        scipy.linalg.solve_triangular(L, b, lower=True),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(
        B.to_host(F.solve_upper(Bm)),
        scipy.linalg.solve_triangular(L.T, Bm, lower=False),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(B.to_host(F.multiply_lower(b)), L @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B.to_host(A @ Bm), A.to_dense() @ Bm, rtol=1e-12, atol=1e-11)


def test_matches_the_standin_bit_for_bit():
    """The strict arrays change where data may go, not the arithmetic."""
    from standin import StandIn

    X = grid_sorted_sites(700)
    results = []
    for backend in (StrictBackend(), StandIn()):
        A = tlr.TLRMatrix.from_generator(
            generator(X, backend), 700, 100, accuracy=1e-8, backend=backend
        )
        F = tlr.cholesky(A)
        results.append((F.logdet(), F.to_dense(), F.ranks))
    assert results[0][0] == results[1][0]
    assert np.array_equal(results[0][1], results[1][1])
    assert np.array_equal(results[0][2], results[1][2])


@pytest.mark.parametrize(
    "safeguard, accuracy",
    [
        ("shift", 1e-4),
        ("compensate", 1e-4),
        ("compensate-block", 1e-4),
        ("modified", 1e-5),
        ("schur+modified", 1e-5),
    ],
)
def test_safeguards_on_the_device(safeguard, accuracy):
    """An indefinite matrix at a loose accuracy: every safeguard of the packed factorization
    runs on device arrays (the modified Cholesky moves its tile explicitly)."""
    n = 600
    X = grid_sorted_sites(n)
    kw = dict(kernel="matern15", nugget=0.0, range_=0.5)
    M = dense(X, **kw)
    B = StrictBackend()
    A = tlr.TLRMatrix.from_generator(generator(X, B, **kw), n, 100, accuracy=accuracy, backend=B)
    with pytest.raises(tlr.NotPositiveDefiniteError):
        tlr.cholesky(A)
    F = tlr.cholesky(A, safeguard=safeguard)
    changed = F.compensated_tiles + F.modified_tiles + ((0,) if F.shift else ())
    assert changed and F.perturbation > 0
    L = F.to_dense()
    error = np.linalg.norm(L @ L.T - M)
    assert error <= 2 * accuracy * np.linalg.norm(M) + F.perturbation
    if safeguard == "shift":
        assert tlr.cholesky(A, shift=F.shift).logdet() == F.logdet()


def test_overwrite_a_on_the_device():
    X = grid_sorted_sites(500)
    B = StrictBackend()
    A = tlr.TLRMatrix.from_generator(generator(X, B), 500, 100, accuracy=1e-8, backend=B)
    reference = tlr.cholesky(A).logdet()
    assert tlr.cholesky(A, overwrite_a=True).logdet() == reference


def test_generator_errors_on_the_device():
    B = StrictBackend()
    with pytest.raises(tlr.GeneratorError, match="NaN"):
        tlr.TLRMatrix.from_generator(
            lambda r, c: B.xp.full((r.size, c.size), np.nan), 300, 100, backend=B
        )
    with pytest.raises(tlr.GeneratorError, match="shape"):
        tlr.TLRMatrix.from_generator(
            lambda r, c: B.xp.zeros((r.size, c.size + 1)), 300, 100, backend=B
        )


# --- geostat's TLR likelihood -----------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["exponential", "matern"])
def test_geostat_tlr_likelihood_on_the_device(kernel):
    """The TLR likelihood's GPU path (covariance blocks formed on the device from host index
    arrays, packed build, factorization, GLS) on strict arrays, against the exact likelihood
    within the TLR error's spread (as ``test_tlr_batched_likelihood.py``)."""
    from strategies import tlr_loglik_error_scale

    from geostat.distance import get_distance
    from geostat.kernels import get_kernel
    from geostat.likelihood import ExactLikelihood, TLRLikelihood

    rng = np.random.default_rng(1)
    n = 1200
    X = rng.uniform(size=(n, 2))
    y = rng.normal(size=(n, 2))
    F = np.column_stack([np.ones(n), X[:, 0]])
    k = get_kernel("matern", smoothness=1.5) if kernel == "matern" else get_kernel(kernel)
    smoothness = 1.5 if kernel == "matern" else 0.5
    params = {"variance": 1.3, "range": 0.1, "nugget": 0.02, "smoothness": smoothness}
    d = get_distance("euclidean")
    B = StrictBackend()
    likelihood = TLRLikelihood(X, y, F, k, d, accuracy=1e-8, tile_size=256, backend=B)
    value = likelihood.log_likelihood(params)
    exact = ExactLikelihood(X, y, F, k, d).log_likelihood(params)
    assert abs(value - exact) <= 3 * tlr_loglik_error_scale(X, y, F, k, params, 1e-8)
    assert B.counts.launches > 0 and B.counts.syncs > 0  # it ran on the strict arrays
    factor = likelihood.factors({"range": 0.1, "smoothness": smoothness}, 0.02 / 1.3)[0]
    assert type(factor.factor).__name__ == "PackedCholesky"
    assert isinstance(factor.solve(np.ones(factor.n)), np.ndarray)
