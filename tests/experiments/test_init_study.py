"""``netsim sweep --init-study NAME``: a new study laid out in a temporary folder runs as laid
out (its small size, its own test and its notebook) and a taken name is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.cli import main

REPO = Path(__file__).resolve().parents[2]
NAME = "starter_study"


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory) -> Path:
    """A folder holding ``experiments/NAME`` and ``tests/experiments/test_NAME.py``."""
    root = tmp_path_factory.mktemp("init")
    assert main(["sweep", "--init-study", NAME, "--dir", str(root / "experiments")]) == 0
    return root


def _env(root: Path) -> dict[str, str]:
    """``experiments.NAME`` importable: ``root`` on the path (``experiments`` extends its
    ``__path__`` over every ``experiments/`` folder on it)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}


def test_lays_out_the_conventions(laid_out) -> None:
    study = laid_out / "experiments" / NAME
    for name in ("__init__.py", "run.py", "study.py", "render.py", "grid.yaml",
                 "grid_full.yaml", "README.md"):
        assert (study / name).is_file(), name
    readme = (study / "README.md").read_text()
    for section in ("## Claim", "## Method", "## Result", "## What it does not show",
                    f"<!-- {NAME}.result:begin -->", f"<!-- {NAME}.result:end -->"):
        assert section in readme, section
    assert "__STUDY__" not in readme
    nb = json.loads((laid_out / "experiments" / "notebooks" / f"{NAME}.ipynb").read_text())
    assert all(not c.get("outputs") for c in nb["cells"])
    assert (laid_out / "tests" / "experiments" / f"test_{NAME}.py").is_file()


def test_refuses_a_taken_or_bad_name(laid_out, capsys) -> None:
    before = (laid_out / "experiments" / NAME / "study.py").read_text()
    capsys.readouterr()
    for name in (NAME, "Not-a-name", "class"):
        assert main(["sweep", "--init-study", name, "--dir",
                     str(laid_out / "experiments")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("netsim sweep: error:"), err
    assert (laid_out / "experiments" / NAME / "study.py").read_text() == before


def test_the_generated_test_passes(laid_out) -> None:
    """Its test runs the small grid (in this process, no Dask) and renders the README."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(laid_out / "tests" / "experiments" / f"test_{NAME}.py")],
                          cwd=laid_out, env=_env(laid_out), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_the_generated_notebook_runs(laid_out, tmp_path, monkeypatch) -> None:
    import nbclient
    import nbformat

    from experiments.run_notebook import CELL_TIMEOUT_S, python3_kernel_here

    monkeypatch.setenv("JUPYTER_PATH", str(python3_kernel_here(tmp_path / "jupyter")))
    monkeypatch.setenv("NETSIM_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("PYTHONPATH", _env(laid_out)["PYTHONPATH"])
    nb = nbformat.read(laid_out / "experiments" / "notebooks" / f"{NAME}.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "predicted MFU falls" in text


def test_the_generated_code_passes_the_linter(laid_out) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None or not (REPO / "pyproject.toml").exists():
        pytest.skip("ruff or the checkout's pyproject.toml not here")
    shutil.copy(REPO / "pyproject.toml", laid_out)  # the checkout's rules; first-party here
    proc = subprocess.run([ruff, "check", "."], cwd=laid_out, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
