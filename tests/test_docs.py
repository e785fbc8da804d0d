"""The Sphinx documentation builds with no warning (``python -m sphinx -W -b html docs ...``).

Each build runs on a copy of ``docs/`` in a temporary folder, next to a ``notebooks/``
folder (the repository's, or made up) and the root files its pages include, so the
generated API stubs and notebook copies never land in the source tree. About 10 s for
the whole site on 2 cores.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="building the docs needs sphinx (pip install '.[docs]')")
pytest.importorskip("numpydoc", reason="building the docs needs numpydoc (pip install '.[docs]')")
pytest.importorskip("myst_nb", reason="building the docs needs myst-nb (pip install '.[docs]')")
nbformat = pytest.importorskip(
    "nbformat", reason="building the docs needs nbformat (a myst-nb dependency)"
)

ROOT = Path(__file__).resolve().parents[1]
#: Files of the repository root that pages of ``docs/`` include (``{include} ../NAME``).
INCLUDED = ("CHANGELOG.md", "CONTRIBUTING.md")
GENERATED = shutil.ignore_patterns(
    "_build", "generated", "tutorials", "jupyter_execute", ".jupyter_cache"
)


def build(root):
    """Build ``root/docs`` to ``root/docs/_build`` (the README's layout) with warnings as
    errors; return the output folder."""
    html = root / "docs" / "_build"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-b",
            "html",
            "-q",
            str(root / "docs"),
            str(html),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=600,
    )
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stdout}\n{result.stderr}"
    return html


def test_docs_build_without_warnings(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=GENERATED)
    # What myst-nb leaves after an earlier build (images and a notebook copy) is not a source.
    (tmp_path / "docs" / "jupyter_execute").mkdir()
    nbformat.write(_notebook("Leftover"), tmp_path / "docs" / "jupyter_execute" / "leftover.ipynb")
    if (ROOT / "notebooks").is_dir():
        shutil.copytree(
            ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns(".*")
        )
    for name in INCLUDED:  # pages of docs/ include these files of the repository root
        shutil.copy(ROOT / name, tmp_path / name)
    html = build(tmp_path)
    api = (html / "api.html").read_text(encoding="utf-8")
    for name in ("SpatialGP", "log_likelihood", "TLRMatrix", "cholesky"):
        assert name in api
    assert (html / "api" / "generated" / "geostat.SpatialGP.html").is_file()
    assert (html / "api" / "generated" / "tlrcore.cholesky.html").is_file()
    assert "Errors and warnings" in (html / "errors.html").read_text(encoding="utf-8")
    assert "Unreleased" in (html / "changelog.html").read_text(encoding="utf-8")
    assert "Adding a kernel" in (html / "contributing.html").read_text(encoding="utf-8")
    notebooks = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
    for name in notebooks:
        assert (html / "tutorials" / f"{name}.html").is_file()


def _notebook(title):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    cell = nbformat.v4.new_code_cell("print(1)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nText."), cell]
    return nb


@pytest.mark.parametrize("n_notebooks", [0, 2], ids=["no-notebooks", "two-notebooks"])
def test_tutorials_page_lists_the_notebooks(tmp_path, n_notebooks):
    """docs/conf.py copies notebooks/*.ipynb into the tutorials toctree; none is no warning.

    A small site (index and tutorials pages, the real conf.py) keeps this fast.
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "docs" / "conf.py", docs)
    shutil.copy(ROOT / "docs" / "tutorials.md", docs)
    (docs / "index.md").write_text("# Test\n\n```{toctree}\ntutorials\n```\n", encoding="utf-8")
    (tmp_path / "notebooks").mkdir()
    names = [f"{k:02d}_tutorial" for k in range(n_notebooks)]
    for name in names:
        nbformat.write(_notebook(f"Tutorial {name}"), tmp_path / "notebooks" / f"{name}.ipynb")
    html = build(tmp_path)
    page = (html / "tutorials.html").read_text(encoding="utf-8")
    for name in names:
        assert f'href="tutorials/{name}.html"' in page
        assert f"Tutorial {name}" in (html / "tutorials" / f"{name}.html").read_text(
            encoding="utf-8"
        )
    assert ("No tutorial notebooks yet" in page) == (not names)
    assert sorted(path.stem for path in (docs / "tutorials").glob("*.ipynb")) == names
