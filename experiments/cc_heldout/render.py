"""Render ``results/cc_heldout.csv`` into this study's README and ``docs/recommend.md``:
``python -m experiments.cc_heldout.render [CSV]`` (the table between the cc-heldout markers)."""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from experiments.cc_heldout.run import HERE, table
from experiments.render import render_file

ROOT = HERE.parents[1]
DOCS = (HERE / "README.md", ROOT / "docs" / "recommend.md")
START, END = "<!-- cc-heldout:start -->", "<!-- cc-heldout:end -->"


def read_rows(path: Path = HERE / "results" / "cc_heldout.csv") -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def block(text: str) -> str:
    """What stands between the markers of *text*."""
    m = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, re.S)
    if m is None:
        raise ValueError(f"no {START} ... {END} block")
    return m.group(1)


def values(results: Path) -> dict[str, str]:
    """The held-out table by marker name, from ``results/cc_heldout.csv``."""
    return {"cc-heldout": table(read_rows(results / "cc_heldout.csv")).rstrip("\n")}


def render(rows: list[dict], paths=DOCS) -> None:
    for p in paths:
        render_file(p, {"cc-heldout": table(rows).rstrip("\n")}, strict=True)


if __name__ == "__main__":
    render(read_rows(Path(sys.argv[1])) if len(sys.argv) > 1 else read_rows())
