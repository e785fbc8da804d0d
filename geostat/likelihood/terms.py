r"""The scalars of one likelihood evaluation, and the split of natural parameters.

Model: each replicate ``y_j`` observed on sites ``S_j`` is Gaussian with mean
``F_j beta_j`` and covariance ``C = variance * R(theta) + nugget * I + V`` restricted to
``S_j``, where ``R`` is the kernel correlation and ``V = diag(noise)`` holds known
measurement-error variances of the sites (``V = 0`` unless given). With
``eta = nugget / variance``, the noise ratio ``nu = 1 / variance`` and
``K = R + eta I + nu V`` (so ``C = variance * K``) the full log-likelihood is

.. math::

    \ell = -\tfrac12 \bigl[Q / \sigma^2 + N \log(2\pi\sigma^2) + \log\det K\bigr],
    \qquad Q = \sum_j (y_j - F_j\hat\beta_j)^T K_j^{-1} (y_j - F_j\hat\beta_j),

with ``beta`` profiled by generalized least squares and ``N`` the number of observed
values. REML replaces ``N`` by ``N - r p`` and adds ``log det(F^T K^{-1} F)`` for each
replicate (the constant ``log det(F^T F)`` is omitted, as in most software). Profiling
the variance gives ``sigma^2 = Q / N`` (REML: ``Q / (N - r p)``) when there is no known
noise; with it, ``K`` depends on the variance through ``nu`` and the variance is a
coordinate of the search like the others.

Every gradient is assembled from two kinds of scalars, computed once per evaluation:
``quad(A) = sum_j alpha_j^T A alpha_j`` with ``alpha_j = P_j y_j`` and
``trace(A) = sum_j tr(P_j A)``, where ``P = K^{-1}`` (ML) or the REML projection
``K^{-1} - K^{-1} F (F^T K^{-1} F)^{-1} F^T K^{-1}``. The derivatives of ``C`` are
``dC/dvariance = R = K - eta I - nu V``, ``dC/dnugget = I`` and ``variance dR`` for the
correlation parameters, so the gradient takes ``quad`` and ``trace`` of ``dR``, of the
identity (``"eye"``) and, with known noise, of ``V`` (``"noise"``).

References
----------
.. [1] Mardia, K. V. and Marshall, R. J. (1984). Maximum likelihood estimation of models
   for residual covariance in spatial regression. Biometrika 71(1), 135-146.
   doi:10.1093/biomet/71.1.135
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["LOG_2PI", "Terms", "resolve_noise_ratio", "split_params"]

LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass
class Terms:
    """Scalars of one likelihood evaluation at ``K = R + eta I + nu V`` (see module
    docstring); `noise_ratio` is the ``nu`` of ``K``, 0.0 without known noise."""

    n_obs: int
    n_eff: int
    logdet: float
    logdet_trend: float
    quadratic: float
    quad: dict = field(default_factory=dict)
    trace: dict = field(default_factory=dict)
    noise_ratio: float = 0.0

    def profiled_value(self):
        """Log-likelihood with the variance profiled out (no known noise: ``K`` must not
        depend on the variance)."""
        scale = self.quadratic / self.n_eff
        return -0.5 * (
            self.n_eff * (LOG_2PI + np.log(scale) + 1.0) + self.logdet + self.logdet_trend
        )

    def profiled_gradient(self, names):
        """Derivatives of :meth:`profiled_value` along ``dK`` for each name.

        ``"eye"`` stands for the nugget ratio ``eta`` (``dK/deta = I``).
        """
        scale = self.quadratic / self.n_eff
        return {k: 0.5 * self.quad[k] / scale - 0.5 * self.trace[k] for k in names}

    def full_value(self, variance):
        """Log-likelihood at a given variance (``K`` already holds ``eta`` and, with known
        noise, ``nu = 1 / variance``)."""
        return -0.5 * (
            self.quadratic / variance
            + self.n_eff * (LOG_2PI + np.log(variance))
            + self.logdet
            + self.logdet_trend
        )

    def full_gradient(self, variance, eta, names):
        """Derivatives of :meth:`full_value` with respect to natural parameters.

        ``"variance"`` (``dC = R = K - eta I - nu V``) and ``"nugget"`` (``dC = I``) are
        handled here; every other name is a correlation parameter with
        ``dC = variance * dR``.
        """
        s = variance
        nu = self.noise_ratio
        out = {}
        for k in names:
            if k == "variance":
                quad_r = (
                    self.quadratic
                    - eta * self.quad["eye"]
                    - (nu * self.quad["noise"] if nu else 0.0)
                )
                trace_r = (
                    self.n_eff - eta * self.trace["eye"] - (nu * self.trace["noise"] if nu else 0.0)
                )
                out[k] = 0.5 * quad_r / s**2 - 0.5 * trace_r / s
            elif k == "nugget":
                out[k] = 0.5 * self.quad["eye"] / s**2 - 0.5 * self.trace["eye"] / s
            else:
                out[k] = 0.5 * self.quad[k] / s - 0.5 * self.trace[k]
        return out


def split_params(params, kernel):
    """Split natural parameters into correlation parameters and the nugget ratio."""
    theta = {"range": float(params["range"])}
    for name in kernel.shape_names:
        if name in params:
            theta[name] = float(params[name])
    variance = float(params["variance"])
    return theta, float(params.get("nugget", 0.0)) / variance


def resolve_noise_ratio(noise, noise_ratio):
    """The noise ratio ``nu`` of ``K = R + eta I + nu V``: 0.0 without known `noise`,
    else `noise_ratio` (``1 / variance``), which is then required (ValueError): ``K``
    depends on the variance, which cannot be profiled."""
    if noise is None:
        return 0.0
    if noise_ratio is None:
        raise ValueError(
            "noise_ratio must be given (1 / variance): with known noise variances "
            "K = R + eta I + noise_ratio diag(noise) depends on the variance, so the variance "
            "cannot be profiled; use a ParameterSpace with known_noise=True, or pass "
            "noise_ratio=1 / variance."
        )
    return float(noise_ratio)
