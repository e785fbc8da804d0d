"""What ``geostat fit`` fits: a CSV table, a bundled dataset or a NetCDF field, read into
sites, observations and covariates, with the options that select and transform them.

A column has one role (named twice, or in two roles, it is refused). A NetCDF field is
restricted by ``--select DIM=VALUE`` (by coordinate label), then its length-1
non-spatial dimensions are dropped (the first stays when all have length 1: the single
replicate). With ``--space-time`` a field is one space-time field, and a table needs a
time column (``--time``, else one named ``time``), one row per site and time. A table's
column of known measurement errors (``--noise-variance``, ``--noise-sd``) gives one
variance per row; a field's variable of them, one per cell (one per site, shared by the
replicates).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from geostat import datasets
from geostat.cli.files import FIELD_SUFFIXES, is_field, open_field, read_csv, warn
from geostat.data import XARRAY_POSITIONS, field_noise, table_from_field
from geostat.data.tables import prepare_noise
from geostat.distance import find_lonlat

__all__ = [
    "NOISE_OPTIONS",
    "TRANSFORMS",
    "FitData",
    "KnownErrors",
    "drop_singletons",
    "load_fit_data",
    "noise_option",
    "numbers",
    "select_field",
    "spatial_dims",
    "split_names",
    "times",
]

#: Values of ``--transform``: the estimator's ``target_transform`` (``"none"``: None), so
#: that the fit reports the likelihood of the data in their own units and ``geostat
#: predict`` writes values in them.
TRANSFORMS = ("none", "log", "boxcox")
#: Words of a column name that mark a longitude or a latitude (``lon`` in ``lon_deg``).
LONGITUDE_WORDS = frozenset({"lon", "long", "lng", "longitude"})
LATITUDE_WORDS = frozenset({"lat", "latitude"})
#: Options naming a table's column of known measurement errors, and what the column holds.
NOISE_OPTIONS = {"--noise-variance": "variances", "--noise-sd": "standard deviations"}


@dataclass
class KnownErrors:
    """Known measurement-error variances of a table or field (``--noise-variance`` or
    ``--noise-sd``)."""

    option: str
    column: str
    variance: np.ndarray  # one per row, in the units of the value squared; 0 where unobserved
    observed: np.ndarray  # the rows with an observed value (bool)
    field: object = None  # a field's variances as a DataArray on its grid, or None

    @property
    def noise_variance(self):
        """What the estimator's ``fit(..., noise_variance=)`` takes: the field's DataArray,
        or the table's variances."""
        return self.variance if self.field is None else self.field

    def summary(self):
        """The report's record: the option and column, and the median, least and greatest
        variance of the observed rows (units of the value squared)."""
        used = self.variance[self.observed]
        return {
            "option": self.option,
            "column": self.column,
            "n": int(used.size),
            "median": float(np.median(used)),
            "min": float(used.min()),
            "max": float(used.max()),
        }


@dataclass
class FitData:
    """What ``geostat fit`` fits, and how the report names it."""

    source: str
    X: object  # DataFrame of sites and covariates, or an xarray Dataset holding the field
    y: object  # observations (ndarray), or the name of the field's variable
    value: object  # value column(s) or variable name
    transform: str
    covariates: list
    n: int
    n_observations: int
    replicates: int
    replicate_dimension: object = None  # a field's replicate dimension (e.g. "time"), or None
    time: object = None  # the time column or coordinate of a space-time fit, or None
    noise: KnownErrors | None = None  # known measurement-error variances, or None


def noise_option(args):
    """``(option, column)`` of ``--noise-variance`` or ``--noise-sd``, or None."""
    for option, column in (
        ("--noise-variance", args.noise_variance),
        ("--noise-sd", args.noise_sd),
    ):
        if column is not None:
            return option, column
    return None


