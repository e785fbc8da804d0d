r"""Dense Cholesky factor, inverse and products by blocks, on tlrcore's thread pool.

LAPACK runs on one BLAS thread in tlrcore; these functions split the work into fixed
blocks (:data:`BLOCK`), each one BLAS call without the GIL (:mod:`tlrcore._lapack`), so
the result is bit-identical for any number of threads. Cholesky, left-looking, per block
column ``K``:

.. math::

    A_{KK} \leftarrow A_{KK} - L_{K,:k_0} L_{K,:k_0}^T, \quad
    A_{IK} \leftarrow A_{IK} - L_{I,:k_0} L_{K,:k_0}^T \ (I > K), \quad
    L_{KK} = \operatorname{chol}(A_{KK}), \quad L_{IK} = A_{IK} L_{KK}^{-T}

(``dsyrk`` on the diagonal: ``A``'s strict upper triangle is never written). Inverse:
``X_J = L^{-1} E_J`` by block columns, then ``(K^{-1})_{j0:, J} = X_{j0:, j0:}^T
X_{j0:, J}``, ``2 n^3 / 3`` flops as ``dpotri``."""

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
    """Cholesky factor of the symmetric positive definite `a` (``(n, n)``, Fortran order,
    float64) in its lower triangle, in place; the strict upper triangle is left as it was.

    Returns ``info``: 0 on success, ``j > 0`` if the leading minor of order ``j`` is not
    positive definite, as LAPACK ``dpotrf``."""
    n = a.shape[0]
    with tile_pool(workers()) as pool:
        run = runner(pool)
        for k0 in range(0, n, BLOCK):
            k1 = min(k0 + BLOCK, n)
            below = range(k1, n, BLOCK)
            if k0:
                done = a[k0:k1, :k0]

                def update(r0, k0=k0, k1=k1, done=done):
                    if r0 == k0:
                        syrk_lower(-1.0, done, 1.0, a[k0:k1, k0:k1])
                    else:
                        gemm_nt(-1.0, a[r0 : r0 + BLOCK, :k0], done, 1.0, a[r0 : r0 + BLOCK, k0:k1])

                list(run(update, range(k0, n, BLOCK)))
            diagonal = a[k0:k1, k0:k1]
            info = potrf_lower(diagonal, clean=False)
            if info:
                return k0 + info

            def solve(r0, k0=k0, k1=k1, diagonal=diagonal):
                trsm_lower(diagonal, a[r0 : r0 + BLOCK, k0:k1], trans=True, right=True)

            list(run(solve, below))
    return 0


def _gram_of_inverse(L, out):
    """The lower triangle of ``X^T X``, ``X = L^{-1}``, into `out`, by column blocks."""
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
    """``(L L^T)^{-1}`` (Fortran order) of a Fortran-ordered lower Cholesky factor `L`, as LAPACK
    ``dpotri``; with `lower`, only the lower triangle (strict upper zero)."""
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
    """``A @ B`` (C order) by row blocks of `A` on the tile pool."""
    out = np.empty((A.shape[0], B.shape[1]), dtype=np.result_type(A, B))
    with tile_pool(workers()) as pool:

        def product(r0):
            np.matmul(A[r0 : r0 + BLOCK], B, out=out[r0 : r0 + BLOCK])

        list(runner(pool)(product, range(0, A.shape[0], BLOCK)))
    return out
