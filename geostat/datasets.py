"""Real spatial climate datasets shipped with geostat.

The datasets come from the R package fields (Nychka et al., GPL (>= 2)) as
packaged by Debian (r-cran-fields 14.1-1) and are stored as CSV files in the
repository's ``datasets/`` folder (``geostat/_datasets/`` in an installed
wheel).  See ``datasets/README.md`` for sources, units and how to regenerate
the files.

Examples
--------
>>> from geostat import datasets
>>> datasets.names()
['co2', 'colorado_temperature', 'north_american_rainfall', 'ozone2', 'rm_precip']
>>> frame = datasets.load(datasets.DEFAULT)
>>> meta = datasets.info(datasets.DEFAULT)
>>> meta["coords"], meta["value"], meta["transform"]
(['lon', 'lat'], 'precipitation', 'log')
"""

from __future__ import annotations

import copy
import csv
import io
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["DEFAULT", "info", "load", "names"]

DEFAULT = "north_american_rainfall"

_FIELDS = "R package fields 14.1 (Nychka et al.), Debian package r-cran-fields 14.1-1"
_LICENCE = "GPL (>= 2), the licence of the R package fields from which the data are taken"
_LON = "degrees_east"  # WGS84 longitude in [-180, 180]
_LAT = "degrees_north"  # WGS84 latitude
_TEXT_COLUMNS = ("station", "type")  # the only non-numeric columns
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

# One entry per dataset.  For ozone2, "value" (the day columns) and their units
# are read from the CSV header by info().
_META: dict[str, dict[str, Any]] = {
    "north_american_rainfall": {
        "description": "Mean summer (June-August) precipitation 1950-2010 at 1720 "
        "North American stations",
        "coords": ["lon", "lat"],
        "value": "precipitation",
        "transform": "log",
        "covariates": ["elevation"],
        "units": {
            "lon": _LON,
            "lat": _LAT,
            "elevation": "m",
            "precipitation": "0.1 mm",
            "precipitation_se": "0.1 mm",
            "trend": "0.1 mm per year",
            "trend_se": "0.1 mm per year",
            "stereo_x": "1 (stereographic projection, unit sphere)",
            "stereo_y": "1 (stereographic projection, unit sphere)",
        },
        "n": 1720,
        "source": f"{_FIELDS}: NorthAmericanRainfall; originally GHCN version 2 "
        "precipitation (NOAA National Centers for Environmental Information), "
        "summarised by Xuebin Zhang",
    },
    "colorado_temperature": {
        "description": "Spring (March-May) mean daily maximum/minimum temperature, "
        "1960-1989 climatology, at 213 Colorado-area stations",
        "coords": ["lon", "lat"],
        "value": "tmax_mam",
        "transform": None,
        "covariates": ["elevation"],
        "units": {
            "lon": _LON,
            "lat": _LAT,
            "elevation": "m",
            "tmax_mam": "degC",
            "tmin_mam": "degC",
            "tmean_mam": "degC",
        },
        "n": 213,
        "source": f"{_FIELDS}: COmonthlyMet (CO.tmax.MAM.climate, CO.tmin.MAM.climate, "
        "CO.loc, CO.elev, CO.id); originally the NCAR/GSP US monthly meteorology "
        "archive 1895-1997",
    },
    "ozone2": {
        "description": "Daily 8-hour average surface ozone at 153 Midwest US stations, "
        "89 days from 1987-06-03 to 1987-08-31 (one column per day, NaN = missing)",
        "coords": ["lon", "lat"],
        "value": None,
        "transform": None,
        "covariates": [],
        "units": {"lon": _LON, "lat": _LAT},
        "n": 153,
        "source": f"{_FIELDS}: ozone2; originally US EPA monitoring data, see Nychka, "
        "Cox and Piegorsch (1998), Case Studies in Environmental Statistics, Springer",
    },
    "rm_precip": {
        "description": "Total precipitation in August 1997 at 806 Rocky Mountain "
        "region stations",
        "coords": ["lon", "lat"],
        "value": "precipitation",
        "transform": None,
        "covariates": ["elevation"],
        "units": {"lon": _LON, "lat": _LAT, "elevation": "m", "precipitation": "mm"},
        "n": 806,
        "source": f"{_FIELDS}: RMprecip; originally the NCAR/GSP US monthly "
        "meteorology archive (US Cooperative Observer Network stations)",
    },
    "co2": {
        "description": "Simulated satellite CO2 concentrations at 26633 cells of a "
        "global 1.25 x 1 degree lon/lat grid, with the noise-free model field",
        "coords": ["lon", "lat"],
        "value": "co2",
        "transform": None,
        "covariates": [],
        "units": {"lon": _LON, "lat": _LAT, "co2": "ppm", "co2_true": "ppm"},
        "n": 26633,
        "source": f"{_FIELDS}: CO2 and CO2.true; synthetic data provided by Dorit "
        "Hammerling and Randy Kawa from a geophysical numerical model",
    },
}


