"""Input and output containers: the only module that knows pandas.

Everything the statistics sees is a :class:`SpatialData`: float64 coordinates in the
order the distance expects (longitude, latitude for spherical distances), a trend design
matrix, and the observations as an ``(n, r)`` array with NaN marking a site missing on a
replicate. Column names are kept so that results can be handed back in the caller's
container.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from geostat.distance import check_lonlat, resolve_distance

__all__ = ["Trend", "SpatialData", "prepare_coords", "prepare_y", "as_output"]

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
        """Build a trend from the ``trend=`` argument of the public API.

        Parameters
        ----------
        spec : None, str or sequence
            ``None``/``"none"``, ``"constant"``, ``"linear"``, or a list of covariate
            columns of ``X`` (an intercept is always added).

        Returns
        -------
        Trend
        """
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
        if isinstance(spec, (list, tuple, pd.Index, np.ndarray)):
            columns = tuple(c.item() if isinstance(c, np.generic) else c for c in spec)
            if not columns:
                return cls("constant")
            if len(set(columns)) != len(columns):
                raise ValueError(f"trend lists a column twice: {list(spec)}; list each covariate once.")
            return cls("covariates", columns)
        raise TypeError(
            f"trend must be None, 'constant', 'linear' or a list of columns, not {type(spec).__name__}."
        )

    def design(self, coords, covariates):
        """Return the design matrix ``F`` of shape ``(n, p)``.

        Parameters
        ----------
        coords : ndarray of shape (n, d)
        covariates : ndarray of shape (n, q)

        Returns
        -------
        ndarray of shape (n, p)
        """
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

    Attributes
    ----------
    coords : ndarray of shape (n, d)
        Coordinates, float64; longitude then latitude for spherical distances.
    design : ndarray of shape (n, p)
        Trend design matrix.
    coord_names, covariate_names : list of str
    index : pandas.Index or None
        Row labels of a DataFrame input, kept for the output.
    layout : tuple
        ``(n_columns, coord_positions, covariate_positions)`` of the input, so that
        prediction inputs are split the same way.
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


def _as_frame(X, argname):
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, pd.Series):
        return X.to_frame()
    if hasattr(X, "to_pandas") and not isinstance(X, np.ndarray):
        return _as_frame(X.to_pandas(), argname)
    try:
        array = np.asarray(X)
    except Exception as exc:  # ragged lists and similar
        raise TypeError(f"{argname} must be an array-like of shape (n, d) or a DataFrame.") from exc
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)
    ):
        try:
            array = array.astype(np.float64)
        except TypeError as exc:
            raise TypeError(f"{argname} must hold numbers: {exc}") from exc
        except ValueError as exc:
            raise ValueError(
                f"{argname} must hold numbers; got dtype {array.dtype}. Convert the coordinates to float."
            ) from exc
    if np.iscomplexobj(array):
        raise ValueError(f"{argname} must be real; complex values are not supported.")
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValueError(f"{argname} must be 2-D (n, d); got an array with {array.ndim} dimensions.")
    return pd.DataFrame(array)


def prepare_coords(X, trend, distance="auto", argname="X", layout=None):
    """Split ``X`` into coordinates and covariates and check them.

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Site coordinates, plus any covariate columns named by `trend`.
    trend : Trend
    distance : str
        ``"auto"``, ``"euclidean"``, ``"chordal"`` or ``"great_circle"``.
    argname : str
        Name of the argument, used in error messages.
    layout : tuple, optional
        ``(n_columns, coord_positions, covariate_positions)`` from a fit: a prediction
        input is split by the same column positions.

    Returns
    -------
    data : SpatialData
    distance_name : str
        The distance actually used (``"auto"`` resolved).
    """
    frame = _as_frame(X, argname)
    if frame.shape[0] == 0:
        raise ValueError(f"{argname} has 0 sites; pass at least one row of coordinates.")
    if frame.shape[1] == 0:
        raise ValueError(f"{argname} has no columns; pass coordinates of shape (n, d) with d >= 1.")
    columns = list(frame.columns)
    if layout is None:
        coord_pos, cov_pos, distance_name = _layout(columns, trend, distance, isinstance(X, pd.DataFrame), argname)
    else:
        n_columns, coord_pos, cov_pos = layout
        if len(columns) != n_columns:
            raise ValueError(
                f"{argname} has {len(columns)} columns but the model was fitted with {n_columns}; "
                "pass the same columns as at fit time."
            )
        distance_name = distance
    coords = _numeric(frame.iloc[:, coord_pos], f"{argname} coordinates")
    covariates = _numeric(frame.iloc[:, cov_pos], f"{argname} covariates") if cov_pos else np.empty((len(frame), 0))
    if distance_name in ("chordal", "great_circle"):
        check_lonlat(coords, argname)
    data = SpatialData(
        coords=coords,
        design=trend.design(coords, covariates),
        coord_names=[str(columns[i]) for i in coord_pos],
        covariate_names=[str(columns[i]) for i in cov_pos],
        index=frame.index if isinstance(X, (pd.DataFrame, pd.Series)) else None,
        layout=(len(columns), list(coord_pos), list(cov_pos)),
    )
    return data, distance_name


def _layout(columns, trend, distance, named, argname):
    """Positions of coordinate and covariate columns, and the resolved distance."""
    cov_pos = []
    if trend.kind == "covariates":
        for column in trend.columns:
            if column in columns:
                cov_pos.append(columns.index(column))
            elif isinstance(column, (int, np.integer)) and 0 <= column < len(columns):
                cov_pos.append(int(column))
            else:
                raise ValueError(
                    f"trend names column {column!r}, which {argname} does not have; its columns are {columns}."
                )
    coord_pos = [i for i in range(len(columns)) if i not in cov_pos]
    if not coord_pos:
        raise ValueError(f"{argname} has no coordinate columns left after removing the trend covariates.")
    names = [str(columns[i]) for i in coord_pos] if named else None
    distance_name, lonlat = resolve_distance(distance, names)
    if lonlat is not None and len(coord_pos) == 2:
        coord_pos = [coord_pos[lonlat[0]], coord_pos[lonlat[1]]]
    return coord_pos, cov_pos, distance_name


def _numeric(frame, what):
    try:
        values = frame.to_numpy(dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric; convert the columns to float.") from exc
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argwhere(bad)[0, 0])
        raise ValueError(
            f"{what} contain NaN or infinite values (first at row {row}); "
            "drop or fill those rows before fitting."
        )
    return values


def prepare_y(y, n, argname="y"):
    """Check observations and return them as an ``(n, r)`` float64 array.

    NaN marks a site missing on a replicate; infinite values are an error.

    Parameters
    ----------
    y : array-like of shape (n,) or (n, r), Series or DataFrame
    n : int
        Number of sites.
    argname : str

    Returns
    -------
    values : ndarray of shape (n, r)
    names : list of str or None
        Column names of a DataFrame (replicates) or the Series name.
    one_d : bool
        Whether the input was one-dimensional.
    """
    names = None
    if isinstance(y, pd.DataFrame):
        names = [str(c) for c in y.columns]
    elif isinstance(y, pd.Series):
        names = [y.name] if y.name is not None else None
    try:
        values = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{argname} must be numeric; convert it to float.") from exc
    one_d = values.ndim == 1
    if one_d:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"{argname} must have shape (n,) or (n, r); got {values.shape}.")
    if values.shape[0] != n:
        raise ValueError(
            f"{argname} has {values.shape[0]} rows but X has {n} sites; pass one observation per site."
        )
    if values.shape[1] == 0:
        raise ValueError(f"{argname} has no columns; pass at least one replicate.")
    if np.isinf(values).any():
        raise ValueError(f"{argname} contains infinite values; remove or replace them (NaN marks missing).")
    observed = ~np.isnan(values)
    if not observed.any():
        raise ValueError(f"{argname} has no observed values (all NaN).")
    return values.copy(), names, one_d


def as_output(values, index=None, names=None, one_d=True):
    """Return predictions in the caller's container.

    Parameters
    ----------
    values : ndarray of shape (m, r) or (m,)
    index : pandas.Index or None
        When given, the result is a Series (one replicate) or a DataFrame.
    names : list of str, optional
        Replicate column names.
    one_d : bool
        Whether to return one column as a 1-D result.

    Returns
    -------
    ndarray, Series or DataFrame
    """
    values = np.asarray(values)
    if values.ndim == 2 and one_d:
        values = values[:, 0]
    if index is None:
        return values
    if values.ndim == 1:
        return pd.Series(values, index=index, name=names[0] if names else None)
    return pd.DataFrame(values, index=index, columns=names)
