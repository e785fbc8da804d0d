"""Pieces shared by the dense and the TLR likelihoods: replicate groups and GLS."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve

__all__ = ["LOG_2PI", "TrendNotIdentifiableError", "Group", "group_by_pattern", "GLSFit", "gls", "block"]

LOG_2PI = float(np.log(2.0 * np.pi))


class TrendNotIdentifiableError(ValueError):
    """The trend design matrix is rank deficient on the observed sites."""


@dataclass
class Group:
    """Replicates that share the same set of observed sites."""

    sites: np.ndarray  # indices of observed sites, or None for all sites
    columns: np.ndarray  # replicate indices
    y: np.ndarray  # (n_g, r_g)
    design: np.ndarray  # (n_g, p)

    @property
    def r(self):
        return self.y.shape[1]


def group_by_pattern(y, design):
    observed = ~np.isnan(y)
    patterns, inverse = np.unique(observed.T, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    groups = []
    for k, pattern in enumerate(patterns):
        columns = np.flatnonzero(inverse == k)
        if not pattern.any():
            continue
        if pattern.all():
            groups.append(Group(None, columns, y[:, columns], design))
        else:
            sites = np.flatnonzero(pattern)
            groups.append(Group(sites, columns, y[np.ix_(sites, columns)], design[sites]))
    return groups



@dataclass
class GLSFit:
    """GLS quantities of one group of replicates."""

    alpha: np.ndarray  # K^{-1} (y - F beta), the REML projection P y
    residual: np.ndarray  # y - F beta
    beta: np.ndarray  # (p, r)
    kinv_f: np.ndarray | None  # K^{-1} F
    ftkf_chol: np.ndarray | None  # Cholesky factor of F^T K^{-1} F
    logdet_ftkf: float

    def ftkf_solve(self, b):
        """Return ``(F^T K^{-1} F)^{-1} b``."""
        return cho_solve((self.ftkf_chol, True), b, check_finite=False)


def gls(chol, y, design):
    """GLS coefficients, residuals and ``alpha = K^{-1} (y - F beta)`` for one group."""
    kinv_y = chol.solve(y)
    if design.shape[1] == 0:
        return GLSFit(kinv_y, y, np.zeros((0, y.shape[1])), None, None, 0.0)
    kinv_f = chol.solve(design)
    try:
        ftkf_chol = np.linalg.cholesky(design.T @ kinv_f)
    except np.linalg.LinAlgError as exc:
        raise TrendNotIdentifiableError(
            "F^T K^-1 F is singular: the trend is not identifiable with this covariance; "
            "drop redundant trend columns."
        ) from exc
    beta = cho_solve((ftkf_chol, True), design.T @ kinv_y, check_finite=False)
    logdet_ftkf = 2.0 * float(np.sum(np.log(np.diag(ftkf_chol))))
    return GLSFit(kinv_y - kinv_f @ beta, y - design @ beta, beta, kinv_f, ftkf_chol, logdet_ftkf)


def block(matrix, sites, copy):
    """Rows and columns `sites` of `matrix` (all when None), copied if asked or needed."""
    if sites is None:
        return matrix.copy() if copy else matrix
    return matrix[np.ix_(sites, sites)]
