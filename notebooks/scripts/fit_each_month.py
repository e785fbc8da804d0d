"""Fit a Matérn covariance to every month of a gridded field, one month at a time.

Writes the estimates with standard errors as a table (CSV and NetCDF) and a plot of
their evolution through the year. By default it fits the bundled monthly temperature
grid (``southeast_us_monthly``, 2,080 land cells, 1999); point it at your own NetCDF
file with ``--file tas.nc --var tas``. Adapt the model in ``make_model``.

Examples
--------
python fit_each_month.py                           # bundled data, every month, ~3 min
python fit_each_month.py --file era5.nc --var t2m --time-slice 2020-01:2020-12
python fit_each_month.py --small                    # coarse grid, 3 months: a smoke test
"""

import argparse
import logging
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

import geostat as gs  # noqa: E402

log = logging.getLogger("fit_each_month")


def make_model():
    """The model fitted to each month: Matérn with estimated smoothness, a nugget, and a
    linear trend in longitude and latitude (temperature falls towards the pole)."""
    return gs.SpatialGP(kernel="matern", smoothness=None, nugget=True, trend="linear")


def load_field(args):
    """The field to fit, as a DataArray with a time dimension."""
    if args.file:
        field = xr.open_dataset(args.file)[args.var]
    else:
        field = gs.datasets.load("southeast_us_monthly", as_xarray=True)[args.var]
    if args.time_slice:
        start, _, stop = args.time_slice.partition(":")
        field = field.sel(time=slice(start or None, stop or None))
    if args.small:  # every third cell and three months: a quick run
        field = field.isel(lat=slice(None, None, 3), lon=slice(None, None, 3), time=slice(0, 12, 4))
    return field


def fit_month(month):
    """Estimates, standard errors and fit details of one month's field, as one table row."""
    start = time.perf_counter()
    model = make_model().fit(month)
    row = {
        "time": pd.Timestamp(month.time.values),
        "n": int(month.notnull().sum()),
        "loglik": model.loglik_,
        "converged": model.converged_,
        "seconds": time.perf_counter() - start,
    }
    for name, value in model.params_.items():
        row[name] = value
        row[f"{name}_se"] = model.stderr_[name]
    for name, value in zip(model.coef_names_, model.coef_):
        row[f"coef_{name}"] = value
    return row


def plot_evolution(table, path):
    """One panel per covariance parameter: the estimate with its 95% log-Wald interval
    ``estimate * exp(±1.96 se / estimate)`` (positive, like the parameter), on log axes."""
    names = [
        c
        for c in ("variance", "range", "smoothness", "nugget")
        if c in table and (table[c] > 0).all()
    ]
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.1 * len(names)), sharex=True)
    for ax, name in zip(axes, names):
        estimate, se = table[name], table[f"{name}_se"]
        spread = np.exp(1.96 * se / estimate)
        ax.plot(table["time"], estimate, "o-", color="C0")
        ax.fill_between(table["time"], estimate / spread, estimate * spread, color="C0", alpha=0.2)
        ax.set_yscale("log")
        ax.set_ylabel(name + (" (km)" if name == "range" else ""))
    axes[0].set_title("Monthly maximum-likelihood estimates (band: 95% log-Wald interval)")
    axes[-1].xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%b %Y"))
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--file", help="NetCDF file (default: the bundled southeast_us_monthly grid)"
    )
    parser.add_argument("--var", default="tas", help="variable to fit (default tas)")
    parser.add_argument("--time-slice", help="START:END, e.g. 1999-03:1999-08")
    parser.add_argument("--output", default=".", help="folder for the table and the plot")
    parser.add_argument(
        "--small", action="store_true", help="coarse grid and three months (a smoke test)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    field = load_field(args)
    rows = []
    for i in range(field.sizes["time"]):
        rows.append(fit_month(field.isel(time=i)))
        row = rows[-1]
        log.info(
            "%s  n=%d  range %.0f ± %.0f km  smoothness %.2f  (%.1f s)",
            row["time"].date(),
            row["n"],
            row["range"],
            row["range_se"],
            row["smoothness"],
            row["seconds"],
        )
    table = pd.DataFrame(rows)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / f"{args.var}_monthly_estimates.csv", index=False)
    table.set_index("time").to_xarray().to_netcdf(out / f"{args.var}_monthly_estimates.nc")
    plot_evolution(table, out / f"{args.var}_monthly_estimates.png")
    log.info("wrote %s_monthly_estimates.csv, .nc and .png to %s", args.var, out.resolve())


if __name__ == "__main__":
    main()
