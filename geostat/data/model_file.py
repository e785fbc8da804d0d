"""Model files: a fitted estimator's settings and state in one zip archive, read without pickle.

A model file is a zip archive (deflate-compressed) holding

``model.json``
    UTF-8 JSON: ``{"format": "geostat-model", "version": 1, "geostat": "<version that
    wrote it>", "params": {...}, "fitted": {...}}`` — the estimator's constructor
    parameters and its fitted state.
``arrays/<name>.npy``
    One NumPy ``.npy`` file per array of that state (numbers, booleans, dates or
    fixed-width strings; never Python objects).

The state is a tree of dicts with string keys, lists, tuples, numbers, strings, None,
NumPy arrays, kernels (:mod:`geostat.kernels`, stored by family name with their
constructor arguments: fixed shape parameters, bounds) and records (dataclasses, stored
by class name and fields). In the JSON, a tuple, an array, an array of Python strings
(such as ``feature_names_in_``), a kernel and a record are objects with a single key
starting with ``$``; floats are written exactly (shortest round-trip form; ``NaN`` and
``Infinity`` as Python's :mod:`json` writes them). Reading uses :func:`json.loads` and
:func:`numpy.lib.format.read_array` with ``allow_pickle=False``, and rebuilds only the
kernel families and record classes the reader names: a model file cannot run code,
unlike a pickle.

:data:`VERSION` changes whenever a reader of an older version could not read the new
files; :func:`read_model` refuses files of a newer version with a message saying so.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

from geostat._version import __version__

from geostat.kernels import Exponential, Gaussian, Kernel, Matern, PoweredExponential

__all__ = ["FORMAT", "VERSION", "write_model", "read_model"]

#: The ``format`` entry of every model file.
FORMAT = "geostat-model"
#: The format version this module writes, and the newest it reads.
VERSION = 1

_JSON_MEMBER = "model.json"
_ARRAY_FOLDER = "arrays/"
_ZIP_MAGIC = b"PK\x03\x04"
_KERNELS = {cls.name: cls for cls in (Exponential, Matern, PoweredExponential, Gaussian)}
_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, TypeError, UnicodeDecodeError)


def write_model(path, params, fitted):
    """Write an estimator's parameters and fitted state to a model file.

    Everything is checked before the file is opened: a value that cannot be stored leaves
    an existing file at `path` as it was.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write (any name; ``.npz`` lets :func:`numpy.load` open it too).
    params : dict
        Constructor parameters (``get_params()``).
    fitted : dict
        Fitted attributes by name.

    Raises
    ------
    ValueError
        If some value cannot be stored without pickle (the message names it), e.g. a
        NumPy ``Generator`` as ``random_state`` or an array of Python objects.
    OSError
        If the file cannot be written.
    """
    arrays = {}
    header = {
        "format": FORMAT,
        "version": VERSION,
        "geostat": __version__,
        "params": _encode(params, "params", arrays),
        "fitted": _encode(fitted, "fitted", arrays),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_JSON_MEMBER, json.dumps(header, indent=1))
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(f"{_ARRAY_FOLDER}{name}.npy", buffer.getvalue())


def read_model(path, records):
    """Read the parameters and fitted state of a model file.

    Parameters
    ----------
    path : str or os.PathLike
    records : sequence of dataclass types
        The record classes the state may hold (others are refused).

    Returns
    -------
    params : dict
    fitted : dict

    Raises
    ------
    OSError
        If `path` cannot be read (:class:`FileNotFoundError` when it does not exist).
    ValueError
        If `path` is not a geostat model file, is damaged (truncated or corrupted), or
        was written in a newer format version; the message names the file and the fix.
    """
    path = Path(path)
    with open(path, "rb") as stream:
        if stream.read(len(_ZIP_MAGIC)) != _ZIP_MAGIC:
            raise _not_a_model(path)
    try:
        archive = zipfile.ZipFile(path)
    except _DAMAGE:
        raise _damaged(path) from None
    with archive:
        header = _read_header(archive, path)
        _check_header(header, path)
        decoder = _Decoder(archive, {cls.__name__: cls for cls in records})
        try:
            return decoder.decode(header["params"]), decoder.decode(header["fitted"])
        except _DAMAGE:
            raise _damaged(path) from None


def _read_header(archive, path):
    if _JSON_MEMBER not in archive.namelist():
        raise _not_a_model(path)
    try:
        return json.loads(archive.read(_JSON_MEMBER).decode("utf-8"))
    except _DAMAGE:
        raise _damaged(path) from None


def _not_a_model(path):
    return ValueError(
        f"{path} is not a geostat model file; give a file written by SpatialGP.save or "
        "'geostat fit --save-model'."
    )


def _damaged(path):
    return ValueError(
        f"{path} is a damaged geostat model file (truncated or corrupted); copy it again, or save the model "
        "again with SpatialGP.save."
    )


def _check_header(header, path):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _not_a_model(path)
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _damaged(path)
    if version > VERSION:

        raise ValueError(
            f"{path} is a geostat model file of format version {version} (written by geostat "
            f"{header.get('geostat', 'unknown')}); this geostat ({__version__}) reads versions up to {VERSION}. "
            "Upgrade geostat to load it."
        )
    if not isinstance(header.get("params"), dict) or not isinstance(header.get("fitted"), dict):
        raise _damaged(path)


# ---------------------------------------------------------------------------- encoding
def _encode(value, where, arrays):
    """`value` as JSON-ready data; arrays go to `arrays` under names made from `where`."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.ndarray):
        return _encode_array(value, where, arrays)
    if isinstance(value, (list, tuple)):
        items = [_encode(v, f"{where}.{i}", arrays) for i, v in enumerate(value)]
        return {"$tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return _encode_dict(value, where, arrays)
    if isinstance(value, Kernel):
        return {"$kernel": _encode_kernel(value, where, arrays)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        return {"$record": [type(value).__name__, _encode_dict(fields, where, arrays)]}
    raise ValueError(
        f"{where} is a {type(value).__name__}, which a model file cannot hold (it holds numbers, strings, "
        "arrays, lists, dicts and kernels); set it to such a value (e.g. an int random_state) before saving."
    )


def _encode_dict(value, where, arrays):
    bad = [k for k in value if not isinstance(k, str) or k.startswith("$")]
    if bad:
        raise ValueError(f"{where} has the key {bad[0]!r}; a model file holds dicts keyed by names (str not "
                         "starting with '$').")
    return {k: _encode(v, f"{where}.{k}", arrays) for k, v in value.items()}


def _encode_array(value, where, arrays):
    if value.dtype.kind == "O":
        if all(isinstance(v, str) for v in value.flat):
            return {"$strings": value.tolist()}
        raise ValueError(
            f"{where} is an array of Python objects (such as cftime dates), which a model file cannot hold "
            "without pickle; convert them to numbers, numpy datetime64 or strings before fitting."
        )
    name = where.replace("/", "_")
    if name in arrays:  # keys that differ only by "/" and "_"
        name = f"{name}_{len(arrays)}"
    arrays[name] = value
    return {"$array": name}


def _encode_kernel(kernel, where, arrays):
    if _KERNELS.get(kernel.name) is not type(kernel):
        raise ValueError(
            f"{where} is a {type(kernel).__name__}, not one of the built-in kernels {sorted(_KERNELS)}: a model "
            "file stores kernels by family name. Use a built-in kernel, or pickle the estimator instead."
        )
    values = {"bounds": kernel.shape_bounds, **{k: kernel.fixed_shape.get(k) for k in kernel.shape_names}}
    arguments = {name: values[name] for name in inspect.signature(type(kernel)).parameters}
    return _encode_dict({"name": kernel.name, "arguments": arguments}, where, arrays)


class _Decoder:
    """Rebuilds a state tree from its JSON data, reading arrays from the archive."""

    def __init__(self, archive, records):
        self.archive = archive
        self.records = records

    def decode(self, data):
        if isinstance(data, list):
            return [self.decode(v) for v in data]
        if not isinstance(data, dict):
            return data
        if len(data) == 1:
            (key, value), = data.items()
            if key.startswith("$"):
                return self._tagged(key, value)
        return {k: self.decode(v) for k, v in data.items()}

    def _tagged(self, key, value):
        if key == "$tuple":
            return tuple(self.decode(value))
        if key == "$array":
            with self.archive.open(f"{_ARRAY_FOLDER}{value}.npy") as stream:
                return np.lib.format.read_array(stream, allow_pickle=False)
        if key == "$strings":
            return np.array(value, dtype=object)
        if key == "$kernel":
            state = self.decode(value)
            return _KERNELS[state["name"]](**state["arguments"])
        if key == "$record":
            name, fields = value
            return self.records[name](**self.decode(fields))
        raise KeyError(key)
