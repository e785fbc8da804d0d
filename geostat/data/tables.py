"""Tables in and out: pandas and NumPy input checked into float64 arrays, results handed back.

The statistics sees a :class:`SpatialData` (float64 coordinates, longitude first for
spherical distances, and a trend design matrix) and observations as an ``(n, r)`` array,
NaN marking a site missing on a replicate. Column names and index are kept for the
output.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from geostat.distance import check_lonlat, resolve_distance
from geostat.errors import GeostatWarning

__all__ = [
    "Trend",
    "SpatialData",
    "check_table",
    "prepare_coords",
    "time_position",
    "align_observations",
    "prepare_y",
    "prepare_noise",
    "as_output",
    "samples_output",
]

_TREND_WORDS = ("none", "constant", "linear")


@dataclass(frozen=True)
class Trend:
    """Mean model: ``E[y] = F beta`` with ``F`` built from coordinates and covariates.

    Parameters
    ----------
    kind : {"none", "constant", "linear", "covariates"}
        ``"constant"`` is an intercept, ``"linear"`` an intercept plus the coordinates,
        ``"covariates"`` an intercept plus the columns named in `columns`.
    columns : tuple
        Covariate columns of ``X`` (names for DataFrames, integer positions for arrays).
    """

    kind: str = "constant"
    columns: tuple = ()

    @classmethod
    def parse(cls, spec):
        """The trend of a ``trend=`` setting: ``None``/``"none"``, ``"constant"``,
        ``"linear"``, or a list of covariate columns of ``X`` (an intercept added)."""
        if spec is None:
            return cls("none")
        if isinstance(spec, Trend):
            return spec
        if isinstance(spec, str):
            word = spec.lower()
            if word not in _TREND_WORDS:
                raise ValueError(
                    f"trend={spec!r} is not understood; use None, 'constant', 'linear', "
                    "or a list of covariate columns of X such as ['elevation']."
                )
            return cls(word)
        if isinstance(spec, np.ndarray) and spec.ndim != 1:
            raise TypeError(f"trend as an array must list columns (1-D); got shape {spec.shape}.")
        if isinstance(spec, (list, tuple, pd.Index, np.ndarray)):
            columns = tuple(c.item() if isinstance(c, np.generic) else c for c in spec)
            if not columns:
                return cls("constant")
            if len(set(columns)) != len(columns):
                raise ValueError(
                    f"trend lists a column twice: {list(spec)}; list each covariate once."
                )
            return cls("covariates", columns)
        raise TypeError(
            "trend must be None, 'constant', 'linear' or a list of columns, not "
            f"{type(spec).__name__}."
        )

    def design(self, coords, covariates):
        """The design matrix ``F``, ``(n, p)``, of `coords` ``(n, d)`` and `covariates`
        ``(n, q)``."""
        n = coords.shape[0]
        if self.kind == "none":
            return np.empty((n, 0))
        ones = np.ones((n, 1))
        if self.kind == "constant":
            return ones
        if self.kind == "linear":
            return np.hstack([ones, coords])
        return np.hstack([ones, covariates])

    def names(self, coord_names, covariate_names):
        """Names of the trend coefficients, in the order of :meth:`design`."""
        if self.kind == "none":
            return []
        if self.kind == "constant":
            return ["intercept"]
        if self.kind == "linear":
            return ["intercept", *map(str, coord_names)]
        return ["intercept", *map(str, covariate_names)]


@dataclass
class SpatialData:
    """Validated inputs of one fit or prediction.

    ``coords`` ``(n, d)`` (longitude first for spherical distances), ``design``
    ``(n, p)``, ``coord_names``, ``covariate_names``, the ``index`` of a DataFrame input,
    and the ``layout`` ``(n_columns, coord_positions, covariate_positions)`` that splits
    prediction inputs the same way.
    """

    coords: np.ndarray
    design: np.ndarray
    coord_names: list
    covariate_names: list
    index: object = None
    layout: tuple = ()

    @property
    def n(self):
        """Number of sites."""
        return self.coords.shape[0]


def check_table(X, argname, finite=True):
    """Refuse a table that is not rows of numbers, naming the argument and the column.

    Refused: no rows or no columns, a scalar, non-numeric DataFrame columns, duplicate
    column names, ragged nested lists, strings in an array, complex values, and (with
    `finite`) NaN or infinite values.

    Raises
    ------
    ValueError, TypeError
    """
    if isinstance(X, pd.Series):
        X = X.to_frame()
    if isinstance(X, pd.DataFrame):
        _check_extent(X.shape, argname)
        if X.columns.has_duplicates:
            repeated = sorted({str(c) for c in X.columns[X.columns.duplicated()]})
            raise ValueError(
                f"{argname} has duplicate column names {repeated}; give each column its own name."
            )
        bad = [
            c
            for c in X.columns
            if not pd.api.types.is_numeric_dtype(X[c]) or pd.api.types.is_complex_dtype(X[c])
        ]
        if bad:
            dtypes = ", ".join(f"{str(c)!r} ({X[c].dtype})" for c in bad)
            raise ValueError(
                f"{argname} has non-numeric column(s) {dtypes}; every column of {argname} is a "
                "coordinate or a trend covariate, so convert them to real numbers or drop them."
            )
        if finite:
            _check_finite(X.to_numpy(dtype=np.float64), [str(c) for c in X.columns], argname)
        return
    if hasattr(X, "to_pandas") and not isinstance(X, np.ndarray):
        return
    try:
        array = np.asarray(X)
    except ValueError as exc:
        raise ValueError(
            f"{argname} is ragged (its rows have different lengths); pass an array of shape (n, d)."
        ) from exc
    if array.ndim == 0:
        raise ValueError(f"{argname} must be an array of shape (n, d); got the scalar {X!r}.")
    _check_extent(array.shape, argname)
    if np.iscomplexobj(array):
        raise ValueError(f"Complex data not supported: {argname} must be real.")
    if array.dtype.kind in "OUS" and not _converts(array):
        flat = array.reshape(array.shape[0], -1)
        for (row, column), value in np.ndenumerate(flat):
            try:
                float(value)
            except (TypeError, ValueError) as exc:
                shown = value.item() if isinstance(value, np.generic) else value
                kind = TypeError if isinstance(exc, TypeError) else ValueError
                raise kind(
                    f"{argname} must hold numbers; row {row}, column {column} is {shown!r}, which "
                    "float() refuses (its argument must be a string or a number). Convert the "
                    "entries to float."
                ) from None
    if not finite:
        return
    if array.dtype.kind in "OUS":
        array = array.astype(np.float64)
    if array.dtype.kind in "iufb" and array.ndim == 2:
        _check_finite(array.astype(np.float64, copy=False), list(range(array.shape[1])), argname)


def _check_finite(values, columns, argname):
    """Refuse NaN or infinite coordinates or covariates, naming the column and rows."""
    bad = ~np.isfinite(values)
    if bad.any():
        column = int(np.flatnonzero(bad.any(axis=0))[0])
        rows = np.flatnonzero(bad[:, column])
        shown = ", ".join(str(r) for r in rows[:5]) + (
            f" and {rows.size - 5} more" if rows.size > 5 else ""
        )
        raise ValueError(
            f"{argname} contains NaN or infinite values in column {columns[column]!r} (row(s) "
            f"{shown}); a site needs finite coordinates and covariates: drop those rows or fill "
            "them."
        )


def _converts(array):
    """Whether every entry of an object or string array converts to float."""
    try:
        array.astype(np.float64)
    except (TypeError, ValueError):
        return False
    return True


def _check_extent(shape, argname):
    """Refuse a table without rows or columns (in words scikit-learn's checks expect)."""
    if shape[0] == 0:
        raise ValueError(f"{argname} has 0 rows; pass one row per site.")
    if len(shape) == 2 and shape[1] == 0:
        raise ValueError(
            f"{argname} has 0 feature(s) (shape={tuple(shape)}) while a minimum of 1 is required: "
            "pass an array of shape (n, d) with d >= 1."
        )


def _as_frame(X, argname):
    check_table(X, argname)
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        return X.to_frame()
    if hasattr(X, "to_pandas") and not isinstance(X, np.ndarray):
        return _as_frame(X.to_pandas(), argname)
    array = np.asarray(X)
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)
    ):
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{argname} must hold numbers; got values of dtype {array.dtype} that are not. "
                "Convert the coordinates to float."
            ) from exc
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(
            f"{argname} must be 2-D (n, d); got an array with {array.ndim} dimensions."
        )
    return pd.DataFrame(array)


