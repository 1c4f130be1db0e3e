"""Held-out accuracy: run the CPU trainer (gloo) in several 3D configurations, calibrate the
workload model on some runs, predict the iteration time of the others.

    python -m experiments.heldout_accuracy.run [--out DIR] [--reuse] [--json]

``--reuse`` skips configurations whose traces already exist in ``--out``. Every run uses 8
ranks (the 2-core machine is shared; the world size is held fixed so that time-slicing
affects every run alike) and the trainer's ``small`` model with 8 layers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from netsim.calibration import fit_calibration, job_from_trace
from netsim.traces import read_trace_dir
from netsim.workload import predict


@dataclass(frozen=True)
class Config:
    tp: int
    pp: int
    dp: int
    micro_batches: int
    calibrate: bool

    @property
    def name(self) -> str:
        return f"tp{self.tp}-pp{self.pp}-dp{self.dp}-m{self.micro_batches}"


# Pipeline depth stays <= 2: the trainer's middle stages (pp >= 3) fail at the time of writing.
CONFIGS = (
    Config(2, 2, 2, 4, True),
    Config(1, 2, 4, 4, True),
    Config(4, 1, 2, 4, True),
    Config(2, 1, 4, 2, True),
    Config(2, 2, 2, 8, False),
    Config(4, 2, 1, 4, False),
    Config(1, 2, 4, 8, False),
    Config(2, 1, 4, 4, False),
    Config(8, 1, 1, 4, False),
    Config(4, 2, 1, 8, False),
)
MODEL_ARGS = ("--model", "small", "--layers", "8")
STEPS = 4


def run_trainer(cfg: Config, out: Path, timeout_s: float = 600) -> Path:
    """One trainer run under torchrun; returns its trace directory."""
    d = out / cfg.name
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
           str(cfg.tp * cfg.pp * cfg.dp), "-m", "trainer", *MODEL_ARGS,
           "--tp", str(cfg.tp), "--pp", str(cfg.pp), "--dp", str(cfg.dp),
           "--micro-batches", str(cfg.micro_batches), "--steps", str(STEPS),
           "--backend", "gloo", "--device", "cpu", "--trace-dir", str(d)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, timeout=timeout_s, env=env, capture_output=True)
    return d


def evaluate(trace_dirs: dict[str, Path], configs=CONFIGS) -> list[dict]:
    """Calibrate on the ``calibrate`` configurations, predict every configuration."""
    runs = {c.name: read_trace_dir(trace_dirs[c.name]) for c in configs}
    cal = fit_calibration([runs[c.name] for c in configs if c.calibrate])
    hw = cal.hardware()
    rows = []
    for c in configs:
        run = runs[c.name]
        measured = float(np.median(run.iteration_s(skip=1)))
        pred = predict(job_from_trace(run), hardware=hw, calibration=cal)
        rows.append({"config": c.name, "role": "calibrate" if c.calibrate else "held-out",
                     "measured_s": measured, "predicted_s": pred.iteration_s,
                     "error": (pred.iteration_s - measured) / measured,
                     "bubble_fraction": pred.bubble_fraction,
                     "exposed_comm_s": pred.exposed_comm_s["total"]})
    return rows


def summary(rows: list[dict]) -> dict:
    held = np.abs([r["error"] for r in rows if r["role"] == "held-out"])
    return {"held_out": int(held.size), "median_abs_error": float(np.median(held)),
            "max_abs_error": float(np.max(held))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/heldout-traces", help="trace directory root")
    ap.add_argument("--reuse", action="store_true", help="reuse traces already in --out")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    dirs = {}
    for c in CONFIGS:
        d = out / c.name
        if not (args.reuse and (d / "summary.json").exists()):
            t0 = time.perf_counter()
            run_trainer(c, out)
            print(f"ran {c.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        dirs[c.name] = d
    rows = evaluate(dirs)
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary(rows)}, indent=2))
        return 0
    print(f"{'config':22s} {'role':9s} {'measured_s':>10s} {'predicted_s':>11s} {'error':>7s}")
    for r in rows:
        print(f"{r['config']:22s} {r['role']:9s} {r['measured_s']:10.3f} "
              f"{r['predicted_s']:11.3f} {r['error']:+7.1%}")
    s = summary(rows)
    print(f"held-out: median |error| {s['median_abs_error']:.1%}, worst {s['max_abs_error']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
