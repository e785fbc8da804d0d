"""Linear-algebra back ends of the likelihood: the only bridge to :mod:`tlrcore`.

A solver factors one symmetric positive definite covariance and answers the questions the
likelihood asks of it: log-determinant, solves, and the inverse for gradient traces.

Threads: dense LAPACK and BLAS calls run on one thread (:func:`one_blas_thread`). On a
busy two-core machine threaded OpenBLAS was 80x slower for a 300 x 300 Cholesky factor and
2.5-4x slower from 1,000 to 3,000, and its in-place ``dpotrf`` crashed at 16,000
(DESIGN.md section 5). Parallel work comes from the kernel evaluation instead.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import lapack, solve_triangular
from threadpoolctl import ThreadpoolController

from tlrcore import NotPositiveDefiniteError

__all__ = ["DenseCholesky", "one_blas_thread"]

_controller = None


def _single_thread():
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def one_blas_thread(func):
    """Decorator: run `func` with BLAS and LAPACK limited to one thread."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _single_thread():
            return func(*args, **kwargs)

    return wrapper


class DenseCholesky:
    """Cholesky factorization ``K = L L^T`` of a dense covariance matrix.

    Parameters
    ----------
    matrix : ndarray of shape (n, n)
        Symmetric positive definite; only the lower triangle is read.
    overwrite : bool, default False
        Allow the factorization to reuse `matrix`'s memory (it is then destroyed).

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If a pivot is not positive; the message gives the failing leading order.
    """

    @one_blas_thread
    def __init__(self, matrix, overwrite=False):
        matrix = np.asarray(matrix, dtype=np.float64)
        n = matrix.shape[0]
        # LAPACK works on the transpose of a C-ordered array in place; for a symmetric
        # matrix the transpose is the same matrix, so no copy is needed.
        work = matrix.T if matrix.flags.c_contiguous else np.asfortranarray(matrix)
        factor, info = lapack.dpotrf(work, lower=1, clean=1, overwrite_a=overwrite)
        if info > 0:
            raise NotPositiveDefiniteError(
                f"the covariance matrix is not positive definite (leading minor of order {info} "
                f"of {n}); duplicate or near-duplicate sites without a nugget, or a range so "
                "large that the correlation matrix is numerically singular, cause this. "
                "Estimate a nugget (nugget=True), remove duplicate sites, or bound the range.",
                tile=0,
            )
        if info < 0:
            raise ValueError(f"LAPACK dpotrf rejected argument {-info}.")
        self.L = factor
        self.n = n

    def logdet(self):
        """Return ``log det K``."""
        return 2.0 * float(np.sum(np.log(np.diagonal(self.L))))

    @one_blas_thread
    def solve_lower(self, b):
        """Return ``L^{-1} b``."""
        return solve_triangular(self.L, b, lower=True, check_finite=False)

    @one_blas_thread
    def solve(self, b):
        """Return ``K^{-1} b`` for a vector or a matrix of right-hand sides."""
        b = np.asarray(b, dtype=np.float64)
        x, info = lapack.dpotrs(self.L, b, lower=1)
        if info != 0:
            raise ValueError(f"LAPACK dpotrs rejected argument {-info}.")
        return x

    @one_blas_thread
    def inverse_lower(self):
        """Return the lower triangle of ``K^{-1}`` (the strict upper triangle is zero)."""
        inv, info = lapack.dpotri(self.L, lower=1)
        if info != 0:
            raise NotPositiveDefiniteError("the inverse of the covariance factor failed.", tile=0)
        return inv

    def inverse(self):
        """Return ``K^{-1}`` as a full symmetric array."""
        inv = self.inverse_lower()
        inv += np.tril(inv, -1).T
        return inv
