"""The README's set-up commands are the ones CI runs, and every Python snippet of the README
runs as written (in a fresh namespace, in order)."""

import re
from pathlib import Path

import matplotlib
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
VENV = "python3 -m venv --system-site-packages .venv && . .venv/bin/activate && "


def commands(text):
    """The lines of a shell text that are neither blank nor comments."""
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def setup_commands():
    """The README's first code block: the main job's command, then the tests' command."""
    first = re.search(r"```(\w*)\n(.*?)```", README.read_text(), flags=re.S)
    assert first is not None and first.group(1) == "bash", "the README starts with a bash block"
    return commands(first.group(2))


def test_readme_starts_with_the_two_setup_commands():
    main_job, tests = setup_commands()
    # A fresh machine's system Python may refuse pip install (externally managed): both
    # commands install into a virtual environment first.
    assert main_job.startswith(VENV) and tests.startswith(VENV)
    assert main_job.endswith("python -m pip install . && geostat fit")
    checks = tests.removeprefix(VENV).split(" && ")
    assert checks[0] == 'python -m pip install ".[test]"'
    assert checks[1:] == [
        "ruff check .",
        "ruff format --check .",
        "mypy",
        "python -m pytest -q",
    ]


def test_ci_runs_exactly_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text()
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script
    assert commands(script)[-1] == setup_commands()[1]


def test_readme_has_python_snippets():
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("index", range(len(SNIPPETS)), ids=lambda i: f"snippet{i + 1}")
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    exec(
        compile(SNIPPETS[index], f"README.md snippet {index + 1}", "exec"),
        {"__name__": "__readme__"},
    )
