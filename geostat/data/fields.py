"""xarray fields in and out: a ``DataArray`` on a lon/lat (or x/y) grid or station
dimension becomes a sites table and observations; predictions on a template become
``DataArray`` objects on its coordinates. xarray itself is imported only to build results.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["XARRAY_POSITIONS", "is_xarray", "FieldLayout", "table_from_field", "sites_of_template",
           "field_from_values"]

#: Coordinate names recognised as the horizontal position of an xarray field, in order of
#: preference: longitude/latitude (as for DataFrame columns), then x/y.
XARRAY_POSITIONS = (("lon", "lat"), ("longitude", "latitude"), ("x", "y"))


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


def _field_layout(obj, argname):
    coords = set(obj.coords)
    for position in XARRAY_POSITIONS:
        if set(position) <= coords:
            break
    else:
        raise ValueError(
            f"{argname} has no horizontal coordinates: give it coordinates named lon/lat (or longitude/latitude, "
            f"or x/y); it has {sorted(map(str, coords))}."
        )
    spanned = {d for name in position for d in obj.coords[name].dims}
    return FieldLayout(position, tuple(d for d in obj.dims if d in spanned))


def _sites_of(obj, layout):
    """Coordinates of every cell of the spatial dimensions, as an ``(n, 2)`` array."""
    shape = tuple(obj.sizes[d] for d in layout.space_dims)
    columns = []
    for name in layout.position:
        coord = obj.coords[name]
        own = [d for d in layout.space_dims if d in coord.dims]
        values = np.asarray(coord.transpose(*own).values, dtype=float)
        expanded = values.reshape([obj.sizes[d] if d in coord.dims else 1 for d in layout.space_dims])
        columns.append(np.broadcast_to(expanded, shape).reshape(-1))
    return np.column_stack(columns)


def table_from_field(da, argname="X"):
    """Sites and observations of an xarray ``DataArray`` field.

    The horizontal position comes from coordinates named lon/lat (or longitude/latitude,
    or x/y): dimensions of a grid, or coordinates along a station dimension. At most one
    other dimension (``time`` or any name) holds replicates. NaN cells are missing values;
    cells missing on every replicate (a land or sea mask) are dropped.

    Returns
    -------
    X : DataFrame
        One row per kept cell, columns the position names (so ``distance="auto"``
        recognises longitude/latitude).
    y : ndarray of shape (n,) or (n, r)
    layout : FieldLayout

    Raises
    ------
    ValueError
        Without position coordinates, with more than one non-spatial dimension, or when
        no cell is observed.
    """
    layout = _field_layout(da, argname)
    other = [d for d in da.dims if d not in layout.space_dims]
    if len(other) > 1:
        raise ValueError(
            f"{argname} has dimensions {list(da.dims)}: besides the spatial ones ({list(layout.space_dims)}) at most "
            f"one (e.g. time) can hold replicates; select or stack the others (da.isel, da.stack) first."
        )
    if other:
        layout.replicate_dim = other[0]
        layout.replicates = np.asarray(da[other[0]].values) if other[0] in da.coords else None
    n_replicates = da.sizes[other[0]] if other else 1
    values = np.asarray(da.transpose(*layout.space_dims, *other).values, dtype=float).reshape(-1, n_replicates)
    observed = ~np.all(np.isnan(values), axis=1)
    if not observed.any():
        raise ValueError(f"{argname} has no observed value (every cell is NaN).")
    sites = _sites_of(da, layout)[observed]
    frame = pd.DataFrame(sites, columns=list(layout.position))
    y = values[observed]
    return frame, (y if layout.replicate_dim else y[:, 0]), layout


def sites_of_template(template, layout, argname="X"):
    """Every cell of an xarray ``DataArray`` or ``Dataset`` template as a sites table (the
    position coordinates fitted)."""
    missing = [name for name in layout.position if name not in template.coords]
    if missing:
        raise ValueError(f"{argname} lacks the coordinates {missing} of the fitted field; it has "
                         f"{sorted(map(str, template.coords))}.")
    here = _field_layout(template, argname)
    return pd.DataFrame(_sites_of(template, here), columns=list(layout.position)), here


def field_from_values(values, template, here, fitted, name, samples=False):
    """Predictions on a template's cells as an ``xarray.DataArray`` with its coordinates.

    Parameters
    ----------
    values : ndarray of shape (m,), (m, r), (m, k) or (m, r, k)
        One row per template cell, in the order of :func:`sites_of_template`; ``r``
        replicates when the fitted field had them, ``k`` draws when `samples`.
    template : xarray.DataArray or xarray.Dataset
    here : FieldLayout
        The template's layout.
    fitted : FieldLayout
        The fitted field's layout (its replicate dimension labels the replicates).
    name : str
    samples : bool, default False
        The last axis holds draws (dimension ``sample``).

    Returns
    -------
    xarray.DataArray
        Dimensions: the template's spatial ones, the fitted replicate dimension (if any),
        then ``sample``; the template's coordinates and attributes.
    """
    import xarray

    values = np.asarray(values)
    dims = list(here.space_dims)
    coords = {k: c for k, c in template.coords.items() if set(c.dims) <= set(here.space_dims)}
    if fitted.replicate_dim is not None:
        dims.append(fitted.replicate_dim)
        if fitted.replicates is not None:
            coords[fitted.replicate_dim] = fitted.replicates
    if samples:
        dims.append("sample")
        coords["sample"] = np.arange(values.shape[-1])
    shape = tuple(template.sizes[d] for d in here.space_dims) + values.shape[1:]
    return xarray.DataArray(values.reshape(shape), dims=dims, coords=coords, name=name,
                            attrs=dict(template.attrs))
