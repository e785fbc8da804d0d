"""Factorizations that survive lost definiteness: time and perturbation, side by side.

Dense section: for each n and matrix, the median of 3 timings of SciPy Cholesky (the
baseline; it fails on anything not positive definite), LDLᵀ with Bunch–Kaufman (LAPACK
``dsytrf``) and with rook pivoting, and the modified Cholesky factorizations GMW and
Cheng–Higham (Bunch–Kaufman and rook); for the modified ones, the perturbation
``||E||_F / ||M||_F`` next to the smallest possible one, the distance from ``M`` to the
positive semidefinite cone ``||min(lambda, 0)||_2 / ||M||_F``.

Matrices: ``Q diag(lambda) Q^T`` with Haar ``Q``, ``|lambda|`` log-uniform in [0.1, 10] and
a fraction 0, 1 %, 10 % or 50 % of the signs negative; a near-singular PSD covariance, a
Gaussian kernel (range 0.1) on uniform sites of the unit square with 5 % of the sites
repeated 1e-12 away; and that covariance without duplicates plus symmetric noise of relative
size 1e-8, like a covariance compressed to that accuracy, which lost definiteness.

The TLR factorizations (plain vs safeguarded vs pivoted vs LDLᵀ, time and ranks on a
2-D or 3-D covariance at n = 32K) are in ``benchmarks/tlr_safeguards.py``.

Everything runs with BLAS on one thread (the tlrcore.dense kernels pin it themselves).

Run: ``python benchmarks/factorizations.py`` (n = 1000, 2000, 4000) or e.g.
``python benchmarks/factorizations.py --n 1000 --matrices neg10%``.

Output: a Markdown table on standard output (progress lines on standard error); nothing
is written to disk.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist
from threadpoolctl import threadpool_limits

import tlrcore as tlr


def with_negative_fraction(n, fraction, seed=0):
    """``(M, lambda)`` with ``M = Q diag(lambda) Q^T`` and ``round(fraction n)`` negative
    eigenvalues."""
    rng = np.random.default_rng(seed)
    Q, R = np.linalg.qr(rng.normal(size=(n, n)))
    Q *= np.sign(np.diagonal(R))  # Haar distributed
    lam = np.exp(rng.uniform(np.log(0.1), np.log(10.0), n))
    lam[: round(fraction * n)] *= -1
    M = (Q * lam) @ Q.T
    return (M + M.T) / 2, lam


def gaussian_covariance(n, duplicated=0.0, seed=0):
    """Gaussian-kernel covariance (range 0.1) on uniform sites of the unit square.

    The last ``duplicated * n`` sites repeat earlier ones 1e-12 away.
    """
    rng = np.random.default_rng(seed)
    copies = round(duplicated * n)
    X = rng.uniform(size=(n - copies, 2))
    X = np.vstack([X, X[:copies] + 1e-12])
    return np.exp(-((cdist(X, X) / 0.1) ** 2))


def near_singular(n):
    """``(M, lambda)``: Gaussian covariance with 5 % duplicated sites (PSD, numerically
    singular)."""
    M = gaussian_covariance(n, duplicated=0.05)
    return M, np.linalg.eigvalsh(M)


def lost_definiteness(n, seed=1):
    """``(M, lambda)``: Gaussian covariance plus symmetric noise of relative size 1e-8.

    Like a covariance compressed to accuracy 1e-8: its numerically zero eigenvalues become
    small negative ones.
    """
    M = gaussian_covariance(n)
    N = np.random.default_rng(seed).normal(size=(n, n))
    N += N.T
    M += 1e-8 * np.linalg.norm(M) / np.linalg.norm(N) * N
    return M, np.linalg.eigvalsh(M)


MATRICES = {
    "spd": lambda n: with_negative_fraction(n, 0.0),
    "neg1%": lambda n: with_negative_fraction(n, 0.01),
    "neg10%": lambda n: with_negative_fraction(n, 0.10),
    "neg50%": lambda n: with_negative_fraction(n, 0.50),
    "near-singular": near_singular,
    "lost-definiteness": lost_definiteness,
}


def _cholesky(M):
    scipy.linalg.cholesky(M, lower=True, check_finite=False)


def _modified(method, pivoting):
    return lambda M: tlr.dense.modified_cholesky(M, method, pivoting).E_norm


FACTORIZATIONS = {
    "scipy cholesky": _cholesky,
    "ldl bk": lambda M: tlr.dense.ldl(M, "bk"),
    "ldl rook": lambda M: tlr.dense.ldl(M, "rook"),
    "gmw": _modified("gmw", "bk"),
    "cheng-higham bk": _modified("cheng-higham", "bk"),
    "cheng-higham rook": _modified("cheng-higham", "rook"),
}


def timed(func, M, repeats):
    """Median wall time of `repeats` calls and the last call's result (``"fails"`` on
    LinAlgError)."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        try:
            result = func(M)
        except np.linalg.LinAlgError:
            return None, "fails"
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def dense_section(ns, matrices, repeats=3):
    """Rows ``(n, matrix, distance to PSD, factorization, seconds, ||E||_F / ||M||_F)``."""
    rows = []
    for n in ns:
        for name in matrices:
            M, lam = MATRICES[name](n)
            norm = np.linalg.norm(M)
            distance = np.linalg.norm(np.minimum(lam, 0.0)) / norm
            for label, func in FACTORIZATIONS.items():
                seconds, result = timed(func, M, repeats)
                perturbation = result / norm if isinstance(result, float) else result
                rows.append((n, name, distance, label, seconds, perturbation))
                print(f"done n={n} {name} {label}", file=sys.stderr, flush=True)
    return rows


#: Sections of the table. The TLR factorizations (plain, safeguarded, pivoted, LDLᵀ) at
#: n = 32K are compared in benchmarks/tlr_safeguards.py, which needs its own matrices.
SECTIONS = {"dense": dense_section}


def markdown(rows):
    lines = [
        "| n | matrix | dist(M, PSD) / ‖M‖_F | factorization | time [s] | ‖E‖_F / ‖M‖_F |",
        "|---:|---|---:|---|---:|---:|",
    ]
    for n, name, distance, label, seconds, perturbation in rows:
        time_cell = "—" if seconds is None else f"{seconds:.3f}"
        if isinstance(perturbation, float):
            pert_cell = "0" if perturbation == 0.0 else f"{perturbation:.2e}"
        else:
            pert_cell = perturbation if isinstance(perturbation, str) else "—"
        lines.append(f"| {n} | {name} | {distance:.2e} | {label} | {time_cell} | {pert_cell} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--matrices", nargs="+", default=list(MATRICES), choices=list(MATRICES))
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    with threadpool_limits(1, "blas"):
        for section in args.sections:
            rows += SECTIONS[section](args.n, args.matrices, args.repeats)
    print()
    print(markdown(rows))
    print(
        "\nMedian of",
        args.repeats,
        "runs, BLAS on one thread; '—': not applicable; 'fails': LinAlgError.",
    )


if __name__ == "__main__":
    main()
