"""The interface every array back end provides."""

from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np

__all__ = ["Backend", "split_flat", "unchecked_eigh", "upload", "upload_indices"]


class Backend:
    """An array module `xp` (``numpy`` or one with its interface) and the linear algebra the TLR
    algorithms need; subclasses set :attr:`name` and :attr:`xp` and implement the methods that
    raise ``NotImplementedError``. Methods take and return arrays of this back end; batched
    ones take stacks ``(..., m, m)``."""

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
        """Context for work made of many small kernels: BLAS on one thread on the CPU (threaded
        OpenBLAS slows small eigensolvers and QRs), nothing on the GPU."""
        return nullcontext()

    def synchronize(self):
        """Wait until queued device work is done; a no-op on the CPU."""

    def cholesky(self, a):
        """Lower Cholesky factors ``L`` of `a`, one matrix or a stack ``(..., m, m)`` (lower
        triangle read; not modified), and LAPACK's ``info`` on the host (``j > 0``: leading minor
        ``j`` not positive definite; ``L`` then meaningless)."""
        raise NotImplementedError

    def solve_triangular(self, a, b, lower=True, trans=False):
        """``op(a)^{-1} b``, ``op(a) = a`` or ``a^T`` (`trans`), for triangular `a` ``(..., m, m)``
        and `b` ``(..., m, k)``."""
        raise NotImplementedError

    def eigh(self, a, check=True):
        """Eigenvalues (ascending) and eigenvectors of symmetric matrices (stack allowed).

        ``check=False`` lets a solver that did not converge return its last iterate instead
        of raising (on a GPU, raising needs its status read on the host: a synchronization),
        and a matrix with values that are not finite NaN results; the caller then checks
        the results."""
        return self.xp.linalg.eigh(a) if check else unchecked_eigh(self.xp, a)

    def eigh_stacks(self, stacks, check=True):
        """:meth:`eigh` of each stack of the list `stacks`, as a list; a back end that solves
        some stacks elsewhere (a GPU's on the host) moves them all in one transfer each way."""
        return [self.eigh(a, check) for a in stacks]

    def normal(self, seed, shape):
        """Standard normal samples, reproducible from the integer `seed` on this back end (each
        back end its own stream: NumPy's generator on the CPU, a device kernel on a GPU)."""
        raise NotImplementedError

    def free_memory(self):
        """Bytes of memory free for new arrays (an estimate on the CPU)."""
        raise NotImplementedError

    # Dense factorizations of one matrix. The NumPy back end overrides these with LAPACK
    # calls that work in place; the versions here need only :meth:`cholesky`,
    # :meth:`solve_triangular` and ``xp``.

    def dense_cholesky(self, a, overwrite=False):
        """Lower Cholesky factor of one symmetric matrix (one triangle read), in `a`'s memory if
        `overwrite`; returns ``(L, info)``.

        On success ``L`` has a zero strict upper triangle. On failure (``info = j > 0``, leading
        minor ``j``) the array's strict upper triangle still holds the matrix's, so it can be
        rebuilt with the saved diagonal."""
        L, info = self.cholesky(a)
        return (L, 0) if not int(info) else (a, int(info))

    def cholesky_solve(self, L, b):
        """``(L L^T)^{-1} b`` for a lower Cholesky factor `L`."""
        z = self.solve_triangular(L, b, lower=True)
        return self.solve_triangular(L, z, lower=True, trans=True)

    def cholesky_inverse(self, L, lower=False):
        """``(L L^T)^{-1}``, or with `lower` its lower triangle (strict upper zero)."""
        xp = self.xp
        L_inv = self.solve_triangular(L, xp.eye(L.shape[0]), lower=True)
        inverse = L_inv.T @ L_inv
        return xp.tril(inverse) if lower else inverse

    def matmul(self, a, b):
        """``a @ b`` of two large matrices (the NumPy back end splits it over its threads)."""
        return a @ b

    def squareform(self, values, n, diagonal):
        """The symmetric ``n x n`` matrix of condensed off-diagonal `values` (``pdist``'s order) and
        a constant `diagonal`, by one masked copy into each triangle (not one kernel per row)."""
        xp = self.xp
        upper = xp.arange(n)[:, None] < xp.arange(n)  # the pairs i < j, row by row: pdist's order
        out = xp.empty((n, n))
        out[upper] = values
        out.T[upper] = values
        xp.fill_diagonal(out, diagonal)
        return out

    def cdist(self, a, b):
        """Euclidean distances between the rows of `a` and `b`, summed coordinate by coordinate as
        ``scipy.spatial.distance.cdist`` (exact zeros for equal rows, where the Gram form
        cancels)."""
        d2 = a[:, 0, None] - b[None, :, 0]
        d2 *= d2
        for k in range(1, a.shape[1]):
            diff = a[:, k, None] - b[None, :, k]
            diff *= diff
            d2 += diff
        return self.xp.sqrt(d2, out=d2)

    def like(self, x, reference):
        """`x` as the kind of array `reference` is: on the host for a NumPy `reference`."""
        return self.to_host(x) if isinstance(reference, np.ndarray) else x

    def __repr__(self):
        return f"<tlrcore backend {self.name!r}>"


def upload_indices(xp, arrays):
    """Copies of the host integer `arrays` on the array module `xp`, in one transfer: views
    ``(shape as given)`` of one ``int64`` array. On a GPU every copy from the host waits for
    the work queued before it, so a batch's index arrays travel together."""
    return upload(xp, arrays, np.int64)


def upload(xp, arrays, dtype=np.float64):
    """Copies of the host `arrays` on the array module `xp` as `dtype`, in one transfer: views
    ``(shape as given)`` of one array."""
    if not arrays:
        return []
    flat = xp.asarray(np.concatenate([np.ravel(a) for a in arrays]).astype(dtype, copy=False))
    return split_flat(flat, [np.shape(a) for a in arrays])


def split_flat(flat, shapes):
    """Views of consecutive pieces of the 1-D array `flat`, of the given `shapes`."""
    ends = np.cumsum([math.prod(shape) for shape in shapes], dtype=np.int64)
    return [
        flat[end - math.prod(shape) : end].reshape(shape)
        for shape, end in zip(shapes, ends, strict=True)
    ]


def unchecked_eigh(xp, a):
    """``xp.linalg.eigh`` of a stack, NaN for the matrices with values that are not finite
    (LAPACK refuses them), as a GPU's batched solver leaves them without a check."""
    finite = xp.isfinite(a).all(axis=(-2, -1))
    if bool(finite.all()):
        return xp.linalg.eigh(a)
    lam, vec = xp.linalg.eigh(xp.where(finite[..., None, None], a, xp.eye(a.shape[-1])))
    return xp.where(finite[..., None], lam, xp.nan), xp.where(finite[..., None, None], vec, xp.nan)
