"""Safeguarded TLR factorizations: their cost on a well-conditioned covariance, and what
they change on covariances that lose definiteness.

Part 1 (cost), default n = 32,768, 2-D exponential (range 0.1, nugget 1e-2, uniform sites
in the unit square) at accuracy 1e-8, tile 1024, KD-tree order: plain ``tlr.cholesky``
against each safeguard and ``tlr.ldl``, one process, the median of ``--repeats`` runs each;
time ratio to plain, mean off-diagonal rank of the factor, ``||E||_F / ||A||_F``. The
safeguards act only when a tile fails, so on this matrix they should cost nothing;
``"pivot"`` changes the algorithm (eager diagonal updates, no lookahead) and the tile order.

Part 2 (rescue), n = 4,096 at accuracy 1e-4, tile 512: a Gaussian kernel (range 0.3),
Matérn 2.5 (range 0.5), and an exponential (range 0.3) with every site repeated 1e-12
away; all without nugget, where plain TLR Cholesky fails. For each safeguard: success,
the shift in tile tolerances, ``||E||_F / ||A_tlr||_F`` and time.

Run: ``PYTHONPATH=. python benchmarks/tlr_safeguards.py`` (about 5 minutes on 2 cores);
``--dim 3`` for the 3-D exponential (range 0.2), ``--n`` to change part 1's size,
``--parts 2`` for part 2 only.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tlrcore as tlr
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.solvers import tlr_covariance

SAFEGUARDS = [None, "shift", "schur", "modified", "pivot", "schur+modified+shift"]


def covariance(X, kernel, params, accuracy, tile):
    A, _ = tlr_covariance(X, kernel, params, get_distance("euclidean"), accuracy=accuracy, tile_size=tile)
    return A


def timed(func, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def mean_rank(factor):
    ranks = factor.ranks
    off = ranks[np.tril_indices(ranks.shape[0], -1)]
    return float(off.mean()) if off.size else 0.0


def cost_part(n, dim, repeats):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, dim))
    range_ = 0.1 if dim == 2 else 0.2
    A = covariance(X, get_kernel("exponential"), {"variance": 1.0, "range": range_, "nugget": 1e-2}, 1e-8, 1024)
    norm = A.frobenius_norm()
    print(f"\nPart 1: {dim}-D exponential, n = {n}, accuracy 1e-8, tile 1024, median of {repeats}")
    print(f"{'factorization':26s} {'time s':>8s} {'/ plain':>8s} {'mean rank':>10s} {'|E|/|A|':>9s}")
    base = None
    for safeguard in [*SAFEGUARDS, "ldl"]:
        if safeguard == "ldl":
            seconds, factor = timed(lambda: tlr.ldl(A), repeats)
            perturbation = 0.0
        else:
            seconds, factor = timed(lambda s=safeguard: tlr.cholesky(A, safeguard=s), repeats)
            perturbation = factor.perturbation / norm
        base = base or seconds
        label = "tlr.ldl (bk)" if safeguard == "ldl" else f"cholesky({safeguard})"
        print(f"{label:26s} {seconds:8.2f} {seconds / base:8.2f} {mean_rank(factor):10.1f} {perturbation:9.1e}")


def hard_matrices(n):
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(n, 2))
    duplicated = np.vstack([X[: n // 2], X[: n // 2] + 1e-12 * rng.standard_normal((n // 2, 2))])
    return {
        "gaussian r0.3": (X, get_kernel("gaussian"), {"variance": 1.0, "range": 0.3}),
        "matern2.5 r0.5": (X, get_kernel("matern", smoothness=2.5), {"variance": 1.0, "range": 0.5}),
        "exp r0.3 duplicated": (duplicated, get_kernel("exponential"), {"variance": 1.0, "range": 0.3}),
    }


def rescue_part(n=4096, accuracy=1e-4, tile=512):
    print(f"\nPart 2: n = {n}, accuracy {accuracy:g}, tile {tile}, no nugget")
    print(f"{'matrix':22s} {'safeguard':22s} {'result':>8s} {'shift/tau':>9s} {'|E|/|A|':>9s} {'time s':>7s}")
    for name, (X, kernel, params) in hard_matrices(n).items():
        A = covariance(X, kernel, params, accuracy, tile)
        norm = A.frobenius_norm()
        for safeguard in SAFEGUARDS:
            start = time.perf_counter()
            try:
                F = tlr.cholesky(A, safeguard=safeguard)
                result, shift, relative = "ok", f"{F.shift / A.tolerance:9.0f}", f"{F.perturbation / norm:9.1e}"
            except tlr.NotPositiveDefiniteError as exc:
                result, shift, relative = f"tile {exc.tile}", "-", "-"
            seconds = time.perf_counter() - start
            print(f"{name:22s} {str(safeguard):22s} {result:>8s} {shift:>9s} {relative:>9s} {seconds:7.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--dim", type=int, default=2, choices=[2, 3])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", type=int, nargs="+", default=[1, 2], choices=[1, 2])
    args = parser.parse_args(argv)
    if 1 in args.parts:
        cost_part(args.n, args.dim, args.repeats)
    if 2 in args.parts:
        rescue_part()


if __name__ == "__main__":
    main()
