"""Execute study notebooks as the tests do: ``python -m experiments.run_notebook NB.ipynb ...``.

Each notebook runs top to bottom with nbclient on a ``python3`` kernel of this interpreter, in
a temporary working directory, with ``NETSIM_NOTEBOOK_SMALL=1`` (``--full-size`` leaves it
unset); the first cell error is printed and the exit status is 1. Outputs are not written back:
the notebooks are committed without them (``python -m experiments.strip_notebooks``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

CELL_TIMEOUT_S = 900  # a guard against a hung kernel, not a speed limit


def python3_kernel_here(root: Path) -> Path:
    """A ``python3`` kernelspec under ``root`` that runs this interpreter; put ``root`` first
    on ``JUPYTER_PATH`` for the lookup to find it."""
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (this interpreter)", "language": "python"}))
    return root


def execute(path: Path, work: Path) -> None:
    """Run the notebook at ``path`` in the folder ``work`` (the environment as set by the
    caller); raises ``nbclient.exceptions.CellExecutionError`` on a cell error."""
    import nbclient  # the dev extra installs nbclient, nbformat and ipykernel
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(work)}})
    client.execute()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="+", type=Path)
    p.add_argument("--full-size", action="store_true", help="leave NETSIM_NOTEBOOK_SMALL unset")
    args = p.parse_args(argv)
    import nbclient

    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["JUPYTER_PATH"] = str(python3_kernel_here(Path(tmp) / "jupyter"))
        os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        if not args.full_size:
            os.environ["NETSIM_NOTEBOOK_SMALL"] = "1"
        for nb in args.notebooks:
            work = Path(tempfile.mkdtemp(dir=tmp))
            try:
                execute(nb.resolve(), work)
                print(f"{nb}: ok")
            except nbclient.exceptions.CellExecutionError as exc:
                failed += 1
                print(f"{nb}: failed\n{str(exc)[-3000:]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
