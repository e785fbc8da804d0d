"""Data in and out: the only package that knows pandas, xarray and files.

``tables``
    DataFrame / array input checked into float64 arrays (:class:`SpatialData`), trend
    designs, and results handed back in the caller's container.
``fields``
    xarray ``DataArray`` / ``Dataset`` fields: sites and replicates in, ``DataArray``
    predictions out.
``times``
    Time columns of dates (``datetime64``, cftime) as float days since 1970-01-01.
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
    space_time_table,
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
    time_position,
)
from geostat.data.times import convert_time_column

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
    "space_time_table",
    "time_position",
    "convert_time_column",
    "sites_of_template",
    "field_from_values",
    "lazy_field",
    "read_model",
    "write_model",
]
