"""Low-rank compression of a block ``A`` (m x p) to an absolute Frobenius tolerance.

Every compressor returns a :class:`LowRank` pair ``(U, V)``, float64, ``U`` (m x k)
carrying the singular values and ``V`` (p x k) orthonormal, with ``||A - U V^T||_F <=
tol`` and ``k`` (possibly 0) close to the smallest rank the SVD allows; when `max_rank`
binds, the error exceeds `tol` without an error.

Public names
------------
svd_compress, aca_compress, ara_compress
    Truncated SVD (the optimal rank, ``O(m p min(m, p))``); adaptive cross approximation
    from ``O(k (m + p))`` entries; adaptive randomized approximation from products.
COMPRESSORS, compress_dense, generator_method
    The three by name; any of them on a dense array; a block generator's default.
LowRank
    The pair, with the norms of what its truncation dropped.
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
    """The default compressor of a block generator's off-diagonal tiles on the host.

    ``"aca"``, or ``"ara"`` when `block` has ``cross_approximation = False`` (tiles whose few
    large entries partial pivoting may miss, :mod:`tlrcore.compress.aca`)."""
    return "aca" if getattr(block, "cross_approximation", True) else "ara"


def compress_dense(block, tol, method="aca", max_rank=None, rng=None):
    """Compress the dense `block` (m x p, not modified) to `tol` with the compressor `method`
    (``"aca"``, ``"ara"``, ``"svd"``), at most `max_rank`; `rng` seeds ``"ara"``.

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
