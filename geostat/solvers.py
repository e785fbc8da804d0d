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
from scipy.spatial.distance import cdist
from threadpoolctl import ThreadpoolController

from tlrcore import NotPositiveDefiniteError, TLRMatrix

__all__ = [
    "DenseCholesky",
    "TLRFactor",
    "not_positive_definite",
    "one_blas_thread",
    "covariance_block",
    "gradient_block",
    "tlr_covariance",
    "tlr_matrix",
]

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


def _zero_strict_upper(F):
    """Zero the strict upper triangle of the Fortran-ordered `F` in place (column by
    column: no ``n x n`` temporary)."""
    for j in range(1, F.shape[1]):
        F[:j, j] = 0.0


def not_positive_definite(order, n):
    """The error of a dense Cholesky factorization whose leading minor `order` (of `n`) failed."""
    return NotPositiveDefiniteError(
        f"the covariance matrix is not positive definite (leading minor of order {order} "
        f"of {n}); duplicate or near-duplicate sites without a nugget, or a range so "
        "large that the correlation matrix is numerically singular, cause this. "
        "Estimate a nugget (nugget=True), remove duplicate sites, or bound the range.",
        tile=0,
    )


class DenseCholesky:
    """Cholesky factorization ``K = L L^T`` of a dense covariance matrix.

    Parameters
    ----------
    matrix : ndarray of shape (n, n)
        Symmetric positive definite; only the lower triangle is read.
    overwrite : bool, default False
        Allow the factorization to reuse `matrix`'s memory (it is then destroyed).
    shifts : sequence of float, default ()
        If the factorization fails, factor ``matrix + s I`` for the first ``s`` that
        works (see :mod:`geostat.safeguard`); ``.shift``, ``.perturbation`` (``s
        sqrt(n)``) and ``.relative_perturbation`` record it (0.0 when not needed).

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If a pivot is not positive; the message gives the failing leading order.
    """

    @one_blas_thread
    def __init__(self, matrix, overwrite=False, shifts=()):
        matrix = np.asarray(matrix, dtype=np.float64)
        n = matrix.shape[0]
        # LAPACK works on the transpose of a C-ordered array in place; for a symmetric
        # matrix the transpose is the same matrix, so no copy is needed.
        work = matrix.T if matrix.flags.c_contiguous else np.asfortranarray(matrix)
        diagonal = np.diagonal(work).copy() if shifts else None
        # clean=0 keeps the strict upper triangle of `work` (the matrix) for a retry.
        factor, info = lapack.dpotrf(work, lower=1, clean=0, overwrite_a=overwrite)
        self.shift = self.perturbation = self.relative_perturbation = 0.0
        if info > 0 and shifts:
            factor, info = self._shifted(work, diagonal, shifts)
        if info == 0:
            _zero_strict_upper(factor)
        if info > 0:
            raise not_positive_definite(info, n)
        if info < 0:
            raise ValueError(f"LAPACK dpotrf rejected argument {-info}.")
        self.L = factor
        self.n = n

    @classmethod
    def from_factor(cls, L):
        """Wrap the lower Cholesky factor `L` of a positive definite matrix, computed
        elsewhere (e.g. by :func:`tlrcore.batched.cholesky`) without a shift.

        `L` is kept in Fortran order (copied if needed), the layout LAPACK reads in place.
        """
        self = cls.__new__(cls)
        self.L = np.asfortranarray(L, dtype=np.float64)
        self.n = self.L.shape[0]
        self.shift = self.perturbation = self.relative_perturbation = 0.0
        return self

    def _shifted(self, work, diagonal, shifts):
        """Factor ``K + s I`` for the first `shifts` entry that works. dpotrf wrote only
        the lower triangle and diagonal of `work`; ``K`` is rebuilt from its strict upper
        triangle and the saved `diagonal`."""
        upper = np.triu(work, 1)
        K = upper + upper.T
        K[np.diag_indices_from(K)] = diagonal
        norm = float(np.linalg.norm(K))
        for shift in shifts:
            trial = np.array(K, order="F")
            trial[np.diag_indices_from(trial)] += shift
            factor, info = lapack.dpotrf(trial, lower=1, clean=0, overwrite_a=True)
            if info == 0:
                self.shift = float(shift)
                self.perturbation = float(shift) * np.sqrt(K.shape[0])
                self.relative_perturbation = self.perturbation / norm
                return factor, info
        return factor, info

    @property
    def nbytes(self):
        """Bytes held by the factor."""
        return self.L.nbytes

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


def covariance_block(coords, kernel, params, distance):
    """Block generator ``block(rows, cols)`` of the covariance matrix of `coords`.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    kernel : geostat.kernels.Kernel
    params : dict
        ``variance``, ``range``, ``nugget`` and the kernel's shape parameters.
    distance : geostat.distance.Distance

    Returns
    -------
    callable
        ``block(rows, cols)`` -> ``variance * M(d / range) + nugget * [rows == cols]``.
    """
    embedded = distance.embed(coords)
    shape = {k: params[k] for k in kernel.shape_names if k in params}
    variance, range_, nugget = params["variance"], params["range"], params.get("nugget", 0.0)

    def block(rows, cols):
        if embedded is not None:
            d = cdist(embedded[rows], embedded[cols])
        else:
            d = distance.cross(coords[rows], coords[cols])
        C = kernel.correlation(d, range_, **shape)
        C *= variance
        if nugget and rows.min() <= cols.max() and cols.min() <= rows.max():
            C[rows[:, None] == cols[None, :]] += nugget
        return C

    return block


