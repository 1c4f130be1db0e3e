"""Render the default run's tables into the study README from its CSVs:
``python -m experiments.placement.render [README] [RESULTS_DIR]`` (between the default-replay
and default-part1 markers)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from experiments.placement.over_time import tables
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


def _pct(x: float) -> str:
    """A fraction as a percent: one decimal from 1% up, else two significant digits."""
    v = 100 * x
    return f"{v:.1f}%" if abs(v) >= 1 else f"{v:.2g}%"


def _gain(rows: list[dict], key: tuple[str, int], slow: str, fast: str = "topo") -> float:
    """How much faster ``fast`` is than ``slow`` on ``key``'s job (a fraction)."""
    return 1 - (float(_cell(rows, key, fast)["iteration_s"])
                / float(_cell(rows, key, slow)["iteration_s"]))


#: a gain below this fraction is called level (the ECMP draws of the slowdowns under 1)
LEVEL = 1e-4


def _versus(gain: float, fast: str, slow: str) -> str:
    """``fast`` against ``slow`` in words: faster by the gain, or level within ``LEVEL``."""
    if abs(gain) < LEVEL:
        return f"{fast} level with {slow} (within {_pct(LEVEL)})"
    return f"{fast} {_pct(abs(gain))} {'faster' if gain > 0 else 'slower'} than {slow}"


def _topo_busy(part1: list[dict]) -> str:
    """Where topo beats the scheduler's order for a job placed into the busy cluster."""
    keys = dict.fromkeys((r["oversubscription"], int(r["gpus"])) for r in part1
                         if r["background_jobs"] != "0")
    wins = [f"{_pct(g)} for {n:,} GPUs on {k}" for k, n in keys
            if (g := _gain(part1, (k, n), "linear")) >= LEVEL]
    level = f"level with it (within {_pct(LEVEL)}) for the other busy-cluster jobs"
    return f"faster by {', '.join(wins)}, and {level}" if wins else level


def full_prose(part1: list[dict], replay: list[dict]) -> dict[str, str]:
    """The ``--full`` subset's figures that the README's sentences quote."""
    busy = next(r for r in part1 if r["background_jobs"] != "0")
    idle = next(r for r in part1 if r["background_jobs"] == "0")
    mid, big = ("1:1", 6144), ("2:1", 6144)
    rnd = _replay(replay, "2:1", "random")
    pods = {k: [float(_cell(part1, (k, int(idle["gpus"])), p)["cross_pod_GB"]) / 1e3
                for p in ("linear", "topo")] for k in ("1:1", "2:1")}
    return {
        "placement.full_busy_state": (f"{busy['background_jobs']} background jobs, "
                                      f"{int(busy['free_servers']):,} of "
                                      f"{int(idle['free_servers']):,} servers free"),
        "placement.full_topo_busy": _topo_busy(part1),
        "placement.full_small_2to1": _pct(float(_cell(part1, ("2:1", 512), "linear")["slowdown"])
                                          - 1),
        "placement.full_random_mid": (
            f"{_pct(float(_cell(part1, big, 'random')['slowdown']) - 1)} on 2:1 and "
            f"{_pct(float(_cell(part1, mid, 'random')['slowdown']) - 1)} on 1:1"),
        "placement.striped_gain": " and ".join(
            f"{_pct(_gain(part1, (k, int(idle['gpus'])), 'linear'))} on {k}"
            for k in ("1:1", "2:1")),
        "placement.striped_pods": " and ".join(f"{a:.0f} -> {b:.0f} TB" for a, b in pods.values()),
        "placement.full_random_replay": (
            f"{_pct(float(rnd['mean_slowdown']) - 1)} on average (p95 "
            f"{float(rnd['p95_slowdown']):.2f}x)"),
        "placement.random_small_faster": _versus(_gain(part1, ("2:1", 512), "topo", "random"),
                                                 "random", "topo"),
    }


def ordered_gains(part1s: list[list[dict]], replays: list[list[dict]]) -> dict[str, str]:
    """Topo against the scheduler's order over every busy part-1 job and 30-job replay: the
    largest gain, the range of cross-ToR byte ratios, and the cost of sharing left on 2:1."""
    gains = [_gain(rows, key, "linear") for rows in part1s
             for key in dict.fromkeys((r["oversubscription"], int(r["gpus"])) for r in rows
                                      if r["background_jobs"] != "0")]
    gains += [1 - float(_replay(rows, k, "topo")["mean_slowdown"])
              / float(_replay(rows, k, "linear")["mean_slowdown"])
              for rows in replays for k in ("1:1", "2:1")]
    ratios = [float(_replay(rows, k, "linear")["cross_tor_TB"])
              / float(_replay(rows, k, "topo")["cross_tor_TB"]) for rows in replays
              for k in ("1:1", "2:1")]
    shared = [float(r["slowdown"]) - 1 for r in part1s[-1] if r["oversubscription"] == "2:1"
              and r["policy"] == "linear" and r["background_jobs"] != "0"
              and float(r["slowdown"]) > 1]
    return {"placement.topo_gain_max": _pct(max(gains)),
            "placement.topo_bytes_range": f"{min(ratios):.1f}x to {max(ratios):.1f}x",
            "placement.shared_cost_2to1": f"{_pct(min(shared))} to {_pct(max(shared))}"}


def before_worst(before: list[dict]) -> str:
    """The slowest job of topo's replays before best fit, with its seed."""
    worst = max((r for r in before if r["policy"] == "topo"), key=lambda r: float(r["max_slowdown"]))
    return f"in seed {worst['seed']}, a job ran {float(worst['max_slowdown']):.4f}x slower"


def values(results: Path) -> dict[str, str]:
    """The tables and quoted figures by marker name, from the CSVs in ``results`` (the
    ``--full`` subset's in ``results/full``, the over-time replays' in ``over_time*.csv``)."""
    replay, part1 = _rows(results / "replay.csv"), _rows(results / "placement.csv")
    full_replay = _rows(results / "full" / "replay.csv")
    full_part1 = _rows(results / "full" / "placement.csv")
    return {"default-replay": replay_table(replay), "default-part1": part1_table(part1),
            "over-time": tables(_rows(results / "over_time.csv")),
            "over-time-before": tables(_rows(results / "over_time_before.csv")),
            "placement.before_worst": before_worst(_rows(results / "over_time_before.csv")),
            "placement.full_part1": pivot_table(full_part1),
            "placement.full_replay": replay_table(full_replay),
            **prose(replay, part1), **full_prose(full_part1, full_replay),
            **ordered_gains([part1, full_part1], [replay, full_replay])}


def render(readme: Path, results: Path) -> None:
    render_file(readme, values(results), prefix="placement.", strict=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    render(Path(args[0]) if args else HERE / "README.md",
           Path(args[1]) if len(args) > 1 else HERE / "results")
