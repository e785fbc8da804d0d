"""The CuPy back end: cuBLAS and cuSOLVER through CuPy, imported only when asked for.

Failures raise as on the CPU: every cuSOLVER call runs under
``cupyx.errstate(linalg="raise")``, and the Cholesky factorizations return cuSOLVER's
``devInfo`` per matrix (CuPy's own :func:`cupy.linalg.cholesky` would only say that some
matrix of a batch failed, not which).
"""

from __future__ import annotations

import cupy
import cupyx
import cupyx.scipy.linalg
import numpy as np
from cupy_backends.cuda.libs import cublas, cusolver

from tlrcore.backends._base import Backend, unchecked_eigh
from tlrcore.backends.numpy_backend import host_eigh

__all__ = ["CupyBackend"]

#: Largest order that cuSOLVER's batched Jacobi eigensolver (syevjBatched) accepts.
_BATCHED_JACOBI_MAX = 32


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
        if a.ndim > 2 and a.shape[-1] > _BATCHED_JACOBI_MAX:
            # cuSOLVER's batched Jacobi solver stops at 32; beyond, CuPy loops over single
            # calls. These Gram matrices are small: solving them on the host in parallel
            # costs a transfer of q^2 numbers each.
            host = cupy.asnumpy(a)
            finite = check or bool(np.isfinite(host).all())
            lam, vec = host_eigh(host) if finite else unchecked_eigh(np, host)
            return cupy.asarray(lam), cupy.asarray(vec)
        with cupyx.errstate(linalg="raise" if check else "ignore"):
            return cupy.linalg.eigh(a)

    def normal(self, seed, shape):
        # The host's generator (the NumPy back end's draws, bit for bit) and one copy: a
        # cuRAND generator per seed costs more to set up than the sketches it draws.
        return cupy.asarray(np.random.default_rng(seed).standard_normal(shape))

    def free_memory(self):
        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free + cupy.get_default_memory_pool().free_bytes())