def prepare_coords(X, trend, distance="auto", argname="X", layout=None, time=None):
    """Split ``X`` into coordinates and covariates and check them.

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Site coordinates, plus any covariate columns named by `trend`.
    trend : Trend
    distance : str
        ``"auto"``, ``"euclidean"``, ``"chordal"`` or ``"great_circle"``.
    argname : str
    layout : tuple, optional
        ``(n_columns, coord_positions, covariate_positions)`` of a fit, to split a
        prediction input the same way.
    time : str, int, True or None, default None
        The time column of a space-time model (a name, a position, or True for the last
        coordinate column); it becomes the last coordinate.

    Returns
    -------
    data : SpatialData
    distance_name : str
        The distance actually used (``"auto"`` resolved).
    """
    frame = _as_frame(X, argname)
    columns = list(frame.columns)
    if layout is None:
        coord_pos, cov_pos, distance_name = _layout(
            columns, trend, distance, isinstance(X, pd.DataFrame), argname, time
        )
    else:
        n_columns, coord_pos, cov_pos = layout
        if len(columns) != n_columns:
            raise ValueError(
                f"{argname} has {len(columns)} columns but the model was fitted with {n_columns}; "
                "pass the same columns as at fit time."
            )
        distance_name = distance
    coords = _numeric(frame.iloc[:, coord_pos], f"{argname} coordinates")
    covariates = (
        _numeric(frame.iloc[:, cov_pos], f"{argname} covariates")
        if cov_pos
        else np.empty((len(frame), 0))
    )
    spatial = coords[:, :-1] if time is not None else coords
    if time is not None and spatial.shape[1] == 0:
        raise ValueError(f"{argname} has a time column but no spatial coordinate columns.")
    if distance_name in ("chordal", "great_circle"):
        check_lonlat(spatial, argname)
    else:
        _check_spread(coords, argname)
    if (
        layout is None
        and _is_auto(distance)
        and distance_name == "euclidean"
        and isinstance(X, pd.DataFrame)
    ):
        _warn_if_degrees(coords, [str(columns[i]) for i in coord_pos], argname)
    data = SpatialData(
        coords=coords,
        design=trend.design(coords, covariates),
        coord_names=[str(columns[i]) for i in coord_pos],
        covariate_names=[str(columns[i]) for i in cov_pos],
        index=frame.index if isinstance(X, (pd.DataFrame, pd.Series)) else None,
        layout=(len(columns), list(coord_pos), list(cov_pos)),
    )
    return data, distance_name


