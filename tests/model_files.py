"""Shared helpers of the model-file tests: save a fitted model, rewrite its JSON header."""

import json
import zipfile


def rewrite_header(path, change):
    """Apply ``change(header)`` to the ``model.json`` of the model file `path` in place
    (every other member kept as it is)."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(members["model.json"])
    change(header)
    members["model.json"] = json.dumps(header).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def saved_model(fitted, tmp_path):
    """The path of ``model.npz`` in `tmp_path` where ``fitted[0]`` (a fixture's estimator)
    was saved."""
    path = tmp_path / "model.npz"
    fitted[0].save(path)
    return path
