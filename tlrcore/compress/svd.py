"""Truncated SVD compression: the reference compressor (optimal rank, ``O(m p min(m, p))``)."""

from tlrcore.compress._recompress import as_block, check_max_rank, check_tol, truncate_svd

__all__ = ["svd_compress"]


def svd_compress(block, tol, max_rank=None):
    """Compress a dense block by truncated SVD.

    Keeps the smallest ``k`` with ``sqrt(sum_{i >= k} s_i^2) <= tol`` (``s`` in
    non-increasing order), which by the Eckart-Young theorem is the smallest rank of
    any approximation within `tol` in the Frobenius norm.

    Parameters
    ----------
    block : array_like of shape (m, p)
        The block ``A``; it is not modified.
    tol : float
        Absolute Frobenius tolerance, ``||A - U V^T||_F <= tol``. ``0`` keeps every
        non-zero singular value (exact to rounding).
    max_rank : int or None, default None
        Largest rank returned. When it binds, the result is the best rank-`max_rank`
        approximation and its error exceeds `tol`; no error is raised.

    Returns
    -------
    U : ndarray of shape (m, k)
        Left singular vectors scaled by the singular values.
    V : ndarray of shape (p, k)
        Right singular vectors (orthonormal columns).

    Raises
    ------
    ValueError
        If `block` is not a finite 2-D numeric array, or `tol` or `max_rank` is invalid.
    numpy.linalg.LinAlgError
        If neither ``gesdd`` nor ``gesvd`` converges.
    """
    tol = check_tol(tol)
    max_rank = check_max_rank(max_rank)
    return truncate_svd(as_block(block), tol, max_rank)
