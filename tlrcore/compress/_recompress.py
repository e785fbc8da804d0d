"""Helpers shared by the compressors: argument checks and SVD truncation.

Every compressor ends in :func:`truncate_svd` or :func:`recompress`, which keep the
smallest rank ``k`` whose discarded singular values satisfy
``sqrt(sum_{i >= k} s_i^2) <= tol``. That discarded part is the exact Frobenius error
of the truncation step (in :func:`recompress`, through nearly orthonormal bases, a
bound with ``tol`` reduced to cover their departure), so each compressor only
has to budget its own sampling error against ``tol``.
"""

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
    """Return `tol` as a float after checking it is finite and non-negative.

    Parameters
    ----------
    tol : float
        Absolute Frobenius tolerance; ``0`` asks for an approximation exact to rounding.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If `tol` is not a real number, is negative, NaN or infinite.
    """
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise ValueError(f"tol must be a real number; got {tol!r}.")
    tol = float(tol)
    if not math.isfinite(tol) or tol < 0.0:
        raise ValueError(f"tol must be finite and >= 0; got {tol!r}.")
    return tol


def check_max_rank(max_rank):
    """Return `max_rank` as an int (or ``None``) after checking it.

    Parameters
    ----------
    max_rank : int or None
        Largest rank allowed; ``None`` means no limit.

    Returns
    -------
    int or None

    Raises
    ------
    ValueError
        If `max_rank` is neither ``None`` nor an integer ``>= 0``.
    """
    if max_rank is None:
        return None
    if isinstance(max_rank, bool) or not isinstance(max_rank, numbers.Integral):
        raise ValueError(f"max_rank must be None or an integer >= 0; got {max_rank!r}.")
    if max_rank < 0:
        raise ValueError(f"max_rank must be >= 0; got {max_rank}.")
    return int(max_rank)


def check_shape(shape):
    """Return `shape` as a tuple ``(m, p)`` of non-negative ints.

    Parameters
    ----------
    shape : tuple of int
        Shape ``(m, p)`` of the block.

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        If `shape` is not a pair of non-negative integers.
    """
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
    """Return `block` as a 2-D float64 array with finite entries (no copy if possible).

    Parameters
    ----------
    block : array_like
        Dense block.
    argname : str, default "block"
        Name used in error messages.

    Returns
    -------
    ndarray of shape (m, p)

    Raises
    ------
    ValueError
        If `block` is not numeric, not 2-D or has NaN or infinite entries.
    """
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
    """Check what a block callback returned and return it as a float64 array.

    Parameters
    ----------
    values : array_like
        Output of the callback.
    expected_shape : tuple of int
        The shape it must have.
    funcname : str
        Name of the callback, used in error messages (``"get_rows"``, ``"matmat"``...).

    Returns
    -------
    ndarray
        `values` as float64 (not copied when it already is one).

    Raises
    ------
    ValueError
        If the output is not numeric, has the wrong shape, or has NaN or infinite entries.
    """
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
    """The pair ``(U, V)`` of a truncation, unpacked like a tuple, with the largest
    singular value it dropped as ``dropped``: the spectral norm ``||M - U V^T||_2`` of the
    truncation step (the compressors' sampling errors, budgeted below `tol`, come on top),
    and the Frobenius norm of all it dropped as ``dropped_frobenius``. The safeguards of
    :mod:`tlrcore.cholesky.safeguards` compensate these errors tile by tile."""

    def __new__(cls, U, V, dropped=0.0, dropped_frobenius=0.0):
        pair = super().__new__(cls, (U, V))
        pair.dropped = float(dropped)
        pair.dropped_frobenius = float(dropped_frobenius)
        return pair

    def __getnewargs__(self):
        return (*self, self.dropped, self.dropped_frobenius)


def _truncated(s, rank, U, V, inflation=1.0, rounding=0.0):
    """:class:`LowRank` of the kept factors, ``dropped = inflation * s[rank] + rounding``
    (``s[rank]`` = 0 when none is; the other two bound the effect of nearly orthonormal
    bases, :func:`recompress`) and ``dropped_frobenius = ||s[rank:]||``."""
    tail = s[rank:]
    dropped = tail[0] if tail.size else 0.0
    return LowRank(U, V, inflation * dropped + rounding, math.sqrt(float(np.sum(tail[::-1] ** 2))))


def empty_factors(m, p):
    """Return rank-0 factors ``U`` of shape (m, 0) and ``V`` of shape (p, 0)."""
    return LowRank(np.zeros((m, 0)), np.zeros((p, 0)))


