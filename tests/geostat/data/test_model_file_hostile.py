"""Model files from anywhere: a hostile or damaged file is refused with
:class:`geostat.errors.ModelFileError` (naming the file) before anything it declares is
allocated, never blocks, never runs code and never replaces a method; saves are atomic.

The zip bombs and the oversized ``.npy`` header are loaded in a subprocess whose address
space is capped a few hundred megabytes above what it holds after importing geostat, so
that reading (or allocating) what they announce would fail there with ``MemoryError``.
"""

import bz2
import errno
import io
import json
import os
import re
import struct
import subprocess
import sys
import textwrap
import threading
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from model_files import rewrite_header

import geostat as gs
from geostat import cli
from geostat.data.model_file import FITTED_ATTRIBUTES, MAX_MODEL_BYTES, VERSION
from geostat.errors import ModelFileError

EXPONENTIAL = {"variance": 1.0, "range": 0.2, "nugget": 0.05}
COORDS = "arrays/fitted._training.coords.npy"


@pytest.fixture(scope="module")
def fitted():
    """An exponential fit on 60 random sites, and sites to predict at."""
    rng = np.random.default_rng(52)
    X = rng.uniform(size=(60, 2))
    y = gs.simulate(X, EXPONENTIAL, kernel="exponential", random_state=53).ravel()
    return gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, y), rng.uniform(size=(5, 2))


@pytest.fixture(scope="module")
def model_bytes(fitted, tmp_path_factory):
    """The bytes of the fit's model file."""
    path = tmp_path_factory.mktemp("model") / "model.npz"
    fitted[0].save(path)
    return path.read_bytes()


@pytest.fixture
def saved(model_bytes, tmp_path):
    """A fresh copy of the model file."""
    path = tmp_path / "model.npz"
    path.write_bytes(model_bytes)
    return path


def _refused(path, match=""):
    """Assert that loading `path` raises ModelFileError naming it (and matching `match`)."""
    with pytest.raises(ModelFileError, match=re.escape(str(path)) + ".*" + match):
        gs.load(path)


# ---------------------------------------------------------------------------- building zip archives
def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _deflate(data):
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def _entry(name, data):
    """A deflated zip entry of `data`: ``(name, method, compressed bytes, crc, size)``."""
    return name, zipfile.ZIP_DEFLATED, _deflate(data), zlib.crc32(data), len(data)


def _zip_bytes(entries):
    """A zip archive of `entries` ``(name, method, stored bytes, crc, declared size)``,
    written field by field (APPNOTE 4.3.7, 4.3.12, 4.3.16) so that a test can declare
    what it likes."""
    local, central = bytearray(), bytearray()
    for name, method, data, crc, size in entries:
        offset = len(local)
        fields = (20, 0, method, 0, 0x21, crc, len(data), size, len(name), 0)
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", *fields) + name.encode() + data
        central += (
            struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, *fields, 0, 0, 0, 0, offset)
            + name.encode()
        )
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central), len(local), 0
    )
    return bytes(local + central + end)


def _rewrite(path, members, replace=None):
    """Write `members` (``{name: bytes}``) to `path`, with `replace` (``{name: entry}``)
    taking the place of or adding to them."""
    entries = {name: _entry(name, data) for name, data in members.items()}
    entries.update(replace or {})
    path.write_bytes(_zip_bytes(list(entries.values())))


def _npy_header(shape, descr="<f8"):
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def _zeros_stream(header, megabytes):
    """A raw deflate stream of `header` then `megabytes` MiB of zeros, built from one
    compressed MiB repeated (each block flushed whole, so copies decode alike)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(2**20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return start + block * megabytes + b"\x03\x00"  # a final empty block ends the stream


# ----------------------------------------------------------------------- bombs, under a memory cap
def _lying_bomb(path, members):
    """0.6 MB of deflate (which inflates to 0.6 GB of zeros) declared as a 1.4 GB array."""
    values = 175_000_000
    header = _npy_header((values,))
    _rewrite(
        path,
        members,
        {
            COORDS: (
                COORDS,
                zipfile.ZIP_DEFLATED,
                _zeros_stream(header, 600),
                0,
                len(header) + 8 * values,
            )
        },
    )


def _honest_bomb(path, members):
    """3 MB of deflate that inflates, as declared, to a 3 GB array of zeros."""
    megabytes = 2861
    header = _npy_header((megabytes * 2**17,))
    _rewrite(
        path,
        members,
        {
            COORDS: (
                COORDS,
                zipfile.ZIP_DEFLATED,
                _zeros_stream(header, megabytes),
                0,
                len(header) + megabytes * 2**20,
            )
        },
    )


def _trillion_values(path, members):
    """A small .npy member whose header announces 10^12 float64 values."""
    members[COORDS] = _npy_header((10**12,)) + bytes(64)
    _rewrite(path, members)


_CAPPED_LOAD = textwrap.dedent("""
    import json, resource, sys
    import geostat as gs
    from geostat.errors import ModelFileError

    def address_space():
        with open("/proc/self/status") as status:
            return next(
                int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:")
            )

    headroom = 384 * 2**20
    limit = address_space() + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        bytearray(2 * headroom)
        cap_holds = False
    except MemoryError:
        cap_holds = True
    outcomes = {}
    for path in sys.argv[1:]:
        try:
            gs.load(path)
            outcomes[path] = "loaded"
        except ModelFileError as exc:
            outcomes[path] = "ModelFileError: " + str(exc)
        except BaseException as exc:
            outcomes[path] = type(exc).__name__
    print(json.dumps({"cap_holds": cap_holds, "outcomes": outcomes}))
