"""xarray fields in and out: a ``DataArray`` on a lon/lat (or x/y) grid or station
dimension becomes a sites table and observations; predictions on a template become
``DataArray`` objects on its coordinates. xarray itself is imported only to build results.

For a spatial model the other dimension (e.g. ``time``) holds replicates. For a
space-time model the field is one realization: every observed cell (site, time) is an
observation with coordinates (position, time) (:func:`space_time_table`), and a template
is predicted on every cell of its spatial and time coordinates, in the order of its
dimensions. Dates stay as they are here; :mod:`geostat.data.times` makes them numbers.

Predictions keep what climate tools read from the template: its order of dimensions,
its coordinates with their attributes (units, standard names, axes, and the encoding of
a time coordinate: units and calendar), and CF attributes of the predicted variable
(:func:`prediction_attrs`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from geostat.distance import find_lonlat

__all__ = [
    "XARRAY_POSITIONS",
    "PREDICTION_LABELS",
    "is_xarray",
    "is_chunked",
    "FieldLayout",
    "field_to_fit",
    "table_from_field",
    "space_time_table",
    "sites_of_template",
    "field_from_values",
    "lazy_field",
    "prediction_attrs",
    "grid_mapping_names",
]

#: Coordinate names recognised as the horizontal position of an xarray field, in order of
#: preference: longitude/latitude (as for DataFrame columns), then x/y.
XARRAY_POSITIONS = (("lon", "lat"), ("longitude", "latitude"), ("x", "y"))
#: What each kind of prediction is, for its ``long_name`` ("kriging mean of ...").
PREDICTION_LABELS = {
    "mean": "kriging mean",
    "std": "kriging standard deviation",
    "sample": "conditional simulation",
}


def is_xarray(obj):
    """Whether `obj` is an xarray object (checked without importing xarray)."""
    return type(obj).__module__.partition(".")[0] == "xarray"


@dataclass
class FieldLayout:
    """How a gridded or station field maps to sites: kept at fit time to rebuild outputs.

    Attributes
    ----------
    position : tuple of str
        The two coordinate names of the horizontal position (x-like first).
    space_dims : tuple of str
        The dimensions those coordinates span (``(lat, lon)`` on a grid, ``(station,)``).
    replicate_dim : str or None
        The other dimension (e.g. ``time``), whose entries are replicates.
    replicates : ndarray or None
        Its coordinate values (None without a coordinate).
    """

    position: tuple
    space_dims: tuple
    replicate_dim: object = None
    replicates: object = None


def _field_layout(obj, argname, position=None):
    """The layout of `obj`'s horizontal position: the coordinates named `position` (a
    fitted model's, read by name and in that order), else the first pair of
    :data:`XARRAY_POSITIONS` that `obj` has."""
    if position is None:
        position = _recognised_position(obj, argname)
    spanned = {d for name in position for d in obj.coords[name].dims}
    return FieldLayout(tuple(position), tuple(d for d in obj.dims if d in spanned))


def _recognised_position(obj, argname):
    """The first pair of :data:`XARRAY_POSITIONS` among `obj`'s coordinates."""
    coords = set(obj.coords)
    for position in XARRAY_POSITIONS:
        if set(position) <= coords:
            return position
    raise ValueError(
        f"{argname} has no horizontal coordinates: give it coordinates named lon/lat (or longitude/latitude, "
        f"or x/y); it has {sorted(map(str, coords))}."
    )


def _observed_table(da, source, layout, covariates, observed, argname):
    """The sites (their coordinates by `layout`) and trend covariates of the `observed`
    cells of `da`, as a table; a covariate that is NaN at an observed cell is refused."""
    frame = _sites_of(da, layout)[observed].reset_index(drop=True)
    for name, column in _covariates_of(
        source if source is not None else da, layout, covariates, argname
    ).items():
        column = column[observed]
        if np.isnan(column).any():
            raise ValueError(
                f"trend covariate {name!r} is NaN at {int(np.isnan(column).sum())} observed cell(s) of {argname}; "
                "fill it there or set those observations to NaN."
            )
        frame[name] = column
    return frame


