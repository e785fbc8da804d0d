"""Would Hutch++ cut the probes of Fisher scoring? The variance of Hutchinson's trace
estimator against that of Hutch++'s residual, on the whitened derivatives of a dense
covariance.

Fisher scoring (:mod:`geostat.optimize.scoring`) estimates ``tr(K^{-1} dK)`` with
Rademacher probes ``z``: ``z^T G z`` with ``G = L^{-1} dK L^{-T}`` has variance ``2
(||G||_F^2 - sum_i G_ii^2)`` per probe. Hutch++ takes ``Q = orth(G S)`` for ``k``
probes ``S`` and the trace of ``G`` on ``range(Q)`` exactly, leaving the variance of
``P G P`` (``P = I - Q Q^T``): it pays when ``G``'s spectrum decays. Printed: both
variances per probe and their ratio (above 1: Hutch++ helps), for the nugget
(``dK = I``) and the range derivative of a Matérn 1.5 covariance (variance 1, range
0.1, nugget 0.05, uniform sites in the unit square: the simulated field of
``benchmarks/peers.py``).

Measured (2 cores, 2026-11-24, ``python benchmarks/hutchpp_variance.py --n 3000``):
ratios 0.90, 0.82, 0.71 (nugget) and 1.01, 1.03, 1.07 (range) for ``k`` = 32, 64, 128:
the spectra are flat (the nugget dominates), so Hutch++ was not built.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.spatial.distance import cdist


def offdiagonal_variance(G):
    """Variance per Rademacher probe of ``z^T G z`` for symmetric ``G``."""
    return 2.0 * (np.sum(G * G) - np.sum(np.diag(G) ** 2))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(args.n, 2))
    range_ = 0.1
    s = np.sqrt(3.0) * cdist(X, X) / range_
    L = cholesky((1.0 + s) * np.exp(-s) + 0.05 * np.eye(args.n), lower=True)
    for name, dK in [("nugget", np.eye(args.n)), ("range", s * s * np.exp(-s) / range_)]:
        G = solve_triangular(L, solve_triangular(L, dK, lower=True).T, lower=True).T
        G = 0.5 * (G + G.T)
        hutchinson = offdiagonal_variance(G)
        for k in (32, 64, 128):
            Q = np.linalg.qr(G @ rng.choice([-1.0, 1.0], size=(args.n, k)))[0]
            P = np.eye(args.n) - Q @ Q.T
            residual = offdiagonal_variance(P @ G @ P)
            print(
                f"{name:7s} k={k:4d}  Hutchinson {hutchinson:.4g}  Hutch++ residual {residual:.4g}  "
                f"ratio {hutchinson / residual:.3g}"
            )


if __name__ == "__main__":
    main()
