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
    #: (a slowdown of stacked host copies, see ``tlrcore.batched._plan``).
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

    def __repr__(self):
        return f"<tlrcore backend {self.name!r}>"