def _sites_of(obj, layout):
    """Coordinates of every cell of the layout's dimensions, one column per name of its
    position (named so): floats, or the raw values of a date coordinate (``datetime64``
    or cftime objects, converted by :mod:`geostat.data.times`)."""
    shape = tuple(obj.sizes[d] for d in layout.space_dims)
    columns = {}
    for name in layout.position:
        coord = obj.coords[name]
        own = [d for d in layout.space_dims if d in coord.dims]
        values = np.asarray(coord.transpose(*own).values)
        if values.dtype.kind not in "MO":
            values = values.astype(float)
        expanded = values.reshape(
            [obj.sizes[d] if d in coord.dims else 1 for d in layout.space_dims]
        )
        columns[name] = np.broadcast_to(expanded, shape).reshape(-1)
    return pd.DataFrame(columns, columns=list(layout.position))


def field_to_fit(X, y, argname="X"):
    """The observed ``DataArray`` of a fit and the object holding its covariates.

    Parameters
    ----------
    X : xarray.DataArray or xarray.Dataset
    y : None or str
        Omitted for a ``DataArray`` (its values are the observations); for a ``Dataset``
        the name of the observed variable.
    argname : str

    Returns
    -------
    field : xarray.DataArray
    source : xarray.DataArray or xarray.Dataset
        Where trend covariates are looked up (data variables and coordinates).
    """
    if hasattr(X, "data_vars"):
        names = sorted(map(str, X.data_vars))
        if not isinstance(y, str):
            raise TypeError(
                f"with {argname} an xarray Dataset, y names the observed variable (one of {names}), e.g. "
                f"fit(ds, y={names[0]!r}) — or pass the DataArray: fit(ds[{names[0]!r}])."
            )
        if y not in X.data_vars:
            raise ValueError(f"y={y!r} is not a data variable of {argname}; it has {names}.")
        return X[y], X
    if y is not None:
        raise ValueError(
            f"y must be omitted when {argname} is an xarray DataArray: its values are the observations."
        )
    return X, X


def table_from_field(da, argname="X", covariates=(), source=None, time=None):
    """Sites and observations of an xarray ``DataArray`` field.

    The horizontal position comes from coordinates named lon/lat (or longitude/latitude,
    or x/y), in that order of preference: dimensions of a grid, 2-D (curvilinear)
    coordinates, or coordinates along a station dimension. At most one other dimension
    longer than 1 (``time`` or any name) holds replicates; the other dimensions must have
    length 1 and are dropped (squeezed), so that a file's ``(time=1, zlev=1, lat, lon)``
    variable fits as it comes. When every other dimension has length 1, the first one
    holds the single replicate (its label, e.g. the date, then labels the predictions).
    Select along the dimensions that are longer first, e.g. ``da.sel(level=850)`` or
    ``da.isel(member=0)``. NaN cells are missing values; cells missing on every
    replicate (a land or sea mask) are dropped. A Dask-backed field is reduced to its
    mask block by block and only then brought into memory.

    Parameters
    ----------
    da : xarray.DataArray
    argname : str
    covariates : sequence of str
        Trend covariates: variables or coordinates of `source` over the spatial
        dimensions only (the trend design is shared by the replicates; dimensions of
        length 1 are dropped), and not the position coordinates themselves.
    source : xarray.Dataset or xarray.DataArray, optional
        Where the covariates are looked up (default `da`'s coordinates).
    time : None, True or str, default None
        None: the other dimension holds replicates (as above). Otherwise the field is
        one space-time field (:func:`space_time_table`): True takes the time coordinate
        of the one non-spatial dimension, a str names the time coordinate.

    Returns
    -------
    X : DataFrame
        One row per kept cell: the position names (so ``distance="auto"`` recognises
        longitude/latitude), then the covariates.
    y : ndarray of shape (n,) or (n, r)
    layout : FieldLayout

    Raises
    ------
    ValueError
        Without position coordinates, with more than one non-spatial dimension longer
        than 1, when no cell is observed, or for a covariate that is missing, is a
        position coordinate, varies along the replicates, or is NaN at an observed cell.
    """
    if time is not None:
        return space_time_table(da, argname, covariates, source, time)
    layout = _field_layout(da, argname)
    _check_covariates_are_not_position(covariates, layout, argname)
    other, squeezed = _replicate_dims(da, layout, argname)
    da = da.squeeze(squeezed)
    if other:
        layout.replicate_dim = other[0]
        layout.replicates = np.asarray(da[other[0]].values) if other[0] in da.coords else None
    n_replicates = da.sizes[other[0]] if other else 1
    ordered = da.transpose(*layout.space_dims, *other)
    observed = np.asarray(
        ordered.notnull().any(other).values if other else ordered.notnull().values
    ).reshape(-1)
    if not observed.any():
        raise ValueError(f"{argname} has no observed value (every cell is NaN).")
    values = np.asarray(ordered.values, dtype=float).reshape(-1, n_replicates)
    frame = _observed_table(da, source, layout, covariates, observed, argname)
    y = values[observed]
    return frame, (y if layout.replicate_dim else y[:, 0]), layout


