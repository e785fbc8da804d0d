"""Test problems shared by the test modules: sites, covariances of sites and their block
generators, and symmetric positive definite matrices.

Every builder is deterministic: the same arguments give the same array, bit for bit (the
random draws come from ``numpy.random.default_rng`` of the seed given).

Correlations are functions of ``u = h / range`` (the convention of geostat and R fields:
``(1 + u) exp(-u)`` is the Matérn correlation of smoothness 1.5), or, with ``scaled=True``,
of ``u = sqrt(2 nu) h / range`` (the usual Matérn range).
"""

import numpy as np
from scipy.spatial.distance import cdist

#: Correlation functions of the scaled distance ``u``, which they may overwrite: the
#: exponential and Gaussian ones work in place, so that a block needs no more memory than
#: ``np.exp(-cdist(X, Y) / range)`` written inline.
CORRELATIONS = {
    "exponential": lambda u: np.exp(np.negative(u, out=u), out=u),
    "gaussian": lambda u: np.exp(np.negative(np.square(u, out=u), out=u), out=u),
    "matern15": lambda u: (1 + u) * np.exp(-u),
    "matern25": lambda u: (1 + u + u**2 / 3) * np.exp(-u),
}
#: The smoothness ``nu`` of the Matérn correlations, for ``scaled=True``.
SMOOTHNESS = {"exponential": 0.5, "matern15": 1.5, "matern25": 2.5}


# ---------------------------------------------------------------------------------- sites
def uniform_sites(n, d=2, seed=0):
    """`n` sites drawn uniformly in the unit cube ``[0, 1)^d``; `seed` is a seed or a
    ``numpy.random.Generator`` to draw from."""
    return np.random.default_rng(seed).uniform(size=(n, d))


def grid_sorted(X, cells=4):
    """`X` sorted by the cells of a grid of `cells` per side (the cell of the last coordinate
    slowest) and by the first coordinate within a cell, so that runs of consecutive sites,
    the tiles, are compact clusters."""
    return X[np.lexsort([X[:, 0], *(np.floor(X[:, k] * cells) for k in range(X.shape[1]))])]


def grid_sorted_sites(n, d=2, seed=0, cells=4):
    """:func:`uniform_sites` sorted by :func:`grid_sorted`."""
    return grid_sorted(uniform_sites(n, d, seed), cells)


def duplicated_sites(n, seed=0, duplicate=None):
    """`n` sites of the unit square sorted into compact tiles (by halves of the first
    coordinate, then by quarters of the second, then along the first).

    With `duplicate`, `n / 2` such sites, each twice, the copy ``1e-12`` away: next to it,
    in the same tile (``"within"``), or in the second half of the sites (``"across"``).
    """
    rng = np.random.default_rng(seed)
    m = n // 2 if duplicate else n
    X = rng.uniform(size=(m, 2))
    X = X[np.lexsort([X[:, 0], np.floor(X[:, 1] * 4), np.floor(X[:, 0] * 2)])]
    if duplicate == "within":
        return np.repeat(X, 2, axis=0) + 1e-12 * rng.standard_normal((2 * m, 2))
    if duplicate == "across":
        return np.vstack([X, X + 1e-12 * rng.standard_normal((m, 2))])
    if duplicate is not None:
        raise ValueError(f"duplicate must be None, 'within' or 'across', not {duplicate!r}")
    return X


def morton_order(X, bits=16):
    """The permutation that sorts sites of the unit square along the Z (Morton) curve."""
    q = np.minimum((X * 2**bits).astype(np.int64), 2**bits - 1)
    code = np.zeros(X.shape[0], dtype=np.int64)
    for bit in range(bits):
        for dim in range(2):
            code |= ((q[:, dim] >> bit) & 1) << (2 * bit + dim)
    return np.argsort(code, kind="stable")


def morton_sites(n, seed=0):
    """:func:`uniform_sites` of the unit square in Morton order."""
    X = uniform_sites(n, 2, seed)
    return X[morton_order(X)]


# ---------------------------------------------------------------------------- covariances
def covariance(
    X, Y=None, *, kernel="exponential", range_=0.1, variance=1.0, nugget=0.0, scaled=False
):
    """``variance R(u) + nugget I`` between the sites `X` and `Y` (default `X`), with the
    correlation `kernel` of :data:`CORRELATIONS`; the nugget only on the diagonal of a
    square ``Y is None`` covariance."""
    u = cdist(X, X if Y is None else Y)
    if scaled:
        u *= np.sqrt(2 * SMOOTHNESS[kernel])
    u /= range_
    C = CORRELATIONS[kernel](u)
    if variance != 1.0:
        C = variance * C
    if nugget:
        if Y is not None:
            raise ValueError("a nugget needs a square covariance (Y=None)")
        C[np.diag_indices_from(C)] += nugget
    return C


def generator(X, *, nugget=0.0, **kwargs):
    """The block generator ``block(rows, cols)`` of :func:`covariance` of the sites `X`:
    its entries at the index arrays `rows` and `cols`, the nugget where a row index equals a
    column index. A closure: it does not pickle, so builds from it compress their tiles in
    threads, never in worker processes."""

    def block(rows, cols):
        C = covariance(X[rows], X[cols], **kwargs)
        if nugget:
            C[rows[:, None] == cols[None, :]] += nugget
        return C

    return block


def dense(block, n):
    """The whole ``n x n`` matrix of the block generator `block`."""
    idx = np.arange(n)
    return block(idx, idx)


# ------------------------------------------------------------------------------ matrices
def spd(m, rng, count=None):
    """``G G^T + m I`` of standard normal ``m x m`` draws ``G`` of the Generator `rng`:
    symmetric positive definite, condition number about 5; `count` such matrices stacked
    when `count` is given."""
    shape = (m, m) if count is None else (count, m, m)
    G = rng.standard_normal(shape)
    return G @ np.swapaxes(G, -1, -2) + m * np.eye(m)
