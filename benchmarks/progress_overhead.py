"""What the progress display costs: a TLR fit with ``verbose=0`` against ``verbose=1``.

Simulates an exponential field with a nugget at n uniform sites of the unit square (dense
Cholesky, once) and times ``SpatialGP(method="tlr").fit`` (Matern, smoothness and nugget
estimated) with the display off and on, alternating the two, and prints the median of
each and their ratio; the baseline is the fit with the display off. The display goes to
standard error (redirect it to see only the results); the estimates must be equal.

Run: ``python benchmarks/progress_overhead.py`` (n = 8,000, 3 runs each) or e.g.
``python benchmarks/progress_overhead.py --n 6000 --repeats 5 2>/dev/null``.

Output: one line per fit and a summary line on standard output; nothing is written to
disk.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import geostat as gs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    X = rng.uniform(size=(args.n, 2))
    distances = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1))
    covariance = np.exp(-distances / 0.1)
    del distances
    covariance[np.diag_indices(args.n)] += 0.05
    y = 2.0 + np.linalg.cholesky(covariance) @ rng.normal(size=args.n)
    del covariance

    times = {0: [], 1: []}
    estimates = {}
    for _ in range(args.repeats):
        for verbose in (0, 1):
            start = time.perf_counter()
            est = gs.SpatialGP(method="tlr", random_state=args.seed, verbose=verbose).fit(X, y)
            times[verbose].append(time.perf_counter() - start)
            estimates.setdefault(verbose, est.params_)
            print(
                f"verbose={verbose}: {times[verbose][-1]:.1f} s, "
                f"{est.n_evaluations_} TLR evaluations",
                flush=True,
            )
    off, on = statistics.median(times[0]), statistics.median(times[1])
    print(
        f"n = {args.n}: median of {args.repeats} fits, verbose=0 {off:.1f} s, "
        f"verbose=1 {on:.1f} s, ratio on/off {on / off:.3f}; "
        f"equal estimates: {estimates[0] == estimates[1]}"
    )


if __name__ == "__main__":
    main()
