"""Files of the ``geostat`` command: reading CSV and NetCDF, checking and writing outputs
(every failure a ``ValueError`` with one line saying what to do).

Outputs are checked before any work: an output may not be an input (by name, link or
resolved path) nor another output, and an existing file is replaced only with
``--force``. Outputs are written atomically (:func:`geostat.data.atomic.atomic_path`);
through a symbolic link, the file it points to is written.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

from geostat._version import DISTRIBUTION
from geostat.data.atomic import atomic_path, atomic_write_text

__all__ = [
    "FALLBACK_ENCODING",
    "FIELD_SUFFIXES",
    "MAX_SAMPLE_COLUMNS",
    "MAX_SAMPLE_VALUES",
    "OUTPUT_SUFFIXES",
    "appended_history",
    "check_input",
    "check_outputs",
    "is_field",
    "open_field",
    "read_csv",
    "separator",
    "strict_json",
    "warn",
    "write_json",
    "write_predictions",
    "written_path",
    "xarray_module",
]

#: File name endings read with xarray (as NetCDF and the like); any other file is read as CSV.
FIELD_SUFFIXES = (
    ".nc",
    ".nc4",
    ".netcdf",
    ".cdf",
    ".h5",
    ".hdf5",
    ".zarr",
    ".grib",
    ".grib2",
    ".grb",
    ".grb2",
)
#: File name endings ``geostat predict`` writes.
OUTPUT_SUFFIXES = (".csv", ".nc")
#: The most simulated values (sites or cells × replicates × samples) one ``geostat predict`` writes.
MAX_SAMPLE_VALUES = 10**7
#: The most sample columns (samples × replicates) of a prediction at the sites of a table.
MAX_SAMPLE_COLUMNS = 10**4
#: The encoding a CSV file is read in when it is not valid UTF-8 and no ``--encoding`` is given.
FALLBACK_ENCODING = "latin-1"
NETCDF_EXTRA = f'pip install "{DISTRIBUTION}[netcdf]"'
#: How much of a CSV file is inspected to tell text in another encoding from binary data.
_SNIFF_BYTES = 1 << 20
#: Control characters never found in a text file (all below 0x20 but tab, LF, FF and CR; DEL).
_CONTROL_BYTES = bytes([*range(0x09), 0x0B, *range(0x0E, 0x20), 0x7F])


def is_field(path):
    return path.suffix.lower() in FIELD_SUFFIXES


def warn(message):
    """Write ``geostat: warning: message`` on standard error (the command goes on)."""
    sys.stderr.write(f"geostat: warning: {message}\n")


def check_input(path, what="a CSV file"):
    """Refuse an input that is missing, a folder (unless a field format stored as one, like
    Zarr) or not a regular file (a pipe or device, which could block or be read once only)."""
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if path.is_dir():
        if not is_field(path):
            raise ValueError(f"{path} is a folder; give {what}")
    elif not path.is_file():
        raise ValueError(
            f"{path} is not a regular file (a pipe, device or socket); save the data to a file and "
            f"give {what}"
        )


def read_csv(path, sep=",", encoding=None):
    """A CSV file as a DataFrame.

    Parameters
    ----------
    path : pathlib.Path
    sep : str
        Column separator (``"\\t"`` spelled out for a tab).
    encoding : str, optional
        The file's text encoding. By default UTF-8 (a byte-order mark is skipped), and
        Latin-1 with a warning on standard error for text that is not valid UTF-8.

    Raises
    ------
    ValueError
        If the file cannot be read as CSV: binary data (compressed, an image, UTF-16),
        text that is not in `encoding`, or a parser error.
    """
    check_input(path)
    try:
        return _parse_csv(path, sep, encoding or "utf-8")
    except UnicodeDecodeError as exc:
        if encoding is not None:
            raise ValueError(
                f"{path} is not {encoding} text (byte {exc.object[exc.start]:#04x} cannot be "
                "decoded); give its encoding with --encoding"
            ) from None
        if _looks_binary(path):
            raise ValueError(
                f"{path} is not a text CSV file (it holds binary data, e.g. compressed, an image "
                "or UTF-16); give a CSV file with a header row"
            ) from None
    warn(
        f"{path} is not UTF-8 text; read as {FALLBACK_ENCODING} (give --encoding to choose another "
        "encoding)"
    )
    return _parse_csv(path, sep, FALLBACK_ENCODING)


def _parse_csv(path, sep, encoding):
    """``pandas.read_csv``, every failure but a decoding one turned into a one-line ValueError."""
    try:
        return pd.read_csv(path, sep=separator(sep), encoding=encoding)
    except UnicodeDecodeError:
        raise
    except Exception as exc:  # any parser or decompression failure is bad input
        raise ValueError(
            f"cannot read {path} as CSV ({' '.join(str(exc).split())}); give a "
            f"{separator_name(sep)}-separated file with a header row (--sep sets the separator)"
        ) from None


def _looks_binary(path):
    """Whether the start of a file that is not UTF-8 holds data rather than text in an
    8-bit encoding: control characters, or mostly bytes above ASCII."""
    with open(path, "rb") as stream:
        head = stream.read(_SNIFF_BYTES)
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    high = len(head) - len(head.translate(None, bytes(range(0x80, 0x100))))
    return controls > 0 or high > 0.3 * len(head)


def separator(text):
    return "\t" if text == "\\t" else text


def separator_name(sep):
    return {",": "comma", ";": "semicolon", "\\t": "tab", "\t": "tab"}.get(sep, repr(sep))


def xarray_module(path):
    """The xarray module, or a one-line error saying how to install it."""
    try:
        import xarray
    except ImportError:
        raise ValueError(
            f"reading or writing {path} needs xarray and netCDF4: {NETCDF_EXTRA}"
        ) from None
    return xarray


def open_field(path):
    """The xarray Dataset of a NetCDF (or other xarray-readable) file, opened lazily."""
    check_input(path)
    xarray = xarray_module(path)
    try:
        return xarray.open_dataset(path)
    except Exception as exc:  # any reader failure is bad input
        hint = (
            f"; install the NetCDF readers: {NETCDF_EXTRA}"
            if importlib.util.find_spec("netCDF4") is None
            else ""
        )
        raise ValueError(
            f"cannot read {path} with xarray ({' '.join(str(exc).split())}){hint}; give a NetCDF "
            "file (or another format xarray reads)"
        ) from None


# ----------------------------------------------------------------------------- outputs
def check_outputs(outputs, inputs, force):
    """Refuse, before any work, outputs that would replace an input, each other, or an
    existing file (without `force`), or that cannot be written.

    `outputs` are ``(option, path or None)``, `inputs` ``(what, path or None)`` (e.g.
    ``("input file", "data.csv")``); `force` allows replacing existing outputs. The
    ValueError names the option, the path and the fix.
    """
    outputs = [(option, path) for option, path in outputs if path]
    for option, path in outputs:
        for what, source in inputs:
            if source and same_file(path, source):
                raise ValueError(
                    f"{option} {path} is the {what} {source}: writing it would replace the input; "
                    "choose another output path"
                )
    for (first, a), (second, b) in itertools.combinations(outputs, 2):
        if same_file(a, b):
            raise ValueError(
                f"{first} {a} and {second} {b} name the same file; give each output its own path"
            )
    for option, path in outputs:
        check_output(path, option, force)


def same_file(a, b):
    """Whether paths `a` and `b` name one file: by resolved path (links followed), or as
    the same file on disk (hard links, case-insensitive file systems)."""
    if os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b)):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def written_path(text):
    """The file an output path writes: the path itself, or the file a symbolic link points to."""
    return Path(os.path.realpath(text))


def check_output(text, option, force):
    """Refuse an output path that cannot be written, or that exists (without `force`)."""
    path, target = Path(text), written_path(text)
    if target.is_dir():
        raise ValueError(
            f"{option} {path} is a folder; give the name of a file (in it or elsewhere)"
        )
    if not target.parent.is_dir():
        raise ValueError(
            f"{option} {path}: folder {target.parent} does not exist; create it or choose another "
            "path"
        )
    if target.exists():
        if not target.is_file():
            raise ValueError(
                f"{option} {path} is not a regular file (a pipe, device or socket); give the name "
                "of a file"
            )
        if not force:
            raise ValueError(
                f"{option} {path} exists; add --force to replace it, or choose another path"
            )
    # the output is written to a new file in its folder, then renamed: the folder must take one
    try:
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=f".{target.name}.", suffix=".probe"
        ):
            pass
    except OSError as exc:
        raise ValueError(
            f"{option} {path} cannot be written ({exc.strerror}); choose a writable path"
        ) from None


def strict_json(value):
    """`value` with every non-finite float (NaN, infinity) replaced by None, so that
    :func:`json.dumps` writes strict JSON (``null`` there)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value