def load_fit_data(args):
    if args.file and args.dataset:
        raise ValueError("give either FILE or --dataset, not both")
    if args.file and is_field(Path(args.file)):
        with open_field(Path(args.file)) as dataset:
            return load_field(args, dataset, str(args.file))
    if args.dataset and datasets.info(args.dataset)["layout"] == "grid":
        return load_field(args, datasets.load(args.dataset, as_xarray=True), args.dataset)
    for option, value in (
        ("--var", args.var),
        ("--time-slice", args.time_slice),
        ("--time-index", args.time_index),
        ("--select", args.select),
    ):
        if value is not None:
            raise ValueError(
                f"{option} applies to a NetCDF file (named *{', *'.join(FIELD_SUFFIXES[:4])}, "
                f"...), not to {args.file or 'a bundled dataset'}; name the column of a table with "
                "--value"
            )
    if args.encoding and not args.file:
        raise ValueError(
            f"--encoding applies to a CSV file, not to the bundled dataset "
            f"{args.dataset or datasets.DEFAULT}"
        )
    if args.file:
        frame = read_csv(Path(args.file), args.sep, args.encoding)
        info = {"coords": None, "value": None, "transform": None}
        source = args.file
    else:
        source = args.dataset or datasets.DEFAULT
        frame, info = datasets.load(source), datasets.info(source)
    coords = split_names(args.coords) or info["coords"] or detect_coords(frame, source)
    value = split_names(args.value) or info["value"]
    if not value:
        raise ValueError(
            f"name the column of observations with --value; {source} has columns "
            f"{list(frame.columns)}"
        )
    value = [value] if isinstance(value, str) else list(value)
    transform = args.transform or info.get("transform") or "none"
    noise = noise_option(args)
    if noise is not None:
        check_noise_transform(noise[0], transform, args.transform is None)
    covariates = split_names(args.covariates)
    time = table_time_column(frame, args, source)
    check_roles(
        ("coordinate", "--coords" if args.coords else "the default coordinates", coords),
        ("value", "--value", value),
        ("covariate", "--covariates", covariates),
        ("time", "--time" if args.time else "the default time column", [time] if time else []),
        *([("known error", noise[0], [noise[1]])] if noise else []),
    )
    if noise is not None and noise[1] not in frame.columns:
        raise ValueError(
            f"{noise[0]} {noise[1]}: {source} has no such column; it has {list(frame.columns)}"
        )
    missing = [c for c in [*coords, *value, *covariates] if c not in frame.columns]
    if missing:
        raise ValueError(f"columns {missing} are not in the data; it has {list(frame.columns)}")
    if time and len(value) > 1:
        raise ValueError(
            "--space-time fits one value column (each row is a site at a time); got --value "
            f"{value}"
        )
    y = np.column_stack(
        [positive_for(numbers(frame, c, "value", missing_ok=True), c, transform) for c in value]
    )
    coords = spherical_order(frame, coords, args.distance)
    X = pd.DataFrame(
        {c: numbers(frame, c, "coordinate") for c in coords}
        | ({time: times(frame, time)} if time else {})
        | {c: numbers(frame, c, "covariate") for c in covariates}
    )
    return FitData(
        source,
        X,
        y[:, 0] if len(value) == 1 else y,
        value if len(value) > 1 else value[0],
        transform,
        covariates,
        len(X),
        int(np.isfinite(y).sum()),
        len(value),
        time=time,
        noise=None if noise is None else known_errors(frame, *noise, np.isfinite(y).any(axis=1)),
    )


def check_noise_transform(option, transform, by_default):
    """Refuse known errors (in the units of the value) with a transformed value."""
    if transform == "none":
        return
    fitted = "log(value)" if transform == "log" else "a Box-Cox transform of the value"
    origin = "the dataset's default --transform" if by_default else "--transform"
    raise ValueError(
        f"{option} gives errors in the units of the value, but {origin} {transform} fits "
        f"{fitted}; known errors and a transform are exclusive: add --transform none, or drop "
        f"{option}"
    )


