"""Tests of geostat.kernels: formulas, numerics, derivatives and bookkeeping."""

import math
import multiprocessing
import sys
import threading
import warnings

import numpy as np
import pytest
from scipy import special
from scipy.spatial.distance import pdist, squareform

import geostat.kernels._base as kernel_base
from geostat.kernels import (
    KERNEL_NAMES,
    Exponential,
    Gaussian,
    Kernel,
    Matern,
    PoweredExponential,
    get_kernel,
)
from geostat.kernels.matern import _plan

U = np.concatenate([[0.0], np.logspace(-6, 2.5, 60)])


def matern_direct(u, nu):
    """The textbook formula, safe for moderate nu and u > 0."""
    return 2.0 ** (1 - nu) / special.gamma(nu) * u**nu * special.kv(nu, u)


# ---------------------------------------------------------------- closed forms
CLOSED_FORMS = {
    0.5: (lambda u: np.exp(-u), lambda u: -np.exp(-u)),
    1.5: (lambda u: (1 + u) * np.exp(-u), lambda u: -u * np.exp(-u)),
    2.5: (lambda u: (1 + u + u**2 / 3) * np.exp(-u), lambda u: -(u / 3) * (1 + u) * np.exp(-u)),
}


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5], ids=lambda v: f"nu={v}")
def test_matern_closed_forms(nu):
    rng = 2.0
    m, grads = Matern(nu).correlation_and_gradient(U * rng, rng)
    form, deriv = CLOSED_FORMS[nu]
    np.testing.assert_allclose(m, form(U), rtol=1e-15, atol=0)
    # dM/drange = dM/du * (-u / range)
    np.testing.assert_allclose(grads["range"], deriv(U) * (-U / rng), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5], ids=lambda v: f"nu={v}")
