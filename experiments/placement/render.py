"""Render the default run's tables into the study README from its CSVs:
``python -m experiments.placement.render [README] [RESULTS_DIR]`` (between the default-replay
and default-part1 markers)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from experiments.render import render_file

HERE = Path(__file__).resolve().parent


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


def pivot_table(rows: list[dict]) -> str:
    """Part 1 with a column per policy (the ``--full`` subset); a job alone on the idle fabric
    (no background) is marked ``(idle, striped)``."""
    out = ["| fabric | job (GPUs) | linear | topo | random |", "|---|---:|---:|---:|---:|"]
    keys = dict.fromkeys((r["oversubscription"], int(r["gpus"])) for r in rows)
    idle = sorted(k for k in keys if _cell(rows, k, "linear")["background_jobs"] == "0")
    for key in sorted(k for k in keys if k not in idle) + idle:
        label = f"{key[1]:,}" + (" (idle, striped)" if key in idle else "")
        cells = " | ".join(f"{float(_cell(rows, key, k)['slowdown']):.4f}"
                           for k in ("linear", "topo", "random"))
        out.append(f"| {key[0]} | {label} | {cells} |")
    return "\n".join(out)


def _cell(rows: list[dict], key: tuple[str, int], policy: str) -> dict:
    return next(r for r in rows if (r["oversubscription"], int(r["gpus"])) == key
                and r["policy"] == policy)


def _replay(rows: list[dict], ratio: str, policy: str) -> dict:
    return next(r for r in rows if r["oversubscription"] == ratio and r["policy"] == policy)


def prose(replay: list[dict], part1: list[dict]) -> dict[str, str]:
    """The default run's figures that the README's sentences quote."""
    rnd, lin = _replay(replay, "2:1", "random"), _replay(replay, "2:1", "linear")
    ratios = {x: float(_replay(replay, x, "linear")["cross_tor_TB"])
              / float(_replay(replay, x, "topo")["cross_tor_TB"]) for x in ("1:1", "2:1")}
    busy = next(r for r in part1 if r["background_jobs"] != "0")
    return {
        "placement.busy_state": (f"{busy['background_jobs']} background jobs, "
                                 f"{busy['free_servers']} servers free"),
        "placement.random_2to1": (
            f"{100 * (float(rnd['mean_slowdown']) - 1):.0f}% on average (p95 "
            f"{float(rnd['p95_slowdown']):.2f}x) and lengthens completion times by "
            f"{100 * (float(rnd['mean_jct_s']) / float(lin['mean_jct_s']) - 1):.0f}%"),
        "placement.topo_bytes": " and ".join(f"{v:.1f}x ({k})" for k, v in ratios.items()),
    }


def values(results: Path) -> dict[str, str]:
    """The tables and quoted figures by marker name, from the CSVs in ``results`` (the
    ``--full`` subset's in ``results/full``)."""
    replay, part1 = _rows(results / "replay.csv"), _rows(results / "placement.csv")
    return {"default-replay": replay_table(replay), "default-part1": part1_table(part1),
            "placement.full_part1": pivot_table(_rows(results / "full" / "placement.csv")),
            "placement.full_replay": replay_table(_rows(results / "full" / "replay.csv")),
            **prose(replay, part1)}


def render(readme: Path, results: Path) -> None:
    render_file(readme, values(results), prefix="placement.", strict=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    render(Path(args[0]) if args else HERE / "README.md",
           Path(args[1]) if len(args) > 1 else HERE / "results")
