"""Each kernel's formula is written once, in ``xp``: the trusted ``evaluate`` path, the
chunking strategies and the array namespace, on NumPy and (with ``-m gpu``) CuPy."""

import sys
import types

import numpy as np
import pytest

import geostat.kernels._base as kernel_base
from geostat.kernels import Exponential, Gaussian, Matern, PoweredExponential
from geostat.kernels._base import array_namespace
from tlrcore.backends import cupy_available

# 0, the smallest subnormal-free scales, the series/quadrature switch points of every
# smoothness, the 1e5 cut-off, and far beyond it.
U = np.concatenate(
    [[0.0, 1e-300, 1e-200, 1e-12, 1e-8], np.logspace(-6, 3.2, 300), [1e4, 9.9e4, 1e5, 1.01e5, 1e9]]
)

KERNELS = {
    "exponential": (Exponential(), {}),
    "gaussian": (Gaussian(), {}),
    "powexp-1.3": (PoweredExponential(), {"power": 1.3}),
    "powexp-0.01": (PoweredExponential(), {"power": 0.01}),
    "powexp-fixed-2": (PoweredExponential(power=2.0), {}),
    **{
        f"matern-{nu}": (Matern(), {"smoothness": nu})
        for nu in (0.5, 1.5, 2.5, 0.05, 0.3, 0.9, 1.0, 1.3, 3.7, 13.0, 40.0)
    },
    **{f"matern-fixed-{nu}": (Matern(nu), {}) for nu in (0.5, 2.5, 0.7, 2.0)},
}


def same(a, b):
    return a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("case", list(KERNELS))
def test_evaluate_is_the_validated_path_bit_for_bit(case):
    kernel, shape = KERNELS[case]
    d = np.concatenate([U, U[::-1]]).reshape(2, -1) * 2.0
    m, grads = kernel.correlation_and_gradient(d, 2.0, **shape)
    values = kernel.resolve_shape(shape)
    got, got_grads = kernel.evaluate(d, 2.0, values, gradient=True)
    assert same(got, m) and set(got_grads) == set(grads) == {"range", *kernel.free_shape}
    assert all(same(got_grads[k], grads[k]) for k in grads)
    only, none = kernel.evaluate(d, 2.0, values)
    assert same(only, m) and none == {} and same(kernel.correlation(d, 2.0, **shape), m)
    assert m[0, 0] == 1.0


@pytest.mark.parametrize("case", list(KERNELS))
def test_bounded_chunks_equal_the_whole_array(case, monkeypatch):
    """The strategy of arrays other than NumPy's (a GPU's), run on NumPy: chunks of
    DEVICE_CHUNK entries written into the outputs equal one evaluation of the whole array,
    bit for bit (every formula is elementwise; the quadrature sums node by node)."""
    kernel, shape = KERNELS[case]
    values = kernel.resolve_shape(shape)
    d = np.abs(np.random.default_rng(0).normal(size=(13, 17))) * 3.0
    whole, grads = kernel.evaluate(d, 0.3, values, gradient=True)
    monkeypatch.setattr(kernel_base, "_CHUNKING", {})
    monkeypatch.setattr(kernel_base, "DEVICE_CHUNK", 10)
    chunked, chunked_grads = kernel.evaluate(d, 0.3, values, gradient=True)
    assert same(chunked, whole) and all(same(chunked_grads[k], grads[k]) for k in grads)
    assert same(kernel.evaluate(d, 0.3, values)[0], whole)


@pytest.mark.parametrize("chunking", ["threaded", "bounded"])
@pytest.mark.parametrize("case", ["exponential", "matern-1.3", "powexp-1.3"])
def test_overwrite_d_gives_the_same_values_in_the_distances_own_memory(case, chunking, monkeypatch):
    """``overwrite_d`` writes the correlation of a large block into its distances (no
    temporary of their size), with the values of a plain evaluation bit for bit (the same
    operations); with a gradient, or for a non-contiguous or read-only array, `d` is left as
    it was."""
    kernel, shape = KERNELS[case]
    values = kernel.resolve_shape(shape)
    if chunking == "bounded":
        monkeypatch.setattr(kernel_base, "_CHUNKING", {})
        monkeypatch.setattr(kernel_base, "DEVICE_CHUNK", 1000)
    else:
        monkeypatch.setattr(kernel_base, "_PARALLEL_MIN_SIZE", 1000)
        monkeypatch.setattr(kernel_base, "_CHUNK_SIZE", 777)
    d = np.abs(np.random.default_rng(1).normal(size=(60, 70))) * 3.0
    plain = kernel.evaluate(d, 0.3, values)[0]
    kept = d.copy()
    for gradient in (True, ("range",)):
        kernel.evaluate(d, 0.3, values, gradient=gradient, overwrite_d=True)
        assert same(d, kept)
    view = np.asfortranarray(d)
    kernel.evaluate(view, 0.3, values, overwrite_d=True)
    assert same(view, kept)
    frozen = d.copy()
    frozen.flags.writeable = False
    assert same(kernel.evaluate(frozen, 0.3, values, overwrite_d=True)[0], plain) and same(
        frozen, kept
    )
    overwritten = kernel.evaluate(d, 0.3, values, overwrite_d=True)[0]
    assert same(overwritten, plain) and np.shares_memory(overwritten, d)


