"""How much the block Vecchia control variate reduces the variance of the probe traces.

Fisher scoring (:mod:`geostat.optimize.scoring`) estimates the traces ``tr(K^{-1} D)``
(``D`` = the identity and ``dR / d range``) from Rademacher probes through the TLR factor
(M. F. Hutchinson, "A stochastic estimator of the trace of the influence matrix for
Laplacian smoothing splines", 1989). :func:`geostat.likelihood.stochastic_fisher.probe_traces`
subtracts from each probe's trace the same form through a block Vecchia precision
``P_V`` and adds back its exact trace (a control variate: P. Glasserman, *Monte Carlo
Methods in Financial Engineering*, 2003, section 4.1). This fits each case
(``SpatialGP(smoothness=NU)``, as ``benchmarks/peers.py``), then at the estimate draws
the same 64 probes with and without the control variate and prints, per trace, both
standard errors of the mean and their ratio, the least variance reduction over all
directions of the traces (the generalized eigenvalue that decides whether the control
variate is kept) and the time of a point's first block of probes each way, the build of
``dR`` included (medians of ``--repeats``).

Cases: those of ``benchmarks/peers.py`` (default ``co2true8k co2``).

Run: ``python benchmarks/control_variate.py [--cases co2true8k co2 tas] [--repeats 3]``.
Output: one table on standard output.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import scipy.linalg
from peers import CASES, SMOOTHNESS, fit_ours

from geostat.distance import get_distance
from geostat.kernels import get_kernel
from geostat.likelihood import TLRLikelihood


def probes(likelihood, theta, eta, control, repeats):
    """The first block's traces (64 probes, with the build of ``dR``) and the median time
    of drawing them, with the control variate or without (`control`)."""
    times = []
    for _ in range(repeats):
        _, blocks = likelihood.probe_traces(theta, eta, control=(control,))  # factors kept
        start = time.perf_counter()
        traces = next(blocks)
        times.append(time.perf_counter() - start)
    return traces, statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["co2true8k", "co2"], choices=CASES)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| data | trace | standard error, plain | with the control variate | ratio |")
    print("|---|---|---|---|---|")
    notes = []
    for case in args.cases:
        X, y = CASES[case]()
        nu = SMOOTHNESS.get(case, 1.5)
        params, _ = fit_ours(X, y, nu)
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float).reshape(len(X), -1)
        theta, eta = {"range": params["range"]}, params["nugget"] / params["variance"]
        likelihood = TLRLikelihood(
            X, y, np.ones((len(X), 1)), get_kernel("matern", nu), get_distance("euclidean")
        )
        with likelihood.fitting():
            next(likelihood.probe_traces(theta, eta)[1])  # the factor, the control variate
            controlled, with_time = probes(likelihood, theta, eta, True, args.repeats)
            plain, plain_time = probes(likelihood, theta, eta, False, args.repeats)
        columns = slice(1, None)
        for name, a, b in zip(
            plain.names[columns],
            plain.traces[:, columns].T,
            controlled.traces[:, columns].T,
            strict=True,
        ):
            se_plain, se_with = (np.std(v, ddof=1) / np.sqrt(v.size) for v in (a, b))
            ratio = se_plain / se_with
            print(f"| {case} | {name} | {se_plain:.3g} | {se_with:.3g} | {ratio:.1f} |")
        least = scipy.linalg.eigvalsh(
            np.cov(plain.traces[:, columns], rowvar=False),
            np.cov(controlled.traces[:, columns], rowvar=False),
        )[0]
        notes.append(
            f"{case}: least variance reduction {least:.3g} (kept at 3 or more); "
            f"64 probes {plain_time:.2f} s plain, {with_time:.2f} s with the control variate "
            f"(range {params['range']:.4g}, nugget/variance {eta:.3g})"
        )
    print()
    print("\n".join(notes))


if __name__ == "__main__":
    main()