def truncation_rank(s, tol, max_rank=None):
    """Smallest rank whose discarded singular values have Frobenius norm ``<= tol``.

    Parameters
    ----------
    s : ndarray of shape (n,)
        Singular values in non-increasing order.
    tol : float
        Absolute Frobenius budget for the discarded part.
    max_rank : int or None, default None
        Upper bound on the returned rank.

    Returns
    -------
    int
        ``k`` in ``[0, n]``, the smallest with ``sqrt(sum(s[k:] ** 2)) <= tol``, capped
        at `max_rank`.
    """
    # tails[k] = sum(s[k:] ** 2), summed from the small end for accuracy; tails[n] = 0.
    tails = np.append(np.cumsum((s * s)[::-1])[::-1], 0.0)
    rank = int(np.argmax(tails <= tol * tol))
    return rank if max_rank is None else min(rank, max_rank)


def svd(matrix):
    """Thin SVD ``matrix = W diag(s) Zt`` by ``gesdd``, falling back to ``gesvd``.

    ``gesdd`` through NumPy, which releases the GIL while LAPACK runs (SciPy's wrapper
    holds it: :mod:`tlrcore._lapack`), so that tiles compressed on several threads do
    not wait for each other's SVDs.

    Parameters
    ----------
    matrix : ndarray of shape (m, n)
        Finite matrix; it is not modified.

    Returns
    -------
    W : ndarray of shape (m, r)
    s : ndarray of shape (r,)
    Zt : ndarray of shape (r, n)
        With ``r = min(m, n)``.

    Raises
    ------
    numpy.linalg.LinAlgError
        If neither LAPACK driver converges.
    """
    try:
        return np.linalg.svd(matrix, full_matrices=False)
    except np.linalg.LinAlgError:
        return scipy.linalg.svd(
            matrix, full_matrices=False, check_finite=False, lapack_driver="gesvd"
        )


def truncate_svd(matrix, tol, max_rank=None):
    """Truncated SVD of a dense matrix, as factors ``U = W S``, ``V = Z``.

    Parameters
    ----------
    matrix : ndarray of shape (m, n)
        Finite matrix; it is not modified.
    tol : float
        Absolute Frobenius budget for the discarded part.
    max_rank : int or None, default None
        Largest rank kept.

    Returns
    -------
    U : ndarray of shape (m, k)
        Left singular vectors scaled by the singular values.
    V : ndarray of shape (n, k)
        Right singular vectors (orthonormal columns).

    Raises
    ------
    numpy.linalg.LinAlgError
        If the SVD does not converge.
    """
    m, n = matrix.shape
    if m == 0 or n == 0:
        return empty_factors(m, n)
    w, s, zt = svd(matrix)
    rank = truncation_rank(s, tol, max_rank)
    return _truncated(s, rank, w[:, :rank] * s[:rank], zt[:rank].T.copy())


