"""Cross-validation in closed form against one likelihood evaluation, side by side.

For each case: a model fitted with its parameters fixed at the truth (2-D exponential,
range 0.1, nugget 0.01, constant mean, data drawn from the model, ``n`` uniform sites),
then in the same run the time of ``cross_validate`` (leave-one-out, or ``--folds``
folds) and of the baseline, one log-likelihood evaluation at those parameters, medians of
``--repeats``, and their ratio: cross-validation in one-evaluation equivalents. The
closed form is
checked against brute force on ``--check`` held-out observations (kriging each from the
other sites with a dense factor of their covariance): the largest relative difference of
the predictions and of the standard deviations.

With ``--solves`` (TLR), the same cross-validation is timed again with the entries of
the inverse covariance from forward solves through the factor and every fold factored
densely (the way before the TLR inverse factor), and the largest differences of the two
are printed: relative for the standard deviations, in standard deviations for the means.

``--case NAME``: a data set of ``benchmarks/peers.py`` instead (real data with small
nuggets among them), its model fitted with the defaults; with ``--solves --exact``,
both paths are also compared with the exact model at the fitted parameters.

Run: ``python benchmarks/cross_validation.py`` (exact leave-one-out at 4,096 sites), or
``python benchmarks/cross_validation.py --n 65536 --method tlr --folds 10``, or
``python benchmarks/cross_validation.py --n 16384 --method tlr --folds 10 --solves``, or
``python benchmarks/cross_validation.py --case co2true8k --folds 10 --solves --exact``.

Output: a few lines on standard output (times, their ratio, the check against brute
force, the scores, the process's peak resident memory); nothing is written to disk.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import time

import numpy as np
import peers
from scipy.linalg import cho_factor, cho_solve
from scipy.spatial.distance import cdist

import geostat as gs
from geostat.validation import closed_form

PARAMS = {"variance": 1.0, "range": 0.1, "nugget": 0.01}


def model_data(n, seed=0):
    """Sites and a draw of the model, through a TLR factor at accuracy 1e-10."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    y = gs.simulate(X, PARAMS, kernel="exponential", random_state=seed)
    return X, np.asarray(y, dtype=float).ravel() + 2.0


