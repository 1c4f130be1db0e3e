"""What the studies write: CSV tables of row dicts, rows printed, saved matplotlib figures."""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Callable
from pathlib import Path


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as a CSV file, the columns those of the first row in its order."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def print_rows(rows: list[dict], as_json: bool, line: Callable[[dict], str],
               indent: int = 2) -> None:
    """The rows as one JSON list (``indent``), or one ``line(row)`` each."""
    if as_json:
        print(json.dumps(rows, indent=indent))
        return
    for r in rows:
        print(line(r))


def finish_figure(fig, path: Path | None, dpi: int = 120):
    """Lay ``fig`` out tightly and save it to ``path`` (when given); return it."""
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=dpi)
    return fig


def parse_study_args(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse a study's command line and create its ``--out`` directory."""
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return args