def space_time_table(da, argname="X", covariates=(), source=None, time=True):
    """Observations of a space-time field: one row per observed cell (site, time).

    Every non-NaN cell of the spatial dimensions and the time dimension is an
    observation whose coordinates are the position, then the time (raw: numbers,
    ``datetime64`` or cftime dates, converted by :mod:`geostat.data.times`), in the
    order of `da`'s dimensions. Other dimensions must have length 1 and are dropped.

    Parameters
    ----------
    da : xarray.DataArray
    argname : str
    covariates : sequence of str
        Trend covariates over the spatial dimensions, the time dimension or both (the
        ones missing are broadcast), not the position or time coordinates.
    source : xarray.Dataset or xarray.DataArray, optional
        Where the covariates are looked up (default `da`'s coordinates).
    time : True or str, default True
        True: the coordinate of the one non-spatial dimension (longer than 1, else the
        first); a str: the name of a one-dimensional time coordinate of `da`.

    Returns
    -------
    X : DataFrame
        One row per observed cell: the position names, the time coordinate's name (the
        last coordinate column), then the covariates.
    y : ndarray of shape (n,)
    layout : FieldLayout
        The spatial layout (no replicate dimension: the field is one realization).

    Raises
    ------
    ValueError
        Without position coordinates or a time coordinate, with another dimension longer
        than 1, when no cell is observed, or for a covariate that is missing, is a
        coordinate of the model, or is NaN at an observed cell.
    """
    layout = _field_layout(da, argname)
    time_name, time_dim = _time_coordinate(da, layout, time, argname)
    _check_covariates_are_not_position(
        covariates, FieldLayout(layout.position + (time_name,), ()), argname
    )
    others = [d for d in da.dims if d not in layout.space_dims and d != time_dim]
    longer = [d for d in others if da.sizes[d] > 1]
    if longer:
        name = argname if argname.isidentifier() else "da"
        raise ValueError(
            f"{argname} has dimensions {_sizes(da)}: besides the spatial ones {list(layout.space_dims)} "
            f"and the time ({time_dim!r}) no dimension may be longer than 1; select along the others "
            f"first, e.g. {name}.isel({longer[0]}=0)."
        )
    da = da.squeeze(others)
    cells = FieldLayout(layout.position + (time_name,), tuple(d for d in da.dims))
    observed = np.asarray(da.notnull().values).reshape(-1)
    if not observed.any():
        raise ValueError(f"{argname} has no observed value (every cell is NaN).")
    frame = _observed_table(da, source, cells, covariates, observed, argname)
    return frame, np.asarray(da.values, dtype=float).reshape(-1)[observed], layout


def _sizes(da):
    return {str(d): da.sizes[d] for d in da.dims}