def known_errors(frame, option, column, observed):
    """The :class:`KnownErrors` of `column`: finite, non-negative numbers wherever a value
    is `observed` (read as variances, or standard deviations squared, after `option`); the
    rows without a value are not used (their variance is 0)."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(observed & ~(np.isfinite(values) & (values >= 0)))
    if bad.size:
        shown = "; ".join(f"data row {i + 1}: {cell_text(raw.iloc[i])}" for i in bad[:3])
        raise ValueError(
            f"{option} column {column!r} must hold finite, non-negative {NOISE_OPTIONS[option]} "
            f"wherever the value is observed: {bad.size} row(s) do not ({shown}"
            f"{'; ...' if bad.size > 3 else ''}); fix or drop those rows"
        )
    values = np.where(observed, values, 0.0)
    return KnownErrors(
        option, column, values**2 if option == "--noise-sd" else values, observed.copy()
    )


def cell_text(cell):
    """A table cell as a message shows it: ``missing``, a number as written, or quoted text."""
    if pd.isna(cell):
        return "missing"
    if isinstance(cell, (int, float, np.number)):
        return f"{cell:g}"
    return repr(str(cell))


def table_time_column(frame, args, source):
    """The time column of a table for ``--space-time`` (``--time``, else the column named
    ``time``); None without ``--space-time``."""
    if not args.space_time:
        return None
    if args.time:
        if args.time not in frame.columns:
            raise ValueError(
                f"--time {args.time}: {source} has no such column; it has {list(frame.columns)}"
            )
        return args.time
    if "time" in frame.columns:
        return "time"
    raise ValueError(
        f"--space-time needs a time column: name it with --time; {source} has columns "
        f"{list(frame.columns)}"
    )


def times(frame, column):
    """A time column as numbers, or as dates (``datetime64``) when it holds dates such as
    ``1999-07-15``; anything else, or a missing value, is an error."""
    raw = frame[column]
    if pd.api.types.is_numeric_dtype(raw) or pd.to_numeric(raw, errors="coerce").notna().all():
        return numbers(frame, column, "time")
    parsed = pd.to_datetime(raw, errors="coerce", format="ISO8601")
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        first = "a missing value" if pd.isna(raw.iloc[bad[0]]) else repr(raw.iloc[bad[0]])
        raise ValueError(
            f"time column {column!r} must hold numbers or dates (e.g. 1999-07-15): {bad.size} "
            f"value(s) are neither; the first, in data row {bad[0] + 1}, is {first}; fix or drop "
            "those rows"
        )
    return parsed.to_numpy()


def split_names(text):
    return [part.strip() for part in text.split(",") if part.strip()] if text else []


def check_roles(*roles):
    """Refuse (ValueError) a column named twice, within one role or in two; each of
    `roles` is ``(role, option, names)``, e.g. ``("covariate", "--covariates",
    ["elevation"])``."""
    for _, origin, names in roles:
        repeated = sorted({c for c in names if names.count(c) > 1})
        if repeated:
            raise ValueError(f"{origin} names {repeated} more than once; give each column once")
    for i, (role, origin, names) in enumerate(roles):
        for other, other_origin, other_names in roles[i + 1 :]:
            shared = [c for c in names if c in other_names]
            if shared:
                raise ValueError(
                    f"{shared} is both a {role} ({origin}) and a {other} ({other_origin}); a "
                    "column has one role: drop it from one of them"
                )


def name_words(name):
    """The lower-case words of a column name (``"lonDeg"`` and ``"LON_DEG"``:
    ``{"lon", "deg"}``)."""
    return {word.lower() for word in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", str(name))}


def degree_columns(frame, coords):
    """``(i_lon, i_lat)`` among two coordinate columns named like longitude and latitude
    only in part (``lon_deg``, ``Latitude_N``) whose values lie in degree ranges; None
    otherwise."""
    if len(coords) != 2 or find_lonlat(coords) is not None:
        return None
    kinds = [
        ("lon" if name_words(c) & LONGITUDE_WORDS else "")
        + ("lat" if name_words(c) & LATITUDE_WORDS else "")
        for c in coords
    ]
    if sorted(kinds) != ["lat", "lon"]:
        return None
    i_lon = kinds.index("lon")
    lon = pd.to_numeric(frame[coords[i_lon]], errors="coerce")
    lat = pd.to_numeric(frame[coords[1 - i_lon]], errors="coerce")
    if lon.between(-180, 360).all() and lat.between(-90, 90).all():
        return i_lon, 1 - i_lon
    return None


def spherical_order(frame, coords, distance):
    """`coords`, longitude first for a spherical `distance` when their names are degree-like
    (:func:`degree_columns`); under ``auto`` a warning that they are taken as Euclidean."""
    found = degree_columns(frame, coords)
    if found is None:
        return coords
    lon, lat = (coords[i] for i in found)
    if str(distance).strip().lower() in ("chordal", "great_circle"):
        return [lon, lat]
    if str(distance).strip().lower() == "auto":
        warn(
            f"coordinate columns {coords} look like longitude and latitude in degrees, but only "
            "columns named lon/lat (or longitude/latitude) get a distance on the sphere: they are "
            "used as Euclidean x/y (the range in degrees). Give --distance chordal (or "
            "great_circle) for distances in km, or rename them lon and lat; --distance euclidean "
            "keeps x/y without this warning"
        )
    return coords


def numbers(frame, column, role, missing_ok=False):
    """The column as floats; anything but a finite number (or NaN where `missing_ok`) is
    an error."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values) & ~(missing_ok & raw.isna().to_numpy()))
    if bad.size:
        first = "a missing value" if pd.isna(raw.iloc[bad[0]]) else repr(raw.iloc[bad[0]])
        raise ValueError(
            f"{role} column {column!r} must hold {'numbers' if missing_ok else 'finite numbers'}: "
            f"{bad.size} value(s) are not; the first, in data row {bad[0] + 1}, is {first}; fix or "
            "drop those rows"
        )
    if missing_ok and np.isnan(values).all():
        raise ValueError(
            f"{role} column {column!r} has no values (all missing); choose another column with "
            "--value"
        )
    return values