""")


@pytest.fixture(scope="module")
def capped_outcomes(model_bytes, tmp_path_factory):
    """``{builder name: outcome}`` of loading each hostile file in one memory-capped subprocess."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the address-space cap (RLIMIT_AS, /proc) is a Linux feature")
    folder = tmp_path_factory.mktemp("bombs")
    (folder / "model.npz").write_bytes(model_bytes)
    members = _members(folder / "model.npz")
    paths = {}
    for build in (_lying_bomb, _honest_bomb, _trillion_values):
        paths[build.__name__] = folder / f"{build.__name__.strip('_')}.npz"
        build(paths[build.__name__], dict(members))
    root = Path(gs.__file__).resolve().parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED_LOAD, *map(str, paths.values())],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["cap_holds"], "the memory cap did not hold: the bomb tests would prove nothing"
    return {name: (path, report["outcomes"][str(path)]) for name, path in paths.items()}


def test_a_small_file_that_expands_to_gigabytes_is_refused_before_decompressing(capped_outcomes):
    path, outcome = capped_outcomes["_lying_bomb"]
    assert path.stat().st_size < 700_000
    assert outcome.startswith(f"ModelFileError: {path} is a damaged")
    assert "declares 1,400,000,128 bytes" in outcome and "more than deflate can give" in outcome


def test_a_file_expanding_past_the_size_limit_is_refused_before_decompressing(capped_outcomes):
    path, outcome = capped_outcomes["_honest_bomb"]
    assert path.stat().st_size < 3_200_000
    assert outcome.startswith(f"ModelFileError: {path} is refused")
    assert f"{MAX_MODEL_BYTES:,}" in outcome and "MAX_MODEL_BYTES" in outcome


def test_an_npy_header_announcing_a_trillion_values_is_refused_before_allocating(capped_outcomes):
    path, outcome = capped_outcomes["_trillion_values"]
    assert outcome.startswith(f"ModelFileError: {path} is a damaged")
    assert "announces 1,000,000,000,000 values of float64" in outcome


# ---------------------------------------------------------------------------- model.json
@pytest.mark.parametrize("depth", [40, 100_000])
def test_deeply_nested_json_is_refused(saved, depth):
    members = _members(saved)
    text = members["model.json"].decode()
    members["model.json"] = text.replace(
        '"_field": null', '"_field": ' + "[" * depth + "]" * depth
    ).encode()
    _rewrite(saved, members)
    _refused(saved, "nests lists or objects deeper than 32")


@pytest.mark.parametrize("name", ["predict", "fit", "__class__", "_solvers"])
def test_a_json_key_named_predict_is_refused(saved, name):
    rewrite_header(saved, lambda header: header["fitted"].update({name: {"$strings": ["x"]}}))
    _refused(saved, rf"sets \['{name}'\], which are not fitted attributes")


@pytest.mark.parametrize("name", ["params_", "_training"])
def test_missing_params_or_training_is_refused(saved, name):
    rewrite_header(saved, lambda header: header["fitted"].pop(name))
    _refused(saved, rf"lacks the fitted attribute\(s\) \['{name}'\]")


def _params_as_list(header):
    header["fitted"]["params_"] = list(header["fitted"]["params_"].values())


def _fitted_as_list(header):
    header["fitted"] = list(header["fitted"])


def _record_fields_as_list(header):
    header["fitted"]["_scale"]["$record"][1] = [1.0]


def _fixed_as_list(header):
    header["params"]["fixed"] = [1.0]


