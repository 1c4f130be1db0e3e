"""The dependency order of the packages: topologies <- netsim <- tuner; trainer stands alone;
inputspec (input-file validation) sits below them all."""

from __future__ import annotations

import ast
import pathlib

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