def _time_coordinate(da, layout, time, argname):
    """``(name, dimension)`` of the time coordinate of a space-time field (see
    :func:`space_time_table`); the dimension is None for a scalar time."""
    if time is True:
        other = [d for d in da.dims if d not in layout.space_dims]
        longer = [d for d in other if da.sizes[d] > 1]
        if len(longer) > 1:
            raise ValueError(
                f"{argname} has dimensions {_sizes(da)}: besides the spatial ones "
                f"{list(layout.space_dims)}, several are longer than 1 ({longer}); name the time "
                f"coordinate with time=..., and select along the others first."
            )
        if not (longer or other):
            raise ValueError(
                f"{argname} has no time dimension (its dimensions are {_sizes(da)}); a space-time model "
                "needs one, with time coordinate values."
            )
        dim = (longer or other)[0]
        if dim not in da.coords:
            raise ValueError(
                f"{argname} has no coordinate values along its time dimension {dim!r}; assign them, "
                f"e.g. da.assign_coords({dim}=dates)."
            )
        return dim, dim
    if not isinstance(time, str) or time not in da.coords:
        raise ValueError(
            f"time={time!r} is not a coordinate of {argname}; with a field, time names its time "
            f"coordinate (it has {sorted(map(str, da.coords))}), or is None for the coordinate of its "
            "one non-spatial dimension."
        )
    dims = da.coords[time].dims
    if len(dims) > 1 or set(dims) & set(layout.space_dims):
        raise ValueError(
            f"time={time!r} is a coordinate of {argname} along {list(dims)}; the time coordinate must "
            "be one-dimensional, along a dimension other than the spatial ones."
        )
    return time, (dims[0] if dims else None)


def _replicate_dims(da, layout, argname):
    """``([replicate dimension] or [], dimensions to squeeze)`` of a field: the one
    non-spatial dimension longer than 1 (else the first non-spatial one) holds the
    replicates, the others must have length 1."""
    other = [d for d in da.dims if d not in layout.space_dims]
    longer = [d for d in other if da.sizes[d] > 1]
    if len(longer) > 1:
        sizes = {str(d): da.sizes[d] for d in da.dims}
        name = argname if argname.isidentifier() else "da"
        raise ValueError(
            f"{argname} has dimensions {sizes}: besides the spatial ones ({list(layout.space_dims)}) at most one "
            f"longer than 1 (e.g. time) can hold replicates; select along the others first, e.g. "
            f"{name}.isel({longer[1]}=0) or {name}.sel({longer[1]}=<value>) (geostat fit: --select "
            f"{longer[1]}=<value>), or stack them ({name}.stack)."
        )
    kept = longer or other[:1]
    return kept, [d for d in other if d not in kept]


def _check_covariates_are_not_position(covariates, layout, argname):
    """Refuse a trend covariate that is one of the position coordinates."""
    both = [str(name) for name in covariates if name in layout.position]
    if both:
        raise ValueError(
            f"trend names {both}, position coordinate(s) of {argname}: a coordinate cannot also be a trend "
            "covariate. Use trend='linear' for a trend in the coordinates, or give the covariate its own name "
            "(a copy of the coordinate)."
        )


def _covariates_of(source, layout, names, argname):
    """Each covariate of `source` as a float column over every cell of the layout's grid."""
    available = set(map(str, source.coords)) | set(map(str, getattr(source, "data_vars", ())))
    columns = {}
    for name in names:
        if name not in available:
            raise ValueError(
                f"trend names {name!r}, which {argname} does not have as a variable or coordinate; "
                f"it has {sorted(available)}."
            )
        variable = source[name]
        variable = variable.squeeze(
            [d for d in variable.dims if d not in layout.space_dims and variable.sizes[d] == 1]
        )
        extra = [d for d in variable.dims if d not in layout.space_dims]
        if extra:
            raise ValueError(
                f"trend covariate {name!r} varies along {extra}: a covariate must depend on the position only "
                f"(dims within {list(layout.space_dims)}), since the replicates share the trend design."
            )
        shape = [source.sizes[d] for d in layout.space_dims]
        own = [d for d in layout.space_dims if d in variable.dims]
        values = np.asarray(variable.transpose(*own).values, dtype=float)
        expanded = values.reshape(
            [source.sizes[d] if d in variable.dims else 1 for d in layout.space_dims]
        )
        columns[str(name)] = np.broadcast_to(expanded, shape).reshape(-1)
    return columns