@pytest.mark.parametrize(
    "change, match",
    [
        (_params_as_list, "params_ must be a dict"),
        (_fitted_as_list, "its 'fitted' is a list, not an object"),
        (_record_fields_as_list, "the fields of a DataScale record are a list"),
        (_fixed_as_list, "fixed must be a dict"),
    ],
)
def test_a_list_where_a_dict_belongs_is_refused(saved, change, match):
    rewrite_header(saved, change)
    _refused(saved, match)


def _set_param(name, value):
    def change(header):
        header["fitted"]["params_"][name] = value
        header["fitted"]["result_"]["$record"][1]["params"][name] = value

    return change


def _zero_data_scale(header):
    header["fitted"]["_scale"]["$record"][1]["factor"] = 0.0


@pytest.mark.parametrize(
    "change, match",
    [
        (
            _zero_data_scale,
            r"_scale is DataScale\(factor=0.0, log_jacobian=0.0\), not a data scale "
            r"\(a positive power of two",
        ),
        (_set_param("range", 0.0), r"params_\['range'\] must be positive and finite; got 0.0"),
        (_set_param("nugget", -1.0), r"params_\['nugget'\] must be non-negative and finite"),
    ],
    ids=["data-scale", "range", "negative-nugget"],
)
def test_a_zero_scale_is_refused(saved, change, match):
    rewrite_header(saved, change)
    _refused(saved, match)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_nan_or_infinite_variance_is_refused(saved, value):
    rewrite_header(saved, _set_param("variance", value))
    _refused(saved, rf"params_\['variance'\] must be positive and finite; got {value}")


def _coords_with_nan(members):
    coords = np.lib.format.read_array(io.BytesIO(members[COORDS]))
    coords[3, 1] = np.nan
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, coords)
    members[COORDS] = buffer.getvalue()


def _fewer_observations(members):
    name = "arrays/fitted._training.y.npy"
    y = np.lib.format.read_array(io.BytesIO(members[name]))
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, y[:-1])
    members[name] = buffer.getvalue()


def _long_coefficients(members):
    name = "arrays/fitted.coef_.npy"
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.zeros(3))
    members[name] = buffer.getvalue()


def _refused_after(saved, change, match):
    """`change` the members of the model file `saved`, write it again, and check it is refused."""
    members = _members(saved)
    change(members)
    _rewrite(saved, members)
    _refused(saved, match)


@pytest.mark.parametrize(
    "change, match",
    [
        (_coords_with_nan, "_training.coords holds non-finite values"),
        (_fewer_observations, r"_training.y is not a float64 array of shape \(60, 'any'\)"),
        (_long_coefficients, r"coef_ is not a float64 array of shape \(1,\)"),
    ],
    ids=["nan-site", "n-mismatch", "p-mismatch"],
)
def test_arrays_that_disagree_with_the_training_data_are_refused(saved, change, match):
    _refused_after(saved, change, match)


# ---------------------------------------------------------------------------- the zip directory
def _unexpected_member(members):
    members["../evil.py"] = b"print('hello')"


def _unused_array(members):
    members["arrays/spare.npy"] = members[COORDS]


def _object_array(members):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.array([{"a": 1}] * 60, dtype=object), allow_pickle=True)
    members[COORDS] = buffer.getvalue()


def _structured_array(members):
    members[COORDS] = _npy_header((60,), [("a", "<f8"), ("b", "<f8")]) + bytes(960)


@pytest.mark.parametrize(
    "change, match",
    [
        (_unexpected_member, r"has the member '../evil.py'"),
        (_unused_array, r"arrays that model.json does not use: \['arrays/spare.npy'\]"),
        (_object_array, "holds values of dtype object"),
        (_structured_array, "holds values of dtype"),
    ],
    ids=["unexpected-member", "unused-array", "object-dtype", "structured-dtype"],
)
def test_members_the_writer_never_writes_are_refused(saved, change, match):
    _refused_after(saved, change, match)


def test_a_member_compressed_with_another_method_is_refused(saved):
    members = _members(saved)
    data = members[COORDS]
    _rewrite(
        saved,
        members,
        {COORDS: (COORDS, zipfile.ZIP_BZIP2, bz2.compress(data), zlib.crc32(data), len(data))},
    )
    _refused(saved, f"its member {COORDS} is compressed with method 12")