def positive_for(values, column, transform):
    """`values` of a value column, checked positive where `transform` needs it."""
    bad = np.flatnonzero(values <= 0)
    if transform != "none" and bad.size:
        raise ValueError(
            f"--transform {transform} needs positive values, but value column {column!r} has "
            f"{bad.size} value(s) <= 0 (the first {values[bad[0]]:g} in data row {bad[0] + 1}); "
            "use --transform none or shift the column"
        )
    return values


def detect_coords(frame, source):
    """Longitude/latitude columns by name (as the library recognises them), else x and y."""
    columns = [str(c) for c in frame.columns]
    found = find_lonlat(columns)
    if found is not None:
        return [columns[found[0]], columns[found[1]]]
    if {"x", "y"} <= set(columns):
        return ["x", "y"]
    raise ValueError(
        f"{source} has no coordinate columns named lon/lat (or longitude/latitude) or x/y; name "
        f"them with --coords (e.g. --coords easting,northing); its columns are {columns}"
    )


def load_field(args, dataset, path):
    """The field to fit from an xarray Dataset (a NetCDF file's, or a gridded bundled dataset)."""
    for option, value in (
        ("--coords", args.coords),
        ("--value", args.value),
        ("--encoding", args.encoding),
    ):
        if value:
            raise ValueError(
                f"{option} applies to CSV files; a NetCDF field's sites are its lon/lat (or x/y) "
                "coordinates and --var names its variable"
            )
    noise = noise_option(args)
    covariates = split_names(args.covariates)
    dataset = select_field(dataset, args.select, path)
    name = variable(dataset, args.var or default_variable(path), path)
    check_roles(
        ("value", "--var", [name]),
        ("covariate", "--covariates", covariates),
        *([("known error", noise[0], [noise[1]])] if noise else []),
    )
    if noise is not None:
        check_noise_transform(noise[0], args.transform or "none", args.transform is None)
        if noise[1] not in dataset.data_vars:
            raise ValueError(
                f"{noise[0]} {noise[1]}: {path} has no such data variable; it has "
                f"{sorted(map(str, dataset.data_vars))}"
            )
    dataset = drop_singletons(
        dataset, dataset[name].dims, spatial_dims(dataset), keep_replicate=True
    )
    label = f"variable {name!r} of {path}"
    dataset = select_steps(dataset, dataset[name], args, label)
    kept = [name, *(c for c in covariates if c in dataset.data_vars)]
    kept += [noise[1]] if noise is not None and noise[1] not in kept else []
    dataset = dataset[kept].load()
    transform = args.transform or "none"
    check_positive_field(dataset[name], label, transform)
    time = (args.time or True) if args.space_time else None
    X, y, layout = table_from_field(dataset[name], label, covariates, dataset, time=time)
    known = None
    if noise is not None:
        given = dataset[noise[1]] ** 2 if noise[0] == "--noise-sd" else dataset[noise[1]]
        argname = f"{noise[0]} {noise[1]}"
        rows = field_noise(dataset[name], given, dataset, argname, time=time)
        values = y.reshape(len(y), -1)
        known = KnownErrors(
            noise[0],
            noise[1],
            prepare_noise(rows, values, argname),
            np.isfinite(values).any(axis=1),
            given,
        )
    return FitData(
        str(path),
        dataset,
        name,
        name,
        transform,
        covariates,
        len(X),
        int(np.isfinite(y).sum()),
        1 if y.ndim == 1 else y.shape[1],
        layout.replicate_dim,
        time=str(X.columns[len(layout.position)]) if time else None,
        noise=known,
    )


