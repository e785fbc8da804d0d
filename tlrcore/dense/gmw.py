"""Gill–Murray–Wright modified Cholesky [1]_.

``P (M + E) P^T = L D L^T``, ``D`` and ``E`` diagonal. At step ``k`` the largest ``|c_ii|``
of the Schur complement becomes the pivot and, with ``theta = max_{i > k} |c_ik|``,
``d_k = max(delta, |c_kk|, theta^2 / beta^2)``, ``E_kk = d_k - c_kk``, where ``beta^2 =
max(gamma, xi / sqrt(n^2 - 1), eps)`` (``gamma``, ``xi``: largest diagonal and
off-diagonal magnitudes) bounds ``|l_ik| sqrt(d_k) <= beta`` and minimizes GMW's bound on
``||E||``. Panels use delayed updates (:mod:`tlrcore.dense._panel`), the diagonal kept
current for the pivot choice.

References
----------
.. [1] Gill, P. E., Murray, W., Wright, M. H. (1981). Practical Optimization. Academic
   Press.
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
    """Factor ``P (A + E) P^T = L D L^T`` in place, `a` Fortran-ordered (lower triangle read),
    overwritten by ``L`` below the diagonal; `beta2` bounds the squared entries of
    ``L sqrt(D)``, `delta` is the smallest pivot, `nb` the panel width.

    Returns ``(d, e, perm)``: ``D >= delta``; ``P E P^T = diag(e)``, ``e >= 0``, exactly zero
    where a pivot was kept; ``P A P^T = A[perm][:, perm]``."""
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
