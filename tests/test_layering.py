"""The dependency order of the packages: topologies <- netsim <- tuner; trainer stands alone;
inputspec (input-file validation), hfconfig (config.json keys) and sweeps (the Dask sweep
engine) sit below them all. And no import circle between files: every import counts, at the
top of a module or inside a function, and ``from pkg import name`` counts as importing the
package's ``__init__`` (its re-exports)."""

from __future__ import annotations

import ast
import pathlib

import networkx as nx
import pytest

import topologies

ROOT = pathlib.Path(topologies.__file__).resolve().parent.parent

# package -> packages of ours it must not import
FORBIDDEN = {
    "topologies": {"netsim", "tuner", "trainer", "experiments"},
    "netsim": {"tuner", "trainer", "experiments"},
    "tuner": {"trainer", "experiments"},
    "trainer": {"topologies", "netsim", "tuner", "experiments"},
    # the input-file validation every layer may import: it depends on nothing of ours
    "inputspec": {"topologies", "netsim", "tuner", "trainer", "experiments"},
    # transformers config.json keys, read by netsim and the trainer alike
    "hfconfig": {"topologies", "netsim", "tuner", "trainer", "experiments", "sweeps"},
    # the sweep engine: the CLI, recommend's CC search and the studies fan out through it
    "sweeps": {"topologies", "netsim", "tuner", "trainer", "experiments", "hfconfig"},
}


def _imported_packages(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_upward_imports(package):
    pkg_dir = ROOT / package
    assert pkg_dir.is_dir(), f"package {package} is not installed next to topologies"
    offenders = []
    for path in sorted(pkg_dir.rglob("*.py")):
        bad = _imported_packages(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: pathlib.Path, modules: set[str]) -> set[str]:
    """Our modules that ``path`` imports anywhere in it (lazy imports included)."""
    me = _module_name(path)
    base = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                stem = base[:len(base) - node.level + 1]
                full = ".".join(stem + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            if full in modules:
                out.add(full)  # the module itself (a package: its __init__ and re-exports)
            out.update(f"{full}.{a.name}" for a in node.names if f"{full}.{a.name}" in modules)
    return out - {me}


def import_graph() -> nx.DiGraph:
    paths = [p for pkg in FORBIDDEN for p in sorted((ROOT / pkg).rglob("*.py"))]
    modules = {_module_name(p) for p in paths}
    graph = nx.DiGraph()
    for p in paths:
        graph.add_node(_module_name(p))
        graph.add_edges_from((_module_name(p), m) for m in _imported_modules(p, modules))
    return graph


def test_the_import_graph_sees_imports():
    """The checker itself: a known chain of imports is in the graph (not vacuous)."""
    g = import_graph()
    assert g.has_edge("netsim.packet.build", "netsim.packet.engine")
    assert g.has_edge("tuner.recommend", "tuner.qos")
    assert g.has_edge("netsim.cc", "netsim.cc.dcqcn")  # the registry's table of algorithms
    assert g.number_of_edges() > 300


def test_no_import_circles_between_files():
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not circles, "import circles (break each by moving the shared piece down):\n" + \
        "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_circle(tmp_path, monkeypatch):
    """A package whose module imports its own package's re-export is reported."""
    pkg = tmp_path / "topologies"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from topologies.a import x\n")
    (pkg / "a.py").write_text("def x():\n    from topologies import y\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "FORBIDDEN", {"topologies": set()})
    circles = [c for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert circles == [{"topologies", "topologies.a"}]


OURS = (*FORBIDDEN, "experiments")


def _guarded(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside ``try: ... except ImportError`` (a deliberate fallback)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in node.handlers):
            lines.update(n.lineno for stmt in node.body for n in ast.walk(stmt)
                         if isinstance(n, ast.ImportFrom))
    return lines


def _missing_names(path: pathlib.Path) -> list[str]:
    import importlib

    tree = ast.parse(path.read_text(), filename=str(path))
    guarded, missing = _guarded(tree), []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.split(".")[0] in OURS and node.lineno not in guarded):
            continue
        module = importlib.import_module(node.module)
        for alias in node.names:
            if alias.name == "*" or hasattr(module, alias.name):
                continue
            try:
                importlib.import_module(f"{node.module}.{alias.name}")
            except ImportError:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name} "
                               f"from {node.module}, which has none")
    return missing


@pytest.mark.parametrize("package", sorted(OURS))
def test_every_name_imported_from_our_packages_exists(package):
    """Imports inside functions run only when the function does: a name removed from a module
    breaks them silently (placement's over_time.py imported run.SMALL for a day after run.py
    dropped it, and ``make results`` failed there). Every ``from ours import name``, at any
    depth, must resolve now."""
    if package == "trainer":
        pytest.importorskip("torch")
    missing = [m for path in sorted((ROOT / package).rglob("*.py")) for m in _missing_names(path)]
    assert not missing, "\n".join(missing)