def _layout(columns, trend, distance, named, argname, time=None):
    """Positions of coordinate and covariate columns (the time column last), and the
    resolved distance."""
    cov_pos = _covariate_positions(columns, trend, argname)
    coord_pos = [i for i in range(len(columns)) if i not in cov_pos]
    if not coord_pos:
        raise ValueError(
            f"{argname} has no coordinate columns left after removing the trend covariates."
        )
    time_pos = None if time is None else _time_position(columns, coord_pos, cov_pos, time, argname)
    if time_pos is not None:
        coord_pos.remove(time_pos)
    names = [str(columns[i]) for i in coord_pos] if named else None
    if named:
        _check_no_split_position(names, [str(columns[i]) for i in cov_pos], argname)
    distance_name, lonlat = resolve_distance(distance, names)
    if lonlat is not None and len(coord_pos) == 2:
        coord_pos = [coord_pos[lonlat[0]], coord_pos[lonlat[1]]]
    if time_pos is not None:
        coord_pos.append(time_pos)
    return coord_pos, cov_pos, distance_name


def time_position(X, trend, time, argname="X"):
    """Position of the `time` column among the columns of `X`, as :func:`prepare_coords`
    finds it; None without `time` or for an `X` that is not a table.

    Raises
    ------
    ValueError
        If `time` names no column of `X`, or a trend covariate.
    """
    if time is None:
        return None
    if isinstance(X, pd.DataFrame):
        columns = list(X.columns)
    else:
        try:
            shape = np.shape(X)
        except ValueError:  # ragged rows
            return None
        if len(shape) != 2:
            return None
        columns = list(range(shape[1]))
    cov_pos = _covariate_positions(columns, trend, argname)
    coord_pos = [i for i in range(len(columns)) if i not in cov_pos]
    return _time_position(columns, coord_pos, cov_pos, time, argname) if coord_pos else None


