"""Shared helper of the model-file tests: rewrite the JSON header of a saved model."""

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
