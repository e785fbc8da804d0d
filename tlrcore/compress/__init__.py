"""Low-rank compression of a block ``A`` (m x p) to an absolute Frobenius tolerance.

Every compressor returns ``(U, V)`` (a :class:`LowRank` pair), ``U`` of shape (m, k) and
``V`` of shape (p, k), float64, with ``||A - U V^T||_F <= tol`` and ``k`` close to the
smallest rank allowed by the SVD. ``U`` carries the singular values and ``V`` has
orthonormal columns. ``k`` may be 0. With `max_rank`, ``k <= max_rank``; when that binds
the result is the method's best rank-`max_rank` approximation and its error exceeds `tol`
(no error is raised).

Public names
------------
LowRank
    The pair ``(U, V)`` the compressors return, unpacked like a tuple, with the norms of
    what its truncation dropped (``dropped``, ``dropped_frobenius``).
svd_compress(block, tol, max_rank=None)
    Truncated SVD of a dense block: the optimal rank, ``O(m p min(m, p))``.
aca_compress(get_rows, get_cols, shape, tol, max_rank=None)
    Adaptive cross approximation from ``O(k (m + p))`` entries, then recompression.
ara_compress(matmat, rmatmat, shape, tol, block_size=16, max_rank=None, rng=None)
    Adaptive randomized approximation from products with ``A`` and ``A^T``.
COMPRESSORS
    ``{"svd": svd_compress, "aca": aca_compress, "ara": ara_compress}``.
generator_method(block)
    The default compressor of a block generator's tiles.
compress_dense(block, tol, method="aca", max_rank=None, rng=None)
    Any of the three on a dense array.
"""

from tlrcore.compress._recompress import LowRank, as_block
from tlrcore.compress.aca import aca_compress
from tlrcore.compress.ara import ara_compress
from tlrcore.compress.svd import svd_compress

__all__ = [
    "COMPRESSORS",
    "LowRank",
    "aca_compress",
    "ara_compress",
    "compress_dense",
    "generator_method",
    "svd_compress",
]

#: Compressor by method name.
COMPRESSORS = {"svd": svd_compress, "aca": aca_compress, "ara": ara_compress}


def generator_method(block):
    """The default compressor of the off-diagonal tiles of a block generator on the host:
    ``"aca"``, or ``"ara"`` when the generator says ``cross_approximation = False`` (its
    tiles may hold a few large entries that partial pivoting need not visit,
    :mod:`tlrcore.compress.aca`).

    Parameters
    ----------
    block : callable
        A block generator (:meth:`tlrcore.TLRMatrix.from_generator`).

    Returns
    -------
    str
    """
    return "aca" if getattr(block, "cross_approximation", True) else "ara"


def compress_dense(block, tol, method="aca", max_rank=None, rng=None):
    """Compress a dense block with the compressor named `method`.

    Parameters
    ----------
    block : array_like of shape (m, p)
        The block ``A``; it is not modified.
    tol : float
        Absolute Frobenius tolerance.
    method : {"aca", "ara", "svd"}, default "aca"
        Compressor, see :data:`COMPRESSORS`.
    max_rank : int or None, default None
        Largest rank returned.
    rng : numpy.random.Generator or int or None, default None
        Seed or generator for ``"ara"``; ignored by the deterministic methods.

    Returns
    -------
    U : ndarray of shape (m, k)
    V : ndarray of shape (p, k)

    Raises
    ------
    ValueError
        If `method` is unknown, `block` is not a finite 2-D numeric array, or `tol` or
        `max_rank` is invalid.
    numpy.linalg.LinAlgError
        If an SVD does not converge.
    """
    if method not in COMPRESSORS:
        raise ValueError(f"method must be one of {sorted(COMPRESSORS)}; got {method!r}.")
    A = as_block(block)
    if method == "svd":
        return svd_compress(A, tol, max_rank=max_rank)
    if method == "aca":
        return aca_compress(
            lambda idx: A[idx, :], lambda idx: A[:, idx], A.shape, tol, max_rank=max_rank
        )
    return ara_compress(
        lambda X: A @ X, lambda X: A.T @ X, A.shape, tol, max_rank=max_rank, rng=rng
    )
