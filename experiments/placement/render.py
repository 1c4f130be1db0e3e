"""Render the default run's tables into the study README from its CSVs:
``python -m experiments.placement.render [README] [RESULTS_DIR]`` (between the default-replay
and default-part1 markers)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from experiments._render import between

HERE = Path(__file__).resolve().parent
REPLAY = ("<!-- default-replay:begin -->", "<!-- default-replay:end -->")
PART1 = ("<!-- default-part1:begin -->", "<!-- default-part1:end -->")


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def replay_table(rows: list[dict]) -> str:
    out = ["| fabric | policy | mean slowdown | p95 slowdown | mean JCT (s) | cross-ToR (TB) | "
           "mean fragmentation |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['oversubscription']} | {r['policy']} | {float(r['mean_slowdown']):.4f} | "
                   f"{float(r['p95_slowdown']):.4f} | {float(r['mean_jct_s']):,.0f} | "
                   f"{float(r['cross_tor_TB']):,.0f} | {float(r['mean_fragmentation']):.3f} |")
    return "\n".join(out)


def part1_table(rows: list[dict]) -> str:
    out = ["| fabric | job (GPUs) | policy | slowdown | cross-ToR (GB / iteration) |",
           "|---|---:|---|---:|---:|"]
    for r in rows:
        out.append(f"| {r['oversubscription']} | {int(r['gpus']):,} | {r['policy']} | "
                   f"{float(r['slowdown']):.4f} | {float(r['cross_tor_GB']):,.1f} |")
    return "\n".join(out)


def render(readme: Path, results: Path) -> None:
    text = readme.read_text()
    text = between(text, REPLAY, replay_table(_rows(results / "replay.csv")))
    text = between(text, PART1, part1_table(_rows(results / "placement.csv")))
    readme.write_text(text)


if __name__ == "__main__":
    args = sys.argv[1:]
    render(Path(args[0]) if args else HERE / "README.md",
           Path(args[1]) if len(args) > 1 else HERE / "results")
