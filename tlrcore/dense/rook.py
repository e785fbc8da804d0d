"""Blocked LDLᵀ with bounded Bunch–Kaufman (rook) pivoting [1]_.

SciPy does not expose LAPACK's ``dsytrf_rook``; this is the same algorithm in NumPy:
panels factored with delayed updates (``dlasyf_rook``), the trailing matrix updated by
matrix products (:mod:`tlrcore.dense._panel`). With ``alpha = (1 + sqrt 17) / 8``, ``a_kk``
is a 1x1 pivot if ``|a_kk| >= alpha colmax``; else the search moves to the row ``r`` of the
largest off-diagonal entry and accepts ``a_rr`` if ``|a_rr| >= alpha rowmax``, the 2x2
pivot ``(p, r)`` if column ``r``'s largest entry is in column ``p``, and otherwise goes on
from ``r``. Every pivot is the largest entry of its row and column: ``|L| <= 1 / (1 -
alpha) ~ 2.78``.

References
----------
.. [1] Ashcraft, C., Grimes, R. G., Lewis, J. G. (1998). Accurate symmetric indefinite
   linear equation solvers. SIAM J. Matrix Anal. Appl. 20(2), 513-561.
"""

import numpy as np

from tlrcore.dense._panel import PANEL_WIDTH, swap, update_trailing, updated_column

ALPHA = (1.0 + np.sqrt(17.0)) / 8.0


def rook_ldl(a, nb=PANEL_WIDTH):
    """Factor ``P A P^T = L D L^T`` in place, `a` Fortran-ordered (lower triangle read),
    overwritten by ``L`` below the diagonal; panels of `nb` columns.

    Returns ``(d, e, perm)``: the diagonal and subdiagonal of ``D`` (``e[k] != 0`` marks the
    2x2 block at ``k``) and ``P A P^T = A[perm][:, perm]``."""
    n = a.shape[0]
    d, e = np.zeros(n), np.zeros(n - 1)
    perm = np.arange(n)
    w = np.empty((n, min(nb, n)), order="F")
    k = 0
    while k < n:
        k0 = k
        k = _factor_panel(a, w, k0, nb, d, e, perm)
        update_trailing(a, w, k0, k)
    return d, e, perm


def _factor_panel(a, w, k0, nb, d, e, perm):
    """Factor columns from `k0` until the panel is full; return the next column."""
    n = a.shape[0]
    # Stop one column short of nb so that a final 2x2 pivot still fits in the panel.
    stop = n if n - k0 <= nb else k0 + nb - 1
    k = k0
    while k < stop:
        j = k - k0
        p, r, cp, cr = _search(a, w, k, k0)
        if p is None:
            swap(a, w, perm, k, r)
            _swap_entries(cr, 0, r - k)
            d[k] = cr[0]
            w[k:, j] = cr
            a[k + 1 :, k] = cr[1:] / cr[0] if cr[0] != 0.0 else 0.0
            k += 1
            continue
        swap(a, w, perm, k, p)
        _swap_entries(cp, 0, p - k)
        _swap_entries(cr, 0, p - k)
        swap(a, w, perm, k + 1, r)
        _swap_entries(cp, 1, r - k)
        _swap_entries(cr, 1, r - k)
        w[k:, j], w[k:, j + 1] = cp, cr
        # [l_k, l_k+1] = [cp, cr] D^-1 with D scaled by its off-diagonal (as dlasyf_rook).
        d21 = cp[1]
        d11, d22 = cr[1] / d21, cp[0] / d21
        t = 1.0 / (d11 * d22 - 1.0)
        a[k + 2 :, k] = t * (d11 * cp[2:] - cr[2:]) / d21
        a[k + 2 :, k + 1] = t * (d22 * cr[2:] - cp[2:]) / d21
        a[k + 1, k] = 0.0
        d[k], d[k + 1], e[k] = cp[0], cr[1], d21
        k += 2
    return k


def _search(a, w, k, k0):
    """Rook pivot search from column `k`: ``(p, r, cp, cr)``, ``p`` None for a 1x1 pivot at row
    ``r``, else the 2x2 pivot on rows ``p``, ``r``; ``cp``, ``cr`` rows ``k:`` of their Schur
    complement columns."""
    ck = updated_column(a, w, k, k, k0)
    colmax, imax = _offdiagonal_max(ck, 0, k)
    if abs(ck[0]) >= ALPHA * colmax:
        return None, k, None, ck
    p, cp = k, ck
    while True:
        cr = updated_column(a, w, imax, k, k0)
        rowmax, jmax = _offdiagonal_max(cr, imax - k, k)
        if abs(cr[imax - k]) >= ALPHA * rowmax:
            return None, imax, None, cr
        if jmax == p or rowmax <= colmax:
            return p, imax, cp, cr
        p, cp, colmax, imax = imax, cr, rowmax, jmax


def _offdiagonal_max(column, diagonal, k):
    """Largest ``|column[i]|``, ``i != diagonal``, and its row ``k + i`` (0 and `k` if none)."""
    magnitude = np.abs(column)
    magnitude[diagonal] = -1.0
    i = int(np.argmax(magnitude))
    return max(magnitude[i], 0.0), k + i


def _swap_entries(x, i, j):
    x[i], x[j] = x[j], x[i]
