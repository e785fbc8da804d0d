r"""Gill–Murray–Wright modified Cholesky (GMW81; Gill, Murray and Wright, Practical Optimization, 1981).

``P (M + E) P^T = L D L^T`` with ``D`` diagonal and ``E`` diagonal, built column by column.
At step ``k`` the symmetric interchange brings the largest ``|c_ii|`` of the Schur complement
to the pivot, and with ``c`` the pivot column and ``theta = max_{i > k} |c_ik|``,

    d_k = max(delta, |c_kk|, theta^2 / beta^2),    E_kk = d_k - c_kk,

where ``beta^2 = max(gamma, xi / sqrt(n^2 - 1), eps)`` (``gamma``, ``xi``: largest diagonal
and off-diagonal magnitudes of ``M``) bounds ``|l_ik| sqrt(d_k) <= beta``, the choice that
minimizes GMW's a-priori bound on ``||E||``. The columns are computed in panels with delayed
updates (:mod:`tlrcore.dense._panel`); only an ``O(n)`` diagonal update is done per column
for the whole trailing matrix, so the pivot choice sees the current Schur complement.
"""

import numpy as np

from tlrcore.dense._panel import PANEL_WIDTH, swap, update_trailing, updated_column

EPS = np.finfo(np.float64).eps


def gmw_beta2(a):
    """GMW's ``beta^2`` for the symmetric matrix `a` (both triangles stored)."""
    n = a.shape[0]
    diagonal = np.diagonal(a).copy()
    np.fill_diagonal(a, 0.0)
    gamma, xi = np.abs(diagonal).max(), max(a.max(), -a.min())
    np.fill_diagonal(a, diagonal)
    return max(gamma, xi / max(1.0, np.sqrt(n * n - 1.0)), EPS)


def gmw_ldl(a, beta2, delta, nb=PANEL_WIDTH):
    """Factor ``P (A + E) P^T = L D L^T`` in place.

    Parameters
    ----------
    a : ndarray, shape (n, n), Fortran order
        Symmetric matrix (lower triangle read); overwritten by ``L`` below the diagonal.
    beta2, delta : float
        Bound on the squared entries of ``L sqrt(D)`` and smallest pivot.
    nb : int
        Panel width.

    Returns
    -------
    d : ndarray, shape (n,)
        ``D``, all entries ``>= delta``.
    e : ndarray, shape (n,)
        ``P E P^T = diag(e)``, ``e >= 0``; exactly zero where a pivot was kept.
    perm : ndarray of int, shape (n,)
        ``P A P^T = A[perm][:, perm]``.
    """
    n = a.shape[0]
    d, e = np.zeros(n), np.zeros(n)
    perm = np.arange(n)
    schur_diagonal = np.diagonal(a).copy()
    w = np.empty((n, min(nb, n)), order="F")
    k = 0
    while k < n:
        k0, stop = k, min(k + nb, n)
        for k in range(k0, stop):
            q = k + int(np.argmax(np.abs(schur_diagonal[k:])))
            swap(a, w, perm, k, q)
            schur_diagonal[[k, q]] = schur_diagonal[[q, k]]
            c = updated_column(a, w, k, k, k0)
            theta = np.abs(c[1:]).max() if c.size > 1 else 0.0
            d[k] = max(delta, abs(c[0]), theta * theta / beta2)
            e[k] = d[k] - c[0]
            c[0] = d[k]
            w[k:, k - k0] = c
            a[k + 1 :, k] = c[1:] / d[k]
            schur_diagonal[k + 1 :] -= c[1:] * a[k + 1 :, k]
        k = stop
        update_trailing(a, w, k0, k)
    return d, e, perm