def names() -> list[str]:
    """Return the names of the available datasets.

    Returns
    -------
    list of str
        Dataset names, sorted alphabetically.
    """
    return sorted(_META)


def info(name: str) -> dict[str, Any]:
    """Return the metadata of a dataset.

    Parameters
    ----------
    name : str
        Dataset name, one of :func:`names`.

    Returns
    -------
    dict
        A new dict (safe to modify) with keys ``"description"`` (one line),
        ``"coords"`` (coordinate columns, longitude first), ``"value"``
        (default value column, or for a replicate set such as ``ozone2`` the
        list of its value columns), ``"transform"`` (``"log"`` or None, the
        transform to apply to the value before modelling), ``"covariates"``
        (columns usable as trend covariates), ``"units"`` (numeric column ->
        unit), ``"n"`` (number of rows), ``"source"`` and ``"licence"``.

    Raises
    ------
    ValueError
        If `name` is not a known dataset.
    """
    meta = copy.deepcopy(_META[_check_name(name)])
    if meta["value"] is None:  # replicate set: the value columns are the days
        days = [col for col in _header(name) if _DATE.fullmatch(col)]
        meta["value"] = days
        meta["units"].update({day: "ppb" for day in days})
    meta["licence"] = _LICENCE
    return meta


def load(name: str = DEFAULT) -> pd.DataFrame:
    """Load a dataset as a data frame.

    Parameters
    ----------
    name : str, default DEFAULT
        Dataset name, one of :func:`names`.

    Returns
    -------
    pandas.DataFrame
        A new frame on every call (safe to modify).  Numeric columns are
        float64 with NaN for missing values; the ``station`` and ``type``
        columns, where present, are strings.  ``frame.attrs`` holds a copy of
        :func:`info`.

    Raises
    ------
    ValueError
        If `name` is not a known dataset.
    """
    meta = info(name)
    text = [col for col in _header(name) if col in _TEXT_COLUMNS]
    with _data_file(name).open("rb") as stream:
        frame = pd.read_csv(
            stream,
            dtype={col: str for col in text},
            keep_default_na=False,
            na_values=[""],
            **_exact_floats(),
        )
    numeric = [col for col in frame.columns if col not in text]
    frame[numeric] = frame[numeric].astype("float64")
    frame.attrs = meta
    return frame


def _check_name(name: str) -> str:
    """Return `name` if it is a dataset name, else raise ValueError."""
    if not isinstance(name, str) or name not in _META:
        raise ValueError(
            f"unknown dataset name {name!r}; pass name as one of {', '.join(names())}"
        )
    return name


def _exact_floats() -> dict[str, str]:
    """Return the read_csv option that parses floats exactly (pandas < 3 needs it)."""
    if int(pd.__version__.split(".")[0]) < 3:
        return {"float_precision": "round_trip"}
    return {}


def _data_dir():
    """Return the folder holding the CSV files (a Path or importlib Traversable)."""
    packaged = resources.files("geostat") / "_datasets"
    if packaged.is_dir():
        return packaged
    source = Path(__file__).resolve().parent.parent / "datasets"
    if source.is_dir():
        return source
    raise FileNotFoundError(
        f"geostat datasets folder not found: looked for {packaged} (installed "
        f"wheel) and {source} (source checkout); reinstall geostat or run from a "
        "full checkout of the repository"
    )


def _data_file(name: str):
    """Return the CSV file of dataset `name`."""
    return _data_dir() / f"{name}.csv"


def _header(name: str) -> list[str]:
    """Return the column names of dataset `name` from its CSV header."""
    with _data_file(name).open("rb") as stream:
        line = io.TextIOWrapper(stream, encoding="utf-8", newline="").readline()
    return next(csv.reader([line]))
