"""Held-out accuracy: run the CPU trainer (gloo) in several 3D configurations, calibrate the
workload model on some runs, predict the iteration time of the others.

    python -m experiments.heldout_accuracy.run [--out DIR] [--reuse] [--json] [--repeats N]
                                               [--modern] [--results DIR]

Every run uses 8 ranks on this host (``OMP_NUM_THREADS=1``), the trainer's ``small`` model
with 8 layers, ``STEPS`` steps (the first, warm-up, dropped). The host has fewer cores than
ranks, so the model's host term (``netsim.workload.host``) is what these runs exercise.

Robust to a shared machine: the configurations run round-robin ``--repeats`` times
(interleaved, so slow minutes hit all alike), each configuration's figure is the median over
its repeats, and every run records the load (``load.py``: cores the trainer used, cores
everything else used, so cores left to it) in ``host.json`` next to its traces. The
calibration deflates the calibration runs with the cores that were left to them; the
prediction of a held-out run uses the cores left to *its* measurement (``predicted_s``), and
``predicted_nominal_s`` is the prediction for an otherwise idle host. ``--reuse`` skips runs
whose traces already exist in ``--out``.

``--modern`` runs ``MODERN_CONFIGS`` instead: expert and context parallelism on an MoE
version of the model (``MODERN_MODEL_ARGS``), calibrated and held out among themselves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.heldout_accuracy.load import LoadSampler
from netsim.diagnose.calibration import fit_calibration, fit_host_on_iterations, job_from_trace
from netsim.traces.records import TraceRun, read_trace_dir
from netsim.workload import predict


@dataclass(frozen=True)
class Config:
    tp: int
    pp: int
    dp: int
    micro_batches: int
    calibrate: bool
    cp: int = 1
    ep: int = 1
    layers: int | None = None
    seq: int | None = None

    @property
    def name(self) -> str:
        extra = (f"-cp{self.cp}" if self.cp > 1 else "") + (f"-ep{self.ep}" if self.ep > 1 else "")
        shape = (f"-L{self.layers}" if self.layers else "") + (f"-s{self.seq}" if self.seq else "")
        return f"tp{self.tp}-pp{self.pp}-dp{self.dp}{extra}-m{self.micro_batches}{shape}"

    @property
    def shape_args(self) -> tuple[str, ...]:
        """Trainer flags for a shape other than the model's (they follow, and override, its
        ``--layers``)."""
        return ((("--layers", str(self.layers)) if self.layers else ())
                + (("--seq", str(self.seq)) if self.seq else ()))

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.pp * self.dp


# Calibrate on four runs that reach the end of every axis (tp 8, pp 4, dp 8) plus the
# balanced tp2-pp2-dp2, so that held-out runs are interpolations; hold out the six others.
# (The first split, 2026-12-03 07:11, calibrated on tp4-pp1-dp2-m4 instead of
# tp8-pp1-dp1-m4: tp8's 14 ring steps per all-reduce were then an extrapolation of the
# per-message cost; docs/validation.md reports both.)
CONFIGS = (
    Config(1, 1, 8, 2, True),
    Config(2, 2, 2, 4, True),
    Config(8, 1, 1, 4, True),
    Config(2, 4, 1, 8, True),
    Config(1, 2, 4, 4, False),
    Config(2, 1, 4, 4, False),
    Config(4, 2, 1, 4, False),
    Config(1, 4, 2, 8, False),
    Config(2, 2, 2, 8, False),
    Config(4, 1, 2, 4, False),
    # other shapes than the calibration's 8 layers of sequence 256: the model carries the
    # calibration's per-layer and per-token costs to them
    Config(2, 2, 2, 4, False, layers=12),
    Config(1, 2, 4, 4, False, layers=4),
    Config(2, 2, 2, 4, False, seq=128),
    Config(1, 4, 2, 8, False, seq=512),
)
MODEL_ARGS = ("--model", "small", "--layers", "8")
STEPS = 4

# ``--modern``: context and expert parallelism (issue #18) on an MoE version of the same model
# (GQA with 4 KV heads, SwiGLU, 8 experts top-2 of width 512 in every block), calibrated on
# runs that cover ep, cp and pp and held out on other ep / cp mixes. tp > 1 is left out with
# ep > 1: the predictor requires sequence parallelism there (Megatron-Core's rule) and the
# trainer has none.
MODERN_MODEL_ARGS = ("--model", "small", "--layers", "8", "--kv-heads", "4", "--ffn", "gated",
                     "--experts", "8", "--top-k", "2", "--moe-ffn-hidden", "512")
MODERN_CONFIGS = (
    Config(1, 1, 8, 2, True, ep=4),
    Config(1, 2, 2, 4, True, cp=2, ep=2),
    Config(2, 2, 2, 4, True),
    Config(1, 1, 8, 2, False, ep=8),
    Config(1, 1, 4, 2, False, cp=2, ep=4),
    Config(1, 2, 4, 4, False, ep=2),
    Config(1, 1, 2, 2, False, cp=4, ep=2),
)


def run_trainer(cfg: Config, d: Path, timeout_s: float = 600,
                model_args=MODEL_ARGS, steps: int = STEPS) -> Path:
    """One trainer run under torchrun into ``d``, with the host's load in ``d/host.json``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           str(cfg.world), "-m", "trainer", *model_args, *cfg.shape_args,
           "--tp", str(cfg.tp), "--pp", str(cfg.pp), "--dp", str(cfg.dp),
           "--cp", str(cfg.cp), "--ep", str(cfg.ep),
           "--micro-batches", str(cfg.micro_batches), "--steps", str(steps),
           "--backend", "gloo", "--device", "cpu", "--trace-dir", str(d)]
    env = dict(os.environ, OMP_NUM_THREADS="1", TRAINER_THREADS="1")
    d.mkdir(parents=True, exist_ok=True)
    for old in [*d.glob("trace-rank*.jsonl"), d / "summary.json", d / "host.json"]:
        old.unlink(missing_ok=True)  # an earlier run's files: this run rewrites them
    sampler = LoadSampler(d / "trace-rank0.jsonl", steady_steps=steps - 1)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sampler.start(proc.pid)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        load = sampler.stop()
        if proc.poll() is None:
            proc.kill()
    if proc.returncode:
        raise RuntimeError(f"trainer {cfg.name} failed:\n{out.decode()[-2000:]}")
    (d / "host.json").write_text(json.dumps(load, indent=1))
    return d


