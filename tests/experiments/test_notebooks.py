"""Every ``experiments/notebooks/*.ipynb`` runs top to bottom and is committed without outputs.

Each notebook is executed with nbclient on the ``python3`` kernel of this interpreter, in a
temporary working directory, with ``NETSIM_NOTEBOOK_SMALL=1`` (the notebook's smallest
sensible size), by ``experiments.run_notebook``, which also runs them by hand. Any cell error
fails the test. Strip outputs with
``python -m experiments.strip_notebooks``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "experiments" / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def _ids(paths):
    return [p.stem for p in paths]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: code cells {dirty} carry outputs; run "
                       f"python -m experiments.strip_notebooks {path.name}")


#: notebooks that run for minutes even at their smallest size: CI's slow tier
SLOW = {"heldout_accuracy": "4 trainer runs of 4 gloo ranks: 2-7 minutes on a loaded 2-core host",
        "settings_check": "one size only: a recommend and 18 packet runs, a minute of CPU"}
EXECUTED = [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW else p for p in NOTEBOOKS]


@pytest.mark.parametrize("path", EXECUTED, ids=_ids(NOTEBOOKS))
def test_notebook_executes(path: Path, tmp_path, monkeypatch) -> None:
    import nbclient  # the dev extra installs nbclient, nbformat and ipykernel

    from experiments.run_notebook import execute, python3_kernel_here
    monkeypatch.setenv("JUPYTER_PATH", str(python3_kernel_here(tmp_path / "jupyter")))
    monkeypatch.setenv("NETSIM_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    work = tmp_path / "cwd"
    work.mkdir()
    try:
        execute(path, work)
    except nbclient.exceptions.CellExecutionError as exc:
        pytest.fail(f"{path.name} failed:\n{str(exc)[-3000:]}")


def test_strip_tool_round_trip(tmp_path) -> None:
    from experiments.strip_notebooks import is_stripped, main

    nb = {"cells": [{"cell_type": "code", "source": "1", "metadata": {},
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": "1"}],
                     "execution_count": 3},
                    {"cell_type": "markdown", "source": "x", "metadata": {}}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb))
    assert not is_stripped(nb)
    assert main([str(path)]) == 0
    assert is_stripped(json.loads(path.read_text()))
