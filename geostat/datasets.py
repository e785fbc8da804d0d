"""Real spatial climate datasets shipped with geostat.

Five station (or cell) tables come from the R package fields (Nychka et al.,
GPL (>= 2)) as packaged by Debian (r-cran-fields 14.1-1) and are stored as CSV
files; one gridded monthly field with a time axis comes from the R package
stars (Apache-2.0; data "freely available", Maurer et al. 2002) and is stored
as netCDF-3. They live in the repository's ``datasets/`` folder
(``geostat/_datasets/`` in an installed wheel). See ``datasets/README.md`` for
sources, units, licences and how to regenerate the files.

``load(name)`` returns a pandas DataFrame (the grid as a long table of its
observed cells); ``load(name, as_xarray=True)`` an ``xarray.Dataset`` (needs
xarray): the grid on its ``time``, ``lat``, ``lon`` dimensions with NaN outside
the land mask, the station tables along a ``station`` dimension with ``lon`` and
``lat`` coordinates (ozone2: one ``ozone`` variable over ``station`` and ``time``).

Examples
--------
>>> from geostat import datasets
>>> datasets.names()  # doctest: +NORMALIZE_WHITESPACE
['co2', 'colorado_temperature', 'north_american_rainfall', 'ozone2', 'rm_precip',
 'southeast_us_monthly']
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
from typing import Any, Literal, overload

import numpy as np
import pandas as pd

from geostat.data.types import XarrayDataset

__all__ = ["DEFAULT", "info", "load", "names"]

DEFAULT = "north_american_rainfall"

_FIELDS = "R package fields 14.1 (Nychka et al.), Debian package r-cran-fields 14.1-1"
_FIELDS_LICENCE = "GPL (>= 2), the licence of the R package fields from which the data are taken"
_STARS_LICENCE = (
    "data: 'Freely available' (USGS Center for Integrated Data Analytics, file metadata); "
    "file as distributed in the R package stars: Apache-2.0"
)
_GRIDDED = "southeast_us_monthly"  # the one dataset stored as netCDF
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
        "description": "Total precipitation in August 1997 at 806 Rocky Mountain region stations",
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
    "southeast_us_monthly": {
        "description": "Monthly mean air temperature and total precipitation in 1999 on a "
        "1/8 degree grid over the south-eastern US (2080 land cells of 33 x 81, 12 months)",
        "coords": ["lon", "lat"],
        "value": "tas",
        "transform": None,
        "covariates": [],
        "units": {"lon": _LON, "lat": _LAT, "tas": "degC", "pr": "mm per month"},
        "n": 2080,
        "layout": "grid",
        "source": "R package stars 0.6-0 (Pebesma et al.), Debian package r-cran-stars 0.6-0-4: "
        "nc/bcsd_obs_1999.nc; originally the gridded observations behind the BCSD downscaled "
        "CMIP3 projections (Maurer, Wood, Adam, Lettenmaier and Nijssen 2002, J. Climate 15, "
        "3237-3251), served by the USGS Center for Integrated Data Analytics",
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
        unit), ``"n"`` (number of rows; for a grid, of observed cells), ``"layout"``
        (``"stations"``: one row per site; ``"grid"``: a gridded field with a time
        axis, fitted as a field), ``"source"`` and ``"licence"``.

    Raises
    ------
    ValueError
        If `name` is not a known dataset.
    """
    meta = copy.deepcopy(_META[_check_name(name)])
    meta.setdefault("layout", "stations")
    if meta["value"] is None:  # replicate set: the value columns are the days
        days = [col for col in _header(name) if _DATE.fullmatch(col)]
        meta["value"] = days
        meta["units"].update({day: "ppb" for day in days})
    meta["licence"] = _STARS_LICENCE if name == _GRIDDED else _FIELDS_LICENCE
    return meta


@overload
def load(name: str = ..., as_xarray: Literal[False] = ...) -> pd.DataFrame: ...
@overload
def load(name: str, as_xarray: Literal[True]) -> XarrayDataset: ...
@overload
def load(name: str = ..., *, as_xarray: Literal[True]) -> XarrayDataset: ...
@overload
def load(name: str = ..., as_xarray: bool = ...) -> pd.DataFrame | XarrayDataset: ...
def load(name: str = DEFAULT, as_xarray: bool = False) -> pd.DataFrame | XarrayDataset:
    """Load a dataset as a data frame or an xarray Dataset.

    Parameters
    ----------
    name : str, default DEFAULT
        Dataset name, one of :func:`names`.
    as_xarray : bool, default False
        Return an ``xarray.Dataset`` (needs xarray): a gridded dataset on its
        ``time``, ``lat``, ``lon`` dimensions with NaN outside the observed cells;
        a station table along a ``station`` dimension with ``lon`` and ``lat``
        coordinates and one variable per other column (``ozone2``: one ``ozone``
        variable over ``station`` and ``time``).

    Returns
    -------
    pandas.DataFrame or xarray.Dataset
        A new object on every call (safe to modify). In a frame, numeric
        columns are float64 with NaN for missing values and the ``station`` and
        ``type`` columns, where present, are strings; a gridded dataset is a long
        table of its observed cells with columns ``time``, ``lon``, ``lat`` and
        its variables. ``.attrs`` holds a copy of :func:`info`.

    Raises
    ------
    ValueError
        If `name` is not a known dataset.
    ImportError
        If `as_xarray` is true and xarray is not installed.
    """
    meta = info(name)
    if as_xarray:
        try:
            import xarray  # noqa: F401  (an optional dependency)
        except ImportError:
            raise ImportError(
                "datasets.load(..., as_xarray=True) needs xarray: pip install xarray "
                "(or pip install 'geostat-tlr[netcdf]')"
            ) from None
    if name == _GRIDDED:
        grid = _read_grid(name)
        return _grid_dataset(grid, meta) if as_xarray else _grid_frame(grid, meta)
    frame = _read_table(name, meta)
    return _station_dataset(frame, meta) if as_xarray else frame