#: Entries of a correlation derivative below this are set to zero: next to the unit
#: diagonal of the correlation they are below rounding, and a TLR matrix of entries
#: near the underflow threshold cannot be compressed (its norms underflow).
NEGLIGIBLE_DERIVATIVE = 1e-100


def gradient_block(coords, kernel, theta, name, distance):
    """Block generator of ``dR / d name``, the derivative of the correlation matrix
    (entries below :data:`NEGLIGIBLE_DERIVATIVE` in magnitude set to zero).

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    kernel : geostat.kernels.Kernel
    theta : dict
        ``range`` and the kernel's shape parameters.
    name : str
        ``"range"`` or a free shape parameter of `kernel`.
    distance : geostat.distance.Distance

    Returns
    -------
    callable
        ``block(rows, cols)`` -> derivative block (zero on coinciding sites).
    """
    embedded = distance.embed(coords)
    shape = {k: v for k, v in theta.items() if k != "range"}

    def block(rows, cols):
        if embedded is not None:
            d = cdist(embedded[rows], embedded[cols])
        else:
            d = distance.cross(coords[rows], coords[cols])
        D = kernel.correlation_and_gradient(d, theta["range"], **shape)[1][name]
        D[np.abs(D) < NEGLIGIBLE_DERIVATIVE] = 0.0
        return D

    return block


def tlr_matrix(block, n, tile_size=None, accuracy=1e-8, method=None, random_state=0, backend="numpy"):
    """A :class:`tlrcore.TLRMatrix` from a block generator of already ordered sites.

    ``tile_size=None`` uses :func:`geostat.ordering.auto_tile_size`; a tile size above
    `n` is clipped to `n`. ``method=None`` is the back end's default (ACA on NumPy, the
    batched column compression on a GPU).
    """
    from geostat.ordering import auto_tile_size

    tile_size = auto_tile_size(n) if tile_size is None else min(int(tile_size), n)
    return TLRMatrix.from_generator(block, n, tile_size, accuracy=accuracy, method=method, random_state=random_state,
                                    backend=backend)


def tlr_covariance(coords, kernel, params, distance, accuracy=1e-8, tile_size=None, ordering="kdtree",
                   method="aca", random_state=0):
    """Tile low-rank covariance matrix of `coords`, with the sites reordered for compression.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    kernel, params, distance
        As in :func:`covariance_block`.
    accuracy : float, default 1e-8
        Relative Frobenius accuracy of the compression.
    tile_size : int, optional
        Default :func:`geostat.ordering.auto_tile_size`.
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
    method : {"aca", "ara", "svd"}, default "aca"
    random_state : int, default 0

    Returns
    -------
    matrix : tlrcore.TLRMatrix
        Covariance of ``coords[perm]``.
    perm : ndarray of shape (n,)
        The site permutation; undo it with ``geostat.ordering.inverse_permutation``.
    """
    perm, tile_size = site_order(coords, distance, ordering, tile_size)
    block = covariance_block(coords[perm], kernel, params, distance)
    return tlr_matrix(block, coords.shape[0], tile_size, accuracy, method, random_state), perm


def site_order(coords, distance, ordering="kdtree", tile_size=None):
    """Permutation of the sites for TLR compression, and the tile size it was built for.

    Returns
    -------
    perm : ndarray of shape (n,)
    tile_size : int
    """
    from geostat.ordering import auto_tile_size, order_points

    n = coords.shape[0]
    tile_size = auto_tile_size(n) if tile_size is None else min(int(tile_size), n)
    embedded = distance.embed(coords)
    return order_points(coords if embedded is None else embedded, ordering, tile_size), tile_size


class TLRFactor:
    """TLR Cholesky factor of a covariance of reordered sites, used in the original order.

    ``K[perm][:, perm] ~ L L^T``: :meth:`solve` takes and returns arrays in the caller's
    site order, so the factor stands in for :class:`DenseCholesky`.

    Parameters
    ----------
    factor : tlrcore.TLRCholesky
    perm : ndarray of shape (n,)
    matrix_norm : float, optional
        ``||K||_F``, for ``.relative_perturbation`` of a safeguarded factor.
    """

    def __init__(self, factor, perm, matrix_norm=None):
        self.factor = factor
        self.perm = np.asarray(perm)
        self.n = factor.n
        self.shift = factor.shift
        self.perturbation = factor.perturbation
        self.relative_perturbation = factor.perturbation / matrix_norm if factor.perturbation else 0.0

    @property
    def nbytes(self):
        """Bytes held by the factor."""
        return self.factor.nbytes

    def logdet(self):
        """Return ``log det K``."""
        return self.factor.logdet()

    def solve(self, b):
        """Return ``K^{-1} b`` for a vector or a matrix of right-hand sides (on the host)."""
        b = np.asarray(b, dtype=np.float64)
        x = np.empty(b.shape)
        x[self.perm] = self._host(self.factor.solve(b[self.perm]))
        return x

    def solve_lower(self, b):
        """Return ``L^{-1} P b`` (rows in the factor's order; for quadratic forms)."""
        return self._host(self.factor.solve_lower(np.asarray(b, dtype=np.float64)[self.perm]))

    def _host(self, x):
        """A result of the factor as a NumPy array (factors on a GPU return device arrays)."""
        backend = getattr(self.factor, "backend", None)
        return x if backend is None else backend.to_host(x)
