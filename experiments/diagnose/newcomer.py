"""The newcomer loop: a run of docs/trainer.md's 8-rank CPU job, ``netsim calibrate`` on its
traces, ``netsim predict --like`` with that calibration; how far is the prediction from the
run it was fitted on, with and without the calibration's measured host utilization?

    python -m experiments.diagnose.newcomer [-o DIR] [--repeats N] [--steps S] [--json]
    python -m experiments.diagnose.newcomer --dirs D1 D2 ...   # evaluate existing trace dirs

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
from pathlib import Path

import numpy as np

from experiments._output import print_rows
from netsim.diagnose.calibrated import default_host_cores, hardware_for
from netsim.diagnose.calibration import fit_calibration, fit_host_on_iterations, job_from_trace
from netsim.traces.records import read_trace_dir
from netsim.workload import predict

JOB = ("--tp", "2", "--pp", "2", "--dp", "2", "--model", "tiny", "--micro-batches", "4",
       "--global-batch", "8", "--seed", "7")


def run_trainer(d: Path, steps: int) -> Path:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "8", "-m", "trainer", *JOB, "--device", "cpu", "--steps", str(steps),
           "--trace-dir", str(d)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"trainer failed:\n{proc.stderr[-2000:]}")
    return d


def same_run_error(d: Path, utilization: bool = True) -> float:
    """Prediction of the run in ``d`` from a calibration on it, relative to its median step."""
    run = read_trace_dir(d)
    cal = fit_calibration([run], host_cores=default_host_cores([run]))
    if not utilization:
        cal.host.pop("utilization", None)
    cal = fit_host_on_iterations(cal, [run])
    hw = hardware_for(cal, None)
    hw = hw.replace(host_cores=min(hw.host_cores, run.host["available_cores"]))
    pred = predict(job_from_trace(run), hardware=hw, calibration=cal)
    return pred.iteration_s / float(np.median(run.iteration_s(skip=1))) - 1.0


def row(d: Path) -> dict:
    run = read_trace_dir(d)
    loads = [r.host_record.get("loadavg_1m") for r in run.ranks if r.host_record]
    return {"dir": str(d), "steps": len(run.ranks[0].iterations),
            "loadavg_1m": float(np.median(loads)) if loads else None,
            "trainer_cores": run.host.get("trainer_cores"),
            "available_cores": run.host.get("available_cores"),
            "error": same_run_error(d), "error_without_utilization": same_run_error(d, False)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default="/tmp/newcomer-loop")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--dirs", nargs="*", help="evaluate these trace directories instead")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dirs = [Path(x) for x in args.dirs] if args.dirs else [
        run_trainer(Path(args.out) / f"r{k}", args.steps) for k in range(args.repeats)]
    print_rows([row(d) for d in dirs], args.json, _line)
    return 0


def _line(r: dict) -> str:
    return (f"{r['dir']}: {r['steps']} steps, load {r['loadavg_1m']:.1f}, ranks used "
            f"{r['trainer_cores']:.2f} of {r['available_cores']:.2f} cores: "
            f"{r['error']:+.1%} ({r['error_without_utilization']:+.1%} without utilization)")


if __name__ == "__main__":
    sys.exit(main())
