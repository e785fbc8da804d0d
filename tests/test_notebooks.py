"""The tutorials in ``notebooks/`` and the scripts in ``notebooks/scripts/`` run top to bottom.

They run at their small size (``GEOSTAT_NOTEBOOKS=small``, the default; ``full`` switches
them to the full data), each in a fresh kernel or interpreter working in a temporary
folder, so nothing is written into the checkout.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SCRIPTS = sorted((ROOT / "notebooks" / "scripts").glob("*.py"))
ENV = {"GEOSTAT_NOTEBOOKS": "small", "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}


def test_there_are_tutorials_and_scripts():
    assert len(NOTEBOOKS) >= 6 and len(SCRIPTS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [
        out
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_runs(path, tmp_path):
    env = {**os.environ, **ENV}
    done = subprocess.run(
        [sys.executable, str(path), "--small", "--output", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert any(tmp_path.iterdir()), "the script wrote no result"