def measured_s(run: TraceRun) -> float:
    """Median iteration time of a run, warm-up step dropped."""
    return float(np.median(run.iteration_s(skip=1)))


def evaluate(trace_dirs: dict[str, list[Path]], configs=CONFIGS,
             host_cores: float | None = None,
             iteration_fit: bool = True) -> tuple[list[dict], dict]:
    """Calibrate on every repeat of the ``calibrate`` configurations, predict every one.

    ``iteration_fit``: refit the host model on the calibration runs' iteration times
    (``netsim.diagnose.calibration.fit_host_on_iterations``) after the per-record fits.

    A configuration's measured figure is the median over its repeats; its prediction uses the
    median of the cores that were left to those repeats.
    """
    cores = float(host_cores or os.cpu_count() or 1)
    runs = {c.name: [read_trace_dir(d) for d in trace_dirs[c.name]] for c in configs}
    cal_runs = [r for c in configs if c.calibrate for r in runs[c.name]]
    cal = fit_calibration(cal_runs, host_cores=cores)
    if iteration_fit:
        cal = fit_host_on_iterations(cal, cal_runs)
    rows = []
    for c in configs:
        reps = runs[c.name]
        measured = float(np.median([measured_s(r) for r in reps]))
        avail = float(np.median([min(cores, r.host.get("available_cores", cores))
                                 for r in reps]))
        job = job_from_trace(reps[0])
        pred = predict(job, hardware=cal.hardware().replace(host_cores=avail), calibration=cal)
        nominal = predict(job, hardware=cal.hardware(), calibration=cal)
        rows.append({"config": c.name, "role": "calibrate" if c.calibrate else "held-out",
                     "repeats": len(reps), "measured_s": measured,
                     "measured_spread_s": float(np.ptp([measured_s(r) for r in reps])),
                     "predicted_s": pred.iteration_s, "error": pred.iteration_s / measured - 1,
                     "predicted_low_s": pred.interval["low_s"],
                     "predicted_high_s": pred.interval["high_s"],
                     "inside": bool(pred.interval["low_s"] <= measured
                                    <= pred.interval["high_s"]),
                     "predicted_nominal_s": nominal.iteration_s,
                     "error_nominal": nominal.iteration_s / measured - 1,
                     "host_bound_s": pred.host_s, "critical_path_s": pred.pipeline_s,
                     "available_cores": avail,
                     "other_cores": float(np.median([r.host.get("other_cores", 0.0)
                                                     for r in reps]))})
    return rows, cal.to_json()


