"""Argument checks and SVD truncation shared by the compressors.

Every compressor ends in :func:`truncate_svd` or :func:`recompress`, which keep the
smallest rank ``k`` with ``sqrt(sum_{i >= k} s_i^2) <= tol``, the Frobenius error of the
truncation (in :func:`recompress` a bound, ``tol`` reduced for the bases' departure from
orthonormality); each compressor budgets only its own sampling error against ``tol``."""

import math
import numbers

import numpy as np
import scipy.linalg

from tlrcore.compress._gram import gram_basis, rounding_bound

__all__ = [
    "LowRank",
    "as_block",
    "check_block_output",
    "check_max_rank",
    "check_shape",
    "check_tol",
    "empty_factors",
    "recompress",
    "recompress_orthonormal",
    "svd",
    "truncate_svd",
    "truncation_rank",
]


# ---------------------------------------------------------------------- checks
def check_tol(tol):
    """`tol` (absolute Frobenius tolerance; 0: exact to rounding) as a float; ValueError unless
    it is a finite real number ``>= 0``."""
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise ValueError(f"tol must be a real number; got {tol!r}.")
    tol = float(tol)
    if not math.isfinite(tol) or tol < 0.0:
        raise ValueError(f"tol must be finite and >= 0; got {tol!r}.")
    return tol


def check_max_rank(max_rank):
    """`max_rank` (None: no limit) as an int or None; ValueError unless None or an integer
    ``>= 0``."""
    if max_rank is None:
        return None
    if isinstance(max_rank, bool) or not isinstance(max_rank, numbers.Integral):
        raise ValueError(f"max_rank must be None or an integer >= 0; got {max_rank!r}.")
    if max_rank < 0:
        raise ValueError(f"max_rank must be >= 0; got {max_rank}.")
    return int(max_rank)


