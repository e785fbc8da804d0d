"""A whole TLR maximum-likelihood fit in evaluation equivalents, by each local search.

One full maximum-likelihood fit through TLR factors on a simulated field, by Fisher
scoring and by the derivative-free search; the baseline is one TLR log-likelihood
evaluation. A Matern 1.5 field with a nugget (variance 1, range 0.1, nugget 0.05, mean
2) is simulated at n uniform sites of the unit square (through a TLR factor at accuracy
1e-10, ``--simulation-accuracy``, independent of the fit's) and fitted with
``SpatialGP(method="tlr")``, smoothness held at 1.5, by each local search asked for
(``maximize_likelihood``'s ``search``): ``scoring`` (Fisher scoring with probe traces)
and/or ``polish`` (the derivative-free search alone). For each it prints the fit time over
the time of one TLR log-likelihood evaluation at accuracy 1e-8 on the same likelihood
object after the fit (median of 3, ``--baseline-repeats``, each a new build: the cost of
a fit in evaluation equivalents), the full-data evaluations (every factorization, the
final accuracy check included), the probes and their expected Monte Carlo loss, the
reported log-likelihood and its estimated error, and the estimates with standard errors.
With both searches it prints the difference of their optima in log-likelihood (both
evaluated on the scoring fit's likelihood at a hundredth of the finer of the two fits'
accuracies). Last, the time to krige ``--predict`` new sites through the first fit.

``--data co2`` fits real data instead: ``--n`` cells of the bundled co2 grid drawn at
random (lon/lat, chordal distance in km), same model; the other cells are the new sites.

Run: ``python benchmarks/fit_tlr.py`` (n = 65,536, accuracy "auto", both searches) or
e.g. ``python benchmarks/fit_tlr.py --n 16384 --search scoring`` or
``python benchmarks/fit_tlr.py --data co2 --n 8192``; ``--device gpu`` fits on CuPy (the
field is simulated on the CPU either way).

Output: lines and Markdown tables on standard output (``--log``: every evaluation logged
to standard error); nothing is written to disk.
"""

from __future__ import annotations

import argparse
import functools
import logging
import resource
import statistics
import time
from unittest import mock

import numpy as np

import geostat as gs
import geostat.estimator as estimator_module
from geostat.optimize import maximize_likelihood

TRUTH = {"variance": 1.0, "range": 0.1, "smoothness": 1.5, "nugget": 0.05}
MEAN = 2.0


#: The accuracy of the one TLR evaluation a fit's time is measured in.
EQUIVALENT_ACCURACY = 1e-8


def evaluation_time(est, repeats=3):
    """Median time of one TLR log-likelihood at the estimate at :data:`EQUIVALENT_ACCURACY`
    over `repeats` (a new build and factorization each time)."""
    likelihood = est._solvers.likelihood
    params = est._solvers.kriging.params
    times = []
    for _ in range(repeats):
        likelihood.release_factors()
        start = time.perf_counter()
        likelihood.log_likelihood(params, accuracy=EQUIVALENT_ACCURACY)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fit(X, y, args, how):
    searching = functools.partial(maximize_likelihood, search=how)
    with mock.patch.object(estimator_module, "maximize_likelihood", searching):
        start = time.perf_counter()
        est = gs.SpatialGP(
            kernel="matern",
            smoothness=1.5,
            method="tlr",
            accuracy=args.accuracy,
            device=args.device,
            random_state=args.seed,
            verbose=2 if args.log else None,
        ).fit(X, y)
        elapsed = time.perf_counter() - start
    one = evaluation_time(est, args.baseline_repeats)
    r = est.result_
    print(
        f"[{how}] fit {elapsed:.1f} s = {elapsed / one:.1f} evaluation equivalents "
        f"(one TLR evaluation at {EQUIVALENT_ACCURACY:g}: {one:.2f} s); "
        f"accuracy at the end {est.accuracy_:g}; bound on the distance "
        f"to the exact maximum {r.gap_bound:.3g}; full-data evaluations {r.n_evaluations} "
        f"(+ {r.n_pilot_evaluations} exact on subsamples); probes {r.n_probes} "
        f"(expected Monte Carlo loss {r.scoring_loss:.2g}); converged "
        f"{r.converged}: {r.message}"
    )
    print(
        f"[{how}] loglik {r.loglik:.4f} at accuracy {r.loglik_accuracy:g}, "
        f"estimated error {r.loglik_error:.2e}; "
        f"Fisher information Monte Carlo error {100 * r.fisher_relative_error:.1f}%"
    )
    truth = {**TRUTH, "mean": MEAN} if args.data == "simulated" else {}
    print("| parameter | truth | estimate | std. error | (estimate - truth) / s.e. |")
    print("|---|---|---|---|---|")
    rows = [
        (name, est.params_[name], est.stderr_[name]) for name in ("variance", "range", "nugget")
    ]
    for name, value, se in [*rows, ("mean", est.coef_[0], est.coef_stderr_[0])]:
        if name in truth:
            print(
                f"| {name} | {truth[name]:g} | {value:.5g} | {se:.3g} "
                f"| {(value - truth[name]) / se:+.2f} |"
            )
        else:
            print(f"| {name} | | {value:.5g} | {se:.3g} | |")
    return est


