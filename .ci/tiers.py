"""Per-tier test wall times from ``--durations-csv`` files (tests/conftest.py).

``python .ci/tiers.py CSV... [--slowest N] [--doc FILE]`` prints, per tier, the number of tests,
their summed wall time, the load average range and the slowest tests; with ``--doc`` the same
table is rendered into FILE between the ``test-tiers`` markers (docs/contributing.md).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

BEGIN, END = "<!-- test-tiers:begin -->", "<!-- test-tiers:end -->"
TIERS = ("default", "ci-slow", "study")


def read_rows(paths: list[Path]) -> list[dict]:
    """Every row of the CSVs, ``wall_s`` and ``load_1min`` as floats."""
    rows = []
    for path in paths:
        with open(path, newline="") as fh:
            rows += [dict(r, wall_s=float(r["wall_s"]), load_1min=float(r["load_1min"]))
                     for r in csv.DictReader(fh)]
    return rows


def summary(rows: list[dict], slowest: int) -> str:
    """A markdown table per tier, then its slowest tests."""
    out = ["| tier | tests | failed | summed wall time | load average (1 min) |",
           "|---|---:|---:|---:|---|"]
    for t in TIERS:
        rs = [r for r in rows if r["tier"] == t]
        if not rs:
            continue
        loads = [r["load_1min"] for r in rs]
        failed = sum(r["outcome"] == "failed" for r in rs)
        out.append(f"| {t} | {len(rs)} | {failed} | {sum(r['wall_s'] for r in rs) / 60:.1f} min "
                   f"| {min(loads):.1f} to {max(loads):.1f} |")
    top = sorted((r for r in rows if r["tier"] != "default"), key=lambda r: -r["wall_s"])
    out += ["", "| slowest slow tests | tier | wall time |", "|---|---|---:|"]
    out += [f"| `{r['test']}` | {r['tier']} | {r['wall_s']:.0f} s |" for r in top[:slowest]]
    return "\n".join(out)


def write_doc(doc: Path, text: str) -> None:
    """Replace what lies between the markers of ``doc`` with ``text``."""
    body = doc.read_text()
    i, j = body.index(BEGIN) + len(BEGIN), body.index(END)
    doc.write_text(body[:i] + "\n" + text + "\n" + body[j:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="per-tier test wall times")
    p.add_argument("csv", nargs="+", type=Path, help="--durations-csv files")
    p.add_argument("--slowest", type=int, default=8, help="slowest slow tests listed")
    p.add_argument("--doc", type=Path, help="render into this file's test-tiers markers")
    args = p.parse_args(argv)
    missing = [str(c) for c in args.csv if not c.is_file()]
    if missing:
        print(f"error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    text = summary(read_rows(args.csv), args.slowest)
    print(text)
    if args.doc:
        write_doc(args.doc, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
