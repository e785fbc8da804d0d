"""Right-looking blocked factorization of a symmetric matrix kept in lower storage.

The rook-pivoted LDLᵀ and the GMW factorization share the layout of LAPACK's ``dlasyf``:
in the Fortran-ordered ``a`` (lower triangle read), columns ``< k`` hold the unit lower
``L``, the trailing triangle the Schur complement ``S`` as of the panel's start. With
``W = L D`` for the panel columns ``k0 <= c < k`` (``w[:, :k - k0]``), column ``m`` of the
current Schur complement is ``S[:, m] - L[:, k0:k] @ W[m]``, and the trailing matrix is
updated once per panel, ``S -= L W^T``."""

import numpy as np

#: Columns per panel (wider than LAPACK's 64: fewer, larger trailing products).
PANEL_WIDTH = 128

#: Width of the column blocks of the trailing update (only the lower triangle is updated).
UPDATE_CHUNK = 256


def updated_column(a, w, m, k, k0):
    """Rows ``k:`` of column `m` (``>= k``) of the current Schur complement (`k` the first
    unfactored column, `k0` the panel's first)."""
    stored = np.concatenate((a[m, k:m], a[m:, m]))
    return stored - a[k:, k0:k] @ w[m, : k - k0]


def swap(a, w, perm, k, p):
    """Symmetric interchange of rows and columns ``k <= p`` of the trailing matrix, with the rows
    of the factor columns ``< k``, of `w` and of `perm`."""
    if p == k:
        return
    a[[k, p], :k] = a[[p, k], :k]
    a[k, k], a[p, p] = a[p, p], a[k, k]
    between = a[k + 1 : p, k].copy()
    a[k + 1 : p, k] = a[p, k + 1 : p]
    a[p, k + 1 : p] = between
    below = a[p + 1 :, k].copy()
    a[p + 1 :, k] = a[p + 1 :, p]
    a[p + 1 :, p] = below
    w[[k, p]] = w[[p, k]]
    perm[[k, p]] = perm[[p, k]]


def update_trailing(a, w, k0, k):
    """Apply the panel ``k0:k`` to the lower triangle of the trailing matrix ``a[k:, k:]``."""
    n = a.shape[0]
    L, W = a[k:, k0:k], w[k:, : k - k0]
    for c in range(k, n, UPDATE_CHUNK):
        e = min(c + UPDATE_CHUNK, n)
        a[c:, c:e] -= L[c - k :] @ W[c - k : e - k].T


def unit_lower(a):
    """The unit lower triangular factor stored below the diagonal of `a`, C-ordered."""
    L = np.array(a, order="C")
    for i in range(L.shape[0]):
        L[i, i] = 1.0
        L[i, i + 1 :] = 0.0
    return L
