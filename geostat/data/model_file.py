"""Model files: a fitted estimator's settings and state in one zip archive [1]_, no pickle.

The archive (deflate [2]_) holds ``model.json``, UTF-8 JSON ``{"format": "geostat-model",
"version": N, "geostat": "<writer version>", "params": {...}, "fitted": {...}}`` (the
constructor parameters and fitted state), and one ``arrays/<name>.npy`` [3]_ per array
(numbers, booleans, dates or fixed-width strings, never objects). The state is a tree of
dicts, lists, tuples, numbers, strings, None, arrays, kernels (family name and
:meth:`~geostat.kernels.Kernel.init_arguments`, nested at most :data:`MAX_KERNEL_DEPTH`
deep) and records (dataclasses by class name and fields); in the JSON, tuples, arrays,
kernels and records are objects with one key starting with ``$``, and floats round-trip
exactly (NaN and Infinity included). The fitted state holds exactly the attributes
:data:`FITTED_ATTRIBUTES` lists for the file's version; absent optional ones read as
:data:`FITTED_DEFAULTS`.

Versions: 1, isotropic kernels; 2 adds the anisotropic and space-time kernels and
``time_unit_``; 3 adds the known noise variances of the training record (``noise``,
None when absent), ``transform_`` and the log-Jacobian of the data scale; 4 adds
``_field_grid``, the grid of a model fitted on an xarray field
(:mod:`geostat.data.grid_record`). This module
writes :data:`VERSION` and reads every older one; :data:`VERSION` changes whenever an
older reader could not read the new files. Writing is atomic.

Reading trusts nothing: only regular files are opened; before anything is decompressed
the zip directory must be one the writer makes (at most :data:`MAX_MEMBERS` members
named ``model.json`` and ``arrays/<name>.npy``, stored or deflated, not encrypted, not
overlapping, each declaring an uncompressed size deflate can reach, at most 1032 to 1,
together at most :data:`MAX_MODEL_BYTES`); members are read to their declared size only;
``model.json`` is at most :data:`MAX_JSON_BYTES` and :data:`MAX_JSON_DEPTH` deep
without repeated keys; an array's header must declare a plain dtype and the size the
directory declares before the array is allocated. Only the kernel families and records
the reader names are rebuilt. A file that breaks these rules raises
:class:`geostat.errors.ModelFileError`.

References
----------
.. [1] PKWARE Inc. (2022). APPNOTE.TXT - .ZIP File Format Specification, version 6.3.10.
.. [2] Deutsch, P. (1996). DEFLATE Compressed Data Format Specification version 1.3.
   RFC 1951.
.. [3] NumPy Enhancement Proposal 1 (NEP 1): A simple file format for NumPy arrays.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import math
import os
import re
import stat
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from geostat._version import __version__
from geostat.data.atomic import atomic_path
from geostat.errors import ModelFileError
from geostat.kernels import (
    Anisotropic,
    Exponential,
    Gaussian,
    Kernel,
    Matern,
    PoweredExponential,
    SpaceTime,
)

__all__ = [
    "FITTED_ATTRIBUTES",
    "FITTED_DEFAULTS",
    "FORMAT",
    "MAX_FILE_BYTES",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_KERNEL_DEPTH",
    "MAX_MEMBERS",
    "MAX_MODEL_BYTES",
    "VERSION",
    "damaged_file_error",
    "read_model",
    "write_model",
]

#: The ``format`` entry of every model file.
FORMAT = "geostat-model"
#: The format version this module writes, and the newest it reads (it reads every older one).
VERSION = 4

_REQUIRED_1 = frozenset(
    {
        "n_features_in_",
        "kernel_",
        "distance_",
        "method_",
        "accuracy_",
        "n_safeguarded_",
        "perturbation_",
        "shift_",
        "result_",
        "loglik_error_",
        "params_",
        "stderr_",
        "coef_",
        "coef_stderr_",
        "coef_names_",
        "loglik_",
        "n_iter_",
        "n_evaluations_",
        "converged_",
        "_trend",
        "_layout",
        "_y_names",
        "_y_one_d",
        "_scale",
        "_training",
        "_field",
    }
)
#: ``{version: (required, optional)}``: the fitted attributes of a model file of each
#: format version (a model fitted on a DataFrame also has ``feature_names_in_``). A file
#: with any other attribute, or without a required one, is refused.
FITTED_ATTRIBUTES = {
    1: (_REQUIRED_1, frozenset({"feature_names_in_"})),
    2: (_REQUIRED_1, frozenset({"feature_names_in_", "time_unit_"})),
    3: (_REQUIRED_1, frozenset({"feature_names_in_", "time_unit_", "transform_"})),
    4: (
        _REQUIRED_1,
        frozenset({"feature_names_in_", "time_unit_", "transform_", "_field_grid"}),
    ),
}
#: ``{name: value}``: optional fitted attributes that :func:`read_model` sets when a file
#: lacks them (a file of an older version, or one saved before the attribute existed).
FITTED_DEFAULTS = {"time_unit_": None, "transform_": None, "_field_grid": None}
#: Deepest nesting of kernels in a model file: ``SpaceTime(space=Anisotropic(Matern()))``.
MAX_KERNEL_DEPTH = 3

#: Largest model file read, in bytes (the largest zip archive without ZIP64 end records).
MAX_FILE_BYTES = 2**31 - 1
#: Largest total of the members' uncompressed sizes, in bytes: the training data of about
#: 60 million sites with one replicate, far more than any model this package fits.
MAX_MODEL_BYTES = 2**31
#: Largest ``model.json``, in bytes.
MAX_JSON_BYTES = 2**24
#: Deepest nesting of lists and objects in ``model.json`` (files written today reach 14, with
#: kernels nested :data:`MAX_KERNEL_DEPTH` deep).
MAX_JSON_DEPTH = 32
#: Most members of a model file (``model.json`` and one per array).
MAX_MEMBERS = 1024

_JSON_MEMBER = "model.json"
_ARRAY_FOLDER = "arrays/"
_ARRAY_MEMBER = re.compile(r"arrays/([\w.\-]{1,200})\.npy", re.ASCII)
_ZIP_MAGIC = b"PK\x03\x04"
_END_RECORD = struct.Struct("<4s4H2LH")  # end of central directory record, APPNOTE 4.3.16
_END_MAGIC = b"PK\x05\x06"
_ZIP64_LOCATOR_MAGIC = b"PK\x06\x07"
_LOCAL_HEADER_BYTES = 30  # fixed part of a local file header, APPNOTE 4.3.7
#: General-purpose flags a member may carry (APPNOTE 4.4.4): deflate options, data
#: descriptor, UTF-8 name; not encryption (bits 0, 6, 13) nor patched data (bit 5).
_ALLOWED_FLAGS = 0x02 | 0x04 | 0x08 | 0x800
#: Most uncompressed bytes a deflate stream yields per compressed byte (RFC 1951).
_DEFLATE_RATIO = 1032
#: Largest directory (central directory) read: :data:`MAX_MEMBERS` entries of short names.
_MAX_DIRECTORY_BYTES = MAX_MEMBERS * 512
#: Array dtype kinds a model file holds: booleans, integers, floats, complex, dates,
#: time spans, fixed-width byte and unicode strings (never objects or structures).
_ARRAY_KINDS = frozenset("biufcmMSU")
_NPY_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_READ_CHUNK = 2**20
_ISOTROPIC = {cls.name: cls for cls in (Exponential, Matern, PoweredExponential, Gaussian)}
#: ``{version: {family name: class}}``: the kernels a model file of each version holds.
_ALL_KERNELS = {**_ISOTROPIC, Anisotropic.name: Anisotropic, SpaceTime.name: SpaceTime}
_KERNELS = {1: _ISOTROPIC, 2: _ALL_KERNELS, 3: _ALL_KERNELS, 4: _ALL_KERNELS}
#: What the zip, zlib, JSON, ``.npy`` and dataclass readers raise on bad input.
_DAMAGE = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    ValueError,
    KeyError,
    TypeError,
    struct.error,
    OverflowError,
    NotImplementedError,
)


class _Malformed(Exception):
    """A broken rule of the model file format (the message of :class:`ModelFileError`)."""


def write_model(path, params, fitted):
    """Write an estimator's parameters and fitted state to a model file, atomically.

    Everything is checked before the file is opened; the archive is written to a
    temporary file and renamed onto `path` (:func:`geostat.data.atomic.atomic_path`), so
    a failure leaves an existing file as it was.

    Parameters
    ----------
    path : str, bytes or os.PathLike
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
        If the file cannot be written (:class:`IsADirectoryError` when `path` is a folder).
    """
    arrays = {}
    header = {
        "format": FORMAT,
        "version": VERSION,
        "geostat": __version__,
        "params": _encode(params, "params", arrays),
        "fitted": _encode(fitted, "fitted", arrays),
    }
    with (
        atomic_path(path) as temporary,
        zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        archive.writestr(_JSON_MEMBER, json.dumps(header, indent=1))
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            archive.writestr(f"{_ARRAY_FOLDER}{name}.npy", buffer.getvalue())


def read_model(path, records):
    """Read the parameters and fitted state of a model file, trusting nothing in it.

    The checks (module docstring) are made before the data they guard are read or
    allocated.

    Parameters
    ----------
    path : str, bytes or os.PathLike
    records : sequence of dataclass types
        The record classes the state may hold (others are refused).

    Returns
    -------
    params, fitted : dict
        The constructor parameters, and exactly the fitted attributes
        :data:`FITTED_ATTRIBUTES` lists (absent optional ones at their
        :data:`FITTED_DEFAULTS`), to be checked by the caller.

    Raises
    ------
    OSError
        If `path` cannot be read (:class:`FileNotFoundError` when it does not exist).
    geostat.errors.ModelFileError
        If `path` is not a regular geostat model file, breaks a rule or a size limit of
        the format, or was written in a newer format version.
    """
    path = Path(os.fsdecode(path))
    with _open_regular_file(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise _too_large(path, f"the file has {size:,} bytes", MAX_FILE_BYTES, "MAX_FILE_BYTES")
        if stream.read(len(_ZIP_MAGIC)) != _ZIP_MAGIC:
            raise _not_a_model(path)
        try:
            directory_offset = _check_end_record(stream, size)
            with zipfile.ZipFile(stream) as archive:
                return _read_archive(archive, directory_offset, records, path)
        except ModelFileError:
            raise
        except _Malformed as exc:
            raise damaged_file_error(path, str(exc)) from None
        except _DAMAGE as exc:
            raise damaged_file_error(path, f"{type(exc).__name__}: {str(exc)[:200]}") from None


def damaged_file_error(path, detail):
    """The :class:`~geostat.errors.ModelFileError` for a damaged model file `path`, with
    the `detail` of what is wrong (e.g. ``"params_['variance'] is nan"``)."""
    return ModelFileError(
        f"{path} is a damaged geostat model file ({detail}); copy it again, or save the "
        "model again with SpatialGP.save."
    )


# ---------------------------------------------------------------------------- the file
def _open_regular_file(path):
    """`path` open for binary reading if it is a regular file; a named pipe, a device, a
    socket or a folder raises :class:`ModelFileError` without being read (nor waited on:
    the file is opened without blocking, and checked again once open)."""
    _check_regular(os.stat(path).st_mode, path)
    descriptor = os.open(
        path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    )
    try:
        _check_regular(os.fstat(descriptor).st_mode, path)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def _check_regular(mode, path):
    if stat.S_ISREG(mode):
        return
    kinds = [
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    raise ModelFileError(
        f"{path} is {kind}, not a model file; give the path of a file written by SpatialGP.save or "
        "'geostat fit --save-model'."
    )


def _check_end_record(stream, size):
    """The offset of the zip directory, from the end record, once checked: one disk, at
    most :data:`MAX_MEMBERS` entries in at most ``_MAX_DIRECTORY_BYTES``, the directory
    right before the record (no data before the archive, no ZIP64 records)."""
    tail_size = min(size, _END_RECORD.size + 2**16)  # as far back as zipfile looks for it
    stream.seek(size - tail_size)
    tail = stream.read(tail_size)
    at = len(tail) - _END_RECORD.size
    if (
        tail[at : at + 4] != _END_MAGIC or tail[-2:] != b"\0\0"
    ):  # not a record without comment: search, as zipfile does
        at = tail.rfind(_END_MAGIC, 0, len(tail) - _END_RECORD.size + 1)
    if at < 0:
        raise _Malformed("no zip end record")
    _, disk, directory_disk, entries_here, entries, directory_size, directory_offset, _ = (
        _END_RECORD.unpack_from(tail, at)
    )
    if disk or directory_disk or entries_here != entries:
        raise _Malformed("the archive spans several disks")
    if entries > MAX_MEMBERS or directory_size > _MAX_DIRECTORY_BYTES:
        raise _Malformed(
            f"its directory lists {entries} members in {directory_size:,} bytes; a model file has "
            f"at most {MAX_MEMBERS} members"
        )
    record = size - tail_size + at
    if (
        directory_offset + directory_size != record
        or tail[max(at - 20, 0) : max(at - 16, 0)] == _ZIP64_LOCATOR_MAGIC
    ):
        raise _Malformed("the zip directory is not where its end record says")
    return directory_offset


def _read_archive(archive, directory_offset, records, path):
    members = _check_directory(archive, directory_offset, path)
    header = _read_header(archive, members.pop(_JSON_MEMBER))
    _check_header(header, path)
    decoder = _Decoder(
        archive, members, {cls.__name__: cls for cls in records}, _KERNELS[header["version"]]
    )
    params, fitted = decoder.decode(header["params"]), decoder.decode(header["fitted"])
    unread = sorted(set(members) - decoder.read)
    if unread:
        raise _Malformed(f"it holds arrays that model.json does not use: {unread[:3]}")
    return params, {**FITTED_DEFAULTS, **fitted}


def _check_directory(archive, directory_offset, path):
    """``{name: ZipInfo}`` of the members, once the directory is checked (nothing is read)."""
    infos = archive.infolist()
    names = [info.filename for info in infos]
    if _JSON_MEMBER not in names:
        raise _not_a_model(path)
    if len(infos) > MAX_MEMBERS or len(set(names)) != len(names):
        raise _Malformed(
            "its zip directory lists a member twice"
            if len(infos) <= MAX_MEMBERS
            else f"it has {len(infos)} members, more than {MAX_MEMBERS}"
        )
    for info in infos:
        _check_member(info)
    total = sum(info.file_size for info in infos)
    if total > MAX_MODEL_BYTES:
        raise _too_large(
            path, f"its members declare {total:,} bytes", MAX_MODEL_BYTES, "MAX_MODEL_BYTES"
        )
    json_size = archive.getinfo(_JSON_MEMBER).file_size
    if json_size > MAX_JSON_BYTES:
        raise _too_large(
            path, f"its model.json declares {json_size:,} bytes", MAX_JSON_BYTES, "MAX_JSON_BYTES"
        )
    _check_no_overlap(infos, directory_offset)
    return dict(zip(names, infos, strict=True))


def _check_member(info):
    """One directory entry: an expected name, stored or deflated, not encrypted, and an
    uncompressed size that its compressed size can honestly give."""
    name = info.filename
    if name != _JSON_MEMBER and not _ARRAY_MEMBER.fullmatch(name):
        raise _Malformed(
            f"it has the member {name[:100]!r}; a model file holds model.json and "
            "arrays/<name>.npy only"
        )
    if info.orig_filename != name:
        raise _Malformed(f"its member {name} has a name with a NUL character or a backslash")
    if info.flag_bits & ~_ALLOWED_FLAGS:
        raise _Malformed(f"its member {name} is encrypted or patched (flags {info.flag_bits:#06x})")
    if info.compress_type == zipfile.ZIP_STORED:
        honest = info.file_size == info.compress_size
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        honest = info.file_size <= _DEFLATE_RATIO * info.compress_size
    else:
        raise _Malformed(
            f"its member {name} is compressed with method {info.compress_type}; a model file uses "
            "deflate"
        )
    if not honest:
        raise _Malformed(
            f"its member {name} declares {info.file_size:,} bytes from {info.compress_size:,} "
            f"compressed bytes, more than deflate can give ({_DEFLATE_RATIO} to 1)"
        )


def _check_no_overlap(infos, directory_offset):
    """Members follow each other, each ending (local header, name, compressed data)
    before the next begins and the last before the directory: no data is read twice."""
    end = 0
    for info in sorted(infos, key=lambda i: i.header_offset):
        if info.header_offset < end:
            raise _Malformed(f"its member {info.filename} overlaps the one before it")
        end = info.header_offset + _LOCAL_HEADER_BYTES + len(info.filename) + info.compress_size
    if end > directory_offset:
        raise _Malformed("its last member overlaps the zip directory")


def _read_member(archive, info):
    """The bytes of a member: its declared size, read at most one byte further."""
    with archive.open(info) as stream:
        data = stream.read(info.file_size + 1)
    if len(data) != info.file_size:
        raise _Malformed(
            f"its member {info.filename} holds {'more' if len(data) > info.file_size else 'fewer'} "
            "bytes than its directory entry says"
        )
    return data


def _not_a_model(path):
    return ModelFileError(
        f"{path} is not a geostat model file; give a file written by SpatialGP.save or "
        "'geostat fit --save-model'."
    )


def _too_large(path, what, limit, name):
    return ModelFileError(
        f"{path} is refused as a geostat model file: {what}, more than the {limit:,} a model file "
        f"may have (geostat.data.model_file.{name}). A file written by SpatialGP.save stays far "
        "below; if this one is, raise that limit before loading it."
    )


# ---------------------------------------------------------------------------- model.json
def _read_header(archive, info):
    try:
        header = json.loads(
            _read_member(archive, info).decode("utf-8"), object_pairs_hook=_object_without_repeats
        )
    except RecursionError:
        raise _Malformed(
            f"model.json nests lists or objects deeper than {MAX_JSON_DEPTH}"
        ) from None
    except (
        ValueError
    ) as exc:  # invalid UTF-8 or JSON, a repeated key, an integer of too many digits
        raise _Malformed(f"model.json is not valid JSON: {exc}") from None
    if _nesting_depth(header, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise _Malformed(f"model.json nests lists or objects deeper than {MAX_JSON_DEPTH}")
    return header


def _object_without_repeats(pairs):
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        repeated = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"the key {repeated[:100]!r} appears twice in one object")
    return dict(pairs)


def _nesting_depth(value, limit):
    """How deeply lists and objects nest in `value` (a scalar: 0), counted without
    recursion; counting stops past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= limit:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def _check_header(header, path):
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _not_a_model(path)
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise _Malformed(f"its format version is {version!r:.60}")
    if version > VERSION:
        raise ModelFileError(
            f"{path} is a geostat model file of format version {version} (written by geostat "
            f"{str(header.get('geostat', 'unknown'))[:40]}); this geostat ({__version__}) reads "
            f"versions up to {VERSION}. Upgrade geostat to load it."
        )
    for part in ("params", "fitted"):
        if not isinstance(header.get(part), dict):
            raise _Malformed(f"its {part!r} is a {type(header.get(part)).__name__}, not an object")
    required, optional = FITTED_ATTRIBUTES[version]
    unknown = sorted(set(header["fitted"]) - required - optional)
    if unknown:
        raise _Malformed(
            f"it sets {[name[:100] for name in unknown[:5]]}, which are not fitted attributes of a "
            f"model file of format version {version}"
        )
    missing = sorted(required - set(header["fitted"]))
    if missing:
        raise _Malformed(f"it lacks the fitted attribute(s) {missing}")


