"""Benchmark results as CSV files with a JSON metadata line, and tables rendered from them into
a document between two markers (every figure in a doc comes from a CSV a command wrote)."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def write_meta_csv(path: Path, rows: list[dict], meta: dict, cols: list[str]) -> None:
    """``# {meta as JSON}`` then the *cols* of *rows* as CSV (other keys left out)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        fh.write("# " + json.dumps(meta) + "\n")
        w = csv.DictWriter(fh, cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def read_meta_csv(path: Path) -> tuple[list[dict], dict]:
    """The rows (strings) and the metadata of a file :func:`write_meta_csv` wrote."""
    with path.open() as fh:
        meta = json.loads(fh.readline()[2:])
        rows = list(csv.DictReader(fh))
    return rows, meta


def render_between(doc: Path, text: str, begin: str, end: str) -> None:
    """Replace what lies between the *begin* and *end* markers of *doc* with *text*."""
    body = doc.read_text()
    if begin not in body or end not in body:
        raise SystemExit(f"{doc}: markers {begin} / {end} missing")
    head, rest = body.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{text}\n{end}{tail}")
