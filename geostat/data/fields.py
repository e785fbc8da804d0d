"""xarray fields in and out.

A ``DataArray`` on a lon/lat (or x/y) grid or station dimension becomes a sites table
and observations (:func:`table_from_field`); for a spatial model its other dimension
holds replicates, for a space-time model every observed cell is an observation at
(position, time) (:func:`space_time_table`). Predictions on a template become
``DataArray`` objects with its order of dimensions, its coordinates and their
attributes, and CF attributes of the predicted variable (:func:`prediction_attrs`).
xarray is imported only to build results.
"""

from __future__ import annotations

import dataclasses
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
    "FieldGrid",
    "field_to_fit",
    "field_noise",
    "table_from_field",
    "space_time_table",
    "sites_of_template",
    "field_from_values",
    "lazy_field",
    "results_on_grid",
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
    """How a gridded or station field maps to sites (kept at fit time to rebuild outputs).

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
    grid : FieldGrid or None
        The fitted field's grid (:func:`table_from_field`), None for a template. Not a
        constructor argument: model files store it apart
        (:mod:`geostat.data.grid_record`).
    """

    position: tuple
    space_dims: tuple
    replicate_dim: object = None
    replicates: object = None
    grid: FieldGrid | None = dataclasses.field(default=None, init=False, repr=False, compare=False)


@dataclass
class FieldGrid:
    """The grid of a fitted field, to put results per training observation back on it.

    Attributes
    ----------
    coords : xarray.Dataset
        The field's coordinates, without data variables (those of the dimensions of
        length 1 the fit dropped are scalars).
    sizes : dict
        The length of each dimension the fit kept, in the field's order.
    cell_dims : tuple
        The dimensions the training sites run over, in the order of the field: the
        spatial ones (every one of a space-time field).
    cells : ndarray of int
        The flat index, in C order over `cell_dims`, of the cell of each training site.
    replicate_dim : hashable or None
        The dimension of the replicates (the kept one not in `cell_dims`).
    name : hashable or None
        The field's name.
    attrs : dict
        The field's attributes, with a ``grid_mapping`` kept in its encoding.
    """

    coords: object
    sizes: dict
    cell_dims: tuple
    cells: np.ndarray
    replicate_dim: object = None
    name: object = None
    attrs: dict = dataclasses.field(default_factory=dict)

    @property
    def encoding(self):
        """No encoding: the attributes hold all :func:`prediction_attrs` reads."""
        return {}


def _grid_of(da, cell_dims, observed, replicate_dim):
    """The :class:`FieldGrid` of a fitted field `da` (its dimensions of length 1 already
    dropped) whose cells `observed` (flattened over `cell_dims`) are the training sites."""
    attrs = dict(da.attrs)
    if "grid_mapping" in da.encoding and "grid_mapping" not in attrs:
        attrs["grid_mapping"] = da.encoding["grid_mapping"]
    return FieldGrid(
        coords=da.coords.to_dataset(),
        sizes={d: int(da.sizes[d]) for d in da.dims},
        cell_dims=tuple(cell_dims),
        cells=np.flatnonzero(observed),
        replicate_dim=replicate_dim,
        name=da.name,
        attrs=attrs,
    )


def _field_layout(obj, argname, position=None):
    """The layout of `obj`'s coordinates named `position`, else of the first pair of
    :data:`XARRAY_POSITIONS` it has."""
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
        f"{argname} has no horizontal coordinates: give it coordinates named lon/lat (or "
        f"longitude/latitude, or x/y); it has {sorted(map(str, coords))}."
    )


def _observed_table(da, source, layout, covariates, observed, argname):
    """Sites and trend covariates of the `observed` cells of `da` as a table
    (ValueError for a covariate NaN at an observed cell)."""
    frame = _sites_of(da, layout)[observed].reset_index(drop=True)
    for name, column in _covariates_of(
        source if source is not None else da, layout, covariates, argname
    ).items():
        column = column[observed]
        if np.isnan(column).any():
            raise ValueError(
                f"trend covariate {name!r} is NaN at {int(np.isnan(column).sum())} observed "
                f"cell(s) of {argname}; fill it there or set those observations to NaN."
            )
        frame[name] = column
    return frame


