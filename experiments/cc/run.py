"""CC study: DCQCN vs Swift vs the DCQCN+Swift hybrid on a training job's own traffic.

    python -m experiments.cc.run [--full] [-o DIR] [--json]

MegaScale (NSDI'24, section 3.6) reports that a congestion control combining Swift's precise
RTT signal with DCQCN's ECN signal cuts PFC pauses while keeping throughput. Every pattern of
:mod:`netsim.validation.jobtraffic` (DP ring crossing ToRs, PP sends, all-to-all, 8:1 and 16:1
incast) runs in the packet engine under each algorithm (parameters: each algorithm's defaults,
``docs/congestion-control.md``). Written to DIR: ``cc.csv`` (one row per run), ``summary.csv``
(mean over seeds per pattern and algorithm) and ``cc.png``.

Small (default, about a minute on one core): 4 ToRs x 6 NICs at 400G, 2 MB messages, one
seed. ``--full``: 4 ToRs x 8 NICs, 8 MB messages, three seeds.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from netsim.validation.jobtraffic import KINDS, JobScenario, run_scenario

ALGORITHMS = ("dcqcn", "swift", "hybrid")
METRICS = ("pfc_pauses", "paused_us", "hol_victims", "goodput", "fct_p50_us", "fct_p99_us")


def scenarios(full: bool, tiny: bool = False) -> list[JobScenario]:
    """The patterns at the study's size (non-blocking leaf-spine: spines = NICs per ToR).

    ``tiny`` (notebooks under ``NETSIM_NOTEBOOK_SMALL=1``): 4 ToRs x 5 NICs, 1 MB messages.
    """
    hpt = 8 if full else (5 if tiny else 6)
    size = 8_000_000 if full else (1_000_000 if tiny else 2_000_000)
    return [JobScenario(k, tors=4, hosts_per_tor=hpt, spines=hpt, msg_bytes=size) for k in KINDS]


def run_study(full: bool = False, seeds: tuple[int, ...] | None = None, progress=None,
              tiny: bool = False, dcqcn_params: dict | None = None) -> list[dict]:
    """One row per (pattern, algorithm, seed); *dcqcn_params* override DCQCN's defaults."""
    seeds = seeds or ((1, 2, 3) if full else (1,))
    rows = []
    for sc in scenarios(full, tiny):
        for cc in ALGORITHMS:
            for s in seeds:
                if progress:
                    progress(f"{sc.kind} {cc} seed {s}")
                params = dcqcn_params if cc == "dcqcn" else None
                rows.append(run_scenario(sc, cc, cc_params=params, seed=s))
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Mean over seeds of every metric per (pattern, algorithm)."""
    out = []
    for kind in dict.fromkeys(r["scenario"] for r in rows):
        for cc in ALGORITHMS:
            sel = [r for r in rows if r["scenario"] == kind and r["cc"] == cc]
            if sel:
                out.append({"scenario": kind, "cc": cc, "runs": len(sel),
                            "completed": all(r["completed"] for r in sel)}
                           | {m: float(np.mean([r[m] for r in sel])) for m in METRICS})
    return out


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def plot(summary: list[dict], path: Path) -> Path:
    """Four panels per pattern: PFC pauses, time paused, goodput, p99 FCT, one bar per CC."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["scenario"] for r in summary))
    panels = (("pfc_pauses", "PFC pause frames"), ("paused_us", "time paused, summed over ports (us)"),
              ("goodput", "goodput (fraction of ideal)"), ("fct_p99_us", "p99 FCT (us)"))
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    x = np.arange(len(kinds))
    w = 0.8 / len(ALGORITHMS)
    for ax, (metric, label) in zip(axes, panels, strict=True):
        for i, cc in enumerate(ALGORITHMS):
            vals = [next((r[metric] for r in summary if r["scenario"] == k and r["cc"] == cc), np.nan)
                    for k in kinds]
            ax.bar(x + (i - 1) * w, vals, w, label=cc)
        ax.set_xticks(x, kinds, rotation=30, ha="right")
        ax.set_ylabel(label)
    axes[0].legend()
    fig.suptitle("DCQCN vs Swift vs hybrid on the job's traffic (packet engine)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.cc.run", description=__doc__.split("\n\n")[1])
    ap.add_argument("--full", action="store_true", help="bigger fabric, 8 MB messages, three seeds")
    ap.add_argument("-o", "--out", type=Path, default=Path("cc-study"), help="output folder")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--dcqcn-param", action="append", default=[], metavar="KEY=VALUE",
                    help="DCQCN parameter override, e.g. rpg_byte_reset_unit_bytes=1 (bytes)")
    args = ap.parse_args(argv)
    from netsim.cc.params import DcqcnParams, parse_cc_params

    try:
        dcqcn = parse_cc_params(args.dcqcn_param)
        DcqcnParams.from_dict(dcqcn)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = run_study(args.full, progress=lambda s: print(s, file=sys.stderr), dcqcn_params=dcqcn)
    summary = summarize(rows)
    write_csv(rows, args.out / "cc.csv")
    write_csv(summary, args.out / "summary.csv")
    plot(summary, args.out / "cc.png")
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        for r in summary:
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