def default_variable(source):
    """The modelled variable of a bundled gridded dataset (None for a file)."""
    return datasets.info(source)["value"] if source in datasets.names() else None


def variable(dataset, var, path):
    names = [str(v) for v in dataset.data_vars]
    if var is None:
        if len(names) != 1:
            raise ValueError(
                f"{path} has {len(names)} data variables {names}; choose one with --var"
                if names
                else f"{path} has no data variable to fit"
            )
        return names[0]
    if var not in names:
        raise ValueError(f"--var {var} is not a data variable of {path}; it has {names}")
    return var


def spatial_dims(dataset, position=None):
    """The dimensions that the position coordinates of an xarray object span: those named
    `position`, else every pair of :data:`XARRAY_POSITIONS` it has."""
    pairs = [position] if position else XARRAY_POSITIONS
    return {
        d
        for pair in pairs
        if set(pair) <= set(map(str, dataset.coords))
        for name in pair
        for d in dataset[name].dims
    }


def select_field(dataset, selections, label, position=None):
    """`dataset` at the labels of ``--select DIM=VALUE``.

    Parameters
    ----------
    dataset : xarray.Dataset
    selections : list of (str, str) or None
        ``(DIM, VALUE)`` of each ``--select``. VALUE is a label of DIM's coordinate
        (``.sel``): a number for a numeric coordinate, a date or a partial date
        (``1999-07``) for a time coordinate, else text; a dimension without a coordinate
        is selected by position (from 0). A partial date may keep several steps.
    label : str
        The file, for messages.
    position : tuple of str, optional
        The position coordinates (default: those :data:`XARRAY_POSITIONS` finds).

    Raises
    ------
    ValueError
        For a dimension the file lacks, a spatial dimension, one selected twice, or a
        label it lacks (the message gives the dimension's range).
    """
    spatial = spatial_dims(dataset, position)
    sizes = {str(d): n for d, n in dataset.sizes.items()}
    chosen = [dim for dim, _ in selections or ()]
    repeated = sorted({dim for dim in chosen if chosen.count(dim) > 1})
    if repeated:
        raise ValueError(
            f"--select names dimension(s) {repeated} more than once; select each dimension once"
        )
    for dim, text in selections or ():
        if dim not in dataset.dims:
            raise ValueError(
                f"--select {dim}={text}: {label} has no dimension {dim!r}; its dimensions are "
                f"{sizes}"
            )
        if dim in spatial:
            raise ValueError(
                f"--select {dim}={text}: {dim} is a spatial dimension of {label}; --select picks "
                f"along the others ({sorted(map(str, set(dataset.dims) - spatial))})"
            )
        dataset = select_label(dataset, dim, text, label)
    return dataset


def drop_singletons(dataset, dims, spatial, keep_replicate):
    """`dataset` without the length-1 dimensions among `dims` other than the `spatial` ones.

    With `keep_replicate`, when every such dimension has length 1, the first one stays
    (the field's single replicate).
    """
    others = [d for d in dims if d not in spatial]
    singletons = [d for d in others if dataset.sizes[d] == 1]
    if keep_replicate and singletons and len(singletons) == len(others):
        singletons = singletons[1:]
    return dataset.squeeze(singletons, drop=True) if singletons else dataset


