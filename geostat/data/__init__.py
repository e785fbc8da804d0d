"""Data in and out: the only package that knows pandas, xarray and files.

``tables``
    DataFrame / array input checked into float64 arrays (:class:`SpatialData`), trend
    designs, and results handed back in the caller's container.
``fields``
    xarray ``DataArray`` / ``Dataset`` fields: sites and replicates in, ``DataArray``
    predictions out.
``model_file``
    Model files of fitted estimators: JSON and ``.npy`` arrays in a zip archive, read
    without pickle.
"""

from geostat.data.fields import (
    XARRAY_POSITIONS,
    FieldLayout,
    field_from_values,
    field_to_fit,
    is_chunked,
    is_xarray,
    lazy_field,
    sites_of_template,
    table_from_field,
)
from geostat.data.model_file import read_model, write_model
from geostat.data.tables import (
    SpatialData,
    Trend,
    as_output,
    check_table,
    prepare_coords,
    prepare_y,
    samples_output,
)

__all__ = [
    "Trend",
    "SpatialData",
    "check_table",
    "prepare_coords",
    "prepare_y",
    "as_output",
    "samples_output",
    "XARRAY_POSITIONS",
    "is_xarray",
    "is_chunked",
    "FieldLayout",
    "field_to_fit",
    "table_from_field",
    "sites_of_template",
    "field_from_values",
    "lazy_field",
    "read_model",
    "write_model",
]
