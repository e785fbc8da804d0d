"""The interface every array back end provides."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

__all__ = ["Backend"]


class Backend:
    """An array module and the linear algebra the TLR algorithms need from it.

    Subclasses set :attr:`name` and :attr:`xp` and implement the methods that raise
    ``NotImplementedError`` here. Every method takes and returns arrays of this back end;
    batched methods take stacks ``(..., m, m)``.

    Attributes
    ----------
    name : str
    xp : module
        ``numpy`` or a module with the same interface.
    """

    name = "abstract"
    xp = np
    #: Whether TLR matrices on this back end are built and factored a tile column at a
    #: time in the packed layout (:mod:`tlrcore.packed`) rather than tile by tile.
    batched_by_default = False
    #: Strategy of ``tlrcore.batched``'s ``"auto"`` for matrices of varying sizes:
    #: ``"pad"`` (few stacked calls; what a GPU's launches favour) or ``"group"``.
    batched_strategy = "pad"
    #: Whether kernels compute on the calling host thread (then ``tlrcore.batched`` runs
    #: parts of a batch on a thread pool) rather than queue on a device.
    host_threads = False
    #: Whether ``tlrcore.batched``'s ``"auto"`` moves Cholesky orders off multiples of 64
    #: (a slowdown of stacked host copies, see ``tlrcore.batched.plan``).
    cholesky_off_alignment = False

    def asarray(self, a):
        """`a` as a float64 array of this back end (no copy if it already is one)."""
        return self.xp.asarray(a, dtype=self.xp.float64)

    def to_host(self, a):
        """`a` as a NumPy array."""
        return np.asarray(a)

    def small_kernels(self):
        """Context for work made of many small kernels (batched tile operations).

        On the CPU it pins BLAS to one thread (threaded OpenBLAS slows small
        eigensolvers and QRs down by 10x and more); on the GPU it does nothing.
        """
        return nullcontext()

    def synchronize(self):
        """Wait until queued device work is done (for timings); a no-op on the CPU."""

    def cholesky(self, a):
        """Lower Cholesky factors of one matrix or a stack, with LAPACK's ``info``.

        Parameters
        ----------
        a : array of shape (..., m, m)
            Symmetric; only the lower triangle is read. Not modified.

        Returns
        -------
        L : array of shape (..., m, m)
            Lower triangular; meaningless where ``info != 0``.
        info : ndarray of int, shape (...)
            On the host. ``0`` for success, ``j > 0`` when the leading minor of order ``j``
            is not positive definite.
        """
        raise NotImplementedError

    def solve_triangular(self, a, b, lower=True, trans=False):
        """``op(a)^{-1} b`` with ``op(a) = a`` or ``a^T``, for one system or a stack.

        Parameters
        ----------
        a : array of shape (..., m, m)
            Triangular.
        b : array of shape (..., m, k)
        lower : bool, default True
        trans : bool, default False
        """
        raise NotImplementedError

    def eigh(self, a):
        """Eigenvalues (ascending) and eigenvectors of symmetric matrices (stack allowed)."""
        return self.xp.linalg.eigh(a)

    def normal(self, seed, shape):
        """Standard normal samples, reproducible from the integer `seed`."""
        raise NotImplementedError

    def free_memory(self):
        """Bytes of memory free for new arrays (an estimate on the CPU)."""
        raise NotImplementedError

    # Dense factorizations of one matrix. The NumPy back end overrides these with LAPACK
    # calls that work in place; the versions here need only :meth:`cholesky`,
    # :meth:`solve_triangular` and ``xp``.

    def dense_cholesky(self, a, overwrite=False):
        """Lower Cholesky factor of one symmetric matrix, possibly in `a`'s memory.

        Parameters
        ----------
        a : array of shape (m, m)
            Symmetric; only one triangle is read.
        overwrite : bool, default False
            Allow the factor to take `a`'s memory (`a` is then destroyed).

        Returns
        -------
        L : array of shape (m, m)
            On success, the factor with a zero strict upper triangle. On failure, an
            array whose strict upper triangle still holds the matrix's (its diagonal and
            lower triangle are lost): ``triu(L, 1)`` and the saved diagonal rebuild the
            matrix without a copy having been kept.
        info : int
            0 for success, ``j > 0`` when the leading minor of order ``j`` is not
            positive definite.
        """
        L, info = self.cholesky(a)
        return (L, 0) if not int(info) else (a, int(info))

    def cholesky_solve(self, L, b):
        """``(L L^T)^{-1} b`` for a lower Cholesky factor `L`."""
        z = self.solve_triangular(L, b, lower=True)
        return self.solve_triangular(L, z, lower=True, trans=True)

    def cholesky_inverse(self, L, lower=False):
        """``(L L^T)^{-1}``: the full symmetric inverse, or with ``lower=True`` its lower
        triangle (strict upper triangle zero)."""
        xp = self.xp
        L_inv = self.solve_triangular(L, xp.eye(L.shape[0]), lower=True)
        inverse = L_inv.T @ L_inv
        return xp.tril(inverse) if lower else inverse

    def matmul(self, a, b):
        """``a @ b`` of two large matrices (the NumPy back end splits it over its threads)."""
        return a @ b

    def squareform(self, values, n, diagonal):
        """The symmetric ``n x n`` matrix of condensed off-diagonal `values` (the pairs
        ``i < j`` row by row, as ``scipy.spatial.distance.pdist``) and a constant
        `diagonal`: one masked copy into each triangle (a mask of ``n^2`` bytes), not a
        copy per row (on an H200, 30 ms at 1,024 sites: a kernel launch per copy)."""
        xp = self.xp
        upper = xp.arange(n)[:, None] < xp.arange(n)  # the pairs i < j, row by row: pdist's order
        out = xp.empty((n, n))
        out[upper] = values
        out.T[upper] = values
        xp.fill_diagonal(out, diagonal)
        return out

    def cdist(self, a, b):
        """Euclidean distances between the rows of `a` and of `b`, summed coordinate by
        coordinate as ``scipy.spatial.distance.cdist`` does (exact zeros for equal rows;
        the Gram-matrix form ``|a|^2 + |b|^2 - 2 a.b`` loses them to cancellation)."""
        d2 = a[:, 0, None] - b[None, :, 0]
        d2 *= d2
        for k in range(1, a.shape[1]):
            diff = a[:, k, None] - b[None, :, k]
            diff *= diff
            d2 += diff
        return self.xp.sqrt(d2, out=d2)

    def like(self, x, reference):
        """`x` (an array of this back end) as the kind of array `reference` is: on the
        host when `reference` is a NumPy array, else as it is."""
        return self.to_host(x) if isinstance(reference, np.ndarray) else x

    def __repr__(self):
        return f"<tlrcore backend {self.name!r}>"
