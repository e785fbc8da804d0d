"""How the TLR log-likelihood's error shrinks with the accuracy, against what the fit reports.

A TLR fit reports ``loglik_error_`` from ``d_c = |l(10 a) - l(a)|``, the change from an
evaluation ten times less accurate (``geostat.optimize.search.reported_loglik``): it
estimates the error of the less accurate value, so it overstates that of ``l(a)`` by as
much as the error shrinks over that decade. This script measures that, with the error
``e(a) = l(a) - l(1e-12)`` at accuracies 1e-6 to 1e-10 (``TLRLikelihood.log_likelihood``,
GLS trend as in a fit), per case:

* ``co2``: 8,192 co2 cells (``benchmarks/peers.py``), Matérn 1.5 at the fit's estimate;
* ``sim16k``: the simulated 16,384 sites of ``benchmarks/peers.py`` at the truth;
* ``exp2d-model``, ``exp2d-white``, ``matern15_2d-model``: the fields of
  ``benchmarks/loglik.py`` at 16,384 sites (``-white``: white-noise observations, whose
  quadratic form magnifies the compression error).

The baseline is the reference value ``l(1e-12)``. The column ``d_c / |e(a)|`` at
``a = 1e-8`` is the reported error's margin when the check value comes from a new build
at 1e-7: at least 1 for the report to be an upper estimate. A fit takes its check value
from the 1e-8 build truncated to 1e-7 (``TLRLikelihood.keep_coarser``) rather than from a
new build at 1e-7: its error is the column "truncated 1e-07", its margin
``d_t / |e(1e-8)|`` the last column.

Run: ``python benchmarks/loglik_error.py [cases...]`` (all cases by default), e.g.
``python benchmarks/loglik_error.py co2``.

Output: a Markdown table on standard output, one row per case; nothing is written to
disk (``benchmarks/loglik.py`` caches its simulated fields in the temporary directory).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loglik  # noqa: E402  (benchmarks/loglik.py: its fields)
import peers  # noqa: E402  (benchmarks/peers.py: its data)

from geostat.distance import get_distance  # noqa: E402
from geostat.kernels import get_kernel  # noqa: E402
from geostat.likelihood import TLRLikelihood  # noqa: E402

ACCURACIES = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10)
REFERENCE = 1e-12
MATERN_15 = get_kernel("matern", 1.5)


def _co2():
    X, y = peers.co2_cells()
    return (
        X,
        y,
        MATERN_15,
        {"variance": 0.485, "range": 1388.08, "smoothness": 1.5, "nugget": 0.2617},
        True,
    )


def _sim16k():
    X, y = peers.simulated(16384)
    return X, y, MATERN_15, dict(peers.TRUTH), True


def _benchmark_field(key, data):
    def case():
        X, y, kernel, params = loglik.problem(key, 16384, data)
        return X, y, kernel, params, False

    return case


CASES = {
    "co2": _co2,
    "sim16k": _sim16k,
    "exp2d-model": _benchmark_field("exp2d", "model"),
    "exp2d-white": _benchmark_field("exp2d", "white"),
    "matern15_2d-model": _benchmark_field("matern15_2d", "model"),
}


def errors(X, y, kernel, params, trend):
    """``{a: l(a) - l(REFERENCE)}`` over :data:`ACCURACIES`, and the error of the fit's
    check value: the 1e-8 build truncated to 1e-7 (``TLRLikelihood.keep_coarser``)."""
    design = np.ones((len(y), 1)) if trend else np.zeros((len(y), 0))
    likelihood = TLRLikelihood(
        X, y[:, None], design, kernel, get_distance("euclidean"), accuracy=1e-8
    )
    reference = likelihood.log_likelihood(params, accuracy=REFERENCE)
    likelihood.keep_coarser(1e-7)
    e = {
        a: likelihood.log_likelihood(params, accuracy=a) - reference
        for a in ACCURACIES
        if a != 1e-8
    }
    e[1e-8] = likelihood.log_likelihood(params) - reference
    kept = likelihood._coarser.get(0)  # the 1e-8 build's tiles, which the check truncates
    if (
        kept is None or likelihood._truncated(kept[1], 1e-7) is None
    ):  # a copy would not serve: a new build does
        return e, None
    truncated = (
        likelihood.log_likelihood(params, accuracy=1e-7) - reference
    )  # from the 1e-8 build's copy
    return e, truncated


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "cases", nargs="*", default=list(CASES), help=f"any of {', '.join(CASES)} (default: all)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}.")
    print(
        "| case | n | "
        + " | ".join(f"e({a:.0e})" for a in ACCURACIES)
        + " | truncated 1e-07 | d_c / e(1e-08) | d_t / e(1e-08) |"
    )
    print("|---|---|" + "---|" * (len(ACCURACIES) + 3))
    for name in args.cases:
        X, y, kernel, params, trend = CASES[name]()
        e, truncated = errors(X, y, kernel, params, trend)
        margin = abs(e[1e-7] - e[1e-8]) / abs(e[1e-8])
        if truncated is None:
            columns = "no copy (a new build) | | "
        else:
            columns = (
                f"{truncated:+.2e} | {margin:.1f} | {abs(truncated - e[1e-8]) / abs(e[1e-8]):.1f}"
            )
        print(
            f"| {name} | {len(y):,} | "
            + " | ".join(f"{e[a]:+.2e}" for a in ACCURACIES)
            + f" | {columns} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
