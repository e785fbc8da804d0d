"""Dense symmetric factorizations for matrices that may have lost definiteness.

Public names
------------
ldl(M, pivoting="bk"), LDL
    ``M[perm][:, perm] = L D L^T`` with 1x1 and 2x2 pivots (Bunch–Kaufman or rook).
modified_cholesky(M, method="gmw", pivoting="bk"), ModifiedCholesky
    ``L L^T = (M + E)[perm][:, perm]``, ``M + E`` positive definite (Gill–Murray–Wright or
    Cheng–Higham); ``.E_norm = ||E||_F``, 0.0 for a sufficiently positive definite ``M``.

BLAS runs on one thread inside these functions (their per-column products lose more to
thread synchronization than they gain). :mod:`tlrcore.dense.blocked` factors, inverts and
multiplies positive definite matrices by blocks over the tile pool.
"""

from tlrcore.dense.ldl import LDL, ldl
from tlrcore.dense.modified import ModifiedCholesky, modified_cholesky

__all__ = ["LDL", "ModifiedCholesky", "ldl", "modified_cholesky"]