# ------------------------------------------------------------------------ paths that are not files
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are a POSIX feature")
def test_a_fifo_as_the_model_path_is_refused_without_blocking(tmp_path):
    path = tmp_path / "model.npz"
    os.mkfifo(path)
    outcome = []

    def load():
        try:
            gs.load(path)
        except Exception as exc:  # noqa: BLE001 - the outcome is asserted below
            outcome.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(timeout=20)
    if thread.is_alive():  # blocked opening the pipe: release it with a writer, then fail
        os.close(os.open(path, os.O_WRONLY))
        thread.join(timeout=20)
        pytest.fail("loading a named pipe blocked")
    assert len(outcome) == 1 and isinstance(outcome[0], ModelFileError)
    assert str(outcome[0]).startswith(f"{path} is a named pipe (FIFO), not a model file")


def test_a_folder_as_the_model_path_is_refused(tmp_path):
    _refused(tmp_path, "is a folder, not a model file")


@pytest.mark.parametrize("keep", [0.0, 0.3, 0.5, 0.9, 0.999])
def test_a_truncated_model_file_is_refused(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ModelFileError, match=re.escape(str(saved))):
        gs.load(saved)


# ---------------------------------------------------------------------------- saves
@pytest.mark.parametrize(
    "failure",
    [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")],
    ids=["interrupted", "disk-full"],
)
def test_an_interrupted_save_keeps_the_previous_file(fitted, saved, failure, monkeypatch):
    before = saved.read_bytes()
    write = zipfile.ZipFile.writestr
    calls = []

    def fail_midway(archive, *args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            raise failure
        return write(archive, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", fail_midway)
    with pytest.raises(type(failure)):
        fitted[0].save(saved)
    monkeypatch.undo()
    assert saved.read_bytes() == before
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no temporary file left
    assert gs.load(saved).params_ == fitted[0].params_


def test_two_threads_saving_to_one_path_leave_a_loadable_file(fitted, tmp_path, monkeypatch):
    est, _ = fitted
    rng = np.random.default_rng(54)
    X = rng.uniform(size=(90, 2))
    other = gs.SpatialGP(kernel="exponential", n_starts=1).fit(X, X[:, 0] + rng.normal(size=90))
    path = tmp_path / "model.npz"
    barrier = threading.Barrier(2, timeout=30)
    write = zipfile.ZipFile.writestr

    def in_step(archive, *args, **kwargs):  # both writers write each member at the same time
        barrier.wait()
        return write(archive, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", in_step)
    errors = []

    def save(model):
        try:
            model.save(path)
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(model,)) for model in (est, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    monkeypatch.undo()
    assert not errors
    loaded = gs.load(path)
    assert loaded.params_ in (est.params_, other.params_)
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


@pytest.mark.parametrize("convert", [os.fsencode, str, Path], ids=["bytes", "str", "pathlike"])
def test_save_accepts_a_bytes_path(fitted, tmp_path, convert):
    est, sites = fitted
    est.save(convert(tmp_path / "model.npz"))
    assert np.array_equal(
        gs.load(convert(tmp_path / "model.npz")).predict(sites), est.predict(sites)
    )


def test_save_to_a_path_of_another_type_names_the_argument(fitted):
    with pytest.raises(
        TypeError, match=r"path must be a file name \(str, bytes or os.PathLike\); got int"
    ):
        fitted[0].save(3)


def test_saved_state_is_exactly_the_fitted_attributes_of_the_format(fitted, tmp_path):
    """Every fitted attribute is saved, and only those :data:`FITTED_ATTRIBUTES` lists: a
    new attribute of a fit must be added there (and the format version considered)."""
    rng = np.random.default_rng(55)
    frame = pd.DataFrame(rng.uniform(size=(50, 3)), columns=["x", "y", "elevation"])
    draws = gs.simulate(
        frame[["x", "y"]].to_numpy(),
        EXPONENTIAL,
        kernel="exponential",
        n_samples=2,
        random_state=58,
    )
    Y = pd.DataFrame(draws + frame[["elevation"]].to_numpy(), columns=["a", "b"])
    required, optional = FITTED_ATTRIBUTES[VERSION]
    for est in (
        fitted[0],
        gs.SpatialGP(kernel="exponential", trend=["elevation"], n_starts=1).fit(frame, Y),
    ):
        state = set(vars(est)) - set(est.get_params()) - {"_solvers", "_sklearn_version"}
        assert required <= state and state - required <= optional, sorted(state ^ required)
        est.save(tmp_path / "model.npz")
        with zipfile.ZipFile(tmp_path / "model.npz") as archive:
            assert set(json.loads(archive.read("model.json"))["fitted"]) == state


# ---------------------------------------------------------------------------- the command line
def test_geostat_predict_on_a_damaged_model_file_exits_2_naming_it(tmp_path, capsys):
    rng = np.random.default_rng(59)
    sites = pd.DataFrame(rng.uniform(size=(40, 2)), columns=["x", "y"])
    y = gs.simulate(sites.to_numpy(), EXPONENTIAL, kernel="exponential", random_state=60).ravel()
    saved = tmp_path / "model.npz"
    gs.SpatialGP(kernel="exponential", n_starts=1).fit(sites, y).save(saved)
    rewrite_header(saved, lambda header: header["fitted"].pop("params_"))
    sites.iloc[:3].to_csv(tmp_path / "sites.csv", index=False)
    assert (
        cli.main(
            ["predict", str(saved), str(tmp_path / "sites.csv"), "-o", str(tmp_path / "out.csv")]
        )
        == 2
    )
    error = capsys.readouterr().err
    assert (
        error.startswith(f"geostat: {saved} is a damaged geostat model file")
        and "report" not in error
    )


# ---------------------------------------------------------------------------- fuzzing
def _mutations(data, rng, count):
    """`count` damaged copies of `data`: bytes flipped, a stretch zeroed, or the end cut."""
    for _ in range(count):
        damaged = bytearray(data)
        kind = rng.integers(3)
        if kind == 0:
            for at in rng.integers(len(data), size=rng.integers(1, 5)):
                damaged[at] ^= int(rng.integers(1, 256))
        elif kind == 1:
            at, length = int(rng.integers(len(data))), int(rng.integers(1, 64))
            damaged[at : at + length] = bytes(len(damaged[at : at + length]))
        else:
            del damaged[int(rng.integers(len(data))) :]
        yield bytes(damaged)


def test_random_damage_gives_the_model_or_a_model_file_error(fitted, model_bytes, tmp_path):
    """Seeded byte flips, zeroed stretches and truncations anywhere in a model file: each
    load gives the saved model (the damage hit bytes no reader uses, such as a time
    stamp) or ModelFileError, never another exception."""
    est, sites = fitted
    expected = est.predict(sites, return_std=True)
    path = tmp_path / "model.npz"
    outcomes = {"loaded": 0, "refused": 0}
    for damaged in _mutations(model_bytes, np.random.default_rng(56), 400):
        path.write_bytes(damaged)
        try:
            loaded = gs.load(path)
        except ModelFileError as exc:
            assert str(exc).startswith(str(path))
            outcomes["refused"] += 1
            continue
        got = loaded.predict(sites, return_std=True)
        assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
        outcomes["loaded"] += 1
    assert outcomes["refused"] > 300, outcomes


#: Values put in place of any entry of model.json by the fuzz test below.
HOSTILE_VALUES = [
    None,
    True,
    10**400,
    -1,
    0,
    0.5,
    3,
    1e300,
    float("nan"),
    float("inf"),
    "x",
    [],
    {},
    [1, 2],
    {"$tuple": [1]},
    {"$array": "fitted.coef_"},
    {"$strings": ["a"]},
    {"$record": ["DataScale", {"factor": 1.0}]},
    {"$kernel": {"name": "matern", "arguments": {}}},
]


def _entries(value, where=()):
    """The path (keys and indexes) of every entry below the top of a JSON tree."""
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        yield (*where, key)
        yield from _entries(child, (*where, key))


def test_random_values_in_model_json_give_a_working_model_or_a_model_file_error(
    fitted, model_bytes, tmp_path
):
    """Seeded replacements of one entry of model.json (a setting, an estimate, a record
    field, a tag) by a hostile value: each load raises ModelFileError, or gives a model
    whose predictions run (an entry such as a time or a message changes nothing, a valid
    setting may change them), failing at most with a ValueError or LinAlgError of the
    numerics, never a crash."""
    _, sites = fitted
    path = tmp_path / "model.npz"
    path.write_bytes(model_bytes)
    members = _members(path)
    entries = [where for where in _entries(json.loads(members["model.json"])) if len(where) >= 2]
    rng = np.random.default_rng(57)
    refused = 0
    for _ in range(300):
        header = json.loads(members["model.json"])
        *parents, last = entries[rng.integers(len(entries))]
        target = header
        for key in parents:
            target = target[key]
        target[last] = HOSTILE_VALUES[rng.integers(len(HOSTILE_VALUES))]
        _rewrite(path, {**members, "model.json": json.dumps(header).encode()})
        try:
            model = gs.load(path)
        except ModelFileError:
            refused += 1
            continue
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                model.predict(sites, return_std=True)
            except (ValueError, np.linalg.LinAlgError):
                pass
    assert refused > 200
