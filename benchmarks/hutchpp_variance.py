"""Variance of Hutchinson's trace estimator against Hutch++'s, for Fisher scoring's traces.

Would Hutch++ cut the probes of Fisher scoring? This compares the variance of
Hutchinson's trace estimator (the baseline; M. F. Hutchinson, "A stochastic estimator of
the trace of the influence matrix for Laplacian smoothing splines", Communications in
Statistics - Simulation and Computation, 1989) with that of Hutch++'s residual (R. A.
Meyer, C. Musco, C. Musco and D. P. Woodruff, "Hutch++: Optimal stochastic trace
estimation", SOSA 2021), on the whitened derivatives of a dense covariance.

Fisher scoring (:mod:`geostat.optimize.scoring`) estimates ``tr(K^{-1} dK)`` with
Rademacher probes ``z``: ``z^T G z`` with ``G = L^{-1} dK L^{-T}`` has variance ``2
(||G||_F^2 - sum_i G_ii^2)`` per probe. Hutch++ takes ``Q = orth(G S)`` for ``k``
probes ``S`` and the trace of ``G`` on ``range(Q)`` exactly, leaving the variance of
``P G P`` (``P = I - Q Q^T``): it pays when ``G``'s spectrum decays. Printed: both
variances per probe and their ratio (above 1: Hutch++ helps), for ``k`` = 32, 64 and
128, for the nugget (``dK = I``) and the range derivative of a Matérn 1.5 covariance
(variance 1, range 0.1, nugget 0.05, uniform sites in the unit square: the simulated
field of ``benchmarks/peers.py``).

Run: ``python benchmarks/hutchpp_variance.py`` (n = 3,000) or e.g. ``--n 1000``.

Output: one line per derivative and ``k`` on standard output; nothing is written to disk.
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
                f"{name:7s} k={k:4d}  Hutchinson {hutchinson:.4g}  "
                f"Hutch++ residual {residual:.4g}  ratio {hutchinson / residual:.3g}"
            )


if __name__ == "__main__":
    main()
