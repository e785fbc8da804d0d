"""One full maximum-likelihood fit through TLR factors on a simulated field.

A Matern 1.5 field with a nugget (variance 1, range 0.1, nugget 0.05, mean 2) is
simulated at n uniform sites of the unit square (through a TLR factor at accuracy
1e-10, independent of the fit's) and fitted with ``SpatialGP(method="tlr")``, smoothness
held at 1.5. Prints the time of each stage, the number of likelihood evaluations, the
estimates with standard errors and their distance from the truth in standard errors,
and the time to krige (mean and standard deviation) at new sites through the factor.

Run: ``python benchmarks/fit_tlr.py`` (n = 65,536, accuracy 1e-8) or e.g.
``python benchmarks/fit_tlr.py --n 16384 --accuracy 1e-6``.
"""

from __future__ import annotations

import argparse
import logging
import resource
import time

import numpy as np

import geostat as gs

TRUTH = {"variance": 1.0, "range": 0.1, "smoothness": 1.5, "nugget": 0.05}
MEAN = 2.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=65536)
    parser.add_argument("--accuracy", type=float, default=1e-8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--predict", type=int, default=1000, help="new sites to krige (mean and variance)")
    parser.add_argument("--log", action="store_true", help="log every likelihood evaluation (verbose=2)")
    args = parser.parse_args(argv)
    if args.log:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    rng = np.random.default_rng(args.seed)
    X = rng.uniform(size=(args.n, 2))
    start = time.perf_counter()
    y = MEAN + gs.simulate(X, TRUTH, kernel="matern", random_state=args.seed + 1, method="tlr", accuracy=1e-10)
    simulated = time.perf_counter()
    est = gs.SpatialGP(kernel="matern", smoothness=1.5, method="tlr", accuracy=args.accuracy,
                       random_state=args.seed, verbose=2 if args.log else None).fit(X, y)
    fitted = time.perf_counter()
    new = rng.uniform(size=(args.predict, 2))
    mean, std = est.predict(new, return_std=True)
    predicted = time.perf_counter()
    r = est.result_
    print(f"n = {args.n}, accuracy {args.accuracy:g}, method {est.method_}")
    print(f"simulation {simulated - start:.1f} s; fit {fitted - simulated:.1f} s "
          f"({fitted - simulated:.0f} s = {(fitted - simulated) / 60:.1f} min); peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    print(f"kriging mean and standard deviation at {args.predict} new sites: {predicted - fitted:.1f} s "
          f"(median std {np.median(std):.3f})")
    print(f"full-data TLR evaluations {r.n_evaluations} (+ {r.n_pilot_evaluations} exact on subsamples), "
          f"converged {r.converged}: {r.message}")
    print(f"loglik {r.loglik:.4f}, estimated TLR error {r.loglik_error:.2e}; "
          f"Fisher information Monte Carlo error {100 * r.fisher_relative_error:.1f}%")
    print()
    print("| parameter | truth | estimate | std. error | (estimate - truth) / s.e. |")
    print("|---|---|---|---|---|")
    for name in ("variance", "range", "nugget"):
        value, se = est.params_[name], est.stderr_[name]
        print(f"| {name} | {TRUTH[name]:g} | {value:.5g} | {se:.3g} | {(value - TRUTH[name]) / se:+.2f} |")
    print(f"| mean | {MEAN:g} | {est.coef_[0]:.5g} | {est.coef_stderr_[0]:.3g} | "
          f"{(est.coef_[0] - MEAN) / est.coef_stderr_[0]:+.2f} |")


if __name__ == "__main__":
    main()
