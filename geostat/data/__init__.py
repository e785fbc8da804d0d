"""Data in and out: the only package that knows pandas, xarray and files.

:mod:`~geostat.data.tables` (tables in, results out), :mod:`~geostat.data.fields`
(xarray fields), :mod:`~geostat.data.times` (dates as days) and
:mod:`~geostat.data.model_file` (model files without pickle).
"""

from geostat.data.fields import (
    XARRAY_POSITIONS,
    FieldGrid,
    FieldLayout,
    field_from_values,
    field_noise,
    field_to_fit,
    is_chunked,
    is_xarray,
    lazy_field,
    results_on_grid,
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
    "FieldGrid",
    "field_noise",
    "field_to_fit",
    "table_from_field",
    "space_time_table",
    "time_position",
    "convert_time_column",
    "sites_of_template",
    "field_from_values",
    "lazy_field",
    "results_on_grid",
    "read_model",
    "write_model",
]
