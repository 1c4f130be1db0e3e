"""Placement judged over time: topo against linear over whole replays, seeds x load levels.

    python -m experiments.placement.over_time [--seeds 1-20] [--loads 0.5,0.9,1.3]
        [--jobs 30] [-o DIR] [--render README.md]

Each (seed, load) is one ``netsim cluster simulate`` replay of ``--jobs`` generated jobs
(``tuner.cluster.generate_jobs``: seeded sizes, durations and Poisson arrivals at ``load`` of
the fabric's GPU-seconds) on the 2,048-GPU CLOS with 2:1 ToRs (``experiments.placement.run``:
256 servers, 48-port switches, ``tor_down_up`` 2:1, four ToR sets of 64 servers), under
``linear`` and ``topo``. Each decision of topo is no worse than linear's on the same cluster
state; the question here is whether the states it leaves keep it so over a replay.

Seeds 11-20 were the design seeds of topo's best fit (issue 26); seeds 1-10 are held out:
the CSV's ``seeds`` column says which. ``--render README`` rewrites the README's tables
between its ``over-time`` markers from ``over_time.csv`` (and between its
``over-time-before`` markers from ``over_time.csv`` of the code before best fit, saved as
``over_time_before.csv``); ``over_time.png`` plots topo's mean slowdown minus linear's per
seed and load.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from experiments._output import write_csv
from experiments.render import render_file

POLICIES = ("linear", "topo")
DESIGN_SEEDS = range(11, 21)


def fabric():
    """The 2:1 fabric of the study's replay (``replay.yaml``'s servers and ToR sets; issue 26's
    reproduction), read from that spec so that the two cannot drift apart."""
    from experiments.placement import study
    from sweeps.spec import load_spec

    args = load_spec(Path(__file__).with_name("replay.yaml")).args
    return study.fabric("2:1", args["servers"], args["servers_per_tor_group"])


def replay_rows(f, seed: int, load: float, jobs: int, iterations: int) -> list[dict]:
    """One replay of both policies: a row per policy."""
    from tuner.cluster import generate_jobs, simulate

    rows = []
    stream = generate_jobs(jobs, len(f.gpus), seed, load)
    for policy in POLICIES:
        t0 = time.process_time()
        m = simulate(f, stream, (policy,), seed=seed, search_iterations=iterations)[policy]
        js = m.to_json()
        rows.append({"seeds": "design" if seed in DESIGN_SEEDS else "held-out", "seed": seed,
                     "load": load, "jobs": jobs, "policy": policy,
                     "mean_slowdown": js["mean_slowdown"], "p95_slowdown": js["p95_slowdown"],
                     "max_slowdown": js["max_slowdown"], "mean_jct_s": js["mean_jct_s"],
                     "cross_tor_TB": js["cross_tor_bytes"] / 1e12,
                     "mean_fragmentation": js["mean_fragmentation"],
                     "cpu_s": time.process_time() - t0})
    return rows


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def paired(rows: list[dict]) -> dict[tuple[str, float], dict[int, dict[str, dict]]]:
    """{(seeds, load): {seed: {policy: row}}}."""
    out: dict = {}
    for r in rows:
        key = (r["seeds"], float(r["load"]))
        out.setdefault(key, {}).setdefault(int(r["seed"]), {})[r["policy"]] = r
    return out


def _diff(p: dict) -> float:
    return float(p["topo"]["mean_slowdown"]) - float(p["linear"]["mean_slowdown"])


def summary_table(rows: list[dict]) -> str:
    """Per seed set and load: mean slowdowns, seeds where topo is worse / level / better."""
    lines = ["| seeds | load | replays | linear mean slowdown | topo mean slowdown | topo worse "
             "| level | topo better | largest topo - linear | mean fragmentation linear / topo |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (seeds, load), by_seed in sorted(paired(rows).items(), key=lambda kv: (kv[0][0] != "held-out", kv[0][1])):
        pairs = list(by_seed.values())
        d = np.array([_diff(p) for p in pairs])
        mean = {k: np.mean([float(p[k]["mean_slowdown"]) for p in pairs]) for k in POLICIES}
        frag = {k: np.mean([float(p[k]["mean_fragmentation"]) for p in pairs]) for k in POLICIES}
        lo, hi = min(by_seed), max(by_seed)
        lines.append(f"| {seeds} {lo}-{hi} | {load:g} | {len(pairs)} | {mean['linear']:.4f} | "
                     f"{mean['topo']:.4f} | {int((d > 1e-12).sum())} | "
                     f"{int((abs(d) <= 1e-12).sum())} | {int((d < -1e-12).sum())} | "
                     f"{d.max():+.2e} | {frag['linear']:.3f} / {frag['topo']:.3f} |")
    return "\n".join(lines)


def seed_table(rows: list[dict], seeds: str = "held-out") -> str:
    """Mean slowdown per seed of ``seeds``, linear / topo, a column per load."""
    groups = {load: by for (s, load), by in paired(rows).items() if s == seeds}
    loads = sorted(groups)
    head = "| seed | " + " | ".join(f"load {x:g}: linear / topo" for x in loads) + " |"
    lines = [head, "|---:|" + "---:|" * len(loads)]
    for seed in sorted({s for by in groups.values() for s in by}):
        cells = []
        for x in loads:
            p = groups[x].get(seed)
            cells.append("" if p is None else f"{float(p['linear']['mean_slowdown']):.4f} / "
                         f"{float(p['topo']['mean_slowdown']):.4f}")
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tables(rows: list[dict]) -> str:
    """What stands between the over-time markers: both tables and the CPU time per replay."""
    cpu = {k: [float(r["cpu_s"]) for r in rows if r["policy"] == k] for k in POLICIES}
    return (f"{summary_table(rows)}\n\nHeld-out seeds, mean slowdown per replay "
            f"(linear / topo):\n\n{seed_table(rows)}\n\nCPU time per replay (one policy, "
            f"alone-fabric predictions included), mean over {len(cpu['topo'])} replays: "
            + ", ".join(f"{k} {np.mean(v):.1f} s" for k, v in cpu.items()) + ".")


def render(readme: Path, rows: list[dict], before: list[dict] | None = None) -> None:
    """Rewrite the README's text between the over-time markers with the tables (and between
    the over-time-before markers with ``before``'s, when given)."""
    values = {"over-time": tables(rows)} | ({"over-time-before": tables(before)} if before else {})
    render_file(readme, values, strict=True)


