"""Safeguarded TLR factorizations: what they cost on a well-conditioned covariance, and
what they change on covariances that lose definiteness.

Part 1 (cost), default n = 32,768, 2-D exponential (range 0.1, nugget 1e-2, uniform sites
in the unit square) at accuracy 1e-8, tile 1024, KD-tree order: plain ``tlr.cholesky``
against ``safeguard="compensate"`` (always on, so it changes this positive definite
matrix too) and the on-failure safeguards, one process, after one unmeasured warm-up, in
rotated round robin (drift of a shared machine falls on all alike), the median of
``--repeats`` runs each; time ratio to plain (the baseline), ``||E||_F / ||A||_F`` (the
intended perturbation) and the Gaussian log-likelihood minus that of plain, for a seeded
standard normal ``y`` and for a draw from the model, with plain's own error (plain at
1e-8 minus plain at 1e-9) for scale.

Part 2 (rescue), n = 4,096 sites in the unit square, tile 256, accuracies 1e-4, 1e-6 and
1e-8, no nugget: Gaussian kernel (range 0.1 and 0.3), Matérn 2.5 (range 0.5), and an
exponential (range 0.3) with every site repeated 1e-12 away. For each safeguard: the
result (``ok`` or the failing tile), the shift in tile tolerances, ``||E||_F / ||A||_F``
with ``E = L L^T - A`` against the dense ``A`` (compression included), the intended
perturbation ``factor.perturbation / ||A||_F``, the log-determinant error against a dense
eigenvalue-lifted reference, and the time. The reference: with ``s =
factor.perturbation / sqrt(n)`` (the diagonal change per entry, ``s = shift`` for a
shift), ``logdet_ref = sum_i log max(lambda_i(A), s)``: ``A`` with the eigenvalues below
the perturbation scale lifted to it. The error is ``(logdet(L L^T) - logdet_ref) / n``,
per site.

Part 3 (fits), a near-singular fit: 2,000 uniform sites of the unit square, a Gaussian
field (variance 1, range 0.2, nugget 1e-6 of the variance), fitted by ``SpatialGP(kernel=
"gaussian", nugget=False, method="tlr")`` at accuracy 1e-6 under each ``on_failure``
policy (``"shift"``, ``"compensate"``, ``"step"``), and exactly (dense, ``"shift"``) for
reference: estimates, the reported log-likelihood, factorizations that needed a safeguard,
the relative perturbation at the estimate, and the time.

Run: ``python benchmarks/tlr_safeguards.py`` (all three parts; part 1 at the default
n is the longest); ``--parts 2`` or ``--parts 1`` for one part, ``--n`` for part 1's
size, ``--accuracies`` for part 2's, ``--dim 3`` for the 3-D exponential (range 0.2) in
part 1.

Output: one table per part on standard output; nothing is written to disk.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tlrcore as tlr
from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.solvers import covariance_block, tlr_covariance

COST_SAFEGUARDS = [None, "compensate", "compensate-block", "shift", "modified"]
RESCUE_SAFEGUARDS = [
    None,
    "shift",
    "modified",
    "compensate",
    "compensate-block",
    "compensate+modified",
]


def timed(func, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def log_likelihood(factor, y):
    return -0.5 * (factor.logdet() + float(y @ factor.solve(y)) + y.size * np.log(2 * np.pi))


def cost_part(n, dim, repeats):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, dim))
    range_ = 0.1 if dim == 2 else 0.2
    params = {"variance": 1.0, "range": range_, "nugget": 1e-2}

    def build(accuracy):
        return tlr_covariance(
            X,
            get_kernel("exponential"),
            params,
            get_distance("euclidean"),
            accuracy=accuracy,
            tile_size=1024,
        )[0]

    A = build(1e-8)
    norm = A.frobenius_norm()
    print(f"\nPart 1: {dim}-D exponential, n = {n}, accuracy 1e-8, tile 1024, median of {repeats}")
    # Round robin after one unmeasured warm-up, each round starting one later, so that
    # drift of a shared machine and the first run of a round (often slower) fall on every
    # factorization alike.
    tlr.cholesky(A)
    times = {safeguard: [] for safeguard in COST_SAFEGUARDS}
    factors = {}
    for round_ in range(repeats):
        start = round_ % len(COST_SAFEGUARDS)
        for safeguard in COST_SAFEGUARDS[start:] + COST_SAFEGUARDS[:start]:
            seconds, factors[safeguard] = timed(lambda s=safeguard: tlr.cholesky(A, safeguard=s), 1)
            times[safeguard].append(seconds)
    # Log-likelihoods of two data vectors: white noise, and a draw from the model (what a
    # fit sees near its estimate: there the tail's trace and quadratic terms nearly cancel).
    data = {
        "y ~ N(0, I)": np.random.default_rng(1).standard_normal(n),
        "y ~ N(0, A)": factors[None].multiply_lower(np.random.default_rng(2).standard_normal(n)),
    }
    plain = {name: log_likelihood(factors[None], y) for name, y in data.items()}
    reference = tlr.cholesky(build(1e-9))
    print(
        "plain's own error (plain at 1e-8 minus plain at 1e-9, the estimate geostat reports): "
        + ", ".join(
            f"{name}: {plain[name] - log_likelihood(reference, y):.3e}" for name, y in data.items()
        )
    )
    print(
        f"{'factorization':28s} {'time s':>8s} {'/ plain':>8s} {'|E|/|A|':>9s} "
        + " ".join(f"{'dloglik ' + name:>20s}" for name in data)
    )
    base = statistics.median(times[None])
    for safeguard in COST_SAFEGUARDS:
        seconds, factor = statistics.median(times[safeguard]), factors[safeguard]
        changes = " ".join(
            f"{log_likelihood(factor, y) - plain[name]:20.3e}" for name, y in data.items()
        )
        print(
            f"{'cholesky(' + str(safeguard) + ')':28s} {seconds:8.2f} {seconds / base:8.3f} "
            f"{factor.perturbation / norm:9.1e} {changes}"
        )


def hard_cases(n):
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(n, 2))
    duplicated = np.vstack([X[: n // 2], X[: n // 2] + 1e-12 * rng.standard_normal((n // 2, 2))])
    return {
        "gaussian r0.1": (X, get_kernel("gaussian"), {"variance": 1.0, "range": 0.1}),
        "gaussian r0.3": (X, get_kernel("gaussian"), {"variance": 1.0, "range": 0.3}),
        "matern2.5 r0.5": (
            X,
            get_kernel("matern", smoothness=2.5),
            {"variance": 1.0, "range": 0.5},
        ),
        "exp r0.3 dup 1e-12": (
            duplicated,
            get_kernel("exponential"),
            {"variance": 1.0, "range": 0.3},
        ),
    }


def rescue_part(accuracies, n=4096, tile=256):
    print(
        f"\nPart 2: n = {n}, tile {tile}, no nugget; E = L L^T - A (dense A); "
        "dlogdet per site against the eigenvalue-lifted reference"
    )
    print(
        f"{'matrix':19s} {'acc':>6s} {'safeguard':20s} {'result':>8s} {'shift/tau':>9s} "
        f"{'|E|/|A|':>9s} {'pert/|A|':>9s} {'dlogdet/n':>10s} {'time s':>7s}"
    )
    distance = get_distance("euclidean")
    for name, (X, kernel, params) in hard_cases(n).items():
        eigenvalues = None
        for accuracy in accuracies:
            A, perm = tlr_covariance(X, kernel, params, distance, accuracy=accuracy, tile_size=tile)
            if eigenvalues is None:
                M = np.asarray(
                    covariance_block(X[perm], kernel, params, distance)(np.arange(n), np.arange(n))
                )
                eigenvalues = np.linalg.eigvalsh(M)
                dense_norm = np.linalg.norm(M)
            for safeguard in RESCUE_SAFEGUARDS:
                start = time.perf_counter()
                try:
                    F = tlr.cholesky(A, safeguard=safeguard)
                except tlr.NotPositiveDefiniteError as exc:
                    seconds = time.perf_counter() - start
                    print(
                        f"{name:19s} {accuracy:6.0e} {str(safeguard):20s} "
                        f"{'tile ' + str(exc.tile):>8s} "
                        f"{'-':>9s} {'-':>9s} {'-':>9s} {'-':>10s} {seconds:7.2f}"
                    )
                    continue
                seconds = time.perf_counter() - start
                L = F.to_dense()
                p = np.arange(n) if F.perm is None else F.perm
                error = np.linalg.norm(L @ L.T - M[np.ix_(p, p)]) / dense_norm
                scale = F.perturbation / np.sqrt(n)
                reference = (
                    float(np.sum(np.log(np.maximum(eigenvalues, scale)))) if scale > 0 else np.nan
                )
                print(
                    f"{name:19s} {accuracy:6.0e} {str(safeguard):20s} {'ok':>8s} "
                    f"{F.shift / A.tolerance:9.0f} {error:9.1e} {F.perturbation / dense_norm:9.1e} "
                    f"{(F.logdet() - reference) / n:10.2e} {seconds:7.2f}",
                    flush=True,
                )


def fit_part(n=2000, accuracy=1e-6):
    import warnings

    import geostat as gs

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, 2))
    y = gs.simulate(
        X, {"variance": 1.0, "range": 0.2, "nugget": 1e-6}, kernel="gaussian", random_state=1
    ).ravel()
    print(
        f"\nPart 3: near-singular fit, Gaussian kernel without nugget, n = {n}, "
        f"TLR accuracy {accuracy:g}"
    )
    print(
        f"{'method':7s} {'on_failure':11s} {'variance':>9s} {'range':>8s} {'loglik':>12s} "
        f"{'safeguarded':>11s} {'pert/|K|':>9s} {'time s':>7s}"
    )
    for method, policy in [
        ("exact", "shift"),
        ("tlr", "shift"),
        ("tlr", "compensate"),
        ("tlr", "step"),
    ]:
        model = gs.SpatialGP(
            kernel="gaussian", nugget=False, method=method, accuracy=accuracy, on_failure=policy
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X, y)
        seconds = time.perf_counter() - start
        print(
            f"{method:7s} {policy:11s} {model.params_['variance']:9.4f} "
            f"{model.params_['range']:8.5f} {model.loglik_:12.3f} {model.n_safeguarded_:11d} "
            f"{model.perturbation_:9.1e} {seconds:7.1f}",
            flush=True,
        )


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=32768)
    parser.add_argument("--dim", type=int, default=2, choices=[2, 3])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", type=int, nargs="+", default=[1, 2, 3], choices=[1, 2, 3])
    parser.add_argument("--accuracies", type=float, nargs="+", default=[1e-4, 1e-6, 1e-8])
    args = parser.parse_args(argv)
    if 2 in args.parts:
        rescue_part(args.accuracies)
    if 1 in args.parts:
        cost_part(args.n, args.dim, args.repeats)
    if 3 in args.parts:
        fit_part()


if __name__ == "__main__":
    main()