def simulated(args, rng):
    """Sites, observations and new sites of the simulated field."""
    X = rng.uniform(size=(args.n, 2))
    y = MEAN + gs.simulate(
        X,
        TRUTH,
        kernel="matern",
        random_state=args.seed + 1,
        method="tlr",
        accuracy=args.simulation_accuracy,
    )
    return X, y, rng.uniform(size=(args.predict, 2))


def co2_cells(args, rng):
    """`args.n` random cells of the co2 grid (lon/lat), their values, and `args.predict`
    of the other cells as new sites."""
    frame = gs.datasets.load("co2")
    order = rng.permutation(len(frame))
    fitted, new = (
        frame.iloc[np.sort(order[: args.n])],
        frame.iloc[order[args.n : args.n + args.predict]],
    )
    return fitted[["lon", "lat"]], fitted["co2"].to_numpy(), new[["lon", "lat"]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("simulated", "co2"), default="simulated")
    parser.add_argument("--n", type=int, default=65536)
    parser.add_argument(
        "--accuracy", type=lambda text: text if text == "auto" else float(text), default="auto"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--search", choices=("both", "scoring", "polish"), default="both")
    parser.add_argument(
        "--predict", type=int, default=1000, help="new sites to krige (mean and variance)"
    )
    parser.add_argument(
        "--device", choices=("cpu", "gpu"), default="cpu", help="where the fit runs (gpu: CuPy)"
    )
    parser.add_argument(
        "--log", action="store_true", help="log every likelihood evaluation (verbose=2)"
    )
    parser.add_argument(
        "--simulation-accuracy",
        type=float,
        default=1e-10,
        help="TLR accuracy of the simulated field's factor (coarser: cheaper at large n)",
    )
    parser.add_argument(
        "--baseline-repeats",
        type=int,
        default=3,
        help="evaluations whose median is the one-evaluation baseline",
    )
    args = parser.parse_args(argv)
    if args.log:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    X, y, new = (simulated if args.data == "simulated" else co2_cells)(args, rng)
    print(
        f"{args.data} data, n = {len(y)}, accuracy {args.accuracy}, device {args.device}; "
        f"data ready in {time.perf_counter() - start:.1f} s"
    )
    searches = ("scoring", "polish") if args.search == "both" else (args.search,)
    fits = {how: fit(X, y, args, how) for how in searches}
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    if len(fits) == 2:
        scored, polished = fits["scoring"], fits["polish"]
        likelihood, scale = scored._solvers.likelihood, scored._scale
        tight = min(scored.accuracy_, polished.accuracy_) / 100

        def loglik(est):
            unit = scale.params_to_unit(est.params_)
            return likelihood.log_likelihood(unit, accuracy=tight)

        print(
            "loglik(scoring optimum) - loglik(derivative-free optimum), "
            f"both at accuracy {tight:g}: {loglik(scored) - loglik(polished):+.4f}"
        )
    est = fits[searches[0]]
    start = time.perf_counter()
    _, std = est.predict(new, return_std=True)
    print(
        f"kriging mean and standard deviation at {args.predict} new sites: "
        f"{time.perf_counter() - start:.1f} s (median std {np.median(std):.3f})"
    )


if __name__ == "__main__":
    main()