def figure(rows: list[dict], path: Path) -> Path:
    """topo's mean slowdown minus linear's, per seed (x) and load (marker)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    by_load: dict = {}
    for (_, load), by in paired(rows).items():
        by_load.setdefault(load, {}).update(by)
    for i, (load, by) in enumerate(sorted(by_load.items())):
        seeds = sorted(by)
        ax.plot(seeds, [_diff(by[s]) for s in seeds], "os^"[i % 3], color=f"C{i}",
                label=f"load {load:g}", linestyle="none")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.axvspan(min(DESIGN_SEEDS) - 0.5, max(DESIGN_SEEDS) + 0.5, color="0.9", zorder=0,
               label="design seeds")
    ax.set_xlabel("seed")
    ax.set_ylabel("mean slowdown: topo - linear")
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="1-20", help="e.g. 1-10,15")
    ap.add_argument("--loads", default="0.5,0.9,1.3", help="offered load levels")
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--iterations", type=int, default=300, help="topo's swap proposals")
    ap.add_argument("-o", "--out", type=Path, default=Path("experiments/placement/results"))
    ap.add_argument("--render", type=Path, default=None,
                    help="README to rewrite from OUT/over_time.csv (runs no replay)")
    args = ap.parse_args(argv)
    csv_path = args.out / "over_time.csv"
    if args.render is not None:
        old = args.out / "over_time_before.csv"
        render(args.render, read_csv(csv_path), read_csv(old) if old.exists() else None)
        print(f"rendered {args.render} from {csv_path}" + (f" and {old}" if old.exists() else ""))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    f, rows = fabric(), []
    for load in [float(x) for x in args.loads.split(",")]:
        for seed in _seeds(args.seeds):
            rows += replay_rows(f, seed, load, args.jobs, args.iterations)
            write_csv(csv_path, rows)
            print(f"over_time: load {load:g} seed {seed}: topo - linear "
                  f"{_diff({r['policy']: r for r in rows[-2:]}):+.2e}", file=sys.stderr,
                  flush=True)
    figure(rows, args.out / "over_time.png")
    print(f"wrote {csv_path} and {args.out / 'over_time.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
