"""Held-out accuracy calibrated from torch.profiler traces vs from the native traces.

    python -m experiments.diagnose.kineto_heldout [-o DIR] [--reuse] [--repeats N] [--json]
                                                  [--results DIR]

Every configuration of ``experiments.heldout_accuracy`` runs once per repeat with both
``--trace-dir`` and ``--profile`` (schedule 0,1,3: the profiler records steps 1-3, the steps the
native calibration uses), so the two formats describe the very same steps. The workload model
is calibrated twice on the calibration configurations, from the native traces and from the
Kineto traces (``netsim.traces.kineto``), and both predict every configuration; the measured figure is
the native iteration time. Profiling slows the runs down alike for both formats. A third
evaluation (``native-no-cpu``) drops the native records' thread CPU time (``cpu_s``, which a
profiler does not record) to separate the reader's fidelity from that extra measurement.

The traces go to a new temporary folder unless ``-o`` names one (``--reuse`` needs it). Each
row carries ``other_cores``, the median over its repeats of the cores other processes took
while it ran (``host.json``), so the load behind the errors is part of the result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from experiments.heldout_accuracy.run import CONFIGS, MODEL_ARGS, STEPS, measured_s, run_trainer
from netsim.diagnose.calibration import fit_calibration, fit_host_on_iterations, job_from_trace
from netsim.traces.kineto import read_traces
from netsim.traces.records import read_trace_dir
from netsim.workload import predict


def collect(out: Path, repeats: int, reuse: bool) -> dict[str, list[Path]]:
    dirs: dict[str, list[Path]] = {c.name: [] for c in CONFIGS}
    for k in range(repeats):
        for c in CONFIGS:
            d = out / c.name / f"r{k}"
            if not (reuse and (d / "kineto").is_dir() and (d / "summary.json").exists()):
                extra = ("--profile", str(d / "kineto"), "--profile-schedule", "0,1,3")
                run_trainer(c, d, model_args=MODEL_ARGS + extra, steps=STEPS)
                print(f"ran {c.name} r{k}, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
            dirs[c.name].append(d)
    return dirs


def evaluate(dirs: dict[str, list[Path]], fmt: str) -> list[dict]:
    cores = float(os.cpu_count() or 1)
    runs = {}
    for c in CONFIGS:
        runs[c.name] = []
        for d in dirs[c.name]:
            native = read_trace_dir(d)
            run = native if fmt.startswith("native") else read_traces(d / "kineto")
            if fmt == "native-no-cpu":  # what the profiler cannot record: thread CPU time
                run = read_trace_dir(d)
                for rank in run.ranks:
                    for rec in rank.compute:
                        rec.pop("cpu_s", None)
            run.host = native.host  # host.json: the load during the run, for both formats
            runs[c.name].append((native, run))
    cal_runs = [r for c in CONFIGS if c.calibrate for _, r in runs[c.name]]
    cal = fit_host_on_iterations(fit_calibration(cal_runs, host_cores=cores), cal_runs)
    rows = []
    for c in CONFIGS:
        pairs = runs[c.name]
        measured = float(np.median([measured_s(n) for n, _ in pairs]))
        avail = float(np.median([min(cores, n.host.get("available_cores", cores))
                                 for n, _ in pairs]))
        job = job_from_trace(pairs[0][0])
        pred = predict(job, hardware=cal.hardware().replace(host_cores=avail), calibration=cal)
        rows.append({"config": c.name, "role": "calibrate" if c.calibrate else "held-out",
                     "format": fmt, "measured_s": measured, "predicted_s": pred.iteration_s,
                     "error": pred.iteration_s / measured - 1,
                     "other_cores": float(np.median([n.host.get("other_cores", 0.0)
                                                     for n, _ in pairs]))})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, default=None,
                    help="the traces' folder (default: a new temporary one)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse traces already in -o (needs -o)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--results", type=Path, default=None, metavar="DIR",
                    help="also write the --json printout to DIR/kineto_heldout.json")
    args = ap.parse_args(argv)
    if args.reuse and args.out is None:
        ap.error("--reuse needs -o DIR: the traces of an earlier run to reuse")
    out = args.out or Path(tempfile.mkdtemp(prefix="kineto-heldout-"))
    print(f"traces in {out}", file=sys.stderr)
    dirs = collect(out, args.repeats, args.reuse)
    formats = ("native", "native-no-cpu", "kineto")
    rows = [row for fmt in formats for row in evaluate(dirs, fmt)]
    summary = {}
    for fmt in formats:
        err = np.abs([r["error"] for r in rows if r["format"] == fmt and r["role"] == "held-out"])
        summary[fmt] = {"median_abs_error": float(np.median(err)), "max_abs_error": float(err.max())}
    text = json.dumps({"rows": rows, "summary": summary}, indent=2)
    if args.results:
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / "kineto_heldout.json").write_text(text + "\n")
    if args.json:
        print(text)
        return 0
    for r in rows:
        print(f"{r['format']:13s} {r['config']:18s} {r['role']:9s} {r['measured_s']:8.3f} "
              f"{r['predicted_s']:8.3f} {r['error']:+7.1%}")
    for fmt, s in summary.items():
        print(f"{fmt}: held-out median |error| {s['median_abs_error']:.1%}, worst "
              f"{s['max_abs_error']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
