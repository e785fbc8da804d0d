"""Symmetric indefinite factorization ``P M P^T = L D L^T`` with 1x1 and 2x2 pivots.

Bunch–Kaufman pivoting [1]_ through LAPACK ``dsytrf``, or rook (bounded Bunch–Kaufman)
pivoting [2]_ (:mod:`tlrcore.dense.rook`).

References
----------
.. [1] Bunch, J. R., Kaufman, L. (1977). Some stable methods for calculating inertia and
   solving symmetric linear systems. Math. Comp. 31(137), 163-179.
.. [2] Ashcraft, C., Grimes, R. G., Lewis, J. G. (1998). Accurate symmetric indefinite
   linear equation solvers. SIAM J. Matrix Anal. Appl. 20(2), 513-561.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg.lapack import dsytrf, dsytrf_lwork

from tlrcore._typing import FloatArray, IntArray, Pivoting
from tlrcore.concurrency.threads import one_blas_thread
from tlrcore.dense._checks import PIVOTING, check_choice, check_finite_result, working_copy
from tlrcore.dense._panel import unit_lower
from tlrcore.dense.rook import rook_ldl

__all__ = ["LDL", "ldl"]


class LDL(NamedTuple):
    """Result of :func:`ldl`, unpacking as ``L, D, perm``: unit lower ``L``, block-diagonal ``D``
    (a 2x2 block at ``k`` has ``D[k+1, k] != 0`` and is indefinite), ``M[perm][:, perm] = L @
    D @ L.T``."""

    L: FloatArray
    D: FloatArray
    perm: IntArray

    def inertia(self, rtol: float | None = None) -> tuple[int, int, int]:
        """``(n_pos, n_neg, n_zero)`` of ``M`` (Sylvester): the signs of the eigenvalues of ``D``,
        those with ``|lambda| <= rtol max|lambda|`` counted as zero (default ``rtol = n eps``)."""
        return inertia_of(block_eigenvalues(self.D), rtol)

    def slogdet(self) -> tuple[float, float]:
        """``(sign, log|det M|)`` as :func:`numpy.linalg.slogdet`: ``(0, -inf)`` if singular."""
        lam = block_eigenvalues(self.D)
        if np.any(lam == 0):
            return 0.0, -np.inf
        return float(np.prod(np.sign(lam))), float(np.sum(np.log(np.abs(lam))))

    def logdet(self) -> float:
        """``log|det M|``."""
        return self.slogdet()[1]


@one_blas_thread
def ldl(M: ArrayLike, pivoting: Pivoting = "bk", check_finite: bool = True) -> LDL:
    """Symmetric indefinite factorization ``P M P^T = L D L^T``.

    Parameters
    ----------
    M : array_like, shape (n, n)
        Real symmetric, possibly indefinite or singular (to a relative ``1e-10``; lower
        triangle used; not modified).
    pivoting : {"bk", "rook"}
        Bunch–Kaufman [1]_ (LAPACK ``dsytrf``, blocked) or rook [2]_ (blocked NumPy,
        ``|L| <= 2.78``; slower, more accurate where Bunch–Kaufman's ``L`` grows).
    check_finite : bool
        Reject NaN and infinite entries.

    Returns
    -------
    LDL
        ``(L, D, perm)``.

    Raises
    ------
    TypeError, ValueError
        `M` is not a real symmetric finite square matrix, or `pivoting` is unknown.
    FactorizationError
        The factors overflowed (entries of `M` near the floating-point limits).

    References
    ----------
    .. [1] Bunch, J. R., Kaufman, L. (1977). Some stable methods for calculating inertia and
       solving symmetric linear systems. Math. Comp. 31(137), 163-179.
    .. [2] Ashcraft, C., Grimes, R. G., Lewis, J. G. (1998). Accurate symmetric indefinite
       linear equation solvers. SIAM J. Matrix Anal. Appl. 20(2), 513-561.

    Examples
    --------
    >>> import numpy as np
    >>> from tlrcore.dense import ldl
    >>> M = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> L, D, perm = ldl(M)
    >>> np.allclose(M[perm][:, perm], L @ D @ L.T), ldl(M).inertia()
    (True, (1, 1, 0))
    """
    check_choice(pivoting, "pivoting", PIVOTING)
    a = working_copy(M, check_finite)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported as FactorizationError
        L, d, e, perm = factor_ldl(a, pivoting)
    D = np.diag(d)
    k = np.arange(e.size)
    D[k + 1, k] = D[k, k + 1] = e
    return LDL(L, D, perm)


def factor_ldl(a, pivoting):
    """Factor the validated copy `a` (overwritten): ``(L, d, e, perm)``, ``L`` unit lower in C
    order, ``d``, ``e`` the diagonal and subdiagonal of ``D`` (``e[k] != 0``: a 2x2 block);
    FactorizationError if not finite."""
    if pivoting == "rook":
        d, e, perm = rook_ldl(a)
        L = unit_lower(a)
    else:
        L, d, e, perm = _bunch_kaufman(a)
    check_finite_result(L, d, e)
    return L, d, e, perm


def _bunch_kaufman(a):
    """LAPACK ``dsytrf`` (lower) converted from its product form to ``(L, d, e, perm)``."""
    n = a.shape[0]
    lwork, _ = dsytrf_lwork(n, lower=1)
    f, ipiv, _ = dsytrf(a, lower=1, lwork=max(int(lwork), 1), overwrite_a=True)
    # LAPACK returns L = P_1 L_1 P_2 L_2 ...: column k's multipliers are in the row order of
    # step k. Applying each later interchange to the columns already placed gives one P.
    L = np.zeros((n, n))
    d, e = np.diagonal(f).copy(), np.zeros(n - 1)
    perm = np.arange(n)
    k = 0
    while k < n:
        step = 1 if ipiv[k] > 0 else 2
        row, p = k + step - 1, abs(int(ipiv[k])) - 1
        L[[row, p], :k] = L[[p, row], :k]
        perm[[row, p]] = perm[[p, row]]
        L[k + step :, k : k + step] = f[k + step :, k : k + step]
        if step == 2:
            e[k] = f[k + 1, k]
        k += step
    np.fill_diagonal(L, 1.0)
    return L, d, e, perm


def inertia_of(lam, rtol=None):
    """``(n_pos, n_neg, n_zero)`` of eigenvalues `lam`, ``|lambda| <= rtol max|lambda|`` (default
    ``rtol = len(lam) eps``) counted as zero."""
    if rtol is None:
        rtol = lam.size * np.finfo(np.float64).eps
    zero = np.abs(lam) <= rtol * np.abs(lam).max()
    return int(np.sum((lam > 0) & ~zero)), int(np.sum((lam < 0) & ~zero)), int(np.sum(zero))


def block_eigenvalues(D):
    """Eigenvalues of a block diagonal ``D`` with 1x1 and 2x2 blocks, in block order."""
    lam = np.diagonal(D).copy()
    starts = np.flatnonzero(np.diagonal(D, -1))
    if starts.size:
        pairs = np.linalg.eigvalsh(
            as_2x2(D[starts, starts], D[starts + 1, starts], D[starts + 1, starts + 1])
        )
        lam[starts], lam[starts + 1] = pairs[:, 0], pairs[:, 1]
    return lam


def as_2x2(a, b, c):
    """The ``(m, 2, 2)`` stack of ``[[a, b], [b, c]]``."""
    return np.stack([np.stack([a, b], -1), np.stack([b, c], -1)], -2)
