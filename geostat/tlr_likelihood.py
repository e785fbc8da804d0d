"""Gaussian log-likelihood through a tile low-rank Cholesky factor.

For each group of replicates sharing observed sites, the covariance
``variance * R + nugget * I`` of those sites is ordered (KD-tree or Morton), compressed
into a :class:`tlrcore.TLRMatrix` and factored by :func:`tlrcore.cholesky`; the GLS
trend, quadratic form and log-determinant then come from the factor exactly as in the
dense path (:mod:`geostat.likelihood`).
"""

from __future__ import annotations

import numpy as np

import tlrcore as tlr
from geostat.gls import LOG_2PI, gls, group_by_pattern
from geostat.solvers import tlr_covariance

__all__ = ["tlr_log_likelihood"]


def tlr_log_likelihood(coords, y, design, kernel, params, distance, accuracy=1e-8, tile_size=None,
                       ordering="kdtree", reml=False, random_state=0):
    """Full (or restricted) log-likelihood at natural parameters, TLR evaluation.

    Parameters
    ----------
    coords : ndarray of shape (n, d)
    y : ndarray of shape (n, r)
        NaN marks a site missing on a replicate.
    design : ndarray of shape (n, p)
    kernel : geostat.kernels.Kernel
    params : dict
        Checked natural parameters (``variance``, ``range``, shape, ``nugget``).
    distance : geostat.distance.Distance
    accuracy : float, default 1e-8
        Relative accuracy of compression and factorization.
    tile_size : int, optional
    ordering : {"kdtree", "morton", "none"}, default "kdtree"
    reml : bool, default False
    random_state : int, default 0

    Returns
    -------
    float

    Raises
    ------
    tlrcore.NotPositiveDefiniteError
        If the compressed covariance is not positive definite at this accuracy.
    """
    n_coef = design.shape[1]
    total = 0.0
    for group in group_by_pattern(y, design):
        sites = np.arange(coords.shape[0]) if group.sites is None else group.sites
        size = min(tile_size, sites.size) if tile_size else None
        A, perm = tlr_covariance(coords[sites], kernel, params, distance, accuracy=accuracy, tile_size=size,
                                 ordering=ordering, random_state=random_state)
        factor = tlr.cholesky(A, random_state=random_state, overwrite_a=True)
        fit = gls(factor, group.y[perm], group.design[perm])
        n_g, r_g = group.y.shape
        n_eff = n_g - (n_coef if reml else 0)
        quadratic = float(np.sum(fit.residual * fit.alpha))
        value = quadratic + r_g * (factor.logdet() + n_eff * LOG_2PI)
        if reml and n_coef:
            value += r_g * fit.logdet_ftkf
        total += -0.5 * value
    return total
