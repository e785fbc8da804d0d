"""A fitted field's grid as plain data for model files, and back, checked as untrusted input.

A :class:`~geostat.data.fields.FieldGrid` holds an xarray ``Dataset`` of coordinates, which
a model file (JSON and ``.npy`` arrays, :mod:`geostat.data.model_file`) cannot hold. Its
record is a dict of names, sizes, the training cells and, per coordinate, its dimensions,
values (an array of numbers, dates or strings) and attributes (strings, numbers and
arrays of numbers). A grid that cannot be written so (non-string dimension names, object
coordinates such as cftime dates) has no record: the loaded model then gives its
per-observation results as a table, as a model without a grid does.
"""

from __future__ import annotations

import numpy as np

from geostat.data.fields import FieldGrid

__all__ = ["grid_record", "grid_from_record"]

#: Dtype kinds of a storable coordinate: booleans, numbers, dates, time spans, strings.
_COORDINATE_KINDS = frozenset("biufMmU")
#: Most cells a grid of a model file spans (a fit's training sites are a subset of them).
MAX_GRID_CELLS = 2**31


def grid_record(grid):
    """The plain-data record of `grid`, or None where some part cannot be stored."""
    names = [*grid.sizes, *grid.coords.variables]
    if not all(isinstance(name, str) and not name.startswith("$") for name in names):
        return None
    if not (_storable_label(grid.name) and _storable_label(grid.replicate_dim)):
        return None
    coords = {}
    for name, variable in grid.coords.variables.items():
        values = np.asarray(variable.values)
        if values.dtype.kind == "O" and all(isinstance(v, str) for v in values.flat):
            values = values.astype(str)
        if values.dtype.kind not in _COORDINATE_KINDS:
            return None
        coords[name] = {
            "dims": list(map(str, variable.dims)),
            "values": values,
            "attrs": _storable_attrs(variable.attrs),
        }
    return {
        "sizes": {str(d): int(s) for d, s in grid.sizes.items()},
        "cell_dims": list(grid.cell_dims),
        "cells": np.asarray(grid.cells, dtype=np.int64),
        "replicate_dim": grid.replicate_dim,
        "name": grid.name,
        "attrs": _storable_attrs(grid.attrs),
        "coords": coords,
    }


def grid_from_record(record, n_sites, n_replicates):
    """The :class:`FieldGrid` of a record read from a model file whose training data have
    `n_sites` sites and `n_replicates` replicates.

    Raises
    ------
    ValueError
        Naming the first part of the record that no fit writes: its keys and types, sizes
        that are not positive or span more than :data:`MAX_GRID_CELLS` cells, cell
        dimensions or a replicate dimension that are not grid dimensions (the latter of
        `n_replicates` entries), training cells out of order or outside the grid (one per
        site), coordinates whose values do not have their dimensions' sizes.
    """
    import xarray

    _require(
        isinstance(record, dict)
        and record.keys()
        == {"sizes", "cell_dims", "cells", "replicate_dim", "name", "attrs", "coords"},
        "is not a grid record",
    )
    sizes = record["sizes"]
    _require(
        isinstance(sizes, dict)
        and sizes
        and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes.values()),
        "sizes are not positive lengths of named dimensions",
    )
    _require(
        int(np.prod([float(s) for s in sizes.values()])) <= MAX_GRID_CELLS,
        f"spans more than {MAX_GRID_CELLS} cells",
    )
    cell_dims = record["cell_dims"]
    _require(
        isinstance(cell_dims, list)
        and cell_dims
        and len(set(cell_dims)) == len(cell_dims)
        and all(isinstance(d, str) and d in sizes for d in cell_dims),
        "cell_dims are not distinct dimensions of the grid",
    )
    replicate_dim = record["replicate_dim"]
    _require(
        replicate_dim is None
        and n_replicates == 1
        or isinstance(replicate_dim, str)
        and replicate_dim in sizes
        and replicate_dim not in cell_dims
        and sizes[replicate_dim] == n_replicates,
        f"replicate_dim is not a grid dimension of the {n_replicates} replicate(s)",
    )
    _require(
        set(sizes) == set(cell_dims) | ({replicate_dim} - {None}),
        "sizes name dimensions that are neither cell dimensions nor the replicate dimension",
    )
    cells = record["cells"]
    n_cells = int(np.prod([sizes[d] for d in cell_dims]))
    _require(
        isinstance(cells, np.ndarray)
        and cells.dtype.kind in "iu"
        and cells.shape == (n_sites,)
        and (n_sites == 0 or (cells[0] >= 0 and cells[-1] < n_cells))
        and bool(np.all(np.diff(cells) > 0)),
        f"cells are not {n_sites} increasing cells of the grid's {n_cells}",
    )
    _require(_storable_label(record["name"]), "name is not a string or None")
    coords = record["coords"]
    _require(isinstance(coords, dict), "coords are not a mapping")
    variables = {}
    for name, coordinate in coords.items():
        _require(
            isinstance(coordinate, dict) and coordinate.keys() == {"dims", "values", "attrs"},
            f"coordinate {name[:40]!r} is not dims, values and attrs",
        )
        dims, values = coordinate["dims"], coordinate["values"]
        _require(
            isinstance(dims, list)
            and len(set(dims)) == len(dims)
            and all(isinstance(d, str) and d in sizes for d in dims)
            and isinstance(values, np.ndarray)
            and values.dtype.kind in _COORDINATE_KINDS
            and values.shape == tuple(sizes[d] for d in dims),
            f"coordinate {name[:40]!r} does not hold values of its dimensions' sizes",
        )
        attrs = _checked_attrs(coordinate["attrs"], f"coordinate {name[:40]!r} attrs")
        variables[name] = xarray.Variable(dims, values, attrs)
    return FieldGrid(
        coords=xarray.Dataset(coords=variables),
        sizes=dict(sizes),
        cell_dims=tuple(cell_dims),
        cells=cells.astype(np.int64),
        replicate_dim=replicate_dim,
        name=record["name"],
        attrs=_checked_attrs(record["attrs"], "attrs"),
    )


def _storable_label(value):
    return value is None or isinstance(value, str)


def _storable_value(value):
    """Whether an attribute value is a string, a number or an array (list) of numbers."""
    if isinstance(value, (str, bool, int, float)):
        return not isinstance(value, float) or np.isfinite(value)
    if isinstance(value, np.generic):
        return value.dtype.kind in "biuf" and bool(np.isfinite(value))
    if isinstance(value, (np.ndarray, list, tuple)):
        array = np.asarray(value)
        return array.dtype.kind in "biuf" and array.ndim == 1 and bool(np.all(np.isfinite(array)))
    return False


def _storable_attrs(attrs):
    """The attributes a model file can hold (strings, numbers, 1-D arrays of numbers)."""
    out = {}
    for key, value in attrs.items():
        if isinstance(key, str) and not key.startswith("$") and _storable_value(value):
            out[key] = np.asarray(value) if isinstance(value, (list, tuple)) else value
    return out


def _checked_attrs(attrs, where):
    _require(
        isinstance(attrs, dict) and all(_storable_value(v) for v in attrs.values()),
        f"{where} are not strings, numbers or arrays of numbers",
    )
    return dict(attrs)


def _require(condition, message):
    if not condition:
        raise ValueError(f"_field_grid {message}")
