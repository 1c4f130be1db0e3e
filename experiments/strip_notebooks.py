"""Strip outputs from notebooks before committing: ``python -m experiments.strip_notebooks [FILES]``.

Without arguments, every ``experiments/notebooks/*.ipynb``. Clears each code cell's outputs and
execution count and drops the kernel's run-time metadata, so notebooks diff cleanly in git
(``tests/experiments/test_notebooks.py`` checks it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"


def strip(nb: dict) -> dict:
    """``nb`` with outputs, execution counts and per-cell execution metadata removed."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)
    return nb


def is_stripped(nb: dict) -> bool:
    return all(not c.get("outputs") and c.get("execution_count") is None
               for c in nb.get("cells", []) if c.get("cell_type") == "code")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path)
    args = p.parse_args(argv)
    for path in args.files or sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = json.loads(path.read_text())
        path.write_text(json.dumps(strip(nb), indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
