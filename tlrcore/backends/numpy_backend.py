"""The NumPy back end: LAPACK through SciPy, stacks through NumPy's gufuncs."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg
from scipy.linalg import lapack
from scipy.linalg.lapack import dpotrf
from scipy.spatial.distance import cdist, squareform

from tlrcore._lapack import zero_strict_upper
from tlrcore.backends._base import Backend
from tlrcore.concurrency.threads import one_blas_thread_block, workers
from tlrcore.dense import blocked

__all__ = ["NumpyBackend", "NUMPY"]


class NumpyBackend(Backend):
    """Arrays in host memory; LAPACK and BLAS for the linear algebra."""

    name = "numpy"
    xp = np
    batched_strategy = "group"
    host_threads = True
    cholesky_off_alignment = True

    def small_kernels(self):
        return one_blas_thread_block()

    def cholesky(self, a):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim == 2:
            L, info = _dpotrf_lower(a)
            return L, np.array(info)
        flat = a.reshape(-1, *a.shape[-2:])
        L = np.empty_like(flat)
        info = np.zeros(flat.shape[0], dtype=np.int64)
        for p, m in enumerate(flat):
            L[p], info[p] = _dpotrf_lower(m)
        return L.reshape(a.shape), info.reshape(a.shape[:-2])

    def solve_triangular(self, a, b, lower=True, trans=False):
        if a.ndim == 2:
            return scipy.linalg.solve_triangular(
                a, b, lower=lower, trans=int(trans), check_finite=False
            )
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:])
        a_b = np.broadcast_to(a, out.shape[:-2] + a.shape[-2:])
        b_b = np.broadcast_to(b, out.shape)
        for idx in np.ndindex(out.shape[:-2]):
            out[idx] = scipy.linalg.solve_triangular(
                a_b[idx], b_b[idx], lower=lower, trans=int(trans), check_finite=False
            )
        return out

    def normal(self, seed, shape):
        return np.random.default_rng(seed).standard_normal(shape)

    def free_memory(self):
        """``MemAvailable`` of ``/proc/meminfo`` (free pages plus reclaimable caches), else
        the free pages, else unlimited."""
        try:
            with open("/proc/meminfo") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return 2**63 - 1

    def dense_cholesky(self, a, overwrite=False):
        # LAPACK works on the transpose of a C-ordered array in place; for a symmetric
        # matrix the transpose is the same matrix, so no copy is needed. The strict upper
        # triangle of the work array (the matrix) is kept for a retry after failure.
        # Large orders go by blocks over the tile pool (tlrcore.dense.blocked).
        work = a.T if a.flags.c_contiguous else np.asfortranarray(a)
        if _blocked(a.shape[0]):
            L = work if overwrite else np.array(work, order="F")
            info = blocked.cholesky_lower(L)
        else:
            L, info = lapack.dpotrf(work, lower=1, clean=0, overwrite_a=overwrite)
            if info < 0:
                raise ValueError(f"LAPACK dpotrf rejected argument {-info}.")
        if info == 0:
            zero_strict_upper(L)
        return L, int(info)

    def cholesky_solve(self, L, b):
        x, info = lapack.dpotrs(L, b, lower=1)
        if info != 0:
            raise ValueError(f"LAPACK dpotrs rejected argument {-info}.")
        return x

    def cholesky_inverse(self, L, lower=False):
        if _blocked(L.shape[0]):
            zeros = np.flatnonzero(np.diagonal(L) == 0)  # dpotri's check: the solves would give inf
            if zeros.size:
                raise ValueError(
                    f"LAPACK dpotri failed with info={zeros[0] + 1}: the factor is singular."
                )
            return blocked.inverse_lower(np.asfortranarray(L), lower=lower)
        inverse, info = lapack.dpotri(L, lower=1)
        if info != 0:
            raise ValueError(f"LAPACK dpotri failed with info={info}: the factor is singular.")
        if not lower:
            for j in range(1, inverse.shape[1]):
                inverse[:j, j] = inverse[j, :j]
        return inverse

    def matmul(self, a, b):
        return blocked.matmul(a, b) if _blocked(min(a.shape[0], b.shape[1])) else a @ b

    def squareform(self, values, n, diagonal):
        out = squareform(values, checks=False)
        np.fill_diagonal(out, diagonal)
        return out

    def cdist(self, a, b):
        return cdist(a, b)

    def like(self, x, reference):
        return x


NUMPY = NumpyBackend()


def _blocked(n):
    """Whether a dense factorization or product of order `n` goes by blocks over the tile
    pool: from :data:`tlrcore.dense.blocked.PARALLEL_FROM`, with more than one thread (on
    one thread LAPACK's ``dpotri`` is faster than the blocked inverse)."""
    return n >= blocked.PARALLEL_FROM and workers() > 1


def _dpotrf_lower(m):
    """``(L, info)`` of LAPACK ``dpotrf`` on the lower triangle of `m`, not modified.

    A C-ordered matrix is handed over transposed (Fortran order, upper triangle): no copy
    into Fortran order, and none of the copies of NumPy's stacked Cholesky.
    """
    if m.flags.c_contiguous:
        U, info = dpotrf(m.T, lower=0, clean=1, overwrite_a=0)
        return U.T, max(int(info), 0)
    L, info = dpotrf(m, lower=1, clean=1, overwrite_a=0)
    return L, max(int(info), 0)


#: Matrices per task of :func:`host_eigh`'s thread pool.
_EIGH_CHUNK = 16


def host_eigh(a):
    """``numpy.linalg.eigh`` of a stack, chunks of it on a thread pool with BLAS on one
    thread each (LAPACK's threaded eigensolvers are much slower on small matrices)."""
    a = np.asarray(a, dtype=np.float64)
    with one_blas_thread_block():
        if a.ndim == 2 or a.shape[0] <= _EIGH_CHUNK:
            return np.linalg.eigh(a)
        chunks = [slice(i, i + _EIGH_CHUNK) for i in range(0, a.shape[0], _EIGH_CHUNK)]
        with ThreadPoolExecutor(min(len(chunks), os.cpu_count() or 1)) as pool:
            parts = list(pool.map(lambda c: np.linalg.eigh(a[c]), chunks))
    return np.concatenate([w for w, _ in parts]), np.concatenate([v for _, v in parts])