def summary(rows: list[dict]) -> dict:
    held = [r for r in rows if r["role"] == "held-out"]
    err = np.abs([r["error"] for r in held])
    nom = np.abs([r["error_nominal"] for r in held])
    return {"held_out": len(held), "median_abs_error": float(np.median(err)),
            "inside_interval": sum(bool(r["inside"]) for r in held),
            "max_abs_error": float(np.max(err)),
            "median_abs_error_nominal": float(np.median(nom)),
            "max_abs_error_nominal": float(np.max(nom)),
            "median_other_cores": float(np.median([r["other_cores"] for r in rows]))}


def collect(out: Path, repeats: int, reuse: bool, configs=CONFIGS,
            **kw) -> dict[str, list[Path]]:
    """Run every configuration ``repeats`` times, round-robin."""
    dirs: dict[str, list[Path]] = {c.name: [] for c in configs}
    for k in range(repeats):
        for c in configs:
            d = out / c.name / f"r{k}"
            if not (reuse and (d / "summary.json").exists()):
                t0 = time.perf_counter()
                run_trainer(c, d, **kw)
                print(f"ran {c.name} (repeat {k}) in {time.perf_counter() - t0:.0f} s, "
                      f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)
            dirs[c.name].append(d)
    return dirs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="trace directory root (default: a new temporary directory per run, "
                         "so no run overwrites another's traces)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse traces already in --out (needs --out)")
    ap.add_argument("--repeats", type=int, default=2, help="round-robin passes (2)")
    ap.add_argument("--no-iteration-fit", action="store_true",
                    help="per-record fits only (no refit on the calibration runs' iteration times)")
    ap.add_argument("--modern", action="store_true",
                    help="the context/expert-parallel configurations on the MoE model instead")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--results", type=Path, default=None, metavar="DIR",
                    help="also write heldout.csv, calibration.json and heldout.png there")
    args = ap.parse_args(argv)
    if args.reuse and args.out is None:
        ap.error("--reuse needs --out DIR: the traces of an earlier run to reuse")
    out = args.out or Path(tempfile.mkdtemp(prefix="heldout-traces-"))
    print(f"traces in {out}", file=sys.stderr)
    configs, model_args = ((MODERN_CONFIGS, MODERN_MODEL_ARGS) if args.modern
                           else (CONFIGS, MODEL_ARGS))
    dirs = collect(out, args.repeats, args.reuse, configs, model_args=model_args)
    rows, cal = evaluate(dirs, configs, iteration_fit=not args.no_iteration_fit)
    s = summary(rows)
    if args.results:
        from experiments.heldout_accuracy.outputs import write_outputs

        write_outputs(rows, cal, args.results)
    if args.json:
        print(json.dumps({"rows": rows, "summary": s, "calibration": cal}, indent=2))
        return 0
    print(f"{'config':24s} {'role':9s} {'measured_s':>10s} {'predicted_s':>11s} {'error':>7s}"
          f" {'idle-host':>9s} {'cores':>5s}")
    for r in rows:
        print(f"{r['config']:24s} {r['role']:9s} {r['measured_s']:10.3f} "
              f"{r['predicted_s']:11.3f} {r['error']:+7.1%} {r['error_nominal']:+9.1%} "
              f"{r['available_cores']:5.2f}")
    print(f"held-out ({s['held_out']}): median |error| {s['median_abs_error']:.1%}, worst "
          f"{s['max_abs_error']:.1%} (idle-host prediction: {s['median_abs_error_nominal']:.1%}"
          f", {s['max_abs_error_nominal']:.1%}); {s['inside_interval']} inside their interval;"
          " median other load "
          f"{s['median_other_cores']:.2f} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