def _sites_of(obj, layout):
    """Coordinates of every cell of the layout's dimensions, one column per position
    name: floats, or raw dates (converted later by :mod:`geostat.data.times`)."""
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
    """``(field, source)``: the observed ``DataArray`` of a fit and where its trend
    covariates are looked up. `y` is None for a ``DataArray`` `X`, the name of the
    observed variable for a ``Dataset``."""
    if hasattr(X, "data_vars"):
        names = sorted(map(str, X.data_vars))
        if not isinstance(y, str):
            raise TypeError(
                f"with {argname} an xarray Dataset, y names the observed variable (one of "
                f"{names}), e.g. fit(ds, y={names[0]!r}) — or pass the DataArray: "
                f"fit(ds[{names[0]!r}])."
            )
        if y not in X.data_vars:
            raise ValueError(f"y={y!r} is not a data variable of {argname}; it has {names}.")
        return X[y], X
    if y is not None:
        raise ValueError(
            f"y must be omitted when {argname} is an xarray DataArray: its values are the "
            "observations."
        )
    return X, X


def field_noise(da, noise, source, argname="noise_variance", time=None):
    """Known measurement-error variances of a field fit, row for row with the observations
    :func:`table_from_field` makes of `da` (``(n,)`` or ``(n, r)``, NaN where `da` is).

    `noise` is a ``DataArray`` that broadcasts against `da` (a variance per cell, or per
    site when it lacks the replicate or time dimension), its coordinates equal to `da`'s
    where they share a dimension, or the name of a variable of the ``Dataset`` `source`.
    ValueError, naming `argname`, for a missing variable, other coordinates, or a NaN
    variance at an observed cell; TypeError for another kind of object.
    """
    import xarray as xr

    if isinstance(noise, str):
        if not hasattr(source, "data_vars") or noise not in source.data_vars:
            names = sorted(map(str, getattr(source, "data_vars", ())))
            raise ValueError(
                f"{argname}={noise!r} names no data variable of X"
                + (f" (it has {names})." if names else " (X is a DataArray).")
            )
        noise = source[noise]
    if not isinstance(noise, xr.DataArray):
        raise TypeError(
            f"with X an xarray field, {argname} is a DataArray of variances on its grid or "
            f"the name of a variable of the Dataset X; got {type(noise).__name__}."
        )
    extra = sorted(map(str, set(noise.dims) - set(da.dims)))
    if extra:
        raise ValueError(
            f"{argname} has dimension(s) {extra} that the field {da.name or 'X'!r} lacks; "
            f"its dimensions are {list(map(str, da.dims))}."
        )
    try:
        da, noise = xr.align(da, noise, join="exact")
    except ValueError as exc:
        raise ValueError(
            f"{argname}'s coordinates differ from the field's ({exc}); give the variances "
            "on the field's own grid (e.g. noise.interp_like(field) or .reindex_like)."
        ) from None
    # the field's own coordinates (positions, times), the variances as values
    noise = xr.DataArray(
        np.asarray(noise.broadcast_like(da).transpose(*da.dims).values, dtype=float),
        coords=da.coords,
        dims=da.dims,
    )
    observed = da.notnull()
    unknown = int((observed & noise.isnull()).sum())
    if unknown:
        raise ValueError(
            f"{argname} is NaN at {unknown} observed value(s) of the field; give a variance "
            "(0 where none is known) at every observed cell."
        )
    return table_from_field(noise.where(observed), argname, time=time)[1]


