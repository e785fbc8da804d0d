"""Modified Cholesky factorizations ``L L^T = P (M + E) P^T`` with ``M + E`` positive definite.

``"gmw"`` [1]_ perturbs the diagonal while it factors (:mod:`tlrcore.dense.gmw`).
``"cheng-higham"`` [2]_ factors ``P M P^T = L D L^T`` with Bunch–Kaufman or rook pivoting,
then raises every eigenvalue of the 1x1 and 2x2 blocks of ``D`` below ``delta`` to
``delta``: ``E = P^T L (D' - D) L^T P``.

References
----------
.. [1] Gill, P. E., Murray, W., Wright, M. H. (1981). Practical Optimization. Academic
   Press.
.. [2] Cheng, S. H., Higham, N. J. (1998). A modified Cholesky algorithm based on a
   symmetric indefinite factorization. SIAM J. Matrix Anal. Appl. 19(4), 1097-1110.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from tlrcore._typing import FloatArray, IntArray, Pivoting
from tlrcore.concurrency.threads import one_blas_thread
from tlrcore.dense._checks import PIVOTING, check_choice, check_finite_result, working_copy
from tlrcore.dense._panel import unit_lower
from tlrcore.dense.gmw import gmw_beta2, gmw_ldl
from tlrcore.dense.ldl import as_2x2, factor_ldl

__all__ = ["ModifiedCholesky", "modified_cholesky"]

METHODS = ("gmw", "cheng-higham")
EPS = np.finfo(np.float64).eps


@dataclass(frozen=True, repr=False)
class ModifiedCholesky:
    """Result of :func:`modified_cholesky`: ``L`` (lower, positive diagonal, ``L @ L.T = (M +
    E)[perm][:, perm]``), ``perm``, ``E_norm = ||E||_F`` (exactly 0.0 when no pivot was
    modified), ``delta``, ``method``, and ``E`` (with ``return_E=True``, else None)."""

    L: FloatArray
    perm: IntArray
    E_norm: float
    delta: float
    method: str
    E: FloatArray | None = None

    def logdet(self) -> float:
        """``log det(M + E)``."""
        return 2.0 * float(np.sum(np.log(np.diagonal(self.L))))

    def __repr__(self) -> str:
        return (
            f"ModifiedCholesky(n={self.L.shape[0]}, method={self.method!r}, "
            f"E_norm={self.E_norm:.3g})"
        )


@one_blas_thread
def modified_cholesky(
    M: ArrayLike,
    method: Literal["gmw", "cheng-higham"] = "gmw",
    pivoting: Pivoting = "bk",
    return_E: bool = False,
    delta: float | None = None,
    check_finite: bool = True,
) -> ModifiedCholesky:
    """Cholesky factor of a nearby positive definite matrix: ``L L^T = P (M + E) P^T``.

    Parameters
    ----------
    M : array_like, shape (n, n)
        Real symmetric (to a relative ``1e-10``; lower triangle used; not modified).
    method : {"gmw", "cheng-higham"}
        ``"gmw"`` [1]_: diagonal ``E``, pivoting on the largest diagonal of the Schur
        complement. ``"cheng-higham"`` [2]_: LDLᵀ with `pivoting`, block eigenvalues of ``D``
        below `delta` raised to `delta`; ``E`` dense, usually much smaller.
    pivoting : {"bk", "rook"}
        For ``"cheng-higham"`` (:func:`ldl`); GMW accepts only the default.
    return_E : bool
        Also form ``E`` (``O(n^2 s)`` work for ``s`` modified pivots).
    delta : float, optional
        Smallest pivot (GMW) or block eigenvalue allowed; default ``sqrt(eps / 2) ||M||_inf``
        [2]_ (larger: better conditioned ``M + E``, larger ``E``).
    check_finite : bool
        Reject NaN and infinite entries.

    Returns
    -------
    ModifiedCholesky

    Raises
    ------
    TypeError, ValueError
        Bad `M`, unknown `method` or `pivoting`, ``pivoting="rook"`` with GMW, or a `delta`
        that is not positive and finite.
    FactorizationError
        The factors overflowed (entries of `M` near the floating-point limits).

    Notes
    -----
    Both methods leave `M` unchanged (``E_norm == 0.0``) when ``lambda_min(M) >= delta`` with a
    margin for rounding: an SPD matrix's pivots are at least ``lambda_min(M)``, and GMW's
    ``theta_k^2 / beta^2`` does not bind, as ``theta_k^2 <= c_kk^2`` and ``c_kk <= beta^2``.
    ``||E||_F`` is at least ``||min(lambda(M), 0)||_2``; Cheng–Higham typically within ``n`` times
    it, GMW far more on strongly indefinite matrices. On numerically singular `M` use rook pivoting
    with Cheng–Higham (Bunch–Kaufman's ``L``, hence ``E``, can grow). The default `delta` is above
    [1]_'s ``O(eps)``, with which zero pivots make ``L`` grow as ``beta / sqrt(delta)``.

    References
    ----------
    .. [1] Gill, P. E., Murray, W., Wright, M. H. (1981). Practical Optimization. Academic
       Press.
    .. [2] Cheng, S. H., Higham, N. J. (1998). A modified Cholesky algorithm based on a
       symmetric indefinite factorization. SIAM J. Matrix Anal. Appl. 19(4), 1097-1110.

    Examples
    --------
    >>> import numpy as np
    >>> from tlrcore.dense import modified_cholesky
    >>> M = np.array([[2.0, 1.0], [1.0, -1.0]])
    >>> F = modified_cholesky(M, method="cheng-higham", return_E=True)
    >>> bool(np.all(np.linalg.eigvalsh(M + F.E) > 0)), F.E_norm > 0
    (True, True)
    """
    check_choice(method, "method", METHODS)
    check_choice(pivoting, "pivoting", PIVOTING)
    if method == "gmw" and pivoting != "bk":
        raise ValueError(
            "pivoting applies to method='cheng-higham'; GMW pivots on the largest diagonal, leave "
            "it at 'bk'."
        )
    delta = _check_delta(delta)
    a = working_copy(M, check_finite)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported as FactorizationError
        if delta is None:
            delta = default_delta(a)
        if method == "gmw":
            return _gmw(a, delta, return_E)
        return _cheng_higham(a, pivoting, delta, return_E)


def _check_delta(delta):
    if delta is None:
        return None
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating, np.integer)):
        raise TypeError(f"delta must be a positive float or None; got {type(delta).__name__}.")
    if not (np.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be positive and finite, e.g. 1e-8 * max|M|; got {delta}.")
    return float(delta)


def default_delta(a):
    """``sqrt(eps / 2) * ||A||_inf``, or ``sqrt(eps / 2)`` for ``A = 0``."""
    norm = np.linalg.norm(a, np.inf)
    return float(np.sqrt(EPS / 2) * (norm if norm > 0 else 1.0))


def _gmw(a, delta, return_E):
    d, e, perm = gmw_ldl(a, gmw_beta2(a), delta)
    L = unit_lower(a) * np.sqrt(d)
    check_finite_result(L, e)
    E = None
    if return_E:
        E = np.zeros(a.shape)
        E[perm, perm] = e
    return ModifiedCholesky(L, perm, float(np.linalg.norm(e)), delta, "gmw", E)


def _cheng_higham(a, pivoting, delta, return_E):
    L, d, e, perm = factor_ldl(a, pivoting)
    n = d.size
    pairs = np.flatnonzero(e)
    singles = np.setdiff1d(np.arange(n), np.concatenate([pairs, pairs + 1]))
    # D' - D = R R^T is supported on the modified blocks; Y = L R gives E = P^T Y Y^T P.
    low = singles[d[singles] < delta]
    Y = [L[:, low] * np.sqrt(delta - d[low])]
    d[low] = delta
    det = np.empty(0)
    if pairs.size:
        lam, U = np.linalg.eigh(as_2x2(d[pairs], e[pairs], d[pairs + 1]))
        hit = np.flatnonzero(lam[:, 0] < delta)
        raised = np.maximum(lam[hit], delta)
        R = U[hit] * np.sqrt(raised - lam[hit])[:, None, :]
        p = pairs[hit]
        Y.append((L[:, p, None] * R[:, 0, :] + L[:, p + 1, None] * R[:, 1, :]).reshape(n, -1))
        new = (U[hit] * raised[:, None, :]) @ np.swapaxes(U[hit], 1, 2)
        d[p], e[p], d[p + 1] = new[:, 0, 0], new[:, 1, 0], new[:, 1, 1]
        lam[hit] = raised
        det = lam[:, 0] * lam[:, 1]
    Y = np.concatenate(Y, axis=1)
    check_finite_result(Y, d, e)
    E = None
    if return_E:
        E = np.zeros(a.shape)
        E[np.ix_(perm, perm)] = Y @ Y.T
    E_norm = float(np.linalg.norm(Y.T @ Y))
    return ModifiedCholesky(
        _times_block_cholesky(L, d, e, pairs, det), perm, E_norm, delta, "cheng-higham", E
    )


def _times_block_cholesky(L, d, e, pairs, det):
    """``L C``, ``C`` the lower Cholesky factor of the positive definite ``D'``; `det` holds the
    2x2 blocks' determinants (from their eigenvalues: ``c22 = sqrt(det / d11)`` without
    cancellation)."""
    G = L * np.sqrt(d)
    if pairs.size:
        c11 = np.sqrt(d[pairs])
        G[:, pairs] = L[:, pairs] * c11 + L[:, pairs + 1] * (e[pairs] / c11)
        G[:, pairs + 1] = L[:, pairs + 1] * np.sqrt(det / d[pairs])
    return G
