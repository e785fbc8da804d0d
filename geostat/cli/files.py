"""Files of the ``geostat`` command: which are fields, reading CSV and NetCDF, checking
and writing outputs (every failure a ``ValueError`` with one line saying what to do)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from geostat._version import DISTRIBUTION

__all__ = ["FIELD_SUFFIXES", "OUTPUT_SUFFIXES", "check_input", "check_output", "is_field", "open_field", "read_csv",
           "separator", "write_predictions", "xarray_module"]

#: File name endings read with xarray (as NetCDF and the like); any other file is read as CSV.
FIELD_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf", ".h5", ".hdf5", ".zarr", ".grib", ".grib2", ".grb", ".grb2")
#: File name endings ``geostat predict`` writes.
OUTPUT_SUFFIXES = (".csv", ".nc")
NETCDF_EXTRA = f'pip install "{DISTRIBUTION}[netcdf]"'


def is_field(path):
    return path.suffix.lower() in FIELD_SUFFIXES


def check_input(path, what="a CSV file"):
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if path.is_dir() and not is_field(path):
        raise ValueError(f"{path} is a folder; give {what}")


def read_csv(path, sep=","):
    check_input(path)
    try:
        return pd.read_csv(path, sep=separator(sep))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text CSV file (it holds binary data); give a CSV file with a header row") from None
    except Exception as exc:  # any parser or decompression failure is bad input
        raise ValueError(f"cannot read {path} as CSV ({str(exc).strip()}); give a {separator_name(sep)}-separated file "
                         "with a header row (--sep sets the separator)") from None


def separator(text):
    return "\t" if text == "\\t" else text


def separator_name(sep):
    return {",": "comma", ";": "semicolon", "\\t": "tab", "\t": "tab"}.get(sep, repr(sep))


def xarray_module(path):
    """The xarray module, or a one-line error saying how to install it."""
    try:
        import xarray
    except ImportError:
        raise ValueError(f"reading or writing {path} needs xarray and netCDF4: {NETCDF_EXTRA}") from None
    return xarray


def open_field(path):
    """The xarray Dataset of a NetCDF (or other xarray-readable) file, opened lazily."""
    check_input(path)
    xarray = xarray_module(path)
    try:
        return xarray.open_dataset(path)
    except Exception as exc:  # any reader failure is bad input
        hint = f"; install the NetCDF readers: {NETCDF_EXTRA}" if importlib.util.find_spec("netCDF4") is None else ""
        raise ValueError(f"cannot read {path} with xarray ({' '.join(str(exc).split())}){hint}; give a NetCDF file "
                         "(or another format xarray reads)") from None


def check_output(text, option):
    """Refuse an output path that cannot be written, before any work."""
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder; give the name of a file (in it or elsewhere)")
    if not path.parent.is_dir():
        raise ValueError(f"{option} {path}: folder {path.parent} does not exist; create it or choose another path")
    existed = path.exists()
    try:
        path.open("a").close()
    except OSError as exc:
        raise ValueError(f"{option} {path} cannot be written ({exc.strerror}); choose a writable path") from None
    if not existed:
        path.unlink()


def write_predictions(predictions, path, sep):
    """Predictions (a table or an xarray Dataset) as CSV or NetCDF, by the name of `path`."""
    table = isinstance(predictions, pd.DataFrame)
    if path.suffix.lower() == ".csv":
        (predictions if table else predictions.to_dataframe().reset_index()).to_csv(path, index=False,
                                                                                   sep=separator(sep))
    elif table:
        xarray_module(path).Dataset.from_dataframe(predictions.rename_axis("site")).to_netcdf(path)
    else:
        predictions.to_netcdf(path)

