"""Atomic writes (geostat.data.atomic): a file is replaced whole or not at all."""

import os
import threading

import pytest

from geostat.data.atomic import atomic_path, atomic_write_bytes, atomic_write_text


def leftovers(folder):
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp") or ".tmp." in p.name]


def test_a_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert leftovers(tmp_path) == []


def test_a_failed_write_leaves_the_previous_file_intact(tmp_path):
    target = tmp_path / "model.npz"
    target.write_bytes(b"previous model")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_path(target) as temporary:
            temporary.write_bytes(b"half a mod")
            raise RuntimeError("disk full")
    assert target.read_bytes() == b"previous model"
    assert leftovers(tmp_path) == []


def test_an_interrupted_write_leaves_the_previous_file_intact(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("a,b\n1,2\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(target) as temporary:
            temporary.write_text("a,")
            raise KeyboardInterrupt
    assert target.read_text() == "a,b\n1,2\n"
    assert leftovers(tmp_path) == []


def test_the_temporary_keeps_the_suffixes_that_choose_a_format(tmp_path):
    with atomic_path(tmp_path / "predictions.csv.gz") as temporary:
        assert temporary.parent == tmp_path
        assert temporary.name.endswith(".csv.gz")
        temporary.write_bytes(b"x")
    assert (tmp_path / "predictions.csv.gz").read_bytes() == b"x"


def test_a_new_file_gets_the_permissions_of_an_ordinary_one(tmp_path):
    ordinary = tmp_path / "ordinary"
    ordinary.write_text("x")
    atomic_write_text(tmp_path / "atomic", "x")
    assert (tmp_path / "atomic").stat().st_mode == ordinary.stat().st_mode


def test_a_folder_as_the_destination_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError, match="folder"):
        atomic_write_bytes(tmp_path, b"x")


def test_bytes_paths_are_accepted(tmp_path):
    atomic_write_bytes(os.fsencode(tmp_path / "b.bin"), b"payload")
    assert (tmp_path / "b.bin").read_bytes() == b"payload"


def test_concurrent_writers_leave_one_complete_file(tmp_path):
    target = tmp_path / "shared.bin"
    payloads = [bytes([k]) * 200_000 for k in range(8)]
    threads = [threading.Thread(target=atomic_write_bytes, args=(target, p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_bytes() in payloads
    assert leftovers(tmp_path) == []