# ---------------------------------------------------------------------------- encoding
def _encode(value, where, arrays, kernels=0):
    """`value` as JSON-ready data; arrays go to `arrays` under names made from `where`
    (`kernels`: how many kernels `value` is nested in)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.ndarray):
        return _encode_array(value, where, arrays)
    if isinstance(value, (list, tuple)):
        items = [_encode(v, f"{where}.{i}", arrays, kernels) for i, v in enumerate(value)]
        return {"$tuple": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return _encode_dict(value, where, arrays, kernels)
    if isinstance(value, Kernel):
        return {"$kernel": _encode_kernel(value, where, arrays, kernels + 1)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        return {"$record": [type(value).__name__, _encode_dict(fields, where, arrays)]}
    raise ValueError(
        f"{where} is a {type(value).__name__}, which a model file cannot hold (it holds numbers, "
        "strings, arrays, lists, dicts and kernels); set it to such a value (e.g. an int "
        "random_state) before saving."
    )


def _encode_dict(value, where, arrays, kernels=0):
    bad = [k for k in value if not isinstance(k, str) or k.startswith("$")]
    if bad:
        raise ValueError(
            f"{where} has the key {bad[0]!r}; a model file holds dicts keyed by names (str not "
            "starting with '$')."
        )
    return {k: _encode(v, f"{where}.{k}", arrays, kernels) for k, v in value.items()}


def _encode_array(value, where, arrays):
    if value.dtype.kind == "O":
        if all(isinstance(v, str) for v in value.flat):
            return {"$strings": value.tolist()}
        raise ValueError(
            f"{where} is an array of Python objects (such as cftime dates), which a model file "
            "cannot hold without pickle; convert them to numbers, numpy datetime64 or strings "
            "before fitting."
        )
    name = where.replace("/", "_")
    if name in arrays:  # keys that differ only by "/" and "_"
        name = f"{name}_{len(arrays)}"
    arrays[name] = value
    return {"$array": name}


def _encode_kernel(kernel, where, arrays, depth):
    """A kernel as its family name and constructor arguments (:meth:`Kernel.init_arguments`,
    whose kernels are encoded in turn); `depth` counts it among the kernels it is nested in."""
    families = _KERNELS[VERSION]
    if families.get(kernel.name) is not type(kernel):
        raise ValueError(
            f"{where} is a {type(kernel).__name__}, not one of the built-in kernels "
            f"{sorted(families)}: a model file stores kernels by family name. Use a built-in "
            "kernel, or pickle the estimator instead."
        )
    if depth > MAX_KERNEL_DEPTH:
        raise ValueError(
            f"{where} nests kernels more than {MAX_KERNEL_DEPTH} deep (or in a cycle); a model "
            "file holds at most SpaceTime(space=Anisotropic(<family>)). Build the kernel from "
            "built-in families only."
        )
    arguments = kernel.init_arguments()
    expected = set(inspect.signature(type(kernel)).parameters)
    if not isinstance(arguments, dict) or set(arguments) != expected:
        raise ValueError(
            f"{where}: {type(kernel).__name__}.init_arguments() does not give the constructor "
            f"arguments {sorted(expected)}, so a model file cannot rebuild it."
        )
    return _encode_dict(
        {"name": kernel.name, "arguments": arguments}, f"{where}.{kernel.name}", arrays, depth
    )


# ---------------------------------------------------------------------------- decoding
class _Decoder:
    """Rebuilds a state tree from its JSON data, reading each array of the archive once."""

    def __init__(self, archive, members, records, kernels):
        self.archive = archive
        self.members = members
        self.records = records
        self.kernels = kernels  # {family name: class} of the file's version
        self.depth = 0  # kernels the value being decoded is nested in
        self.read = set()

    def decode(self, data):
        if isinstance(data, list):
            return [self.decode(v) for v in data]
        if not isinstance(data, dict):
            return data
        tags = [key for key in data if key.startswith("$")]
        if tags:
            if len(data) != 1:
                raise _Malformed(f"an object mixes the tag {tags[0][:40]!r} with other keys")
            return self._tagged(tags[0], data[tags[0]])
        return {k: self.decode(v) for k, v in data.items()}

    def _tagged(self, key, value):
        if key == "$tuple" and isinstance(value, list):
            return tuple(self.decode(value))
        if key == "$array" and isinstance(value, str):
            return self._array(f"{_ARRAY_FOLDER}{value}.npy")
        if key == "$strings" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return np.array(value, dtype=object)
        if key == "$kernel":
            return self._kernel(value)
        if (
            key == "$record"
            and isinstance(value, list)
            and len(value) == 2
            and value[0] in self.records
        ):
            fields = self.decode(value[1])
            if not isinstance(fields, dict):
                raise _Malformed(f"the fields of a {value[0]} record are a {type(fields).__name__}")
            return self.records[value[0]](**fields)
        raise _Malformed(f"it has an unknown or malformed {key[:40]!r} entry")

    def _kernel(self, state):
        """A kernel of a built-in family from its name and constructor arguments, each
        kernel among them decoded first, at most :data:`MAX_KERNEL_DEPTH` deep."""
        if (
            not isinstance(state, dict)
            or state.keys() != {"name", "arguments"}
            or not isinstance(state["name"], str)
            or state["name"] not in self.kernels
        ):
            name = state.get("name") if isinstance(state, dict) else None
            raise _Malformed(
                f"a kernel ({str(name)[:40]!r}) is not one of the built-in families "
                f"{sorted(self.kernels)} of its format version"
            )
        cls = self.kernels[state["name"]]
        if not isinstance(state["arguments"], dict):
            raise _Malformed(f"the arguments of its {cls.__name__} kernel are not an object")
        unknown = sorted(set(state["arguments"]) - set(inspect.signature(cls).parameters))
        if unknown:
            raise _Malformed(
                f"its {cls.__name__} kernel has the argument(s) {[k[:40] for k in unknown[:3]]}"
            )
        if self.depth >= MAX_KERNEL_DEPTH:
            raise _Malformed(f"it nests kernels more than {MAX_KERNEL_DEPTH} deep")
        self.depth += 1
        try:
            arguments = self.decode(state["arguments"])
        finally:
            self.depth -= 1
        try:
            return cls(**arguments)
        except (TypeError, ValueError) as exc:
            detail = str(exc)[:200]
            raise _Malformed(
                f"its {cls.__name__} kernel cannot be built from its arguments ({detail})"
            ) from None

    def _array(self, name):
        if name not in self.members or name in self.read:
            raise _Malformed(
                f"model.json refers to the array {name[:100]!r}, which is "
                f"{'read twice' if name in self.read else 'not in the archive'}"
            )
        self.read.add(name)
        return _read_array(self.archive, self.members[name])


def _read_array(archive, info):
    """The array of a ``.npy`` member, allocated only once its header is checked against
    the member's declared size."""
    with archive.open(info) as stream:
        shape, fortran_order, dtype = _array_header(stream, info.filename)
        data_bytes = info.file_size - stream.tell()
        count = math.prod(shape)
        if count * dtype.itemsize != data_bytes:
            raise _Malformed(
                f"the header of {info.filename} announces {count:,} values of {dtype} "
                f"({count * dtype.itemsize:,} bytes) but the member holds {data_bytes:,} bytes of "
                "data"
            )
        array = np.empty(shape[::-1] if fortran_order else shape, dtype)
        _read_into(stream, array.reshape(-1).view(np.uint8), info.filename)
        if stream.read(1):
            raise _Malformed(
                f"its member {info.filename} holds more bytes than its directory entry says"
            )
    return array.T if fortran_order else array