def timed(function, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def brute_force(X, y, held, params):
    """Universal kriging of the observations `held` from all the others (dense)."""
    rest = np.setdiff1d(np.arange(len(y)), held)
    C = params["variance"] * np.exp(-cdist(X[rest], X[rest]) / params["range"]) + params[
        "nugget"
    ] * np.eye(rest.size)
    factor = cho_factor(C)
    F = np.ones((rest.size, 1))
    cinv_f, cinv_y = cho_solve(factor, F), cho_solve(factor, y[rest])
    beta = float((F.T @ cinv_y)[0] / (F.T @ cinv_f)[0, 0])
    c0 = params["variance"] * np.exp(-cdist(X[held], X[rest]) / params["range"])
    mean = beta + c0 @ cho_solve(factor, y[rest] - F[:, 0] * beta)
    u = 1.0 - c0 @ cinv_f[:, 0]
    var = (
        params["variance"]
        + params["nugget"]
        - np.einsum("ij,ji->i", c0, cho_solve(factor, c0.T))
        + u**2 / (F.T @ cinv_f)[0, 0]
    )
    return mean, np.sqrt(var)


def real_data_model(case):
    """The data of a :mod:`peers` case and its model fitted with the defaults (the case's
    Matérn smoothness): ``(model, X, y)``."""
    X, y = peers.CASES[case]()
    model = gs.SpatialGP(smoothness=peers.SMOOTHNESS.get(case, 1.5), distance="euclidean")
    return model.fit(X, y), X, y


def against_exact(model, X, y, cv, table, reference):
    """The largest differences of the two TLR paths from the exact model at `model`'s
    parameters (its nugget and covariance parameters fixed there)."""
    p = model.params_
    fixed = {k: v for k, v in p.items() if k not in ("nugget", "smoothness")}
    exact = gs.SpatialGP(
        smoothness=p.get("smoothness", 1.5),
        distance="euclidean",
        method="exact",
        nugget=p["nugget"],
        fixed=fixed,
    ).fit(X, y)
    truth = exact.cross_validate(cv=cv)
    for name, result in (("inverse factor", table), ("solves", reference)):
        std = np.max(np.abs(result["std"] / truth["std"] - 1.0))
        mean = np.max(np.abs(result["mean"] - truth["mean"]) / truth["std"])
        print(f"  {name} against exact: std {std:.1e} relative, mean {mean:.1e} std. dev.")


def peak_gib():
    """The process's peak resident memory so far, GiB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


@contextlib.contextmanager
def solves_only():
    """Cross-validation by forward solves through the factor and dense folds."""
    saved = closed_form.INVERSE_FACTOR_BYTES, closed_form.TLR_FOLD_SITES
    closed_form.INVERSE_FACTOR_BYTES = closed_form.TLR_FOLD_SITES = float("inf")
    try:
        yield
    finally:
        closed_form.INVERSE_FACTOR_BYTES, closed_form.TLR_FOLD_SITES = saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--method", choices=("exact", "tlr"), default="exact")
    parser.add_argument("--folds", type=int, default=0, help="K-fold (0: leave-one-out)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", type=int, default=20)
    parser.add_argument(
        "--solves", action="store_true", help="also time the forward solves and dense folds"
    )
    parser.add_argument(
        "--case", choices=sorted(peers.CASES), help="a data set of benchmarks/peers.py instead"
    )
    parser.add_argument(
        "--exact", action="store_true", help="with --case: both paths against the exact model"
    )
    args = parser.parse_args()
    if args.case:
        model, X, y = real_data_model(args.case)
        args.n, args.method = len(y), model.method_
    else:
        X, y = model_data(args.n)
        fixed = {"range": PARAMS["range"], "variance": PARAMS["variance"]}
        model = gs.SpatialGP(
            kernel="exponential",
            method=args.method,
            nugget=PARAMS["nugget"],
            fixed=fixed,
            accuracy=1e-8,
        ).fit(X, y)
    likelihood = model._likelihood

    def evaluate():
        # A TLR likelihood keeps the factor of its last parameters: release it.
        if hasattr(likelihood, "release_factors"):
            likelihood.release_factors()
        return model.log_likelihood(model.params_)

    evaluation, _ = timed(evaluate, args.repeats)
    peak_before = peak_gib()
    cv = "loo" if args.folds == 0 else args.folds
    model._kriging.groups  # noqa: B018  (the factor at the estimates, as after a fit)
    validation, table = timed(lambda: model.cross_validate(cv=cv), args.repeats)
    print(
        f"n = {args.n:,}, {args.method}, {'leave-one-out' if cv == 'loo' else f'{cv}-fold'}, "
        f"medians of {args.repeats}"
    )
    print(f"  one log-likelihood evaluation  {evaluation:8.2f} s")
    print(
        f"  cross-validation               {validation:8.2f} s  "
        f"= {validation / evaluation:.1f} evaluations"
    )
    if args.solves:
        with solves_only():
            by_solves, reference = timed(lambda: model.cross_validate(cv=cv), args.repeats)
        std_difference = np.max(np.abs(table["std"] / reference["std"] - 1.0))
        mean_difference = np.max(np.abs(table["mean"] - reference["mean"]) / reference["std"])
        print(
            f"  by solves and dense folds      {by_solves:8.2f} s  = "
            f"{by_solves / evaluation:.1f} evaluations; largest difference: std "
            f"{std_difference:.1e} relative, mean {mean_difference:.1e} standard deviations"
        )
        if args.exact:
            against_exact(model, X, y, cv, table, reference)
    if cv == "loo" and args.check and not args.case:
        held = np.sort(np.random.default_rng(1).choice(args.n, args.check, replace=False))
        rows = table.set_index("site").loc[held]
        worst_mean = worst_std = 0.0
        for site in held:
            mean, std = brute_force(X, y, np.array([site]), model.params_)
            worst_mean = max(worst_mean, abs(rows.loc[site, "mean"] - mean[0]) / abs(mean[0]))
            worst_std = max(worst_std, abs(rows.loc[site, "std"] - std[0]) / std[0])
        print(
            f"  against brute force at {args.check} sites: mean {worst_mean:.1e}, "
            f"std {worst_std:.1e} (largest relative difference)"
        )
    print("  scores:", {name: round(value, 4) for name, value in table.attrs["scores"].items()})
    print(
        f"  peak resident memory of the process: {peak_before:.2f} GiB before cross-validation, "
        f"{peak_gib():.2f} GiB at the end"
    )


if __name__ == "__main__":
    main()
