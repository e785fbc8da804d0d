"""tlrcore: tile low-rank (TLR) linear algebra.

The package knows nothing about kernels or statistics. At this stage it provides the
error types shared with the dense path of :mod:`geostat`; the TLR matrix, its
compression and factorizations follow.

Public names
------------
NotPositiveDefiniteError
    Raised when a Cholesky factorization meets a non-positive pivot; ``.tile`` names
    the failing diagonal tile.
"""

from tlrcore.errors import NotPositiveDefiniteError

__all__ = ["NotPositiveDefiniteError"]
__version__ = "0.1.0"