def _time_position(columns, coord_pos, cov_pos, time, argname):
    """Position of the time column: a name, an integer position, or True for the last
    coordinate column."""
    if time is True:
        return coord_pos[-1]
    if time in columns:
        position = columns.index(time)
    elif (
        isinstance(time, (int, np.integer))
        and not isinstance(time, (bool, np.bool_))
        and -len(columns) <= time < len(columns)
    ):
        position = int(time) % len(columns)
    else:
        raise ValueError(
            f"time={time!r} is not a column of {argname}; its columns are {columns}. Name the time "
            "column (e.g. time='time') or give its position."
        )
    if position in cov_pos:
        raise ValueError(
            f"time={time!r} is also a trend covariate; a column is either the time or a covariate."
        )
    return position


def _covariate_positions(columns, trend, argname):
    """Positions of the trend covariates among `columns` (names, or integer positions for
    unnamed columns); a column named twice, by its name and its position, is refused."""
    cov_pos = []
    if trend.kind != "covariates":
        return cov_pos
    for column in trend.columns:
        if column in columns:
            position = columns.index(column)
        elif isinstance(column, (int, np.integer)) and 0 <= column < len(columns):
            position = int(column)
        else:
            raise ValueError(
                f"trend names column {column!r}, which {argname} does not have; its columns are "
                f"{columns}."
            )
        if position in cov_pos:
            raise ValueError(
                f"trend names column {columns[position]!r} of {argname} twice (by name and by "
                f"position: {list(trend.columns)}); list each covariate once."
            )
        cov_pos.append(position)
    return cov_pos


#: Pairs of coordinate names that belong together: a trend covariate named like one half
#: of a pair while the other half stays a coordinate splits the position.
_POSITION_PAIRS = (({"lon", "long", "lng", "longitude"}, {"lat", "latitude"}), ({"x"}, {"y"}))


def _check_no_split_position(coord_names, covariate_names, argname):
    """Refuse a trend covariate that is half of the position whose other half is a
    coordinate (``trend=["lon"]`` with columns lon, lat)."""
    coords = {name.strip().lower() for name in coord_names}
    for name in covariate_names:
        key = name.strip().lower()
        for first, second in _POSITION_PAIRS:
            partner = second if key in first else first if key in second else set()
            if coords & partner:
                rest = [c for c in coord_names if c.strip().lower() in partner]
                raise ValueError(
                    f"trend names {name!r}, which with {rest} forms the position of {argname}: as "
                    f"a trend covariate it would leave {rest} alone as the coordinates. Use "
                    "trend='linear' for a trend in the coordinates, or give the covariate its own "
                    "name (a copy of the column)."
                )


#: Longitude and latitude in degrees lie within these bounds.
_DEGREE_BOUNDS = ((-180.0, 360.0), (-90.0, 90.0))


def _warn_if_degrees(coords, names, argname):
    """Warn when two Euclidean coordinate columns look like longitude and latitude in
    degrees (names containing lon or lng and lat, values in [-180, 360] x [-90, 90])."""
    if len(names) != 2:
        return
    lowered = [name.lower() for name in names]
    lon = [i for i, name in enumerate(lowered) if "lon" in name or "lng" in name]
    lat = [i for i, name in enumerate(lowered) if "lat" in name]
    if len(lon) != 1 or len(lat) != 1 or lon == lat:
        return
    within = all(
        low <= coords[:, i].min() and coords[:, i].max() <= high
        for i, (low, high) in zip((lon[0], lat[0]), _DEGREE_BOUNDS, strict=True)
    )
    if within:
        warnings.warn(
            f"{argname} coordinate columns {list(names)} look like longitude and latitude in "
            "degrees, but are not named lon/lat (or longitude/latitude), so distance='auto' takes "
            "them as Euclidean coordinates: distances and the range are then in degrees. Rename "
            "them to lon and lat for chordal distances in km, or pass distance='euclidean' to keep "
            "Euclidean distances.",
            GeostatWarning,
            stacklevel=4,
        )


#: Coordinates beyond the upper limit, or spread over less than the lower one, make squared
#: distances over- or underflow.
_SPREAD_LIMITS = (1e-150, 1e150)