def sites_of_template(template, position, argname="X", covariates=(), hint=""):
    """Cells of an xarray ``DataArray`` or ``Dataset`` template as a sites table.

    The position is read from the coordinates named `position`, in that order, whatever
    the order of the template's dimensions and whatever other position coordinates it has
    (e.g. the 2-D lon/lat of a projected grid read by an x/y model).

    Parameters
    ----------
    template : xarray.DataArray or xarray.Dataset
        Needs the fitted position coordinates; its values are never read, so a
        Dask-backed template is not computed.
    position : sequence of str
        The fitted coordinate names, in the order of the fitted coordinate columns.
    argname : str
    covariates : sequence of str
        Trend covariates, looked up among the template's variables and coordinates.
    hint : str, optional
        Appended to the error for missing coordinates (where the names come from).

    Returns
    -------
    sites : DataFrame
        One row per cell, in the order of the template's spatial dimensions: the
        position columns named and ordered as `position`, then the covariates (NaN where
        the template has none).
    here : FieldLayout
        The template's layout.
    complete : ndarray of bool
        Which rows have finite covariates (every row without covariates).

    Raises
    ------
    ValueError
        If the template lacks a fitted coordinate (the message lists those it has and
        how to rename them), or a covariate.
    """
    missing = [name for name in position if name not in template.coords]
    if missing:
        raise ValueError(_missing_position_message(template, position, missing, argname) + hint)
    here = _field_layout(template, argname, position)
    sites = _sites_of(template, here)
    for name, column in _covariates_of(template, here, covariates, argname).items():
        sites[name] = column
    return sites, here, _complete_rows(sites)


def _complete_rows(sites):
    """Which rows of a sites table have finite numbers and no missing date."""
    numeric = sites.select_dtypes("number").to_numpy(dtype=float)
    return np.isfinite(numeric).all(axis=1) & sites.notna().to_numpy().all(axis=1)


def _missing_position_message(template, position, missing, argname):
    """Why a template without the fitted coordinates is refused, with the rename that
    fixes it when the template has longitude/latitude under other names."""
    has = sorted(map(str, template.coords))
    message = (
        f"{argname} lacks the coordinate(s) {missing} the model was fitted on (its coordinates are "
        f"{list(position)}, read by name); {argname} has {has}."
    )
    fitted, found = find_lonlat(position), find_lonlat(has)
    if fitted is not None and found is not None and len(position) == 2:
        rename = {
            has[found[k]]: position[fitted[k]]
            for k in (0, 1)
            if has[found[k]] != position[fitted[k]]
        }
        return (
            f"{message} If those are the same coordinates, rename them: {argname}.rename({rename})."
        )
    return f"{message} Give {argname} coordinates with those names (e.g. {argname}.rename(...))."


def field_from_values(values, template, here, fitted, name, samples=False, complete=None):
    """Predictions on a template's cells as an ``xarray.DataArray`` with its coordinates.

    Parameters
    ----------
    values : ndarray of shape (m,), (m, r), (m, k) or (m, r, k)
        One row per predicted template cell, in the order of :func:`sites_of_template`;
        ``r`` replicates when the fitted field had them, ``k`` draws when `samples`.
    template : xarray.DataArray or xarray.Dataset
    here : FieldLayout
        The template's layout.
    fitted : FieldLayout
        The fitted field's layout (its replicate dimension labels the replicates).
    name : {"mean", "std", "sample"}
        The output's name and kind (:func:`prediction_attrs`).
    samples : bool, default False
        The last axis holds draws (dimension ``sample``).
    complete : ndarray of bool, optional
        The cells `values` belong to (the others, without covariates, become NaN);
        default every cell.

    Returns
    -------
    xarray.DataArray
        Dimensions: the template's spatial ones and the fitted replicate dimension (if
        any), in the template's order of dimensions where it has them (that of its
        widest data variable over the spatial dimensions for a ``Dataset``), then
        ``sample``; the template's coordinates over them, with their attributes (the
        replicate coordinate is the template's own when it holds the fitted labels);
        for a ``DataArray`` template the CF attributes of :func:`prediction_attrs`.
    """
    import xarray

    values = np.asarray(values)
    shape = tuple(template.sizes[d] for d in here.space_dims)
    if complete is not None and not complete.all():
        full = np.full((complete.size, *values.shape[1:]), np.nan)
        full[complete] = values
        values = full
    dims, coords = _output_dims(template, here, fitted, samples, values.shape[-1] if samples else 0)
    field = xarray.DataArray(
        values.reshape(shape + values.shape[1:]),
        dims=dims,
        coords=coords,
        name=name,
        attrs=_template_attrs(template, name, coords),
    )
    return field.transpose(*_output_order(template, here, dims))


