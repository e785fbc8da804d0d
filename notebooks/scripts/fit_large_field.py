"""Fit a large field through tile low-rank (TLR) algebra, save the model, map the prediction.

By default it fits the bundled global CO2 field (``co2``: 26,633 grid cells, ν estimated;
about 10–15 minutes on 2 cores) with ``method="tlr"``, logs each stage as it goes, saves
the fitted model (``gs.load`` reads it back, no pickle), and writes a kriging map with its
standard deviation on a 2.5° grid as NetCDF and PNG. Point it at your own table with
``--file cells.csv --value co2`` (columns lon, lat). Adapt the model in ``make_model``.

Examples
--------
python fit_large_field.py                    # the full co2 field
python fit_large_field.py --accuracy 1e-6    # faster, a coarser likelihood
python fit_large_field.py --small            # 800 random cells: a smoke test
"""

import argparse
import json
import logging
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import xarray as xr  # noqa: E402

import geostat as gs  # noqa: E402
from geostat import plotting  # noqa: E402

log = logging.getLogger("fit_large_field")


def make_model(args):
    """Matérn (smoothness estimated) with a nugget and a constant mean, through TLR."""
    return gs.SpatialGP(
        kernel="matern",
        smoothness=None,
        nugget=True,
        trend="constant",
        method="tlr",
        accuracy=args.accuracy,
        tile_size=args.tile_size,
    )


def load_cells(args):
    """Sites (lon, lat) and observations."""
    frame = pd.read_csv(args.file) if args.file else gs.datasets.load("co2")
    if args.small:
        frame = frame.sample(800, random_state=0).reset_index(drop=True)
    return frame[["lon", "lat"]], frame[args.value]


def map_template(sites, step):
    """An empty lon/lat grid over the sites' box, `step` degrees apart."""
    lon = np.arange(sites["lon"].min(), sites["lon"].max() + step / 2, step)
    lat = np.arange(sites["lat"].min(), sites["lat"].max() + step / 2, step)
    return xr.DataArray(
        np.zeros((lat.size, lon.size)), dims=("lat", "lon"), coords={"lat": lat, "lon": lon}
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--file", help="CSV with lon, lat and the value column (default: the bundled co2 field)"
    )
    parser.add_argument("--value", default="co2", help="value column (default co2)")
    parser.add_argument("--accuracy", type=float, default=1e-8, help="TLR accuracy (default 1e-8)")
    parser.add_argument("--tile-size", type=int, help="TLR tile size (default: chosen from n)")
    parser.add_argument("--output", default=".", help="folder for the model, the table and the map")
    parser.add_argument("--small", action="store_true", help="800 random cells (a smoke test)")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)

    sites, values = load_cells(args)
    log.info("fitting %d cells through TLR at accuracy %g", len(sites), args.accuracy)
    start = time.perf_counter()
    model = make_model(args).fit(sites, values)
    seconds = time.perf_counter() - start
    log.info(
        "fit in %.0f s, %d likelihood evaluations; estimated TLR error of the log-likelihood %.2g",
        seconds,
        model.n_evaluations_,
        model.loglik_error_,
    )
    summary = {
        "n": len(sites),
        "seconds": seconds,
        "evaluations": model.n_evaluations_,
        "loglik": model.loglik_,
        "loglik_error": model.loglik_error_,
        "params": model.params_,
        "stderr": model.stderr_,
        "coef": dict(zip(model.coef_names_, np.atleast_1d(model.coef_).tolist())),
    }
    (out / "estimates.json").write_text(json.dumps(summary, indent=2))
    model.save(out / "model.npz")
    log.info(
        "model saved to %s (%.1f MB)", out / "model.npz", (out / "model.npz").stat().st_size / 2**20
    )

    mean, std = gs.load(out / "model.npz").predict(
        map_template(sites, 5.0 if args.small else 2.5), return_std=True
    )
    xr.Dataset({"mean": mean, "std": std}).to_netcdf(out / "kriging_map.nc")
    figure, axes = plt.subplots(1, 2, figsize=(13, 3.6), gridspec_kw={"wspace": 0.35})
    plotting.plot_field(
        mean.rename(f"kriged {args.value}"), ax=axes[0], title=f"kriged {args.value}"
    )
    plotting.plot_field(
        std.rename("standard deviation"), ax=axes[1], title="kriging standard deviation"
    )
    figure.savefig(out / "kriging_map.png", dpi=110)
    log.info(
        "wrote estimates.json, model.npz, kriging_map.nc and kriging_map.png to %s", out.resolve()
    )


if __name__ == "__main__":
    main()
