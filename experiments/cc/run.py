"""CC study: DCQCN vs Swift vs the DCQCN+Swift hybrid on a training job's own traffic.

    python -m experiments.cc.run [--full | --tiny] -o DIR [--workers N] [--json]

MegaScale (NSDI'24, section 3.6) reports that a congestion control combining Swift's precise
RTT signal with DCQCN's ECN signal cuts PFC pauses while keeping throughput. Every pattern of
:mod:`netsim.validation.jobtraffic` (DP ring crossing ToRs, PP sends, all-to-all, 8:1 and 16:1
incast) runs in the packet engine under each algorithm (parameters: each algorithm's defaults,
``docs/congestion-control.md``). Written to DIR: ``cc.csv`` (one row per run), ``summary.csv``
(mean over seeds per pattern and algorithm) and ``cc.png``. The grid is the sweep spec
``cc.yaml`` (``cc_full.yaml``, ``cc_tiny.yaml``), run through :mod:`sweeps` into ``DIR/cc``:
resumable, on Dask.

Small (default, about a minute on one core): 4 ToRs x 6 NICs at 400G, 2 MB messages, one
seed. ``--full``: 4 ToRs x 8 NICs, 8 MB messages, three seeds. ``--tiny`` (notebooks, CI):
4 ToRs x 5 NICs, 1 MB messages.
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from experiments._output import parse_study_args
from experiments._sweeps import ok_outputs, run_spec_files, study_parser

HERE = Path(__file__).resolve().parent
ALGORITHMS = ("dcqcn", "swift", "hybrid")
METRICS = ("pfc_pauses", "paused_us", "hol_victims", "goodput", "fct_p50_us", "fct_p99_us")


def run_study(out: Path | None = None, full: bool = False, tiny: bool = False,
              workers: int | None = 0, scheduler: str | None = None,
              dcqcn_params: dict | None = None, progress: bool = False) -> list[dict]:
    """One row per (pattern, algorithm, seed) of the sweep (resumed in ``out/cc``; a temporary
    folder when ``out`` is None); *dcqcn_params* override DCQCN's defaults."""
    if out is None:
        with tempfile.TemporaryDirectory() as tmp:
            return run_study(Path(tmp), full, tiny, workers, scheduler, dcqcn_params, progress)
    extra = {"dcqcn_params": dcqcn_params} if dcqcn_params else None
    res = run_spec_files(HERE, ["cc"], out, full, workers, scheduler, progress,
                         size="tiny" if tiny else None, extra_args=extra)["cc"]
    return ok_outputs(res, "cc")  # each output names its pattern, CC and seed


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
    p = study_parser(__doc__.split("\n\n")[1], "bigger fabric, 8 MB messages, three seeds")
    p.add_argument("--tiny", action="store_true", help="4 ToRs x 5 NICs, 1 MB (notebooks, CI)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--dcqcn-param", action="append", default=[], metavar="KEY=VALUE",
                   help="DCQCN parameter override, e.g. rpg_byte_reset_unit_bytes=1 (bytes)")
    args = parse_study_args(p, argv)
    from netsim.cc.params import DcqcnParams, parse_cc_params

    try:
        dcqcn = parse_cc_params(args.dcqcn_param)
        DcqcnParams.from_dict(dcqcn)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = run_study(args.out, args.full, args.tiny, args.workers, args.scheduler, dcqcn,
                     progress=True)
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
