"""The newcomer loop: a run of docs/trainer.md's 8-rank CPU job, ``netsim calibrate`` on its
traces, ``netsim predict --like`` with that calibration; how far is the prediction from the
run it was fitted on, with and without the calibration's measured host utilization, and
where does the difference come from?

    python -m experiments.diagnose.newcomer [-o DIR] [--repeats N] [--steps S] [--profile]
                                            [--csv FILE] [--json]
    python -m experiments.diagnose.newcomer --dirs D1 D2 ...   # evaluate existing trace dirs

``--profile`` runs the job with ``--profile DIR/kineto --profile-schedule 1,1,6`` and evaluates
both the Kineto files and the native ones. A directory is read as ``netsim calibrate`` reads it
(native or Kineto). Every row carries the decomposition of the error (``breakdown``): the
model's host-bound step is ``T = W / (C x u)``, so ``T_pred / T_meas - 1`` splits into the
fitted work ``W`` against the ranks' measured CPU time of a step, the calibration's
utilization ``u`` against the cores the ranks used over the median step, and the median step
against the mean.

The job is the one of ``tests/trainer/test_faults_profile.py`` (tp2 pp2 dp2, ``tiny``,
4 micro-batches, global batch 8, seed 7). The prediction is made as the test makes it
(``fit_calibration`` with the host records' cores, ``fit_host_on_iterations``, the calibrated
hardware with the cores left to the run); "without" drops ``host.utilization``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments._output import print_rows, write_csv
from netsim.diagnose.calibrated import default_host_cores, hardware_for
from netsim.diagnose.calibration import (
    STALL_FACTOR,
    fit_calibration,
    fit_host_on_iterations,
    job_from_trace,
    step_cores,
)
from netsim.traces.kineto import read_traces
from netsim.workload import predict

JOB = ("--tp", "2", "--pp", "2", "--dp", "2", "--model", "tiny", "--micro-batches", "4",
       "--global-batch", "8", "--seed", "7")


FITTED = ("forward", "backward", "optimizer")


def run_trainer(d: Path, steps: int, profile: bool = False) -> list[Path]:
    """Run the job with native traces in ``d`` (and Kineto ones in ``d/kineto``); the trace
    directories to evaluate."""
    extra = ["--profile", str(d / "kineto"), "--profile-schedule", "1,1,6"] if profile else []
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "8", "-m", "trainer", *JOB, "--device", "cpu", "--steps", str(steps),
           "--trace-dir", str(d), *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"trainer failed:\n{proc.stderr[-2000:]}")
    return [d / "kineto", d] if profile else [d]


def calibrated(run, utilization: bool = True):
    """(calibration, hardware) as the test fits them on ``run`` itself."""
    cal = fit_calibration([run], host_cores=default_host_cores([run]))
    if not utilization:
        cal.host.pop("utilization", None)
    cal = fit_host_on_iterations(cal, [run])
    hw = hardware_for(cal, None)
    return cal, hw.replace(host_cores=min(hw.host_cores, run.host["available_cores"]))


def same_run_error(run, utilization: bool = True) -> float:
    """Prediction of ``run`` from a calibration on it, relative to its median step."""
    cal, hw = calibrated(run, utilization)
    pred = predict(job_from_trace(run), hardware=hw, calibration=cal)
    return pred.iteration_s / float(np.median(run.iteration_s(skip=1))) - 1.0


def predicted_work(run) -> dict[str, float]:
    """The model's CPU work of one step summed over the ranks, per term (dedicated-core s)."""
    cal, hw = calibrated(run)
    inf = float("inf")

    def work(**host) -> float:
        c = replace(cal, host={**cal.host, **host})
        pred = predict(job_from_trace(run), hardware=hw, calibration=c)
        return pred.host_s * hw.host_cores * c.host.get("utilization", 1.0)

    total, comp = work(), work(cpu_msg_s=0.0, cpu_iter_s=0.0, cpu_bytes_per_s=inf)
    it = work(cpu_msg_s=0.0, cpu_bytes_per_s=inf) - comp
    msg = work(cpu_iter_s=0.0, cpu_bytes_per_s=inf) - comp
    return {"work_s": total, "compute_s": comp, "iter_s": it, "msg_s": msg,
            "bytes_s": total - comp - it - msg, "utilization": cal.host.get("utilization", 1.0),
            "cores": hw.host_cores}