def table_from_field(da, argname="X", covariates=(), source=None, time=None):
    """Sites and observations of an xarray ``DataArray`` field.

    The position comes from coordinates named lon/lat, longitude/latitude or x/y (in
    that order of preference): grid dimensions, 2-D (curvilinear) coordinates, or
    coordinates along a station dimension. At most one other dimension longer than 1
    holds replicates; the others must have length 1 and are dropped (when all have
    length 1, the first holds the single replicate). NaN cells are missing values;
    cells missing on every replicate are dropped. A Dask-backed field is reduced to its
    mask block by block before it is loaded.

    Parameters
    ----------
    da : xarray.DataArray
    argname : str
    covariates : sequence of str
        Trend covariates: variables or coordinates of `source` (default `da`) over the
        spatial dimensions only, not position coordinates.
    source : xarray.Dataset or xarray.DataArray, optional
    time : None, True or str, default None
        Not None: a space-time field (:func:`space_time_table`).

    Returns
    -------
    X : DataFrame
        One row per kept cell: the position columns, then the covariates.
    y : ndarray of shape (n,) or (n, r)
    layout : FieldLayout
        With the field's :class:`FieldGrid`.

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
    layout.grid = _grid_of(da, layout.space_dims, observed, layout.replicate_dim)
    return frame, (y if layout.replicate_dim else y[:, 0]), layout


def space_time_table(da, argname="X", covariates=(), source=None, time=True):
    """Observations of a space-time field: one row per observed cell (site, time).

    Every non-NaN cell is an observation at the position, then the time (raw numbers or
    dates), in the order of `da`'s dimensions. Other dimensions must have length 1.

    `covariates` may span the spatial dimensions, the time dimension or both. `time`:
    True for the coordinate of the one non-spatial dimension (longer than 1, else the
    first), or the name of a 1-D time coordinate. Returns ``(X, y, layout)`` as
    :func:`table_from_field`, with the time column last among the coordinates and the
    spatial layout; raises ValueError as it does, and without a time coordinate.
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
            f"{argname} has dimensions {_sizes(da)}: besides the spatial ones "
            f"{list(layout.space_dims)} and the time ({time_dim!r}) no dimension may be "
            f"longer than 1; select along the others first, e.g. {name}.isel({longer[0]}=0)."
        )
    da = da.squeeze(others)
    cells = FieldLayout(layout.position + (time_name,), tuple(d for d in da.dims))
    observed = np.asarray(da.notnull().values).reshape(-1)
    if not observed.any():
        raise ValueError(f"{argname} has no observed value (every cell is NaN).")
    frame = _observed_table(da, source, cells, covariates, observed, argname)
    layout.grid = _grid_of(da, da.dims, observed, None)
    return frame, np.asarray(da.values, dtype=float).reshape(-1)[observed], layout


def _sizes(da):
    return {str(d): da.sizes[d] for d in da.dims}


def _time_coordinate(da, layout, time, argname):
    """``(name, dimension)`` of the time coordinate of a space-time field; the dimension
    is None for a scalar time."""
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
                f"{argname} has no time dimension (its dimensions are {_sizes(da)}); a "
                "space-time model needs one, with time coordinate values."
            )
        dim = (longer or other)[0]
        if dim not in da.coords:
            raise ValueError(
                f"{argname} has no coordinate values along its time dimension {dim!r}; assign "
                f"them, e.g. da.assign_coords({dim}=dates)."
            )
        return dim, dim
    if not isinstance(time, str) or time not in da.coords:
        raise ValueError(
            f"time={time!r} is not a coordinate of {argname}; with a field, time names its "
            f"time coordinate (it has {sorted(map(str, da.coords))}), or is None for the "
            "coordinate of its one non-spatial dimension."
        )
    dims = da.coords[time].dims
    if len(dims) > 1 or set(dims) & set(layout.space_dims):
        raise ValueError(
            f"time={time!r} is a coordinate of {argname} along {list(dims)}; the time "
            "coordinate must be one-dimensional, along a dimension other than the spatial "
            "ones."
        )
    return time, (dims[0] if dims else None)