def _array_header(stream, name):
    """``(shape, fortran_order, dtype)`` of a ``.npy`` header (versions 1.0 and 2.0),
    refused unless the dtype is one a model file holds and the shape is non-negative."""
    try:
        version = np.lib.format.read_magic(stream)
        if version not in _NPY_HEADERS:
            raise _Malformed(
                f"{name} is a .npy file of version {version}; a model file holds versions 1.0 and "
                "2.0"
            )
        shape, fortran_order, dtype = _NPY_HEADERS[version](stream)
    except (SyntaxError, RecursionError) as exc:
        raise _Malformed(f"{name} has an unreadable .npy header ({type(exc).__name__})") from None
    plain = (
        dtype.kind in _ARRAY_KINDS
        and dtype.fields is None
        and dtype.subdtype is None
        and dtype.itemsize > 0
    )
    if not plain:
        raise _Malformed(
            f"{name} holds values of dtype {dtype}; a model file holds numbers, booleans, dates "
            "and fixed-width strings only"
        )
    if any(n < 0 for n in shape):
        raise _Malformed(f"{name} announces the shape {shape}")
    return shape, fortran_order, dtype


def _read_into(stream, buffer, name):
    """Fill `buffer` (bytes of an array) from `stream`, a megabyte at a time."""
    view = memoryview(buffer)
    filled = 0
    while filled < len(view):
        got = stream.readinto(view[filled : filled + _READ_CHUNK])
        if not got:
            raise _Malformed(f"its member {name} ends before its data")
        filled += got
