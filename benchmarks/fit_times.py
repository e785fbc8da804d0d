"""Fit times of the exact maximum-likelihood path, side by side with scikit-learn.

For each bundled dataset and kernel, ``SpatialGP`` is fitted ``--repeats`` times and the
median wall time is reported. The baseline is scikit-learn's ``GaussianProcessRegressor``
fitting the *same* model: exponential covariance ``variance * exp(-h / range) + nugget``
on the same chordal (3-D, km) coordinates with the sample mean removed (scikit-learn has no
GLS trend, so geostat runs with ``trend=None`` on the same centred data). Both maximize the
same log-likelihood, so their maxima are compared too.

The second row of each dataset, a Matern fit with the smoothness estimated and a GLS
constant mean on longitude/latitude, has no scikit-learn counterpart.

Run: ``python benchmarks/fit_times.py [--repeats 3]``

Output: a table on standard output, two rows per dataset; nothing is written to disk.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

import geostat as gs
from geostat.distance import lonlat_to_xyz

CASES = [
    ("north_american_rainfall", "precipitation", "log"),
    ("rm_precip", "precipitation", None),  # two stations record 0 mm: no log
    ("colorado_temperature", "tmax_mam", None),
]


def load(name, column, transform):
    frame = gs.datasets.load(name)
    y = frame[column].to_numpy(dtype=float)
    keep = np.isfinite(y)
    y = np.log(y[keep]) if transform == "log" else y[keep]
    return frame.loc[keep, ["lon", "lat"]], y


def median_time(func, repeats):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def sklearn_exponential(xyz, y):
    kernel = ConstantKernel(1.0, (1e-6, 1e6)) * Matern(1000.0, (1.0, 1e6), nu=0.5) + WhiteKernel(
        0.1, (1e-8, 1e3)
    )
    return GaussianProcessRegressor(kernel, n_restarts_optimizer=2, random_state=0).fit(xyz, y)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", gs.GeostatWarning)
    header = (
        f"{'dataset':<24}{'n':>6} {'model':<26}{'geostat s':>10}{'evals':>7}{'sklearn s':>10}"
        f"{'ratio':>7}{'loglik geostat':>16}{'loglik sklearn':>16}"
    )
    print(header)
    print("-" * len(header))
    for name, column, transform in CASES:
        X, y = load(name, column, transform)
        xyz = lonlat_to_xyz(X.to_numpy())
        centred = y - y.mean()
        t_gs, est = median_time(
            lambda xyz=xyz, centred=centred: gs.SpatialGP(
                kernel="exponential", trend=None, distance="euclidean"
            ).fit(xyz, centred),
            args.repeats,
        )
        t_sk, gpr = median_time(
            lambda xyz=xyz, centred=centred: sklearn_exponential(xyz, centred), args.repeats
        )
        print(
            f"{name:<24}{len(y):>6} {'exponential, mean removed':<26}{t_gs:>10.2f}"
            f"{est.n_evaluations_:>7}{t_sk:>10.2f}{t_sk / t_gs:>7.1f}{est.loglik_:>16.4f}"
            f"{gpr.log_marginal_likelihood_value_:>16.4f}"
        )
        t_m, mat = median_time(
            lambda X=X, y=y: gs.SpatialGP(trend="constant").fit(X, y), args.repeats
        )
        print(
            f"{name:<24}{len(y):>6} {'matern nu free, GLS mean':<26}{t_m:>10.2f}"
            f"{mat.n_evaluations_:>7}{'-':>10}{'-':>7}{mat.loglik_:>16.4f}{'-':>16}"
        )
    print(
        "\nratio = scikit-learn time / geostat time (higher is better for geostat); medians of",
        args.repeats,
        "runs.",
    )


if __name__ == "__main__":
    main()