def select_label(dataset, dim, text, label):
    """`dataset` at label `text` of dimension `dim` (or position, without a coordinate)."""
    size = dataset.sizes[dim]
    if dim not in dataset.indexes:
        try:
            position = int(text)
        except ValueError:
            position = size
        if not 0 <= position < size:
            raise ValueError(
                f"--select {dim}={text}: {dim} of {label} has no coordinate values, so VALUE is a "
                f"position from 0 to {size - 1}"
            )
        return dataset.isel({dim: position}, drop=True)
    values = dataset.indexes[dim]
    span = f"{dim} has {size} value(s), from {step_label(values[0])} to {step_label(values[-1])}"
    key = text
    if values.dtype.kind in "iuf":
        try:
            key = float(text)
        except ValueError:
            raise ValueError(
                f"--select {dim}={text}: {dim} of {label} holds numbers; give one ({span})"
            ) from None
        key = int(key) if values.dtype.kind in "iu" and key.is_integer() else key
    try:
        chosen = dataset.sel({dim: key}, drop=True)
    except (KeyError, ValueError, TypeError):
        chosen = None
    if chosen is None or (dim in chosen.dims and chosen.sizes[dim] == 0):
        raise ValueError(f"--select {dim}={text}: {label} has no {dim} {text}; {span}")
    return chosen


def replicate_dimension(da, label):
    """The one dimension of a field besides the spatial ones (e.g. time)."""
    spatial = spatial_dims(da)
    others = [str(d) for d in da.dims if d not in spatial]
    if not spatial or len(others) != 1:
        raise ValueError(
            "--time-slice and --time-index select along the one time (non-spatial) dimension of "
            f"{label}, but its dimensions are {[str(d) for d in da.dims]}"
            + ("" if spatial else ", with no lon/lat or x/y coordinates")
        )
    return others[0]


def select_steps(dataset, da, args, label):
    """`dataset` restricted to the steps of --time-slice or --time-index (if given)."""
    if args.time_slice is None and args.time_index is None:
        return dataset
    if args.time_slice is not None and args.time_index is not None:
        raise ValueError("give --time-slice or --time-index, not both")
    dim = replicate_dimension(da, label)
    size = dataset.sizes[dim]
    if args.time_index is not None:
        if not -size <= args.time_index < size:
            raise ValueError(
                f"--time-index {args.time_index} is out of range: {dim} of {label} has {size} "
                f"steps (0 to {size - 1})"
            )
        return dataset.isel({dim: args.time_index})
    if dim not in dataset.coords:
        raise ValueError(
            f"--time-slice needs coordinate values along {dim} of {label}, which has none; "
            "use --time-index"
        )
    values = dataset[dim].values
    start, end = slice_bounds(args.time_slice, values.dtype.kind in "iuf")
    span = f"{dim} runs from {step_label(values[0])} to {step_label(values[-1])}"
    try:
        chosen = dataset.sel({dim: slice(start, end)})
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(
            f"--time-slice {args.time_slice} cannot select from {label} ({span}): "
            f"{' '.join(str(exc).split())}"
        ) from None
    if chosen.sizes[dim] == 0:
        raise ValueError(f"--time-slice {args.time_slice} selects no step of {label}; {span}")
    return chosen


def step_label(value):
    """A coordinate value as a user writes it (dates without a midnight time of day)."""
    if isinstance(value, (np.datetime64, pd.Timestamp)):
        return str(pd.Timestamp(value)).removesuffix(" 00:00:00")
    return str(value)


def slice_bounds(text, numeric):
    """``(start, end)`` of ``START:END`` (None where left out), numbers for a numeric coordinate."""
    if text.count(":") != 1:
        raise ValueError(
            "--time-slice must be START:END (e.g. 1999-01:1999-06; either may be left out); got "
            f"{text!r}"
        )
    bounds = [part.strip() or None for part in text.split(":")]
    if not numeric:
        return bounds
    try:
        return [None if b is None else float(b) for b in bounds]
    except ValueError:
        raise ValueError(
            f"--time-slice {text}: the time coordinate holds numbers, so START and END must be "
            "numbers"
        ) from None


def check_positive_field(da, label, transform):
    """ValueError unless the values of `da` are positive where `transform` needs it."""
    values = da.values
    bad = values <= 0  # NaN cells compare False: they stay missing
    if transform != "none" and bad.any():
        raise ValueError(
            f"--transform {transform} needs positive values, but {label} has {int(bad.sum())} "
            f"value(s) <= 0 (the first {values[bad][0]:g}); use --transform none"
        )