def measured_work(run) -> dict[str, float]:
    """The ranks' measured CPU time of a step (process CPU of the step records), summed over the
    ranks, and the part in the fitted compute records, means over the steps
    ``TraceRun.iteration_s`` keeps."""
    its = run.ranks[0].iterations
    first = int(run.summary.get("start_step", its[0]["step"])) + 1
    if not any(r["step"] >= first for r in its):
        first = its[0]["step"]
    step, comp = defaultdict(float), defaultdict(float)
    for rank in run.ranks:
        for c in rank.compute:
            if c["step"] < first or c.get("cpu_s") is None:
                continue
            if c["phase"] == "iteration":
                step[c["step"]] += c["cpu_s"]
            elif c["phase"] in FITTED and c.get("name", "layer") in ("layer", "head", "optimizer"):
                comp[c["step"]] += c["cpu_s"]
    steps = sorted(step)
    return {"step_cpu_s": float(np.mean([step[k] for k in steps])),
            "compute_cpu_s": float(np.mean([comp[k] for k in steps]))}


def breakdown(run) -> dict[str, float]:
    """Predicted against measured, per factor of ``T = W / (C x u)``."""
    p, m = predicted_work(run), measured_work(run)
    its = run.iteration_s(skip=1)
    median = float(np.median(its))
    mean = float(np.mean([t for t in its if t <= STALL_FACTOR * median]))  # as step_cores
    used = step_cores(run)
    return {**{f"pred_{k}": v for k, v in p.items()}, **{f"meas_{k}": v for k, v in m.items()},
            "meas_step_median_s": median, "meas_step_mean_s": mean,
            "step_utilization": (used or float("nan")) / p["cores"],
            "window_utilization": run.host.get("trainer_cores", float("nan")) / p["cores"],
            "work_ratio": p["work_s"] / m["step_cpu_s"],
            "utilization_ratio": (m["step_cpu_s"] / (mean * p["cores"])) / p["utilization"],
            "median_over_mean": median / mean}


def row(d: Path) -> dict:
    run = read_traces(d)
    loads = [r.host_record.get("loadavg_1m") for r in run.ranks if r.host_record]
    return {"dir": str(d), "steps": len(run.ranks[0].iterations),
            "loadavg_1m": float(np.median(loads)) if loads else None,
            "trainer_cores": run.host.get("trainer_cores"),
            "available_cores": run.host.get("available_cores"),
            "error": same_run_error(run), "error_without_utilization": same_run_error(run, False),
            **breakdown(run)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default="/tmp/newcomer-loop")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--profile", action="store_true",
                    help="run with --profile (schedule 1,1,6); evaluate Kineto and native files")
    ap.add_argument("--dirs", nargs="*", help="evaluate these trace directories instead")
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dirs = [Path(x) for x in args.dirs] if args.dirs else [
        d for k in range(args.repeats)
        for d in run_trainer(Path(args.out) / f"r{k}", args.steps, args.profile)]
    rows = [row(d) for d in dirs]
    if args.csv:
        write_csv(Path(args.csv), rows)
    print_rows(rows, args.json, _line)
    return 0


def _line(r: dict) -> str:
    return (f"{r['dir']}: {r['steps']} steps, load {r['loadavg_1m']:.1f}, ranks used "
            f"{r['trainer_cores']:.2f} of {r['available_cores']:.2f} cores: "
            f"{r['error']:+.1%} ({r['error_without_utilization']:+.1%} without utilization); "
            f"work {r['work_ratio'] - 1:+.1%}, utilization {r['utilization_ratio'] - 1:+.1%}, "
            f"median/mean step {r['median_over_mean'] - 1:+.1%} (u {r['pred_utilization']:.3f}: "
            f"steps {r['step_utilization']:.3f}, host window {r['window_utilization']:.3f})")


if __name__ == "__main__":
    sys.exit(main())
