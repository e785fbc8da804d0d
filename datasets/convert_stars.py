"""Regenerate ``southeast_us_monthly.nc`` from the R package stars.

Run from the repository root on Debian bookworm (needs ``apt-get download``,
``dpkg-deb`` and Python with xarray and netCDF4)::

    python datasets/convert_stars.py

The script downloads the Debian package ``r-cran-stars`` (0.6-0-4, without
installing it or R), takes ``stars/nc/bcsd_obs_1999.nc`` (netCDF-4/HDF5) from
it, and writes the same grid, times, values (float32, NaN where fields has its
``1e20`` fill) and attributes as classic netCDF-3 (64-bit offset), which SciPy
reads without the netCDF C library. Every value is compared with the original;
any difference stops the script.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

HERE = Path(__file__).resolve().parent
MEMBER = "usr/lib/R/site-library/stars/nc/bcsd_obs_1999.nc"
OUT = HERE / "southeast_us_monthly.nc"


def extract(workdir: Path) -> Path:
    """Download r-cran-stars and unpack the NetCDF file into `workdir`."""
    subprocess.run(["apt-get", "download", "r-cran-stars"], cwd=workdir, check=True)
    deb = next(workdir.glob("r-cran-stars_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "x")], check=True)
    return workdir / "x" / MEMBER


def convert(source: Path) -> None:
    """Write `OUT` from the original file and check it value for value."""
    with xr.open_dataset(source) as original:
        data = original.load()
    data.attrs["geostat_source"] = (
        "R package stars 0.6-0 (Pebesma et al., Apache-2.0), Debian package r-cran-stars "
        "0.6-0-4, file inst/nc/bcsd_obs_1999.nc; converted to netCDF-3 by datasets/convert_stars.py"
    )
    for name in data.data_vars:
        data[name].encoding = {"_FillValue": np.float32(np.nan), "dtype": "float32"}
    data.time.encoding = {"units": "days since 1999-01-31", "calendar": "proleptic_gregorian"}
    data.to_netcdf(OUT, engine="scipy", format="NETCDF3_64BIT")
    with xr.open_dataset(source) as original, xr.open_dataset(OUT, engine="scipy") as written:
        for name in ("tas", "pr", "time", "latitude", "longitude"):
            if not np.array_equal(original[name].values, written[name].values, equal_nan=True):
                sys.exit(f"{name} differs after conversion")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        convert(extract(Path(tmp)))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