def _check_spread(coords, argname):
    """Refuse coordinates whose differences, squared, leave double precision."""
    if not coords.size:
        return
    low, high = _SPREAD_LIMITS
    largest = float(np.max(np.abs(coords)))
    spread = float(np.max(np.ptp(coords, axis=0)))
    if largest > high or 0 < spread < low:
        what = f"reach {largest:.3g}" if largest > high else f"span {spread:.3g}"
        raise ValueError(
            f"{argname} coordinates {what}: squared distances would "
            f"{'overflow' if largest > high else 'underflow'} in double precision. Rescale the "
            f"coordinates (e.g. to km) to magnitudes between {low:g} and {high:g}."
        )


def _is_auto(distance):
    """Whether the ``distance`` setting is ``"auto"`` (chosen from the column names)."""
    return isinstance(distance, str) and distance.strip().lower() == "auto"


def _numeric(frame, what):
    values = frame.to_numpy(dtype=np.float64, copy=True)
    bad = ~np.isfinite(values)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{what} contain NaN or infinite values (first at row {row}, column "
            f"{frame.columns[column]!r}); drop or fill those rows before fitting."
        )
    return values


def align_observations(X, y, argname="y"):
    """`y` in the row order of `X`, paired by index label when both are pandas objects.

    Pairing by label guards against a ``y`` whose index is a permutation of ``X``'s.

    Returns
    -------
    y
        Unchanged unless both are pandas objects with equal, unique index sets in
        different orders: then `y` reindexed to ``X.index``. Unequal lengths are left
        to :func:`prepare_y`.

    Raises
    ------
    ValueError
        If both are pandas objects of the same length whose indexes hold different
        labels, or the same labels in another order with some repeated.
    """
    if not (isinstance(X, (pd.DataFrame, pd.Series)) and isinstance(y, (pd.DataFrame, pd.Series))):
        return y
    if len(X.index) != len(y.index) or y.index.equals(X.index):
        return y
    repeated = X.index.has_duplicates or y.index.has_duplicates
    if not repeated and X.index.isin(y.index).all():
        return y.reindex(X.index)
    absent = X.index[~X.index.isin(y.index)]
    why = (
        f"{absent.size} label(s) of X's index are not in {argname}'s (e.g. {list(absent[:3])})"
        if absent.size
        else "they hold the same labels in another order, with some repeated"
    )
    raise ValueError(
        f"{argname} and X are pandas objects whose indexes disagree: {why}. Observations are "
        f"paired with sites by index label; align them first ({argname}.reindex(X.index), or reset "
        f"both indexes), or pass {argname}.to_numpy() to pair them by position."
    )


def prepare_y(y, n, argname="y"):
    """``(values, names, one_d)``: observations `y` ``(n,)`` or ``(n, r)`` checked into a
    new ``(n, r)`` float64 array (NaN: missing; infinite values and empty replicates
    raise ValueError), the column or Series names (or None), and whether `y` was 1-D."""
    names = None
    if isinstance(y, pd.DataFrame):
        names = [str(c) for c in y.columns]
    elif isinstance(y, pd.Series):
        names = [y.name] if y.name is not None else None
    if isinstance(y, (pd.DataFrame, pd.Series)):
        check_table(y, argname, finite=False)  # NaN marks a missing observation
    try:
        values = np.asarray(y)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(f"{argname} is ragged; pass numbers of shape (n,) or (n, r).") from exc
    if np.iscomplexobj(values):
        raise ValueError(f"Complex data not supported: {argname} must be real.")
    try:
        values = values.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{argname} must be numbers of shape (n,) or (n, r); got values of dtype "
            f"{values.dtype} that are not. Convert it to float (NaN marks a missing value)."
        ) from exc
    one_d = values.ndim == 1
    if one_d:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"{argname} must have shape (n,) or (n, r); got {values.shape}.")
    if values.shape[0] != n:
        raise ValueError(
            f"{argname} has {values.shape[0]} rows but X has {n} sites; pass one observation per "
            "site."
        )
    if values.shape[1] == 0:
        raise ValueError(f"{argname} has no columns; pass at least one replicate.")
    if np.isinf(values).any():
        raise ValueError(
            f"{argname} contains infinite values; remove or replace them (NaN marks missing)."
        )
    empty = np.flatnonzero(np.isnan(values).all(axis=0))
    if empty.size == values.shape[1]:
        raise ValueError(f"{argname} has no observed values (all NaN).")
    if empty.size:
        label = (
            f"column {names[empty[0]]!r}"
            if names and len(names) == values.shape[1]
            else f"column {empty[0]}"
        )
        raise ValueError(
            f"{argname} replicate {label} has no observed values (all NaN; {empty.size} such "
            "replicate(s)); drop the empty replicates before fitting."
        )
    return values.copy(), names, one_d


