"""Time coordinates as numbers: dates become float days since 1970-01-01.

A time column may hold numbers (in their own unit), naive ``datetime64`` values of any
resolution (converted by exact integer arithmetic), or cftime dates (``date2num`` in
their calendar; cftime is imported only when such dates appear). The unit is recorded
(:func:`time_unit`) so that prediction times are converted alike; another kind of time
is refused.
"""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd

__all__ = ["EPOCH_DAYS", "column_to_days", "convert_time_column", "time_unit"]

#: The unit of converted dates.
EPOCH_DAYS = "days since 1970-01-01"
#: Ticks of each ``datetime64`` unit in one day (months and years are made days first).
_TICKS_PER_DAY = {
    "D": 1,
    "h": 24,
    "m": 24 * 60,
    "s": 86_400,
    "ms": 86_400 * 10**3,
    "us": 86_400 * 10**6,
    "ns": 86_400 * 10**9,
    "ps": 86_400 * 10**12,
    "fs": 86_400 * 10**15,
    "as": 86_400 * 10**18,
}


def time_unit(calendar=None):
    """The unit string of converted dates: ``"days since 1970-01-01"``, with the cftime
    calendar in parentheses for cftime dates (e.g. ``"days since 1970-01-01 (noleap)"``)."""
    return EPOCH_DAYS if calendar is None else f"{EPOCH_DAYS} ({calendar})"


def column_to_days(values, what="the time column"):
    """A time column as float64 numbers, and its unit.

    `values` ``(n,)`` are numbers, naive ``datetime64`` values or datetimes, or cftime
    dates of one calendar; `what` names the column in messages. Returns ``(days, unit)``:
    the numbers as they are (unit None) or dates as days since 1970-01-01
    (:func:`time_unit`). Raises ValueError for aware or missing dates, mixed calendars,
    or values that are neither numbers nor dates; ImportError for cftime dates without
    cftime.
    """
    if isinstance(getattr(values, "dtype", None), pd.DatetimeTZDtype):
        raise ValueError(
            f"{what} holds time-zone aware dates ({values.dtype}); convert them to naive UTC "
            "first, e.g. column.dt.tz_convert(None)."
        )
    array = np.asarray(values)
    if array.dtype.kind == "M":
        return _datetime64_days(array, what), time_unit()
    if array.dtype.kind == "O" and array.size:
        return _object_days(array, what)
    if array.dtype.kind in "iufb":
        return array.astype(np.float64), None
    raise ValueError(
        f"{what} must hold numbers or dates; got values of dtype {array.dtype}. Convert them to "
        "numbers or to datetime64 (pandas.to_datetime)."
    )


def _datetime64_days(array, what):
    """Days since 1970-01-01 of ``datetime64`` values: whole days and the remainder by
    integer arithmetic in the array's own resolution, then one rounding to float."""
    if np.isnat(array).any():
        row = int(np.flatnonzero(np.isnat(array))[0])
        raise ValueError(f"{what} has a missing date (NaT) at row {row}; drop or fill those rows.")
    unit, count = np.datetime_data(array.dtype)
    if unit not in _TICKS_PER_DAY or unit == "generic":
        array, unit, count = array.astype("datetime64[D]"), "D", 1
    ticks = array.astype(np.int64)
    per_day = _TICKS_PER_DAY[unit]
    if count != 1:
        ticks = ticks * count
    whole, rest = np.divmod(ticks, per_day)
    return whole.astype(np.float64) + rest.astype(np.float64) / per_day


def _object_days(array, what):
    """Days of an object column: cftime dates, or Python/pandas datetimes (made
    ``datetime64``), or numbers."""
    first = array.flat[0]
    if type(first).__module__.partition(".")[0] == "cftime":
        return _cftime_days(array, what)
    if all(isinstance(v, (datetime.date, np.datetime64)) for v in array.flat):
        try:
            converted = pd.to_datetime(pd.Series(array.ravel()))
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{what} holds dates pandas cannot convert: {' '.join(str(exc).split())}"
            ) from None
        return column_to_days(converted, what)
    try:
        numbers = array.astype(np.float64)
    except (TypeError, ValueError):
        shown = next(v for v in array.flat if not _is_number(v))
        raise ValueError(
            f"{what} must hold numbers or dates; it holds {shown!r} ({type(shown).__name__}). "
            "Convert it to numbers or to datetime64 (pandas.to_datetime)."
        ) from None
    return numbers, None


def _is_number(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _cftime_days(array, what):
    """Days since 1970-01-01 of cftime dates of one calendar, in that calendar."""
    import cftime

    values = array.ravel()
    if not all(isinstance(v, cftime.datetime) for v in values):
        shown = next(v for v in values if not isinstance(v, cftime.datetime))
        raise ValueError(
            f"{what} mixes cftime dates with {shown!r} ({type(shown).__name__}); give dates of one "
            "kind."
        )
    calendars = sorted({v.calendar for v in values})
    if len(calendars) != 1:
        raise ValueError(
            f"{what} holds cftime dates of several calendars {calendars}; convert them to one "
            "calendar."
        )
    days = np.asarray(cftime.date2num(values, EPOCH_DAYS, calendar=calendars[0]), dtype=np.float64)
    return days.reshape(array.shape), time_unit(calendars[0])


def convert_time_column(X, position, argname="X", expected=False):
    """`X` with its time column as float numbers (before scikit-learn's validation), and
    the time unit.

    `position` is the time column's (None: none, `X` returned as it is). `expected`:
    False takes any kind of time (a fit), else the unit recorded at fit time, and a
    column of another kind raises ValueError. `X` is copied only when converted.
    """
    if position is None or position >= _width(X):
        return X, None  # no time column, or not a table with that column (the table checks name it)
    if isinstance(X, pd.DataFrame):
        name = X.columns[position]
        days, unit = column_to_days(X.iloc[:, position], f"{argname} column {str(name)!r}")
        _check_unit(unit, expected, f"{argname} column {str(name)!r}")
        if X.iloc[:, position].dtype.kind in "iufb":
            return X, unit
        converted = X.copy()
        converted[name] = days
        return converted, unit
    array = np.asarray(X)
    if array.dtype.kind not in "OM":
        _check_unit(None, expected, f"{argname} time column {position}")
        return X, None
    days, unit = column_to_days(array[:, position], f"{argname} time column {position}")
    _check_unit(unit, expected, f"{argname} time column {position}")
    converted = np.array(array, dtype=object)
    converted[:, position] = days
    return _as_numbers(converted), unit


def _width(X):
    """Columns of a table `X`; 0 for anything else (ragged rows, a scalar, 1-D)."""
    try:
        shape = np.shape(X)
    except ValueError:
        return 0
    return shape[1] if len(shape) == 2 else 0


def _as_numbers(array):
    """An object array as float64 where every entry converts, else as it is (for the
    table checks to name the entry that does not)."""
    try:
        return array.astype(np.float64)
    except (TypeError, ValueError):
        return array


def _check_unit(unit, expected, what):
    """Refuse a time column whose kind (numbers, dates, a cftime calendar) differs from
    the fitted one."""
    if expected is False or unit == expected:
        return

    def kind(u):
        return "numbers (in the unit of the fitted time column)" if u is None else f"dates ({u})"

    raise ValueError(
        f"{what} holds {kind(unit)}, but the model was fitted on times given as {kind(expected)}; "
        "give the times in the same form as at fit time."
    )
