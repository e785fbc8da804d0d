"""The prose of the source: docstrings that state contracts, not the history of the code.

* no module docstring over :data:`MODULE_DOCSTRING_LINES` lines;
* docstrings at most :data:`DOCSTRING_SHARE` of the non-blank source lines of ``geostat``
  and ``tlrcore`` together;
* no pointer, anywhere in the tree a reader gets, to records outside it (dated stretches of work,
  numbered issues of this project, files beside the repository).
"""

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("geostat", "tlrcore")
MODULE_DOCSTRING_LINES = 40
DOCSTRING_SHARE = 0.30
#: Phrases that point outside the repository or to the project's own work history
#: (written with character classes so that this line does not match itself).
OUTSIDE_POINTERS = re.compile(
    r"\bs[e]ssion \d|\bi[s]sue #?\d|shared/pap[e]rs|DESIGN\.md|\bwork item|\bwork period",
    re.IGNORECASE,
)


def sources():
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def docstring_lines(path):
    """``(lines of all docstrings, lines of the module docstring)`` of a source file."""
    total = module = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = node.body[0] if node.body else None
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            lines = first.end_lineno - first.lineno + 1
            total += lines
            if isinstance(node, ast.Module):
                module = lines
    return total, module


def test_module_docstrings_are_short():
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources()
        if (n := docstring_lines(p)[1]) > MODULE_DOCSTRING_LINES
    }
    assert not long, f"module docstrings over {MODULE_DOCSTRING_LINES} lines: {long}"


def test_docstrings_are_at_most_their_share_of_the_source():
    documented = code = 0
    for path in sources():
        documented += docstring_lines(path)[0]
        code += sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    assert documented <= DOCSTRING_SHARE * code, f"{documented / code:.1%} docstring lines"


def tracked_text_files():
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    suffixes = {".py", ".md", ".rst", ".sh", ".toml", ".cfg", ".yaml", ".yml", ".txt"}
    return [ROOT / name for name in listed if Path(name).suffix in suffixes or name == ".ci/run"]


def test_no_pointer_outside_the_repository_or_to_work_history():
    hits = []
    for path in tracked_text_files():
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE_POINTERS.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "\n".join(hits)