class DeviceFlags(np.ndarray):
    """NumPy memory with CuPy's flags: contiguity and ownership, no ``writeable``."""

    @property
    def flags(self):
        own = np.ndarray.flags.__get__(self)
        return types.SimpleNamespace(
            c_contiguous=own.c_contiguous, f_contiguous=own.f_contiguous, owndata=own.owndata
        )


@pytest.mark.parametrize("case", ["exponential", "matern-1.3"])
def test_overwrite_d_asks_only_for_flags_cupy_has(case, monkeypatch):
    """CuPy's flags have no ``writeable`` (its arrays always are): such an array is
    overwritten like a writeable NumPy one, in the GPU's chunks, without reading the missing
    flag."""
    kernel, shape = KERNELS[case]
    monkeypatch.setattr(kernel_base, "_CHUNKING", {})
    monkeypatch.setattr(kernel_base, "DEVICE_CHUNK", 1000)
    values = kernel.resolve_shape(shape)
    d = np.abs(np.random.default_rng(2).normal(size=(40, 50))) * 3.0
    plain = kernel.evaluate(d, 0.3, values)[0]
    device = d.copy().view(DeviceFlags)
    overwritten = kernel.evaluate(device, 0.3, values, overwrite_d=True)[0]
    assert np.array_equal(overwritten, plain) and np.shares_memory(overwritten, device)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (1,), (4, 1)])
def test_shapes_are_kept_including_empty(shape):
    d = np.ones(shape)
    for kernel, values in [(Matern(), {"smoothness": 1.7}), (Exponential(), {})]:
        m, grads = kernel.correlation_and_gradient(d, 1.0, **values)
        assert m.shape == shape and all(g.shape == shape for g in grads.values())


def test_array_namespace():
    assert (
        array_namespace(np.ones(2)) is np
        and array_namespace([1.0]) is np
        and array_namespace(2.0) is np
    )
    assert array_namespace(np.float64(1.0)) is np
    module = types.ModuleType("fakexp")

    class Array:
        pass

    Array.__module__ = "fakexp"
    sys.modules["fakexp"] = module
    try:
        assert array_namespace(Array()) is module
    finally:
        del sys.modules["fakexp"]


def test_argument_errors_are_the_validated_paths():
    with pytest.raises(ValueError, match="range"):
        Exponential().correlation(np.ones(3), 0.0)
    with pytest.raises(ValueError, match="smoothness"):
        Matern().correlation(np.ones(3), 1.0)
    with pytest.raises(ValueError, match="smoothness"):
        Matern().resolve_shape({})
    with pytest.raises(TypeError, match="unexpected shape"):
        Exponential().resolve_shape({"power": 1.0})


@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="CuPy or a GPU is not available")
@pytest.mark.parametrize("case", list(KERNELS))
def test_cupy_values_match_numpy(case):
    import cupy

    kernel, shape = KERNELS[case]
    m_cpu, g_cpu = kernel.correlation_and_gradient(U * 2.0, 2.0, **shape)
    m, g = kernel.correlation_and_gradient(cupy.asarray(U * 2.0), 2.0, **shape)
    assert isinstance(m, cupy.ndarray)
    # The same operations; GPU exp/log/pow may differ from the host's by a few ulp. A value
    # exp(-t) inherits t's rounding as a relative error of a few ulp times t = -log m
    # (t is about 630 at 1e-274), hence the bound grows with t.
    t = -np.log(np.maximum(m_cpu, np.finfo(float).tiny))
    np.testing.assert_array_less(
        np.abs(cupy.asnumpy(m) - m_cpu), 1e-13 * (1.0 + t) * m_cpu + 1e-300
    )
    for name in g_cpu:
        np.testing.assert_allclose(
            cupy.asnumpy(g[name]), g_cpu[name], rtol=1e-12, atol=2e-12 * np.abs(g_cpu[name]).max()
        )
