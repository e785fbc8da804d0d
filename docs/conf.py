"""Sphinx configuration: ``python -m sphinx -W -b html docs docs/_build`` builds with no warning.

Generated, git-ignored folders inside ``docs/``: ``api/generated/`` (autosummary stubs),
``tutorials/`` (copies of ``notebooks/*.ipynb``, refreshed on every build: Sphinx reads
sources only from this folder) and ``jupyter_execute/`` (notebook images, from myst-nb).
Notebooks are rendered with their stored outputs and never executed here
(``nb_execution_mode = "off"``); CI executes them separately.
"""

import filecmp
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
if (ROOT / "geostat").is_dir():  # document this checkout, even where another copy is installed
    sys.path.insert(0, str(ROOT))

from geostat._version import __version__  # noqa: E402  (after the path above)

project = "geostat + tlrcore"
author = "geostat developers"
copyright = "geostat developers"
release = version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_nb",  # also registers MyST Markdown for the .md pages
]
# No sphinx.ext.intersphinx: its inventories need the network, and the build must work offline.

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
# myst-nb writes notebook images to <outdir>/../jupyter_execute (docs/jupyter_execute for
# docs/_build).
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
nitpicky = False

html_theme = "alabaster"
html_title = "geostat + tlrcore"
html_static_path = []

# --- autodoc / autosummary / numpydoc -----------------------------------------------------
autosummary_generate = True
autosummary_generate_overwrite = True
autosummary_ignore_module_all = False  # a module's __all__ is its list of public names
# Names equal but for case would collide on case-insensitive file systems (macOS, Windows).
autosummary_filename_map = {"tlrcore.dense.LDL": "tlrcore.dense.LDL-class"}
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc Parameters sections carry the types
numpydoc_show_class_members = False  # the class template lists members with autosummary
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

SKLEARN_REQUEST_METHOD = re.compile(r"set_\w+_request")


def _skip_sklearn_routing(app, what, name, obj, skip, options):
    """Skip the ``set_*_request`` methods scikit-learn adds to every estimator: they are
    not geostat's API, and their docstrings link into scikit-learn's own documentation."""
    if SKLEARN_REQUEST_METHOD.fullmatch(name) and "sklearn" in getattr(obj, "__module__", ""):
        return True
    return None


# --- MyST / myst-nb ------------------------------------------------------------------------
nb_execution_mode = "off"
myst_heading_anchors = 3  # [text](#a-heading) links in the Markdown pages
myst_enable_extensions = ["dollarmath"]

# --- tutorials: notebooks/*.ipynb copied into docs/tutorials/ ---------------------------------
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS = DOCS / "tutorials"
TUTORIALS_TOCTREE = re.compile(r"```\{toctree\}.*?```", re.DOTALL)


def sync_notebooks(source=NOTEBOOKS, target=TUTORIALS):
    """Make ``target`` hold exactly the ``*.ipynb`` of ``source``; return their names.

    Unchanged copies are left alone (so incremental builds do not re-read them) and copies
    of notebooks removed from ``source`` are deleted.
    """
    notebooks = sorted(source.glob("*.ipynb")) if source.is_dir() else []
    target.mkdir(exist_ok=True)
    names = {path.name for path in notebooks}
    for stale in target.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    for path in notebooks:
        copy = target / path.name
        if not copy.exists() or not filecmp.cmp(path, copy, shallow=False):
            shutil.copyfile(path, copy)
    return sorted(names)


_copied = []


def _clear_api_stubs(app):
    """Delete the autosummary stubs before autosummary writes them again (it runs later on
    the same event): a stub of a name no longer documented would be an orphan page."""
    shutil.rmtree(DOCS / "api" / "generated", ignore_errors=True)


def _copy_notebooks(app):
    _copied[:] = sync_notebooks()


def _reread_tutorials(app, env, added, changed, removed):
    """The tutorials page lists the notebooks: read it again on every build."""
    return ["tutorials"]


def _no_tutorials_yet(app, docname, source):
    """With no notebook, replace the tutorials toctree (whose glob would match nothing)."""
    if docname == "tutorials" and not _copied:
        source[0] = TUTORIALS_TOCTREE.sub("No tutorial notebooks yet.", source[0])


def setup(app):
    app.connect("builder-inited", _clear_api_stubs, priority=400)
    app.connect("builder-inited", _copy_notebooks)
    app.connect("env-get-outdated", _reread_tutorials)
    app.connect("source-read", _no_tutorials_yet)
    app.connect("autodoc-skip-member", _skip_sklearn_routing)