def recompress(U, V, tol, max_rank=None):
    """Truncate a product ``U V^T`` to rank ``k`` through orthonormal bases of both factors.

    ``U = P_U R_U`` and ``V = P_V R_V``; the small SVD ``R_U R_V^T = W S Z^T`` gives
    ``U V^T = (P_U W) S (P_V Z)^T``, truncated as in :func:`truncation_rank`. The bases
    come from the Cholesky factors of the factors' Gram matrices
    (:func:`~tlrcore.compress._gram.gram_basis`), orthonormal to a computed bound
    ``delta`` on ``||P^T P - I||_2``: the truncation's Frobenius error is then within
    ``1 +- (delta_U + delta_V)`` of the dropped singular values' norm, plus a bound on
    the rounding of the products with the bases. The rank is that of the budget `tol`
    divided by ``1 + delta_U + delta_V``, and the truncation is kept when the two terms
    add up to at most `tol` (:func:`_gram_truncation`). Where a basis is refused or the
    sum is above `tol` (as for ``tol = 0``), the bases come from Householder QR (``P``
    orthonormal to rounding).

    Parameters
    ----------
    U : ndarray of shape (m, r)
    V : ndarray of shape (n, r)
    tol : float
        Absolute Frobenius budget for the truncation.
    max_rank : int or None, default None
        Largest rank kept.

    Returns
    -------
    LowRank
        ``U`` (m x k) carries the singular values; ``V`` (n x k) has orthonormal columns
        (to the computed bound ``delta``, at most 0.05: :mod:`tlrcore.compress._gram`; on
        ACA tiles 1e-12). ``dropped`` bounds the truncation's spectral error, rounding of
        the products included; ``dropped_frobenius`` is the norm of the dropped singular
        values, its Frobenius error to a factor ``1 +- delta``.

    Raises
    ------
    numpy.linalg.LinAlgError
        If the small SVD does not converge.
    """
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
    ``||U - P_U R_U||_F <= residual_u`` and ``||V - P_V R_V||_F <= residual_v``."""
    if residual_u == 0.0 and residual_v == 0.0:
        return 0.0
    return (
        residual_u * float(np.linalg.norm(V)) + (float(np.linalg.norm(U)) + residual_u) * residual_v
    )


def _gram_truncation(s, tol, max_rank, inflation, products, residual=0.0, spare=0.0):
    """The truncation of singular values `s` through Cholesky-Gram bases, or None where its
    error bound is not certified within `tol`.

    The rank is that of the budget ``tol / inflation``; ``products(rank)`` returns a
    callable that makes the kept factors, the bases' column count ``k`` and the size of
    the products' rounding (:func:`~tlrcore.compress._gram.rounding_bound`), known before
    the products (:meth:`~tlrcore.compress._gram.GramBasis.coefficients`), which are made
    for the rank kept only (the near-field tiles of the 131,072-site build, most of them
    tried twice, spent a fifth of their recompression on the products of the rank
    refused); `residual` bounds the distance of
    the product factored by the bases from the given one (second-pass bases). The error
    is then at most ``inflation ||s[rank:]|| + rounding + residual``; a truncation is
    kept when that is within `tol`, or when `max_rank` cut the rank below the budget's
    (the tolerance is then not asked for). A rank whose tail leaves no room for the
    rounding found is tried once more with the rank of the budget less that rounding
    (near-field tiles: their tails fill the budget to within the few per cent that the
    rounding bound takes). A rank more than ``1 + spare h`` above the rank ``h`` of the
    budget itself (the Householder path's) is not kept. :func:`recompress` spares 2 %:
    at 65,536 sites its near-field tiles (ranks 175-192) keep up to 3 more, 0.1 % more
    memory in all, instead of two Householder QRs each, which took 10-15 % of the
    build's CPU time; :func:`recompress_orthonormal` (one QR to save) spares none.
    """
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
    """Thin QR of ``M`` (m x r) with ``Q`` kept as Householder reflectors (``dgeqrf``).

    Returns
    -------
    reflectors : tuple
        ``(a, tau)`` as ``dgeqrf`` returns them, for :func:`_apply_q`.
    R : ndarray of shape (min(m, r), r)
        Upper triangular.
    """
    m, r = M.shape
    a, tau, _, info = scipy.linalg.lapack.dgeqrf(M, lwork=max(1, r * _QR_BLOCK))
    if info != 0:
        raise np.linalg.LinAlgError(f"dgeqrf failed (info={info}).")
    k = min(m, r)
    return (a[:, :k], tau), np.triu(a[:k])


def _apply_q(reflectors, C):
    """``Q C`` for the thin ``Q`` (m x k) of :func:`_householder_qr` and ``C`` (k x c): the
    reflectors applied to ``[C; 0]`` (``dormqr``), without forming ``Q``, which costs as
    much as the QR itself and more than this product."""
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
    """Truncate ``Q B^T`` where `Q` has orthonormal columns.

    With ``B = W S Z^T``, ``Q B^T = (Q Z) S W^T``; only ``B`` is factored, as ``B = P_B R``
    and the SVD of the small ``R``, ``W = P_B W_R``. ``P_B`` is a Cholesky-Gram basis
    with the error accounting of :func:`recompress` (projections of ARA at 131,072 sites:
    35 % faster than Householder QR), else Householder QR with ``W`` applied by
    reflectors (15-25 % cheaper than the SVD of the tall ``B`` for ``2048 x 35-48``).

    Parameters
    ----------
    Q : ndarray of shape (m, r)
        Orthonormal columns.
    B : ndarray of shape (n, r)
    tol : float
        Absolute Frobenius budget for the truncation.
    max_rank : int or None, default None
        Largest rank kept.

    Returns
    -------
    LowRank
        ``U`` (m x k) carries the singular values; ``V`` (n x k) has orthonormal columns
        (as in :func:`recompress`).

    Raises
    ------
    numpy.linalg.LinAlgError
        If the SVD does not converge.
    """
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