def _output_dims(template, here, fitted, samples, n_samples):
    """Dimensions and coordinates of an output on a template: its spatial dimensions, the
    fitted replicate dimension, then ``sample`` (the order of the values; the output is
    transposed to :func:`_output_order` afterwards)."""
    dims = list(here.space_dims)
    coords = {k: c for k, c in template.coords.items() if set(c.dims) <= set(here.space_dims)}
    if fitted.replicate_dim is not None:
        dims.append(fitted.replicate_dim)
        if fitted.replicates is not None:
            coords[fitted.replicate_dim] = _replicate_coordinate(template, fitted)
    if samples:
        dims.append("sample")
        coords["sample"] = np.arange(n_samples)
    return dims, coords


def _replicate_coordinate(template, fitted):
    """The fitted replicate labels as a coordinate: the template's own coordinate of that
    dimension when it holds the same labels (its attributes and encoding, e.g. the units
    and calendar of a time axis, come along), else the bare labels."""
    own = template.coords.get(fitted.replicate_dim)
    labels = fitted.replicates
    if (
        own is not None
        and own.dims == (fitted.replicate_dim,)
        and own.dtype == labels.dtype
        and own.shape == labels.shape
        and np.array_equal(own.values, labels)
    ):
        return own
    return labels


def _output_order(template, here, dims):
    """`dims` in the template's order of dimensions (:func:`_template_dims`), then those the
    template lacks (a fitted replicate dimension it does not have, ``sample``) in the
    order of `dims`: a ``(time, lat, lon)`` field is predicted as ``(time, lat, lon)``."""
    reference = [d for d in _template_dims(template, here) if d in dims]
    return reference + [d for d in dims if d not in reference]


def _template_dims(template, here):
    """The order of a template's dimensions: a ``DataArray``'s own; for a ``Dataset``,
    that of its data variable over every spatial dimension with the most dimensions (the
    first of them), else the ``Dataset``'s."""
    if not hasattr(template, "data_vars"):
        return tuple(template.dims)
    spanning = [v for v in template.data_vars.values() if set(here.space_dims) <= set(v.dims)]
    widest = max(spanning, key=lambda v: len(v.dims), default=None)
    return tuple(template.dims) if widest is None else tuple(widest.dims)


def _template_attrs(template, kind, carried):
    """The attributes of an output on a template: those of :func:`prediction_attrs` for a
    ``DataArray`` template (the variable predicted); none for a ``Dataset``, whose own
    attributes are global ones and which names no one variable."""
    return {} if hasattr(template, "data_vars") else prediction_attrs(template, kind, carried)