def _read_table(name: str, meta: dict[str, Any]) -> pd.DataFrame:
    """The CSV file of a station dataset as a frame (float64 and string columns)."""
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


def _read_grid(name: str) -> dict[str, Any]:
    """The netCDF-3 file of a gridded dataset: coordinates, variables and attributes.

    Read with SciPy, so neither xarray nor the netCDF C library is needed; values
    become float64 with NaN at the fill value, ``time`` becomes ``datetime64[ns]``.
    """
    from scipy.io import netcdf_file

    with _data_file(name).open("rb") as stream, netcdf_file(stream, mmap=False) as nc:
        variables = nc.variables
        origin = variables["time"].units.decode().removeprefix("days since ")
        time = np.datetime64(origin, "ns") + variables["time"].data.astype("timedelta64[D]")
        grid = {
            "time": time,
            "lat": variables["latitude"].data.astype(float),
            "lon": variables["longitude"].data.astype(float),
            "attrs": {
                k: v.decode() if isinstance(v, bytes) else v for k, v in nc._attributes.items()
            },
            "variables": {},
        }
        for var in ("tas", "pr"):
            values = variables[var].data.astype(float)
            grid["variables"][var] = (values, variables[var].long_name.decode())
    return grid


def _grid_frame(grid: dict[str, Any], meta: dict[str, Any]) -> pd.DataFrame:
    """Long table of the observed cells: ``time, lon, lat`` and one column per variable."""
    time, lat, lon = np.meshgrid(grid["time"], grid["lat"], grid["lon"], indexing="ij")
    columns = {"time": time.ravel(), "lon": lon.ravel(), "lat": lat.ravel()}
    columns.update({var: values.ravel() for var, (values, _) in grid["variables"].items()})
    frame = pd.DataFrame(columns)
    frame = frame[frame[list(grid["variables"])].notna().any(axis=1)].reset_index(drop=True)
    frame.attrs = meta  # type: ignore[assignment]  # pandas-stubs: Mapping[Hashable | None, Any]
    return frame


def _grid_dataset(grid: dict[str, Any], meta: dict[str, Any]):
    """The grid as an ``xarray.Dataset`` on ``time, lat, lon``."""
    import xarray

    data = {
        var: (("time", "lat", "lon"), values, {"long_name": long_name, "units": meta["units"][var]})
        for var, (values, long_name) in grid["variables"].items()
    }
    coords = {
        "time": grid["time"],
        "lat": ("lat", grid["lat"], {"units": _LAT, "standard_name": "latitude"}),
        "lon": ("lon", grid["lon"], {"units": _LON, "standard_name": "longitude"}),
    }
    return xarray.Dataset(
        data, coords=coords, attrs={**grid["attrs"], "geostat_dataset": meta["description"]}
    )


def _station_dataset(frame: pd.DataFrame, meta: dict[str, Any]):
    """A station table as an ``xarray.Dataset`` along a ``station`` dimension."""
    import xarray

    station = frame["station"].to_numpy() if "station" in frame else np.arange(len(frame))
    coords = {
        "station": station,
        "lon": ("station", frame["lon"].to_numpy(), {"units": _LON}),
        "lat": ("station", frame["lat"].to_numpy(), {"units": _LAT}),
    }
    values = meta["value"]
    if isinstance(values, list):  # ozone2: the day columns form one variable over time
        data: dict[str, tuple[Any, ...]] = {
            "ozone": (("station", "time"), frame[values].to_numpy(), {"units": "ppb"})
        }
        coords["time"] = pd.to_datetime(values).to_numpy()
    else:
        others = [c for c in frame.columns if c not in ("station", "lon", "lat")]
        data = {
            c: ("station", frame[c].to_numpy(), {"units": meta["units"].get(c, "")}) for c in others
        }
    return xarray.Dataset(data, coords=coords, attrs={"geostat_dataset": meta["description"]})


def _check_name(name: str) -> str:
    """Return `name` if it is a dataset name, else raise ValueError."""
    if not isinstance(name, str) or name not in _META:
        raise ValueError(f"unknown dataset name {name!r}; pass name as one of {', '.join(names())}")
    return name


def _exact_floats() -> dict[str, Any]:
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
    """Return the file of dataset `name` (netCDF-3 for the grid, CSV otherwise)."""
    return _data_dir() / (f"{name}.nc" if name == _GRIDDED else f"{name}.csv")


def _header(name: str) -> list[str]:
    """Return the column names of dataset `name` from its CSV header."""
    with _data_file(name).open("rb") as stream:
        line = io.TextIOWrapper(stream, encoding="utf-8", newline="").readline()
    return next(csv.reader([line]))
