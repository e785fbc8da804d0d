r"""Dense Cholesky factor, inverse and products by blocks, on tlrcore's thread pool.

One LAPACK call (``dpotrf``, ``dpotri``) or one NumPy product runs on one BLAS thread here
(``tlrcore.concurrency.threads``: threaded OpenBLAS crashed in place at n = 16,000 and collapsed
whenever another process was busy). These functions do the same work as independent
blocks on the tile pool instead, each block one BLAS call on one thread that releases the
GIL (:mod:`tlrcore._lapack`). The blocks are fixed (:data:`BLOCK`), never sized by the
number of threads, so the result is bit-identical for any number of threads.

Cholesky (left-looking, lower storage): for each block column ``K = k0:k1``,

.. math::

    A_{KK} \leftarrow A_{KK} - L_{K,:k_0} L_{K,:k_0}^T, \quad
    A_{IK} \leftarrow A_{IK} - L_{I,:k_0} L_{K,:k_0}^T \ (I > K), \quad
    L_{KK} = \operatorname{chol}(A_{KK}), \quad L_{IK} = A_{IK} L_{KK}^{-T},

the updates and the triangular solves split by row blocks ``I`` (``dsyrk`` for the
diagonal block, so that the strict upper triangle of ``A`` is never written).

Inverse: ``K^{-1} = L^{-T} L^{-1}``, by block columns ``J = j0:j1``: ``X_J = L^{-1} E_J``
(only rows ``j0:`` are non-zero: a solve with ``L[j0:, j0:]``), then
``(K^{-1})_{j0:, J} = X_{j0:, j0:}^T X_{j0:, J}`` (a triangular product): each
``(n - j0)^2 b`` flops, ``2 n^3 / 3`` in all, as ``dpotri``.
"""

from __future__ import annotations

import numpy as np

from tlrcore._lapack import (
    gemm_nt,
    potrf_lower,
    syrk_lower,
    trmm_lower_transposed,
    trsm_lower,
    zero_strict_upper,
)
from tlrcore.concurrency.threads import runner, tile_pool, workers

__all__ = ["BLOCK", "PARALLEL_FROM", "cholesky_lower", "inverse_lower", "matmul"]

#: Rows and columns of a block.
BLOCK = 256
#: Smallest order handed to the blocked algorithms when more than one thread is allowed;
#: below it one LAPACK call is as fast.
PARALLEL_FROM = 1024


def cholesky_lower(a):
    """Cholesky factor of the symmetric positive definite `a`, in its lower triangle.

    Parameters
    ----------
    a : ndarray of shape (n, n), Fortran order, float64
        Read in its lower triangle, overwritten there by ``L``; the strict upper
        triangle is left as it was (so the matrix can be rebuilt after a failure).

    Returns
    -------
    info : int
        0 on success; ``j > 0`` if the leading minor of order ``j`` is not positive
        definite (the factorization stopped in its block), as LAPACK ``dpotrf``.
    """
    n = a.shape[0]
    with tile_pool(workers()) as pool:
        run = runner(pool)
        for k0 in range(0, n, BLOCK):
            k1 = min(k0 + BLOCK, n)
            below = range(k1, n, BLOCK)
            if k0:
                done = a[k0:k1, :k0]

                def update(r0):
                    if r0 == k0:
                        syrk_lower(-1.0, done, 1.0, a[k0:k1, k0:k1])
                    else:
                        gemm_nt(-1.0, a[r0 : r0 + BLOCK, :k0], done, 1.0, a[r0 : r0 + BLOCK, k0:k1])

                list(run(update, range(k0, n, BLOCK)))
            diagonal = a[k0:k1, k0:k1]
            info = potrf_lower(diagonal, clean=False)
            if info:
                return k0 + info

            def solve(r0):
                trsm_lower(diagonal, a[r0 : r0 + BLOCK, k0:k1], trans=True, right=True)

            list(run(solve, below))
    return 0


def _gram_of_inverse(L, out):
    """The lower triangle of ``X^T X`` into ``out``, ``X = L^{-1}``, by column blocks."""
    n = L.shape[0]
    starts = range(0, n, BLOCK)
    X = np.zeros((n, n), order="F")
    with tile_pool(workers()) as pool:
        run = runner(pool)

        def invert(j0):
            j1 = min(j0 + BLOCK, n)
            block = X[j0:, j0:j1]
            block[np.arange(j1 - j0), np.arange(j1 - j0)] = 1.0
            trsm_lower(L[j0:, j0:], block)

        list(run(invert, starts))

        def multiply(j0):
            j1 = min(j0 + BLOCK, n)
            out[j0:, j0:j1] = X[j0:, j0:j1]
            trmm_lower_transposed(X[j0:, j0:], out[j0:, j0:j1])

        list(run(multiply, starts))


def inverse_lower(L, lower=False):
    """``(L L^T)^{-1}`` of a lower Cholesky factor, as LAPACK ``dpotri``.

    Parameters
    ----------
    L : ndarray of shape (n, n), float64
        Fortran-ordered, read in its lower triangle.
    lower : bool, default False
        Return only the lower triangle (strict upper triangle zero).

    Returns
    -------
    ndarray of shape (n, n), Fortran order
    """
    n = L.shape[0]
    out = np.empty((n, n), order="F")
    _gram_of_inverse(L, out)
    if lower:
        zero_strict_upper(out)
        return out
    for j0 in range(0, n, BLOCK):  # the upper triangle mirrors the lower one exactly
        j1 = min(j0 + BLOCK, n)
        out[:j0, j0:j1] = out[j0:j1, :j0].T
        diagonal, upper = out[j0:j1, j0:j1], np.triu_indices(j1 - j0, 1)
        diagonal[upper] = diagonal.T[upper]
    return out


def matmul(A, B):
    """``A @ B`` by row blocks of `A` on the tile pool (NumPy's product, one BLAS thread
    per block, releases the GIL).

    Parameters
    ----------
    A : ndarray of shape (m, k)
    B : ndarray of shape (k, n)

    Returns
    -------
    ndarray of shape (m, n), C order
    """
    out = np.empty((A.shape[0], B.shape[1]), dtype=np.result_type(A, B))
    with tile_pool(workers()) as pool:

        def product(r0):
            np.matmul(A[r0 : r0 + BLOCK], B, out=out[r0 : r0 + BLOCK])

        list(runner(pool)(product, range(0, A.shape[0], BLOCK)))
    return out