def prediction_attrs(variable, kind, carried=()):
    """CF attributes of a prediction of `variable`.

    * ``units`` — copied (a standard deviation and a simulation have the units of the
      variable);
    * ``standard_name`` — copied for ``mean`` and ``sample``; for ``std`` with the CF
      modifier ``standard_error`` (``"air_temperature standard_error"``);
    * ``long_name`` — ``"<label> of <long_name>"`` (the variable's name without one), the
      label from :data:`PREDICTION_LABELS`, e.g. ``"kriging mean of air temperature"``;
    * ``grid_mapping`` — copied when every variable it names is among `carried`.

    Other attributes (``_FillValue``, ``valid_range``, ``cell_methods``, packing) describe
    the stored variable, not its prediction, and are not copied.

    Parameters
    ----------
    variable : xarray.DataArray
        The variable predicted: its attributes and name are read (a ``grid_mapping``
        moved to its encoding by ``decode_coords="all"`` too); never modified.
    kind : {"mean", "std", "sample"}
    carried : collection of str, optional
        Names of the variables that come with the prediction (its coordinates, or the
        other variables of the file it goes to).

    Returns
    -------
    dict
    """
    attrs = variable.attrs
    out = {}
    if "units" in attrs:
        out["units"] = attrs["units"]
    if attrs.get("standard_name"):
        out["standard_name"] = (
            f"{attrs['standard_name']} standard_error" if kind == "std" else attrs["standard_name"]
        )
    label = attrs.get("long_name") or variable.name
    if label is not None:
        out["long_name"] = f"{PREDICTION_LABELS[kind]} of {label}"
    mapping = attrs.get("grid_mapping", variable.encoding.get("grid_mapping"))
    if mapping and set(grid_mapping_names(mapping)) <= {str(name) for name in carried}:
        out["grid_mapping"] = mapping
    return out


def grid_mapping_names(value):
    """The variables a CF ``grid_mapping`` attribute names: ``"crs"``, or in the extended
    form ``"crsOSGB: x y crsWGS84: lat lon"`` each name before a colon."""
    words = str(value).split()
    named = [word[:-1] for word in words if word.endswith(":")]
    return named if named else words[:1]


def is_chunked(template):
    """Whether an xarray template holds Dask arrays (its values are then never computed
    by us, and predictions on it stay lazy)."""
    arrays = template.data_vars.values() if hasattr(template, "data_vars") else [template]
    return any(getattr(a, "chunks", None) for a in arrays)


def lazy_field(predict_cells, template, here, fitted, names, n_replicates):
    """Pointwise predictions on a Dask-backed template, computed chunk by chunk.

    Parameters
    ----------
    predict_cells : callable
        ``predict_cells(rows) -> sequence of ndarray`` (one per name, each ``(m,)`` or
        ``(m, r)``) for integer positions of cells in the order of
        :func:`sites_of_template`.
    template : xarray.DataArray or xarray.Dataset
    here, fitted : FieldLayout
    names : tuple of str
        Output names (``("mean",)`` or ``("mean", "std")``).
    n_replicates : int or None
        ``r`` when the outputs have a replicate axis.

    Returns
    -------
    tuple of xarray.DataArray
        Dask-backed, chunked like the template's spatial dimensions; nothing is
        computed until the caller asks (``.compute()``, ``.to_netcdf()``, ``.plot()``).
        Dimensions, coordinates and attributes as for :func:`field_from_values`.
    """
    import dask.array
    import xarray

    chunked = next(
        a
        for a in (template.data_vars.values() if hasattr(template, "data_vars") else [template])
        if getattr(a, "chunks", None)
    )
    chunks = tuple(chunked.chunksizes.get(d, (template.sizes[d],)) for d in here.space_dims)
    shape = tuple(template.sizes[d] for d in here.space_dims)
    cells = dask.array.arange(int(np.prod(shape)), chunks=-1).reshape(shape).rechunk(chunks)
    extra = () if n_replicates is None else (n_replicates,)

    def block(index):
        out = predict_cells(index.ravel())
        return np.stack([np.asarray(a) for a in out], axis=-1).reshape(
            index.shape + extra + (len(names),)
        )

    new_axes = list(range(len(shape), len(shape) + len(extra) + 1))
    stacked = cells.map_blocks(
        block,
        dtype=float,
        meta=np.empty((0,) * (len(shape) + len(new_axes))),
        new_axis=new_axes,
        chunks=chunks + tuple((e,) for e in extra) + ((len(names),),),
    )
    dims, coords = _output_dims(template, here, fitted, False, 0)
    order = _output_order(template, here, dims)
    return tuple(
        xarray.DataArray(
            stacked[..., i],
            dims=dims,
            coords=coords,
            name=name,
            attrs=_template_attrs(template, name, coords),
        ).transpose(*order)
        for i, name in enumerate(names)
    )