def _replicate_dims(da, layout, argname):
    """``([replicate dimension] or [], dimensions to squeeze)`` of a field: the one
    non-spatial dimension longer than 1 (else the first non-spatial one)."""
    other = [d for d in da.dims if d not in layout.space_dims]
    longer = [d for d in other if da.sizes[d] > 1]
    if len(longer) > 1:
        sizes = {str(d): da.sizes[d] for d in da.dims}
        name = argname if argname.isidentifier() else "da"
        raise ValueError(
            f"{argname} has dimensions {sizes}: besides the spatial ones "
            f"({list(layout.space_dims)}) at most one longer than 1 (e.g. time) can hold "
            f"replicates; select along the others first, e.g. {name}.isel({longer[1]}=0) or "
            f"{name}.sel({longer[1]}=<value>) (geostat fit: --select {longer[1]}=<value>), "
            f"or stack them ({name}.stack)."
        )
    kept = longer or other[:1]
    return kept, [d for d in other if d not in kept]


def _check_covariates_are_not_position(covariates, layout, argname):
    """Refuse a trend covariate that is one of the position coordinates."""
    both = [str(name) for name in covariates if name in layout.position]
    if both:
        raise ValueError(
            f"trend names {both}, position coordinate(s) of {argname}: a coordinate cannot "
            "also be a trend covariate. Use trend='linear' for a trend in the coordinates, or "
            "give the covariate its own name (a copy of the coordinate)."
        )


def _covariates_of(source, layout, names, argname):
    """Each covariate of `source` as a float column over every cell of the layout's grid."""
    available = set(map(str, source.coords)) | set(map(str, getattr(source, "data_vars", ())))
    columns = {}
    for name in names:
        if name not in available:
            raise ValueError(
                f"trend names {name!r}, which {argname} does not have as a variable or "
                f"coordinate; it has {sorted(available)}."
            )
        variable = source[name]
        variable = variable.squeeze(
            [d for d in variable.dims if d not in layout.space_dims and variable.sizes[d] == 1]
        )
        extra = [d for d in variable.dims if d not in layout.space_dims]
        if extra:
            raise ValueError(
                f"trend covariate {name!r} varies along {extra}: a covariate must depend on "
                f"the position only (dims within {list(layout.space_dims)}), since the "
                "replicates share the trend design."
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
    the order of the template's dimensions and whatever other coordinates it has.

    The template's values are never read (a Dask-backed one is not computed). `hint` is
    appended to the error for missing coordinates.

    Returns
    -------
    sites : DataFrame
        One row per cell, in the order of the template's spatial dimensions: the
        position columns as `position`, then the `covariates`.
    here : FieldLayout
        The template's layout.
    complete : ndarray of bool
        Which rows have finite covariates.

    Raises
    ------
    ValueError
        If the template lacks a fitted coordinate or a covariate.
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
    fixes it when it has longitude/latitude under other names."""
    has = sorted(map(str, template.coords))
    message = (
        f"{argname} lacks the coordinate(s) {missing} the model was fitted on (its "
        f"coordinates are {list(position)}, read by name); {argname} has {has}."
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

    `values` has one row per cell of :func:`sites_of_template` (or per `complete` cell;
    the others become NaN), then ``r`` replicates of the `fitted` layout and, with
    `samples`, ``k`` draws. The result is named `name` (``"mean"``, ``"std"`` or
    ``"sample"``), on the template's spatial dimensions and the fitted replicate
    dimension in the template's order, then ``sample``, with the template's coordinates
    and, for a ``DataArray`` template, :func:`prediction_attrs`.
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


def results_on_grid(grid, site, replicate, values, per_site=None, attrs=None):
    """Results per training observation as an ``xarray.Dataset`` on a fitted field's grid.

    Parameters
    ----------
    grid : FieldGrid
    site, replicate : ndarray of int of shape (m,)
        The training site and replicate (column of ``y``) of each result.
    values : dict
        ``{name: (array of shape (m,), attrs)}``: variables on every dimension of the
        grid, NaN where no observation has a result.
    per_site : dict, optional
        ``{name: (array of shape (n,), fill, attrs)}``: one value per training site,
        variables on the grid's `cell_dims`, `fill` at the other cells.
    attrs : dict, optional
        The attributes of the Dataset.

    Returns
    -------
    xarray.Dataset
        The variables on the grid's dimensions in the field's order, with its coordinates.
    """
    import xarray

    shape = tuple(grid.sizes[d] for d in grid.cell_dims)
    n_cells = int(np.prod(shape))
    replicates = () if grid.replicate_dim is None else (grid.sizes[grid.replicate_dim],)
    dims = grid.cell_dims + ((grid.replicate_dim,) if replicates else ())
    where = (grid.cells[site],) + ((replicate,) if replicates else ())
    order = [d for d in grid.sizes if d in dims]
    variables = {}
    for name, (column, meta) in values.items():
        full = np.full((n_cells, *replicates), np.nan)
        full[where] = column
        variable = xarray.Variable(dims, full.reshape(shape + replicates), meta)
        variables[name] = variable.transpose(*order)
    for name, (column, fill, meta) in (per_site or {}).items():
        full = np.full(n_cells, fill, dtype=np.result_type(column, np.asarray(fill)))
        full[grid.cells] = column
        variables[name] = xarray.Variable(grid.cell_dims, full.reshape(shape), meta)
    return xarray.Dataset(variables, coords=grid.coords.coords, attrs=attrs or {})


def _output_dims(template, here, fitted, samples, n_samples):
    """Dimensions and coordinates of an output, in the order of the values: spatial
    dimensions, the fitted replicate dimension, then ``sample``."""
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
    """The fitted replicate labels: the template's own coordinate (with its attributes
    and encoding) when it holds the same labels, else the bare labels."""
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
    """`dims` in the template's order (:func:`_template_dims`), then those it lacks."""
    reference = [d for d in _template_dims(template, here) if d in dims]
    return reference + [d for d in dims if d not in reference]


