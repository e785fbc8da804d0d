r"""Orthonormal bases of tall thin factors from the Cholesky factor of their Gram matrix.

:func:`gram_basis` takes ``M = P R`` from the Cholesky factor ``L L^T`` of the Gram matrix
(CholeskyQR [1]_): one symmetric product, without the GIL, where Householder QR runs
level-2 panels holding it. ``P`` is never formed: ``P Y = M_s (L^{-T} Y)``. With columns
scaled to unit norm (``M = M_s D``, ``G = M_s^T M_s``), ``L L^T = G + E``, ``||E||_F <= (m
+ k + 1) eps tr(G)`` to first order, so

.. math:: \delta = \|P^T P - I\|_2 \le (m + k + 1)\,\varepsilon\,\mathrm{tr}(G)\,\|L^{-1}\|_F^2,

computed with a 1 % margin; a truncation ``P_U X P_V^T`` has Frobenius norm within ``1 +-
(delta_U + delta_V)`` of ``||X||_F``. Above :data:`DEPARTURE` a second pass (CholeskyQR2
[2]_) factors ``P_1 = M_s L_1^{-T}`` again, leaving ``||M - P R||_F <= 2 (k + 1) eps
||P_1||_F ||R_1||_F`` by the solve's backward error ([3]_, Thm 8.5). Products ``M_s Z``
round by at most ``2 k^{3/2} eps ||Z||_F``. Where the Cholesky fails or the bound is
missed, callers use Householder QR.

References
----------
.. [1] Fukaya, T., Nakatsukasa, Y., Yanagisawa, Y., Yamamoto, Y. (2014). CholeskyQR2: a
   simple and communication-avoiding algorithm for computing a tall-skinny QR factorization
   on a large-scale parallel system. ScalA '14, IEEE.
.. [2] Yamamoto, Y., Nakatsukasa, Y., Yanagisawa, Y., Fukaya, T. (2015). Roundoff error
   analysis of the CholeskyQR2 algorithm. Electron. Trans. Numer. Anal. 44, 306-326.
.. [3] Higham, N. J. (2002). Accuracy and Stability of Numerical Algorithms, 2nd ed. SIAM.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import lapack

from tlrcore._lapack import potrf_lower, trsm_lower

__all__ = ["DEPARTURE", "GramBasis", "gram_basis", "rounding_bound"]

EPS = float(np.finfo(np.float64).eps)
#: Largest bound on ``||P^T P - I||_2`` with which a basis is returned.
DEPARTURE = 0.05


class GramBasis:
    """``M = P R`` with ``P = M R^{-1}`` nearly orthonormal, never formed: `M` (or after a second
    pass the first basis ``P_1``), upper triangular `R` (``L^T D``, times the first pass's
    ``R``), ``departure`` the bound on ``||P^T P - I||_2``, ``residual`` the bound on
    ``||M_0 - P R||_F`` (0 for one pass)."""

    def __init__(self, M, L, norms, departure, leading=None, residual=0.0):
        self.M, self.departure, self.residual = M, departure, residual
        self.R = L.T * norms if leading is None else (L.T * norms) @ leading
        self._L, self._scale = L, 1.0 / norms

    def coefficients(self, Y):
        """``(Z, ||L^{-T} Y||_F)`` for a ``k x c`` `Y`, with ``P Y = M Z``.

        :meth:`apply` then rounds by at most ``2 k^{3/2} eps ||L^{-T} Y||_F``; the norm comes first
        so that a caller can choose a rank by the rounding before paying for the product."""
        Z = trsm_lower(self._L, np.array(Y, order="F"), trans=True)
        norm = float(np.linalg.norm(Z))
        Z *= self._scale[:, None]
        return Z, norm

    def apply(self, Z):
        """``P Y = M Z`` for the ``Z`` of :meth:`coefficients`."""
        return self.M @ Z


def gram_basis(M):
    """:class:`GramBasis` of the tall `M` (m x k, k >= 1), or None when its Gram matrix is not
    numerically positive definite or the departure exceeds :data:`DEPARTURE` after a second
    pass."""
    first = _cholesky_gram(M)
    if first is None:
        return None
    L, norms, departure = first
    if departure <= DEPARTURE:
        return GramBasis(M, L, norms, departure)
    P1 = trsm_lower(L, M / norms, trans=True, right=True)
    second = _cholesky_gram(P1)
    if second is None or second[2] > DEPARTURE:
        return None
    L2, norms2, departure2 = second
    R1 = L.T * norms
    residual = (
        2.0 * (M.shape[1] + 1) * EPS * float(np.linalg.norm(norms2)) * float(np.linalg.norm(R1))
    )
    return GramBasis(P1, L2, norms2, departure2, leading=R1, residual=residual)


def _cholesky_gram(M):
    """``(L, norms, departure)`` for the Gram matrix of `M` with unit-norm columns; None where a
    norm is 0 or not finite, or the Cholesky factor or its inverse fails."""
    rows, k = M.shape
    gram = M.T @ M
    norms = np.sqrt(np.diagonal(gram))
    if not (np.all(norms > 0.0) and np.all(np.isfinite(norms))):
        return None
    scale = 1.0 / norms
    gram *= scale[:, None]
    gram *= scale[None, :]
    trace = float(np.trace(gram))
    L = np.asfortranarray(gram)
    if potrf_lower(L) != 0:
        return None
    L_inv, info = lapack.dtrtri(L, lower=1)
    if info != 0 or not np.all(np.isfinite(L_inv)):
        return None
    return L, norms, 1.01 * (rows + k + 1) * EPS * trace * float(np.vdot(L_inv, L_inv))


def rounding_bound(k, size):
    """``2 k^{3/2} eps size``: the rounding of a product through a basis of `k` columns, `size`
    being ``||Z||_F`` times the spectral norm of the factor it multiplies."""
    return 2.0 * k * math.sqrt(k) * EPS * size
