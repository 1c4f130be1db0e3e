"""What the studies write: CSV tables of row dicts and saved matplotlib figures."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as a CSV file, the columns those of the first row in its order."""
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


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