def _template_dims(template, here):
    """A ``DataArray``'s dimensions; for a ``Dataset``, those of its first widest data
    variable over every spatial dimension, else the ``Dataset``'s."""
    if not hasattr(template, "data_vars"):
        return tuple(template.dims)
    spanning = [v for v in template.data_vars.values() if set(here.space_dims) <= set(v.dims)]
    widest = max(spanning, key=lambda v: len(v.dims), default=None)
    return tuple(template.dims) if widest is None else tuple(widest.dims)


def _template_attrs(template, kind, carried):
    """:func:`prediction_attrs` for a ``DataArray`` template; none for a ``Dataset``."""
    return {} if hasattr(template, "data_vars") else prediction_attrs(template, kind, carried)


def prediction_attrs(variable, kind, carried=()):
    """CF attributes of a prediction of `variable`.

    ``units`` is copied; ``standard_name`` too, with the CF modifier
    ``standard_error`` for ``std``; ``long_name`` is ``"<label> of <long_name or
    name>"`` with the label from :data:`PREDICTION_LABELS`; ``grid_mapping`` is copied
    when every variable it names is among `carried`. Attributes of the stored variable
    (``_FillValue``, ``valid_range``, packing) are not.

    `kind` is ``"mean"``, ``"std"`` or ``"sample"``; `carried` names the variables that
    come with the prediction. Returns a new dict; `variable` is only read.
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
    """Whether an xarray template holds Dask arrays (predictions on it stay lazy)."""
    arrays = template.data_vars.values() if hasattr(template, "data_vars") else [template]
    return any(getattr(a, "chunks", None) for a in arrays)


def lazy_field(predict_cells, template, here, fitted, names, n_replicates):
    """Pointwise predictions on a Dask-backed template, computed chunk by chunk.

    ``predict_cells(rows)`` returns one array per name of `names`, ``(m,)`` or
    ``(m, n_replicates)``, at cells `rows` of :func:`sites_of_template`. Returns one
    Dask-backed ``DataArray`` per name, chunked like the template's spatial dimensions,
    as :func:`field_from_values` builds them.
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
