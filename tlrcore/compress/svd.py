"""Truncated SVD compression: the reference compressor (optimal rank, ``O(m p min(m, p))``)."""

from tlrcore.compress._recompress import as_block, check_max_rank, check_tol, truncate_svd

__all__ = ["svd_compress"]


def svd_compress(block, tol, max_rank=None):
    """Compress a dense block by truncated SVD.

    Keeps the smallest ``k`` with ``sqrt(sum_{i >= k} s_i^2) <= tol``, by the Eckart-Young
    theorem the smallest rank within `tol` in the Frobenius norm (0 keeps every non-zero
    singular value); `block` is not modified. When `max_rank` binds, the best rank-`max_rank`
    approximation, its error above `tol` without an error.

    Returns
    -------
    U : ndarray of shape (m, k)
        Left singular vectors scaled by the singular values.
    V : ndarray of shape (p, k)
        Right singular vectors.

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
