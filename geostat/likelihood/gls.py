"""Pieces shared by the dense and the TLR likelihoods: replicate groups and GLS."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve

from geostat.errors import TrendNotIdentifiableError

__all__ = [
    "Group",
    "group_by_pattern",
    "check_groups",
    "GLSFit",
    "centered_design",
    "gls",
    "remove_means",
    "unit_columns",
    "gls_coefficients",
    "trend_estimates",
]


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
    """The replicates (columns of `y`) grouped by their set of observed (not NaN) sites,
    in lexicographic order of the masks; replicates observed nowhere are left out."""
    observed = ~np.isnan(y)
    inverse, first = _pattern_ids(observed)
    groups = []
    for k, column in enumerate(first):
        pattern = observed[:, column]
        columns = np.flatnonzero(inverse == k)
        if not pattern.any():
            continue
        if pattern.all():
            groups.append(Group(None, columns, y[:, columns], design))
        else:
            sites = np.flatnonzero(pattern)
            groups.append(Group(sites, columns, y[np.ix_(sites, columns)], design[sites]))
    return groups


def _pattern_ids(observed):
    """For each column of the boolean `observed`, the index of its pattern among the
    distinct ones sorted lexicographically, and a column holding each pattern.

    Each column is packed into bytes, most significant bit first, so that comparing the
    bytes compares the masks lexicographically (one key per column, not ``n`` fields).
    """
    packed = np.ascontiguousarray(np.packbits(observed, axis=0).T)
    keys = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return np.asarray(inverse).reshape(-1), first


def check_groups(groups, n_coef):
    """Check that every replicate group identifies its trend coefficients: ValueError if
    a replicate has no more observed sites than coefficients, TrendNotIdentifiableError
    if the design is rank deficient on its observed sites."""
    for g in groups:
        n_g = g.y.shape[0]
        if n_g <= n_coef:
            raise ValueError(
                f"y column {int(g.columns[0])} (replicate) has {n_g} observed sites but the "
                f"trend has {n_coef} coefficients; use a simpler trend or drop nearly empty "
                "replicates."
            )
        if n_coef and np.linalg.matrix_rank(unit_columns(centered_design(g.design)[0])) < n_coef:
            raise TrendNotIdentifiableError(
                "the trend design matrix is rank deficient on the observed sites (a constant "
                "or repeated covariate?); drop redundant trend columns."
            )


def centered_design(design):
    """The design with its covariate columns centred, when column 0 is the intercept.

    ``F_c = F T`` with ``T`` unit upper triangular, so ``F_c`` spans the trend space of
    ``F``, ``log det(F^T K^{-1} F)`` is unchanged and ``beta = T beta_c``. Centring
    removes the near-collinearity with the intercept of a covariate whose offset dwarfs
    its variation, which would square into ``F^T K^{-1} F``.

    Returns ``(centered, shift)``: the design and the column means (host), or None when
    the design is left as it is.
    """
    if design.shape[1] < 2 or not bool((design[:, 0] == 1.0).all()):
        return design, None
    shift = design[:, 1:].mean(axis=0)
    return remove_means(design, shift), np.asarray(
        shift.get() if hasattr(shift, "get") else shift, dtype=np.float64
    )


def remove_means(design, shift):
    """Rows of a design in the basis of :func:`centered_design`: `shift` subtracted from
    the covariate columns (a copy), or `design` itself when `shift` is None."""
    if shift is None:
        return design
    centered = design.copy()
    centered[:, 1:] -= shift
    return centered


def unit_columns(design):
    """`design` with its nonzero columns scaled to unit norm (a rank test then sees
    collinearity, not the columns' units)."""
    norms = np.linalg.norm(design, axis=0)
    return design / np.where(norms > 0.0, norms, 1.0)


@dataclass
class GLSFit:
    """GLS quantities of one group of replicates, in the basis ``F_c`` of
    :func:`centered_design` (``kinv_f``, ``ftkf_chol``, :meth:`ftkf_solve`); ``beta`` and
    :meth:`coef_covariance` are in the basis of ``F``."""

    alpha: np.ndarray  # K^{-1} (y - F beta), the REML projection P y
    residual: np.ndarray  # y - F beta
    beta: np.ndarray  # (p, r)
    kinv_f: np.ndarray | None  # K^{-1} F_c
    ftkf_chol: np.ndarray | None  # Cholesky factor of F_c^T K^{-1} F_c
    logdet_ftkf: float  # log det(F^T K^{-1} F) = log det(F_c^T K^{-1} F_c)
    shift: np.ndarray | None = None  # covariate means of F_c (None: F_c = F)

    def ftkf_solve(self, b):
        """Return ``(F_c^T K^{-1} F_c)^{-1} b``."""
        return cho_solve((self.ftkf_chol, True), b, check_finite=False)

    def coef_covariance(self):
        """``(F^T K^{-1} F)^{-1} = T (F_c^T K^{-1} F_c)^{-1} T^T``, the coefficients'
        covariance over the variance."""
        inverse = self.ftkf_solve(np.eye(self.ftkf_chol.shape[0]))
        if self.shift is None:
            return inverse
        T = np.eye(inverse.shape[0])
        T[0, 1:] = -self.shift
        return T @ inverse @ T.T


def gls(chol, y, design):
    """GLS coefficients, residuals and ``alpha = K^{-1} (y - F beta)`` for one group.

    `y` and `design` are host arrays or arrays of the factor's back end; only the
    ``p x p`` and ``p x r`` products cross to the host.
    """
    kinv_y = chol.solve(y)
    if design.shape[1] == 0:
        return GLSFit(kinv_y, y, np.zeros((0, y.shape[1])), None, None, 0.0)
    centered, shift = centered_design(design)
    kinv_f = chol.solve(centered)
    host = chol.backend.to_host
    ftkf_chol, beta_c, logdet_ftkf = gls_coefficients(
        host(centered.T @ kinv_f), host(centered.T @ kinv_y)
    )
    beta_b = chol.backend.like(chol.backend.asarray(beta_c), y)
    beta = beta_c.copy()
    if shift is not None:
        beta[0] -= shift @ beta_c[1:]
    return GLSFit(
        kinv_y - kinv_f @ beta_b, y - centered @ beta_b, beta, kinv_f, ftkf_chol, logdet_ftkf, shift
    )


def gls_coefficients(ftkf, ft_kinv_y):
    """``(ftkf_chol, beta, logdet_ftkf)`` from ``F^T K^{-1} F`` (p, p) and
    ``F^T K^{-1} y`` (p, r): the lower Cholesky factor of the first, the coefficients
    (p, r) and ``log det(F^T K^{-1} F)``; TrendNotIdentifiableError if it is singular."""
    try:
        ftkf_chol = np.linalg.cholesky(ftkf)
    except np.linalg.LinAlgError as exc:
        raise TrendNotIdentifiableError(
            "F^T K^-1 F is singular: the trend is not identifiable with this covariance; "
            "drop redundant trend columns."
        ) from exc
    beta = cho_solve((ftkf_chol, True), ft_kinv_y, check_finite=False)
    return ftkf_chol, beta, 2.0 * float(np.sum(np.log(np.diag(ftkf_chol))))


def trend_estimates(groups, factors, variance, n_replicates, n_coef):
    """``(coef, coef_cov)`` of every replicate, ``(r, p)`` and ``(r, p, p)``, from one
    factorization of ``K = C / variance`` per group."""
    coef = np.zeros((n_replicates, n_coef))
    cov = np.zeros((n_replicates, n_coef, n_coef))
    for g, chol in zip(groups, factors, strict=True):
        fit = gls(chol, g.y, g.design)
        if n_coef:
            coef[g.columns] = fit.beta.T
            cov[g.columns] = variance * fit.coef_covariance()
    return coef, cov