def check_shape(shape):
    """`shape` as a tuple ``(m, p)``; ValueError unless a pair of non-negative integers."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"shape must be a pair (m, p) of integers >= 0; got {shape!r}.") from None
    valid = len(dims) == 2 and all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in dims
    )
    if not valid:
        raise ValueError(f"shape must be a pair (m, p) of integers >= 0; got {shape!r}.")
    return int(dims[0]), int(dims[1])


def as_block(block, argname="block"):
    """`block` as a 2-D float64 array (copied only if needed); ValueError, naming it `argname`,
    if not numeric, not 2-D, or not finite."""
    try:
        array = np.asarray(block, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{argname} must be a numeric 2-D array.") from None
    if array.ndim != 2:
        raise ValueError(f"{argname} must be 2-D; got {array.ndim} dimensions.")
    if not np.isfinite(array).all():
        raise ValueError(f"{argname} contains NaN or infinite entries.")
    return array


def check_block_output(values, expected_shape, funcname):
    """`values`, returned by the callback `funcname`, as a float64 array (not copied when it is
    one); ValueError if complex, not numeric, not of `expected_shape`, or not finite."""
    if np.iscomplexobj(values):
        raise ValueError(f"{funcname} returned complex values; it must return real numbers.")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{funcname} returned a non-numeric value.") from None
    if array.shape != tuple(expected_shape):
        raise ValueError(
            f"{funcname} returned an array of shape {array.shape}; "
            f"expected {tuple(expected_shape)}."
        )
    if not np.isfinite(array).all():
        raise ValueError(f"{funcname} returned NaN or infinite values.")
    return array


# ------------------------------------------------------------------ truncation
class LowRank(tuple):
    """The pair ``(U, V)`` of a truncation, unpacked like a tuple, with ``dropped``, the largest
    singular value dropped (``||M - U V^T||_2`` of the truncation step; sampling errors come
    on top), ``dropped_frobenius``, the norm of all dropped, and ``single``, the number of
    trailing columns rounded to single precision (:mod:`tlrcore.compress.single`)."""

    dropped: float
    dropped_frobenius: float
    single: int

    def __new__(cls, U, V, dropped=0.0, dropped_frobenius=0.0, single=0):
        pair = super().__new__(cls, (U, V))
        pair.dropped = float(dropped)
        pair.dropped_frobenius = float(dropped_frobenius)
        pair.single = int(single)
        return pair

    def __getnewargs__(self):
        return (*self, self.dropped, self.dropped_frobenius, self.single)


def _truncated(s, rank, U, V, inflation=1.0, rounding=0.0):
    """:class:`LowRank` of the kept factors, ``dropped = inflation * s[rank] + rounding`` and
    ``dropped_frobenius = ||s[rank:]||``."""
    tail = s[rank:]
    dropped = tail[0] if tail.size else 0.0
    return LowRank(U, V, inflation * dropped + rounding, math.sqrt(float(np.sum(tail[::-1] ** 2))))


def empty_factors(m, p):
    """Rank-0 factors ``U`` of shape (m, 0) and ``V`` of shape (p, 0)."""
    return LowRank(np.zeros((m, 0)), np.zeros((p, 0)))


def truncation_rank(s, tol, max_rank=None):
    """Smallest ``k`` in ``[0, n]`` with ``sqrt(sum(s[k:] ** 2)) <= tol``, capped at `max_rank`,
    for singular values `s` in non-increasing order."""
    # tails[k] = sum(s[k:] ** 2), summed from the small end for accuracy; tails[n] = 0.
    tails = np.append(np.cumsum((s * s)[::-1])[::-1], 0.0)
    rank = int(np.argmax(tails <= tol * tol))
    return rank if max_rank is None else min(rank, max_rank)


def svd(matrix):
    """Thin SVD ``matrix = W diag(s) Zt`` (`matrix` not modified) by ``gesdd`` through NumPy,
    which releases the GIL, falling back to ``gesvd``; LinAlgError if neither converges."""
    try:
        return np.linalg.svd(matrix, full_matrices=False)
    except np.linalg.LinAlgError:
        return scipy.linalg.svd(
            matrix, full_matrices=False, check_finite=False, lapack_driver="gesvd"
        )


def truncate_svd(matrix, tol, max_rank=None):
    """Truncated SVD of `matrix` (m x n, not modified): :class:`LowRank` ``U = W S`` (m x k),
    ``V = Z`` (n x k, orthonormal), ``k`` the smallest rank within the Frobenius budget `tol`,
    at most `max_rank`; LinAlgError if the SVD does not converge."""
    m, n = matrix.shape
    if m == 0 or n == 0:
        return empty_factors(m, n)
    w, s, zt = svd(matrix)
    rank = truncation_rank(s, tol, max_rank)
    return _truncated(s, rank, w[:, :rank] * s[:rank], zt[:rank].T.copy())


def recompress(U, V, tol, max_rank=None):
    """Truncate ``U V^T`` (``U`` m x r, ``V`` n x r) to the Frobenius budget `tol`.

    ``U V^T = (P_U W) S (P_V Z)^T`` for ``U = P_U R_U``, ``V = P_V R_V`` and ``R_U R_V^T = W S
    Z^T``. With Cholesky-Gram bases (:func:`~tlrcore.compress._gram.gram_basis`,
    ``||P^T P - I||_2 <= delta``) the rank is that of the budget ``tol / (1 + delta_U +
    delta_V)``, kept when the error bound, rounding included, is within `tol`; otherwise
    Householder QR (as for ``tol = 0``).

    Returns a :class:`LowRank`: ``U`` (m x k) carries the singular values, ``V`` (n x k) is
    orthonormal to ``delta <= 0.05``; ``dropped`` bounds the spectral error, rounding
    included, ``dropped_frobenius`` is the Frobenius error to a factor ``1 +- delta``.
    Raises LinAlgError if the small SVD does not converge."""
    if U.shape[1] == 0:
        return empty_factors(U.shape[0], V.shape[0])
    left = gram_basis(U)
    right = gram_basis(V) if left is not None else None
    if right is not None:
        w, s, zt = svd(left.R @ right.R.T)

        def products(rank):
            Zu, norm_u = left.coefficients(w[:, :rank] * s[:rank])
            Zv, norm_v = right.coefficients(zt[:rank].T)

            def factors():
                return left.apply(Zu), right.apply(Zv)

            return factors, U.shape[1], norm_u + (s[0] if s.size else 0.0) * norm_v

        residual = _product_residual(U, V, left.residual, right.residual)
        kept = _gram_truncation(
            s, tol, max_rank, 1.0 + left.departure + right.departure, products, residual, spare=0.02
        )
        if kept is not None:
            return kept
    qu, ru = _householder_qr(U)
    qv, rv = _householder_qr(V)
    w, s, zt = svd(ru @ rv.T)
    rank = truncation_rank(s, tol, max_rank)
    return _truncated(s, rank, _apply_q(qu, w[:, :rank] * s[:rank]), _apply_q(qv, zt[:rank].T))


def _product_residual(U, V, residual_u, residual_v):
    """Bound on ``||U V^T - (P_U R_U)(P_V R_V)^T||_F`` for bases with residuals
    `residual_u`, `residual_v` in Frobenius norm."""
    if residual_u == 0.0 and residual_v == 0.0:
        return 0.0
    return (
        residual_u * float(np.linalg.norm(V)) + (float(np.linalg.norm(U)) + residual_u) * residual_v
    )


def _gram_truncation(s, tol, max_rank, inflation, products, residual=0.0, spare=0.0):
    """The truncation of `s` through Cholesky-Gram bases, or None where its bound exceeds `tol`.

    The bound is ``inflation ||s[rank:]|| + rounding + residual``, ``rounding`` known before
    the products (made for the rank kept only). A rank whose tail leaves no room for the
    rounding is retried once with the budget less it; a rank cut by `max_rank` is kept
    without the bound; one above ``h (1 + spare) + 1`` (``h`` the Householder rank) is refused."""
    budget = tol - residual
    rank, householder = -1, truncation_rank(s, tol)
    most = householder + 1 + int(spare * householder)
    for _ in range(2):
        needed = truncation_rank(s, budget / inflation) if budget > 0.0 else s.size
        if needed > most or (needed if max_rank is None else min(needed, max_rank)) == rank:
            return None
        rank = needed if max_rank is None else min(needed, max_rank)
        factors, k, size = products(rank)
        rounding = rounding_bound(k, inflation * size) + residual
        tail = math.sqrt(float(np.sum(s[rank:][::-1] ** 2)))
        if rank < needed or inflation * tail + rounding <= tol:
            return _truncated(s, rank, *factors(), inflation, rounding)
        budget = tol - rounding
    return None


#: Block size of the LAPACK workspace given to ``dgeqrf`` and ``dormqr`` (their blocked code
#: needs ``columns x nb``, plus the ``65 x 64`` triangular factor of ``dormqr``).
_QR_BLOCK = 64


def _householder_qr(M):
    """Thin QR of ``M`` (m x r) as ``((a, tau), R)``: reflectors of ``dgeqrf`` for
    :func:`_apply_q`, and ``R`` (min(m, r) x r) upper triangular."""
    m, r = M.shape
    a, tau, _, info = scipy.linalg.lapack.dgeqrf(M, lwork=max(1, r * _QR_BLOCK))
    if info != 0:
        raise np.linalg.LinAlgError(f"dgeqrf failed (info={info}).")
    k = min(m, r)
    return (a[:, :k], tau), np.triu(a[:k])


def _apply_q(reflectors, C):
    """``Q C`` for the thin ``Q`` (m x k) of :func:`_householder_qr`, by ``dormqr`` on
    ``[C; 0]`` without forming ``Q`` (which costs as much as the QR)."""
    a, tau = reflectors
    m, k = a.shape
    padded = np.zeros((m, C.shape[1]), order="F")
    padded[:k] = C
    if C.shape[1] == 0 or k == 0:
        return padded
    product, _, info = scipy.linalg.lapack.dormqr(
        "L", "N", a, tau, padded, lwork=C.shape[1] * _QR_BLOCK + 65 * _QR_BLOCK, overwrite_c=True
    )
    if info != 0:
        raise np.linalg.LinAlgError(f"dormqr failed (info={info}).")
    return product


def recompress_orthonormal(Q, B, tol, max_rank=None):
    """Truncate ``Q B^T`` (``Q`` m x r orthonormal, ``B`` n x r) to the budget `tol`, as
    :func:`recompress`: ``Q B^T = (Q Z) S (P_B W_R)^T`` for ``B = P_B R``, ``R = W_R S Z^T``."""
    if Q.shape[1] == 0:
        return empty_factors(Q.shape[0], B.shape[0])
    basis = gram_basis(B)
    if basis is not None:
        w, s, zt = svd(basis.R)

        def products(rank):
            Z, norm = basis.coefficients(w[:, :rank])

            def factors():
                return Q @ (zt[:rank].T * s[:rank]), basis.apply(Z)

            return factors, B.shape[1], (s[0] if s.size else 0.0) * norm

        kept = _gram_truncation(s, tol, max_rank, 1.0 + basis.departure, products, basis.residual)
        if kept is not None:
            return kept
    reflectors, R = _householder_qr(B)
    w, s, zt = svd(R)
    rank = truncation_rank(s, tol, max_rank)
    return _truncated(s, rank, Q @ (zt[:rank].T * s[:rank]), _apply_q(reflectors, w[:, :rank]))
