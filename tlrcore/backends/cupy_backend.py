"""The CuPy back end: cuBLAS and cuSOLVER through CuPy, imported only when asked for.

Failures raise as on the CPU: cuSOLVER calls run under ``cupyx.errstate(linalg="raise")``
(``eigh(check=False)`` apart, whose caller checks the results), and the Cholesky
factorizations return cuSOLVER's ``devInfo`` per matrix (CuPy's own
:func:`cupy.linalg.cholesky` would only say that some matrix of a batch failed, not which).
Random blocks are drawn on the device by one stateless kernel: Box-Muller transforms of
SplitMix64 [1]_ outputs, a counter-based stream keyed by the seed.

References
----------
.. [1] Steele, G. L., Lea, D., Flood, C. H. (2014). Fast splittable pseudorandom number
   generators. OOPSLA 2014, 453-472.
"""

from __future__ import annotations

import functools

import cupy
import cupyx
import cupyx.scipy.linalg
import numpy as np
from cupy_backends.cuda.libs import cublas, cusolver

from tlrcore.backends._base import Backend, split_flat, unchecked_eigh, upload
from tlrcore.backends.numpy_backend import host_eigh

__all__ = ["CupyBackend"]

#: Largest order that cuSOLVER's batched Jacobi eigensolver (syevjBatched) accepts.
_BATCHED_JACOBI_MAX = 32
_MASK64 = 2**64 - 1
#: SplitMix64's increment and finalizer, in Python for the key and in CUDA below.
_GAMMA = 0x9E3779B97F4A7C15
_MIX = """
__device__ unsigned long long mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
"""
#: Element ``i``: Box-Muller of outputs ``2i`` and ``2i + 1`` of SplitMix64 from ``key``,
#: their top 53 bits as uniforms in (0, 1] and [0, 1).
_NORMAL_SOURCE = """
const unsigned long long n = 2ull * (unsigned long long)i;
const double u = ((mix64(key + (n + 1ull) * GAMMA) >> 11) + 1ull) * 1.1102230246251565e-16;
const double v = (mix64(key + (n + 2ull) * GAMMA) >> 11) * 1.1102230246251565e-16;
z = sqrt(-2.0 * log(u)) * cospi(2.0 * v);
""".replace("GAMMA", f"{_GAMMA}ull")


@functools.cache
def _normal_kernel():
    """The elementwise kernel of :meth:`CupyBackend.normal` (compiled at its first call)."""
    return cupy.ElementwiseKernel(
        "uint64 key", "float64 z", _NORMAL_SOURCE, "tlrcore_normal", preamble=_MIX
    )


def _splitmix64(seed):
    """The key of `seed` (any integer): SplitMix64's first output from it."""
    z = (int(seed) + _GAMMA) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class CupyBackend(Backend):
    """Arrays in GPU memory; cuBLAS and cuSOLVER for the linear algebra."""

    name = "cupy"
    xp = cupy
    batched_by_default = True

    def to_host(self, a):
        return cupy.asnumpy(a)

    def synchronize(self):
        cupy.cuda.get_current_stream().synchronize()

    def cholesky(self, a):
        a = cupy.asarray(a, dtype=cupy.float64)
        batch = a.shape[:-2]
        # Row-major L L^T is column-major U^T U with U = L^T: factor the upper triangle.
        x = a.reshape(-1, *a.shape[-2:]).copy(order="C")
        count, m = x.shape[0], x.shape[-1]
        info = cupy.zeros(count, dtype=np.int32)
        if m and count:
            handle = cupy.cuda.device.get_cusolver_handle()
            upper = cublas.CUBLAS_FILL_MODE_UPPER
            if count == 1:
                size = cusolver.dpotrf_bufferSize(handle, upper, m, x.data.ptr, m)
                work = cupy.empty(size, dtype=cupy.float64)
                cusolver.dpotrf(handle, upper, m, x.data.ptr, m, work.data.ptr, size, info.data.ptr)
            else:
                pointers = cupy.asarray(
                    x.data.ptr + np.arange(count, dtype=np.uint64) * np.uint64(x.strides[0])
                )
                cusolver.dpotrfBatched(handle, upper, m, pointers.data.ptr, m, info.data.ptr, count)
        return cupy.tril(x).reshape(a.shape), cupy.asnumpy(info).astype(np.int64).reshape(batch)

    def solve_triangular(self, a, b, lower=True, trans=False):
        if a.ndim > 2 or b.ndim > 2:
            shape = cupy.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a = cupy.broadcast_to(a, shape + a.shape[-2:])
            b = cupy.broadcast_to(b, shape + b.shape[-2:])
        if b.size == 0:
            # CuPy's batched solve divides by the stride of b's stack, which is 0 here.
            return cupy.empty(b.shape)
        with cupyx.errstate(linalg="raise"):
            return cupyx.scipy.linalg.solve_triangular(a, b, trans=int(trans), lower=lower)

    def eigh(self, a, check=True):
        return self.eigh_stacks([a], check)[0]

    def eigh_stacks(self, stacks, check=True):
        # cuSOLVER's batched Jacobi solver stops at order 32; beyond, CuPy loops over single
        # calls. These Gram matrices are small: they are solved on the host in parallel,
        # all stacks moved together (one read, one copy back).
        on_host = [a.ndim > 2 and a.shape[-1] > _BATCHED_JACOBI_MAX for a in stacks]
        with cupyx.errstate(linalg="raise" if check else "ignore"):
            solved = [
                None if host else cupy.linalg.eigh(a)
                for a, host in zip(stacks, on_host, strict=True)
            ]
        if not any(on_host):
            return solved
        big = [a for a, host in zip(stacks, on_host, strict=True) if host]
        flat = cupy.asnumpy(cupy.concatenate([a.ravel() for a in big]))
        pairs = []
        for a in split_flat(flat, [a.shape for a in big]):
            finite = check or bool(np.isfinite(a).all())
            pairs += host_eigh(a) if finite else unchecked_eigh(np, a)
        uploaded = upload(cupy, pairs)
        device = iter(zip(uploaded[0::2], uploaded[1::2], strict=True))
        return [next(device) if host else pair for pair, host in zip(solved, on_host, strict=True)]

    def normal(self, seed, shape):
        # One kernel, no generator state: a cuRAND generator costs a kernel that sets up its
        # states per draw of a new seed, the host's draws their time and a copy.
        out = cupy.empty(shape, dtype=cupy.float64)
        _normal_kernel()(np.uint64(_splitmix64(seed)), out)
        return out

    def free_memory(self):
        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free + cupy.get_default_memory_pool().free_bytes())