def write_json(result, text):
    """`result` as strict JSON (non-finite numbers as ``null``) to the file `text` names,
    atomically."""
    atomic_write_text(
        written_path(text), json.dumps(strict_json(result), indent=2, allow_nan=False) + "\n"
    )


def write_predictions(predictions, path, sep, history=None):
    """Predictions (a table or an xarray Dataset) as CSV (UTF-8) or NetCDF, by the name of
    `path`, atomically.

    `predictions` is never modified; `sep` separates CSV columns; `history` is a line
    appended to a NetCDF file's global ``history`` attribute.
    """
    table = isinstance(predictions, pd.DataFrame)
    with atomic_path(written_path(path)) as temporary:
        if path.suffix.lower() == ".csv":
            frame = predictions if table else predictions.to_dataframe().reset_index()
            frame.to_csv(temporary, index=False, sep=separator(sep))
        else:
            dataset = (
                xarray_module(path).Dataset.from_dataframe(predictions.rename_axis("site"))
                if table
                else predictions
            )
            if history:
                dataset = dataset.assign_attrs(
                    history=appended_history(dataset.attrs.get("history"), history)
                )
            dataset.to_netcdf(temporary)


def appended_history(previous, line):
    """A ``history`` attribute with `line` appended: on a new line after a previous history
    (CF, NCO), else alone."""
    previous = str(previous).rstrip("\n") if previous else ""
    return f"{previous}\n{line}" if previous else line
