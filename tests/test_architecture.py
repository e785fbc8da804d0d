"""The shape of the two packages (docs/architecture.md), checked from their source.

* no import cycle between modules, counting imports inside functions (a lazy import that
  dodges a cycle is still a cycle);
* inside ``geostat``, only the bridge (``solvers.py``) and ``errors.py`` import ``tlrcore``;
* ``geostat`` and the benchmarks import only public modules and names of ``tlrcore`` (no
  part of the dotted path private, ``tlrcore._x`` or ``tlrcore.compress._x``);
* no private name (``_x``) is imported from another module, except from a private module
  of the importer's own package (its ``_helpers``);
* flat modules at most 16 in ``geostat/`` and 10 in ``tlrcore/``.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("geostat", "tlrcore")


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    return {
        module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
    }


def imports(name, path):
    """``(module imported, names imported from it)`` for every import statement of a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            yield base, [alias.name for alias in node.names]


def graph():
    known = modules()
    edges = {}
    for name, path in known.items():
        targets = set()
        for module, names in imports(name, path):
            for candidate in [f"{module}.{n}" for n in names] + [module]:
                if candidate in known and candidate != name:
                    targets.add(candidate)
                    break
        edges[name] = targets
    return edges


def test_no_import_cycles():
    known = modules()
    # A package's __init__ importing its own submodules is how a package exposes names;
    # every other edge counts (a submodule importing its package's __init__ included).
    edges = {
        a: {b for b in bs if not (known[a].name == "__init__.py" and b.startswith(a + "."))}
        for a, bs in graph().items()
    }
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert cycles == []


def test_geostat_reaches_tlrcore_only_through_the_bridge():
    offenders = sorted(
        name
        for name, path in modules().items()
        if name.startswith("geostat")
        and name not in ("geostat.solvers", "geostat.errors")
        and any(
            module == "tlrcore" or module.startswith("tlrcore.")
            for module, _ in imports(name, path)
        )
    )
    assert offenders == []


def test_geostat_and_the_benchmarks_import_only_public_tlrcore():
    sources = [(name, path) for name, path in modules().items() if name.startswith("geostat")]
    sources += [(module_name(p), p) for p in sorted((ROOT / "benchmarks").glob("*.py"))]
    offenders = []
    for name, path in sources:
        for module, names in imports(name, path):
            for target in [module] + [f"{module}.{imported}" for imported in names]:
                parts = target.split(".")
                private = [
                    part for part in parts[1:] if part.startswith("_") and not part.endswith("__")
                ]
                if parts[0] == "tlrcore" and private:
                    offenders.append(f"{name}: {target}")
    assert offenders == []


def private_imports():
    known = modules()
    out = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for module, names in imports(name, path):
            for imported in names:
                # a private module of the importer's own package: `from pkg._helpers import x`
                # or `from pkg import _helpers`
                own_helpers = (
                    module.startswith(package + ".") and module.rpartition(".")[2].startswith("_")
                ) or (module == package and f"{module}.{imported}" in known)
                if imported.startswith("_") and not imported.startswith("__") and not own_helpers:
                    out.append(f"{name}: from {module} import {imported}")
    return out


def test_no_private_names_across_modules():
    assert private_imports() == []


@pytest.mark.parametrize("package, limit", [("geostat", 16), ("tlrcore", 10)])
def test_flat_modules(package, limit):
    flat = sorted(p.name for p in (ROOT / package).glob("*.py"))
    assert len(flat) <= limit, flat


def test_the_distribution_is_geostat_tlr_and_both_packages_share_its_version():
    import re

    import geostat
    import tlrcore
    from geostat._version import DISTRIBUTION

    name = re.search(r'^name = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), flags=re.M).group(
        1
    )
    assert name == DISTRIBUTION == "geostat-tlr"
    assert tlrcore.__version__ == geostat.__version__
    for path in [ROOT / "LICENSE", *(ROOT / "datasets" / "LICENSES").glob("*.txt")]:
        assert path.stat().st_size > 1000, path