def test_closed_forms_match_general_path(nu):
    # The mean of nu +- delta cancels the first-order change: agreement to ~1e-13.
    delta = 1e-9
    kernel = Matern()
    m_hi, g_hi = kernel.correlation_and_gradient(U, 1.0, smoothness=nu + delta)
    m_lo, g_lo = kernel.correlation_and_gradient(U, 1.0, smoothness=nu - delta)
    m, g = kernel.correlation_and_gradient(U, 1.0, smoothness=nu)
    np.testing.assert_allclose(0.5 * (m_hi + m_lo), m, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(
        0.5 * (g_hi["range"] + g_lo["range"]), g["range"], rtol=1e-11, atol=1e-17
    )
    # The smoothness derivative at exactly nu is continuous with its neighbours (up to
    # the ~1e-11 absolute rounding of the finite difference where it tends to 0).
    np.testing.assert_allclose(
        g["smoothness"], 0.5 * (g_hi["smoothness"] + g_lo["smoothness"]), rtol=1e-6, atol=1e-10
    )


@pytest.mark.parametrize("nu", [0.3, 1.3, 3.7, 7.2], ids=lambda v: f"nu={v}")
def test_matern_general_matches_direct_formula(nu):
    u = np.linspace(0.05, 50, 200)
    # scipy's kv is the less accurate side, by up to ~1.5e-13 near u = 2
    np.testing.assert_allclose(Matern(nu).correlation(u, 1.0), matern_direct(u, nu), rtol=3e-13)


# ---------------------------------------------------------------- high precision reference
MPMATH_NU = [
    0.01,
    0.05,
    0.3,
    0.74,
    1.0,
    1.3,
    1.9999999999,
    2.0,
    3.0,
    3.3,
    7.5,
    13.0,
    25.0,
    50.0,
    100.0,
]
MPMATH_U = [1e-8, 1e-4, 0.01, 0.3, 1.0, 2.0, 4.0, 10.0, 40.0, 150.0, 650.0, 1000.0]


@pytest.mark.parametrize("nu", MPMATH_NU, ids=lambda v: f"nu={v}")
def test_matern_against_mpmath(nu):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    m, grads = Matern().correlation_and_gradient(np.array(MPMATH_U), 1.0, smoothness=nu)
    for i, u in enumerate(MPMATH_U):
        factor = mp.mpf(2) ** (1 - nu) / mp.gamma(nu)
        ref_m = factor * mp.mpf(u) ** nu * mp.besselk(nu, u)
        # dM/drange at range 1 = -u dM/du = u^(nu+1) K_{nu-1}(u) * factor
        ref_range = factor * mp.mpf(u) ** (nu + 1) * mp.besselk(nu - 1, u)
        if ref_m < 1e-280:
            assert m[i] < 1e-280
            continue
        assert m[i] == pytest.approx(float(ref_m), rel=1e-12), (u, "M")
        assert grads["range"][i] == pytest.approx(float(ref_range), rel=1e-11, abs=1e-30), (
            u,
            "range",
        )


@pytest.mark.parametrize("nu", [0.05, 0.7, 1.3, 2.0, 3.3, 10.7, 50.0], ids=lambda v: f"nu={v}")
def test_matern_smoothness_derivative_against_mpmath(nu):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    u = np.array([0.1, 0.5, 2.0, 8.0, 60.0])
    _, grads = Matern().correlation_and_gradient(u, 1.0, smoothness=nu)

    def corr(n, x):
        return mp.mpf(2) ** (1 - n) / mp.gamma(n) * x**n * mp.besselk(n, x)

    ref = [float(mp.diff(lambda n, x=x: corr(n, mp.mpf(x)), mp.mpf(nu))) for x in u]
    np.testing.assert_allclose(grads["smoothness"], ref, rtol=1e-10)


# ---------------------------------------------------------------- behaviour near 0 and large nu
@pytest.mark.parametrize("nu", [0.1, 0.7, 3.3, 25.0, 50.0], ids=lambda v: f"nu={v}")
def test_matern_at_and_near_zero(nu):
    kernel = Matern(nu)
    assert kernel.correlation(np.array([0.0]), 1.0)[0] == 1.0
    u = np.concatenate([[0.0], np.logspace(-300, 0, 301)])
    m = kernel.correlation(u, 1.0)
    assert np.all(np.isfinite(m)) and np.all(m <= 1.0) and np.all(m > 0)
    assert np.all(np.diff(m) <= 0), "M must decrease with u"
    # Small-u expansion: 1 - M ~ Gamma(1-nu)/Gamma(1+nu) (u/2)^(2 nu) - (u/2)^2 / (1 - nu)
    # for nu < 1 and u^2 / (4 (nu - 1)) for nu > 2.
    small = np.array([1e-4, 1e-3])
    if nu < 1:
        expected = math.gamma(1 - nu) / math.gamma(1 + nu) * (small / 2) ** (2 * nu) - (
            small / 2
        ) ** 2 / (1 - nu)
    else:
        expected = small**2 / (4 * (nu - 1))
    np.testing.assert_allclose(1 - kernel.correlation(small, 1.0), expected, rtol=1e-3)


@pytest.mark.parametrize("nu", [0.1, 0.7, 3.3, 25.0, 50.0], ids=lambda v: f"nu={v}")
def test_matern_continuous_across_series_threshold(nu):
    u_switch = _plan(nu).u_series  # series at and below, Bessel functions above
    u = np.array([u_switch, np.nextafter(u_switch, np.inf)])
    m, grads = Matern().correlation_and_gradient(u, 1.0, smoothness=nu)
    assert m[0] == pytest.approx(m[1], rel=1e-14, abs=1e-16)
    assert grads["range"][0] == pytest.approx(grads["range"][1], rel=1e-6, abs=1e-16)
    assert grads["smoothness"][0] == pytest.approx(grads["smoothness"][1], rel=1e-5, abs=1e-11)


def test_matern_large_smoothness_is_finite_and_monotone():
    u = np.linspace(0.0, 1000.0, 20001)
    m, grads = Matern().correlation_and_gradient(u, 1.0, smoothness=50.0)
    assert all(np.all(np.isfinite(g)) for g in [m, *grads.values()])
    assert np.all((m >= 0) & (m <= 1))
    assert np.all(np.diff(m) <= 0)


def test_matern_huge_distances_give_zero():
    m, grads = Matern().correlation_and_gradient(np.array([1e6, 1e12, 1e300]), 1.0, smoothness=1.3)
    assert np.all(m == 0) and all(np.all(g == 0) for g in grads.values())


@pytest.mark.parametrize(
    "kernel, shape",
    [
        pytest.param(Matern(), {"smoothness": 0.01}, id="matern0.01"),
        pytest.param(Matern(), {"smoothness": 1.2}, id="matern1.2"),
        pytest.param(Matern(), {"smoothness": 100.0}, id="matern100"),
        pytest.param(Matern(2.5), {}, id="matern2.5"),
        pytest.param(PoweredExponential(), {"power": 0.05}, id="powexp0.05"),
        pytest.param(PoweredExponential(), {"power": 2.0}, id="powexp2"),
        pytest.param(Gaussian(), {}, id="gaussian"),
        pytest.param(Exponential(), {}, id="exponential"),
    ],
)
def test_extreme_distances_are_finite(kernel, shape):
    u = np.array([0.0, 5e-324, 1e-200, 1e-20, 1e-8, 0.3, 3.0, 700.0, 1e5, 1e10, 1e300, 1.7e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m, grads = kernel.correlation_and_gradient(u, 1.0, **shape)
    assert all(np.all(np.isfinite(a)) for a in [m, *grads.values()])
    assert m[0] == 1.0 and np.all((m >= 0) & (m <= 1))


# ---------------------------------------------------------------- equivalences
def test_exponential_equals_matern_half_and_power_one():
    d = np.linspace(0, 10, 101)
    expected = Matern(0.5).correlation(d, 1.7)
    np.testing.assert_allclose(Exponential().correlation(d, 1.7), expected, rtol=1e-15)
    np.testing.assert_allclose(PoweredExponential(1.0).correlation(d, 1.7), expected, rtol=1e-15)


def test_powered_exponential_two_equals_gaussian():
    d = np.linspace(0, 10, 101)
    np.testing.assert_allclose(
        PoweredExponential(2.0).correlation(d, 1.7), Gaussian().correlation(d, 1.7), rtol=1e-15
    )


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.7, 3.2], ids=lambda v: f"nu={v}")
def test_sklearn_matern_conversion(nu):
    sk_kernels = pytest.importorskip("sklearn.gaussian_process.kernels")
    x = np.random.default_rng(1).uniform(0, 3, (30, 2))
    length_scale = 0.8
    expected = sk_kernels.Matern(length_scale=length_scale, nu=nu)(x)
    ours = squareform(Matern(nu).correlation(pdist(x), length_scale / math.sqrt(2 * nu)))
    np.fill_diagonal(ours, 1.0)
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- derivatives
GRADIENT_CASES = [
    pytest.param(Matern(), {"smoothness": 0.3}, "range", id="matern0.3-range"),
    pytest.param(Matern(), {"smoothness": 0.3}, "smoothness", id="matern0.3-smoothness"),
    pytest.param(Matern(), {"smoothness": 1.5}, "range", id="matern1.5-range"),
    pytest.param(Matern(), {"smoothness": 1.5}, "smoothness", id="matern1.5-smoothness"),
    pytest.param(Matern(), {"smoothness": 2.2}, "smoothness", id="matern2.2-smoothness"),
    pytest.param(Matern(), {"smoothness": 6.4}, "range", id="matern6.4-range"),
    pytest.param(Matern(), {"smoothness": 6.4}, "smoothness", id="matern6.4-smoothness"),
    pytest.param(Matern(2.5), {}, "range", id="matern2.5fixed-range"),
    pytest.param(Exponential(), {}, "range", id="exponential-range"),
    pytest.param(PoweredExponential(), {"power": 0.6}, "range", id="powexp0.6-range"),
    pytest.param(PoweredExponential(), {"power": 0.6}, "power", id="powexp0.6-power"),
    pytest.param(PoweredExponential(), {"power": 1.7}, "power", id="powexp1.7-power"),
    pytest.param(Gaussian(), {}, "range", id="gaussian-range"),
]


@pytest.mark.parametrize("kernel, shape, param", GRADIENT_CASES)
def test_gradient_against_finite_differences(kernel, shape, param):
    d = np.array([0.0, 0.01, 0.2, 0.9, 2.5, 7.0])
    rng = 1.3
    _, grads = kernel.correlation_and_gradient(d, rng, **shape)
    assert set(grads) == {"range", *kernel.free_shape}
    value = rng if param == "range" else shape[param]
    step = 1e-5 * value

    def evaluate(v):
        if param == "range":
            return kernel.correlation(d, v, **shape)
        return kernel.correlation(d, rng, **{**shape, param: v})

    numeric = (evaluate(value + step) - evaluate(value - step)) / (2 * step)
    np.testing.assert_allclose(grads[param], numeric, rtol=1e-6, atol=1e-9)
    assert grads[param][0] == 0.0  # M(0) = 1 whatever the parameters


# ---------------------------------------------------------------- positive definiteness
@pytest.mark.parametrize(
    "kernel, shape",
    [
        pytest.param(Exponential(), {}, id="exponential"),
        pytest.param(Matern(0.3), {}, id="matern0.3"),
        pytest.param(Matern(1.5), {}, id="matern1.5"),
        pytest.param(Matern(), {"smoothness": 3.3}, id="matern3.3"),
        pytest.param(PoweredExponential(), {"power": 1.4}, id="powexp1.4"),
        pytest.param(Gaussian(), {}, id="gaussian"),
    ],
)
def test_correlation_matrix_positive_definite(kernel, shape):
    x = np.random.default_rng(2).uniform(0, 1, (80, 2))
    r = squareform(kernel.correlation(pdist(x), 0.05, **shape))
    np.fill_diagonal(r, 1.0)
    assert np.linalg.eigvalsh(r).min() > 0


# ---------------------------------------------------------------- shapes, inputs, threading
def test_any_shape_and_inputs_not_mutated():
    d = np.abs(np.random.default_rng(3).normal(size=(7, 5)))
    before = d.copy()
    m, grads = Matern().correlation_and_gradient(d, 0.7, smoothness=1.1)
    assert m.shape == d.shape and all(g.shape == d.shape for g in grads.values())
    np.testing.assert_array_equal(d, before)
    np.testing.assert_array_equal(Matern(1.1).correlation(d.T, 0.7), m.T)
    assert Gaussian().correlation(0.0, 1.0) == 1.0
    assert Exponential().correlation([], 1.0).shape == (0,)


@pytest.mark.parametrize(
    "kernel, shape",
    [
        pytest.param(Matern(), {"smoothness": 1.3}, id="matern-general"),
        pytest.param(Matern(), {"smoothness": 25.0}, id="matern-series"),
        pytest.param(Matern(), {"smoothness": 1.5}, id="matern-closed"),
        pytest.param(PoweredExponential(), {"power": 0.8}, id="powexp"),
    ],
)
def test_chunked_threaded_evaluation_is_identical(monkeypatch, kernel, shape):
    d = np.random.default_rng(4).exponential(size=5000)
    d[:10] = 0.0
    d[10:20] = 800.0  # log-form region of the Matern kernel
    monkeypatch.setattr(kernel_base, "_PARALLEL_MIN_SIZE", 10**9)
    serial = kernel.correlation_and_gradient(d, 0.3, **shape)
    monkeypatch.setattr(kernel_base, "_PARALLEL_MIN_SIZE", 1000)
    monkeypatch.setattr(kernel_base, "_CHUNK_SIZE", 777)
    previous = kernel_base.set_num_threads(2)
    try:
        chunked = kernel.correlation_and_gradient(d, 0.3, **shape)
    finally:
        kernel_base.set_num_threads(previous)
    np.testing.assert_array_equal(chunked[0], serial[0])
    for key in serial[1]:
        np.testing.assert_array_equal(chunked[1][key], serial[1][key])


def test_the_kernel_pool_serves_the_main_thread_alone(monkeypatch):
    d = np.random.default_rng(5).exponential(size=300_000)  # above _PARALLEL_MIN_SIZE: chunked
    pooled = []
    real = kernel_base._get_pool
    monkeypatch.setattr(
        kernel_base, "_get_pool", lambda: pooled.append(threading.current_thread().name) or real()
    )
    previous = kernel_base.set_num_threads(2)
    try:
        expected = Exponential().correlation(d, 0.3)
        assert pooled == [threading.main_thread().name]
        pooled.clear()
        elsewhere = []
        thread = threading.Thread(
            target=lambda: elsewhere.append(Exponential().correlation(d, 0.3))
        )
        thread.start()
        thread.join()
        assert not pooled  # its chunks ran one after the other in that thread
        np.testing.assert_array_equal(elsewhere[0], expected)
    finally:
        kernel_base.set_num_threads(previous)


@pytest.mark.skipif(sys.platform != "linux", reason="forks on Linux only")
def test_a_forked_process_evaluates_its_chunks_itself():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(kernel_base._pool_serves_here) is False
    assert kernel_base._pool_serves_here()


@pytest.mark.parametrize(
    "d, range_, error",
    [
        pytest.param([-1.0, 2.0], 1.0, ValueError, id="negative-distance"),
        pytest.param([np.nan, 2.0], 1.0, ValueError, id="nan-distance"),
        pytest.param([np.inf], 1.0, ValueError, id="inf-distance"),
        pytest.param([1.0], 0.0, ValueError, id="zero-range"),
        pytest.param([1.0], np.nan, ValueError, id="nan-range"),
        pytest.param([1.0], "1", TypeError, id="string-range"),
        pytest.param([1.0], np.array([1.0, 2.0]), TypeError, id="array-range"),
        pytest.param(["a"], 1.0, TypeError, id="string-distance"),
    ],
)
def test_call_argument_errors(d, range_, error):
    with pytest.raises(error):
        Matern(1.5).correlation(d, range_)


def test_shape_argument_errors():
    with pytest.raises(ValueError, match="smoothness"):
        Matern().correlation([1.0], 1.0)
    with pytest.raises(TypeError, match="power"):
        Matern(1.5).correlation([1.0], 1.0, power=1.0)
    with pytest.raises(ValueError, match="smoothness"):
        Matern().correlation([1.0], 1.0, smoothness=-1.0)
    with pytest.raises(ValueError, match="0.5"):
        Exponential().correlation([1.0], 1.0, smoothness=1.5)
    # a given value overrides a fixed one; the fixed one equals itself
    np.testing.assert_array_equal(
        Matern(1.5).correlation([1.0], 1.0, smoothness=1.5), Matern(1.5).correlation([1.0], 1.0)
    )


# ---------------------------------------------------------------- construction and bookkeeping
@pytest.mark.parametrize(
    "factory, error",
    [
        pytest.param(lambda: Matern(0.0), ValueError, id="smoothness-zero"),
        pytest.param(lambda: Matern(-1.0), ValueError, id="smoothness-negative"),
        pytest.param(lambda: Matern(np.inf), ValueError, id="smoothness-inf"),
        pytest.param(lambda: Matern(101.0), ValueError, id="smoothness-too-large"),
        pytest.param(lambda: Matern("1.5"), TypeError, id="smoothness-str"),
        pytest.param(lambda: Matern(True), TypeError, id="smoothness-bool"),
        pytest.param(lambda: PoweredExponential(0.0), ValueError, id="power-zero"),
        pytest.param(lambda: PoweredExponential(2.5), ValueError, id="power-above-2"),
        pytest.param(lambda: PoweredExponential([1.0]), TypeError, id="power-list"),
        pytest.param(
            lambda: Matern(bounds={"smoothness": (2.0, 1.0)}), ValueError, id="bounds-reversed"
        ),
        pytest.param(
            lambda: Matern(bounds={"smoothness": (0.0, 1.0)}), ValueError, id="bounds-zero"
        ),
        pytest.param(
            lambda: Matern(bounds={"power": (0.5, 1.0)}), ValueError, id="bounds-unknown-key"
        ),
        pytest.param(lambda: Matern(bounds={"smoothness": 1.0}), TypeError, id="bounds-not-pair"),
        pytest.param(lambda: Matern(bounds=[(0.1, 1.0)]), TypeError, id="bounds-not-dict"),
        pytest.param(
            lambda: PoweredExponential(bounds={"power": (0.5, 3.0)}),
            ValueError,
            id="bounds-power-above-2",
        ),
    ],
)
def test_constructor_errors(factory, error):
    with pytest.raises(error):
        factory()


def test_fixed_free_bounds_start():
    free = Matern()
    assert free.shape_names == ("smoothness",) and free.free_shape == ("smoothness",)
    assert free.fixed_shape == {} and free.shape_start == {"smoothness": 1.0}
    assert free.shape_bounds == {"smoothness": (0.05, 10.0)}
    fixed = Matern(1.5)
    assert fixed.free_shape == () and fixed.fixed_shape == {"smoothness": 1.5}
    assert fixed.shape_start == {}
    assert Exponential().fixed_shape == {"smoothness": 0.5} and Exponential().free_shape == ()
    assert PoweredExponential().shape_bounds == {"power": (0.05, 2.0)}
    assert PoweredExponential().shape_start == {"power": 1.0}
    assert Gaussian().shape_names == () and Gaussian().shape_bounds == {}
    narrow = Matern(bounds={"smoothness": (2.0, 8.0)})
    assert narrow.shape_bounds == {"smoothness": (2.0, 8.0)}
    assert narrow.shape_start == {"smoothness": 4.0}  # default 1.0 is outside: geometric mean


def test_repr_eq_hash():
    assert repr(Matern(1.5)) == "Matern(smoothness=1.5)"
    assert repr(Matern()) == "Matern(smoothness=None)"
    assert repr(Exponential()) == "Exponential()"
    assert repr(Gaussian()) == "Gaussian()"
    assert repr(PoweredExponential(0.5)) == "PoweredExponential(power=0.5)"
    assert "bounds" in repr(Matern(bounds={"smoothness": (0.1, 5.0)}))
    assert Matern(1.5) == Matern(1.5) and hash(Matern(1.5)) == hash(Matern(1.5))
    assert Matern(1.5) != Matern(2.5)
    assert Matern() != Matern(bounds={"smoothness": (0.1, 5.0)})
    assert Exponential() != Matern(0.5)
    assert Gaussian() == Gaussian()
    assert isinstance(Matern(), Kernel)


@pytest.mark.parametrize(
    "kernel, valid",
    [
        pytest.param(Exponential(), True, id="exponential"),
        pytest.param(Matern(0.3), True, id="matern0.3"),
        pytest.param(Matern(0.5), True, id="matern0.5"),
        pytest.param(Matern(1.5), False, id="matern1.5"),
        pytest.param(Matern(), False, id="matern-free"),
        pytest.param(PoweredExponential(1.0), True, id="powexp1"),
        pytest.param(PoweredExponential(1.5), False, id="powexp1.5"),
        pytest.param(PoweredExponential(), False, id="powexp-free"),
        pytest.param(Gaussian(), False, id="gaussian"),
    ],
)
def test_great_circle_valid(kernel, valid):
    assert kernel.great_circle_valid is valid


# ---------------------------------------------------------------- get_kernel
@pytest.mark.parametrize(
    "spec, smoothness, expected",
    [
        pytest.param("matern", None, Matern(), id="matern-free"),
        pytest.param("Matern", 1.5, Matern(1.5), id="matern-fixed-case"),
        pytest.param("exponential", None, Exponential(), id="exponential"),
        pytest.param("EXPONENTIAL", 0.5, Exponential(), id="exponential-0.5"),
        pytest.param("powered_exponential", None, PoweredExponential(), id="powexp"),
        pytest.param("powexp", None, PoweredExponential(), id="powexp-alias"),
        pytest.param("gaussian", None, Gaussian(), id="gaussian"),
        pytest.param("squared_exponential", None, Gaussian(), id="gaussian-alias"),
    ],
)
def test_get_kernel_names(spec, smoothness, expected):
    kernel = get_kernel(spec, smoothness=smoothness)
    assert kernel == expected and type(kernel) is type(expected)


def test_get_kernel_instances_and_errors():
    kernel = Matern(1.5)
    assert get_kernel(kernel) is kernel
    assert get_kernel(kernel, smoothness=1.5) is kernel
    assert set(KERNEL_NAMES) == {"exponential", "matern", "powered_exponential", "gaussian"}
    with pytest.raises(ValueError, match="matern"):
        get_kernel("rbf")
    with pytest.raises(ValueError, match="smoothness"):
        get_kernel(kernel, smoothness=2.5)
    with pytest.raises(ValueError, match="smoothness"):
        get_kernel(Matern(), smoothness=2.5)
    with pytest.raises(ValueError, match="smoothness"):
        get_kernel("exponential", smoothness=1.5)
    with pytest.raises(ValueError, match="smoothness"):
        get_kernel("gaussian", smoothness=1.5)
    with pytest.raises(ValueError):
        get_kernel("matern", smoothness=-1.0)
    with pytest.raises(TypeError):
        get_kernel(1.5)
    with pytest.raises(TypeError):
        get_kernel(None)