def prepare_noise(noise, y, argname="noise_variance"):
    """Check known measurement-error variances and return one per site.

    `noise` ``(n,)``, ``(n, 1)`` or ``(n, r)`` holds variances in units of `y` squared
    (0: none known); an ``(n, r)`` array must agree across the observed replicates of
    each site (NaN where `y` is NaN). Returns a new float64 ``(n,)`` array (0.0 at a site
    observed nowhere); ValueError for another shape, a negative or non-finite variance
    at an observed cell, or disagreeing replicates.
    """
    n, r = y.shape
    shapes = f"({n},), ({n}, 1)" + (f" or ({n}, {r})" if r > 1 else "")
    try:
        raw = np.asarray(noise)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(
            f"{argname} is ragged; pass numbers (variances) of shape {shapes}."
        ) from exc
    if raw.dtype.kind not in "iuf":
        raise ValueError(
            f"{argname} must be real numbers (variances) of shape {shapes}; got values of dtype "
            f"{raw.dtype}."
        )
    values = raw.astype(np.float64)  # a copy: the input is never changed
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.shape not in ((n,), (n, r)):
        raise ValueError(
            f"{argname} must have shape {shapes} (one variance per site, in the units of y "
            f"squared); got shape {values.shape}."
        )
    observed = ~np.isnan(y) if values.ndim == 2 else np.ones(n, dtype=bool)
    bad = observed & ~(np.isfinite(values) & (values >= 0))
    bad |= ~observed & ~(np.isnan(values) | (np.isfinite(values) & (values >= 0)))
    if bad.any():
        where = tuple(np.argwhere(bad)[0])
        raise ValueError(
            f"{argname} must hold finite, non-negative variances (NaN only where y is missing); "
            f"row {int(where[0])} has {float(values[where])!r} ({int(bad.sum())} such value(s))."
        )
    if values.ndim == 1:
        return values
    per_site = np.where(observed, values, np.inf).min(axis=1)
    spread = np.where(observed, values, -np.inf).max(axis=1)
    differs = np.flatnonzero(observed.any(axis=1) & (spread != per_site))
    if differs.size:
        i = int(differs[0])
        raise ValueError(
            f"{argname} gives site (row) {i} the variances {per_site[i]:g} and {spread[i]:g} on "
            f"different replicates ({differs.size} such site(s)); the known noise is one variance "
            f"per site, shared by the replicates: pass shape ({n},), or fit replicates of "
            "different noise separately."
        )
    return np.where(observed.any(axis=1), per_site, 0.0)


def as_output(values, index=None, names=None, one_d=True):
    """Predictions `values` ``(m, r)`` in the caller's container: 1-D when `one_d`, and
    with an `index` a Series (one replicate) or a DataFrame with columns `names`."""
    values = np.asarray(values)
    if values.ndim == 2 and one_d:
        values = values[:, 0]
    if index is None:
        return values
    if values.ndim == 1:
        return pd.Series(values, index=index, name=names[0] if names else None)
    return pd.DataFrame(values, index=index, columns=names)


def samples_output(draws, index=None, names=None, one_d=True, axis="sample", labels=None):
    """Return conditional draws (or another trailing axis of values) in the caller's container.

    `draws` ``(m, r, k)`` becomes ``(m, k)`` when `one_d`; with an `index`, a DataFrame
    with one column per draw (columns named `axis`, labelled `labels`, default
    ``0..k-1``), or with replicates a ``(replicate, axis)`` column MultiIndex (replicate
    names `names`, default ``0..r-1``).
    """
    m, r, k = draws.shape
    if index is None:
        return draws[:, 0, :] if one_d else draws
    labels = pd.RangeIndex(k, name=axis) if labels is None else pd.Index(labels, name=axis)
    if one_d:
        return pd.DataFrame(draws[:, 0, :], index=index, columns=labels)
    columns = pd.MultiIndex.from_product(
        [names if names else range(r), labels], names=["replicate", axis]
    )
    return pd.DataFrame(draws.reshape(m, r * k), index=index, columns=columns)
