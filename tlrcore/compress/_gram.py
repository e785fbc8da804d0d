r"""Orthonormal bases of tall thin factors from the Cholesky factor of their Gram matrix.

The recompressions truncate a product ``U V^T`` (``m x k`` factors, ``k`` small) through
``U = P_U R_U`` and ``V = P_V R_V`` with orthonormal ``P``: the SVD of the small
``R_U R_V^T`` is then that of ``U V^T``. Householder QR (``dgeqrf``, and ``dormqr`` to
apply ``P``) does this with level-2 panel factorizations; for the ``2048 x 30`` factors of
ACA it ran at 6 GFLOP/s here, holding the GIL. :func:`gram_basis` takes ``R`` from the
Cholesky factor ``L L^T`` of the Gram matrix instead (CholeskyQR, without forming ``P``):
one symmetric product ``M^T M``, which releases the GIL, and ``k x k`` work; ``P`` is
applied as ``P Y = M_s (L^{-T} Y)``, a small triangular solve and one product.

**Departure from orthonormality.** The columns are scaled to unit norm first
(``M = M_s D``), which leaves ``M_s`` with condition numbers of 1e1-1e5 on ACA factors.
The computed ``L`` of the computed ``G = M_s^T M_s`` satisfies ``L L^T = M_s^T M_s + E``
with ``||E||_F <= (m + k + 1) eps tr(G)`` to first order (the ``m``-term inner products
round by ``|dG_ij| <= m eps ||x_i|| ||x_j||``, Cholesky's backward error is
``k eps |L| |L^T|``). So ``P = M_s L^{-T}`` departs from orthonormality by

.. math:: \delta = \|P^T P - I\|_2 \le (m + k + 1)\,\varepsilon\,\mathrm{tr}(G)\,\|L^{-1}\|_F^2,

computed (with a 1 % margin) from the small ``L^{-1}``. A basis whose bound is above
:data:`DEPARTURE` (a condition number of ``M_s`` above about 5e4 at ``m = 2048``) gets
a second pass (below); where the Gram matrix's Cholesky refuses, :func:`gram_basis`
returns None and the caller falls back to Householder QR. A truncation
``P_U X P_V^T`` has Frobenius norm within the factors ``1 +- (delta_U + delta_V)`` of
``||X||_F``, so a caller that divides its budget by ``1 + delta_U + delta_V`` keeps its
tolerance.

**Second pass (CholeskyQR2).** Where the bound is above :data:`DEPARTURE` but the Gram
matrix's Cholesky succeeds (near-field ACA factors of rank about 220, condition numbers
1e5-7e5 after scaling), ``P_1 = M_s L_1^{-T}`` is formed (a triangular solve) and is
nearly orthonormal: its own Gram basis ``P_1 = P R_2`` passes the bound, and
``M = P R_2 R_1`` with ``R_1 = L_1^T D``. The solve's backward error, row by row
``|m_i - p_i L_1^T| <= gamma_k |p_i| |L_1^T|`` (Higham, *Accuracy and Stability*, Thm
8.5), scaled by ``D``, leaves a residual
``||M - P R||_F <= 2 (k + 1) eps ||P_1||_F ||R_1||_F`` (doubled for blocked BLAS),
which the callers add to their error; it is 0 for one pass. Householder QR remains for
factors whose Gram matrix is not positive definite, or whose second pass fails the
bound.

**Rounding of the products.** ``M_s Z`` with ``Z = L^{-T} Y`` rounds by at most
``k eps ||M_s||_F ||Z||_F = k^{3/2} eps ||Z||_F`` (first order), and the solve's backward
error ``k eps |L|`` adds as much: ``2 k^{3/2} eps ||Z||_F`` in all, with ``||Z||_F``
returned by :meth:`GramBasis.coefficients`. For the singular vectors of a truncation ``Z`` is
small (``L^{-T} W S = D R_V^T Z`` for ``R_U R_V^T = W S Z^T``: no inverse appears), but a
caller adds the bound to its error all the same, and falls back where it is large.

Measured on 229 ACA tiles of the 131,072-site exponential build (2048 rows, ranks 8-233
before truncation) and 34 of the co2 8,192-cell Matérn fit: the ranks of Householder QR
(one tile of the 263 one higher), recompression 20 % and 30 % faster; on 189 projections
of ARA in the 131K factorization (``recompress_orthonormal``), 35 % faster. With the
second pass (and the retry of ``_recompress._gram_truncation``), none of the 496 tiles
of the 65,536-site build falls back to Householder QR, where 45 had (1.7 of its 10.0
CPU seconds in their QRs and reflectors): recompression 3.2 -> 2.4 CPU seconds.
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
    """``M = P R`` with ``P = M R^{-1}`` nearly orthonormal, never formed.

    Attributes
    ----------
    M : ndarray of shape (m, k)
        The factor, or after a second pass its first basis ``P_1``.
    R : ndarray of shape (k, k)
        Upper triangular: ``L^T D`` for the column norms ``D`` of `M`, times the `R`
        of the first pass after a second.
    departure : float
        The bound on ``||P^T P - I||_2`` of the module docstring.
    residual : float
        Bound on ``||M_0 - P R||_F`` for the factor ``M_0`` given to :func:`gram_basis`:
        0 for one pass, the first solve's backward error after a second.
    """

    def __init__(self, M, L, norms, departure, leading=None, residual=0.0):
        self.M, self.departure, self.residual = M, departure, residual
        self.R = L.T * norms if leading is None else (L.T * norms) @ leading
        self._L, self._scale = L, 1.0 / norms

    def coefficients(self, Y):
        """``(Z, ||L^{-T} Y||_F)`` for a ``k x c`` `Y`, with ``P Y = M Z``: ``Z`` is
        ``L^{-T} Y`` scaled by the inverse column norms, and the product :meth:`apply`
        makes rounds by at most ``2 k^{3/2} eps ||L^{-T} Y||_F`` (module docstring).
        The norm comes before the product, so that a caller can choose a rank by the
        rounding before it pays for the product."""
        Z = trsm_lower(self._L, np.array(Y, order="F"), trans=True)
        norm = float(np.linalg.norm(Z))
        Z *= self._scale[:, None]
        return Z, norm

    def apply(self, Z):
        """``P Y = M Z`` for the ``Z`` of :meth:`coefficients`."""
        return self.M @ Z


def gram_basis(M):
    """:class:`GramBasis` of the tall `M` (m x k, k >= 1), or None when its Gram matrix
    is not numerically positive definite or the departure bound exceeds
    :data:`DEPARTURE` after a second pass (module docstring)."""
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
    """``(L, norms, departure)``: the Cholesky factor of the Gram matrix of `M` with
    columns scaled to unit norm, the column norms, and the departure bound; None where
    a norm is 0 or not finite, or the Cholesky factorization or its inverse fails."""
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
    """``2 k^{3/2} eps size``: the rounding of a product through a basis of `k` columns,
    with `size` the ``||Z||_F`` of :meth:`GramBasis.coefficients` times the spectral norm of
    the factor it multiplies (module docstring)."""
    return 2.0 * k * math.sqrt(k) * EPS * size
