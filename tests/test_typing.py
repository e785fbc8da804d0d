"""Type hints: both packages ship ``py.typed`` and mypy passes on them.

mypy runs with the ``[tool.mypy]`` settings of ``pyproject.toml``, exactly as
``python -m mypy`` in the repository root: on the two packages, whose annotated functions
are checked against their bodies, and on ``tests/typing_snippets/public_api.py``, which
asserts what a user's type checker infers for the public API (``assert_type``) and which
misuses it rejects. Needs the test extra's ``mypy`` and ``pandas-stubs`` (and xarray, whose
types the predictions on fields use); skipped without them.

mypy runs in a subprocess rather than through ``mypy.api.run``: in-process, freeing its
object graph when pytest exits costs about as much as the check itself. Its incremental
cache lives in pytest's cache folder (``.pytest_cache/d/mypy``): a rerun is quick, a cold
run (a fresh clone) checks everything, so the check is in the ``slow`` set
(``pytest -m slow``).
"""

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install '.[test]')")

ROOT = Path(__file__).resolve().parents[1]


def _installed(distribution):
    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.parametrize("package", ["geostat", "tlrcore"])
def test_packages_ship_py_typed(package):
    assert (ROOT / package / "py.typed").is_file()


# slow: a cold run (a fresh clone, as in CI) type-checks both packages from scratch
@pytest.mark.slow
def test_mypy_passes_on_the_packages_and_the_public_api_snippet(request, tmp_path):
    if not _installed("pandas-stubs"):
        pytest.skip(
            "pandas-stubs is not installed (pip install '.[test]'): pandas has no types of its own"
        )
    pytest.importorskip(
        "xarray", reason="xarray is not installed: the field overloads would be Any"
    )
    config = ROOT / "pyproject.toml"
    settings = config.read_text()
    assert "[tool.mypy]" in settings, "pyproject.toml has no [tool.mypy] section"
    assert "tests/typing_snippets" in settings, "[tool.mypy] files must list tests/typing_snippets"
    pytest_cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider
    cache = pytest_cache.mkdir("mypy") if pytest_cache is not None else tmp_path
    # the files of [tool.mypy] are relative to the root
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(cache)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"mypy failed:\n{run.stdout}{run.stderr}"
    assert run.stdout.startswith("Success: no issues found"), run.stdout
