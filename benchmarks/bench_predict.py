"""Benchmark: wall and CPU time of ``netsim.workload.predict`` for GPT-3 175B on megascale.

Run: ``python benchmarks/bench_predict.py [--gpus 512,2048,12288] [--comm analytic,flow]
[--repeat 3] [--json]``.

Each case runs ``--repeat`` times, each in a fresh child process (imports and the fabric
build are timed apart and not included): the job is GPT-3 175B with tp 8, pp 8 and
dp = gpus / 64 (m = 32 micro-batches, Megatron-LM's default overlaps) on the first ``gpus``
GPUs of the 12,288-GPU ``megascale`` fabric, priced with the alpha-beta model or the flow
engine (``FlowCommModel``). Printed per case: the median wall and CPU seconds over the
repeats (the machine is shared, so wall time carries other users' load; the load average is
printed), the flow-engine runs and the predicted iteration time; then, per comm model, the
scaling exponent of CPU time against GPUs (least squares in log-log) and the flow/analytic
ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np
from _child import run_child

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from topologies import load_fabric
from netsim.model.hardware import A100
from netsim.workload import JobSpec, predict
from netsim.workload.flowcomm import FlowCommModel
import_s = time.perf_counter() - t0
comm, n = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
fabric = load_fabric("megascale")
build_s = time.perf_counter() - t0
job = JobSpec(model="gpt3-175b", gpu="a100", tp=8, pp=8, dp=n // 64)
t0, c0 = time.perf_counter(), time.process_time()
cm = FlowCommModel(fabric, A100) if comm == "flow" else None
pred = predict(job, fabric, A100, comm_model=cm)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"comm": comm, "gpus": n, "import_s": import_s, "build_s": build_s,
                  "wall_s": wall, "cpu_s": cpu, "runs": cm.runs if cm else 0,
                  "iteration_s": pred.iteration_s, "mfu": pred.mfu,
                  "max_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_case(comm: str, n: int) -> dict:
    """One case in a child process; its measurements."""
    return run_child(_CHILD, comm, str(n), comm=comm, gpus=n)


def median_case(comm: str, n: int, repeat: int) -> dict:
    """Median wall and CPU over ``repeat`` child runs (prediction identical in each)."""
    runs = [run_case(comm, n) for _ in range(repeat)]
    bad = [r for r in runs if "error" in r]
    if bad:
        return bad[0]
    row = dict(runs[0])
    for key in ("wall_s", "cpu_s", "import_s", "build_s", "max_rss_MiB"):
        row[key] = statistics.median(r[key] for r in runs)
    row["wall_range_s"] = (min(r["wall_s"] for r in runs), max(r["wall_s"] for r in runs))
    row["load"] = os.getloadavg()[0]
    return row


def exponent(rows: list[dict]) -> float | None:
    """Least-squares slope of log CPU time against log GPUs."""
    ok = [r for r in rows if "cpu_s" in r]
    if len(ok) < 2:
        return None
    return float(np.polyfit(np.log([r["gpus"] for r in ok]), np.log([r["cpu_s"] for r in ok]),
                            1)[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", default="512,2048,12288")
    p.add_argument("--comm", default="analytic,flow")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.gpus.split(",")]
    report: dict = {}
    for comm in args.comm.split(","):
        rows = []
        for n in sizes:
            row = median_case(comm, n, args.repeat)
            rows.append(row)
            if not args.json:
                if "error" in row:
                    print(f"{comm:8s} {n:6d} GPUs  error: {row['error']}")
                    continue
                lo, hi = row["wall_range_s"]
                print(f"{comm:8s} {n:6d} GPUs  wall {row['wall_s']:6.2f} s ({lo:.2f}-{hi:.2f})  "
                      f"CPU {row['cpu_s']:6.2f} s  flow runs {row['runs']:2d}  "
                      f"iteration {row['iteration_s']:.4f} s  MFU {row['mfu']:.4f}  "
                      f"RSS {row['max_rss_MiB']:.0f} MiB  (import {row['import_s']:.1f} s, "
                      f"fabric {row['build_s']:.2f} s, load {row['load']:.1f})", flush=True)
        report[comm] = {"rows": rows, "cpu_exponent": exponent(rows)}
    if "flow" in report and "analytic" in report:
        ratio = [f["cpu_s"] / a["cpu_s"] for f, a in zip(report["flow"]["rows"],
                                                         report["analytic"]["rows"], strict=True)
                 if "cpu_s" in f and "cpu_s" in a]
        report["flow_over_analytic_cpu"] = ratio
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for comm in args.comm.split(","):
        e = report[comm]["cpu_exponent"]
        print(f"{comm}: CPU time ~ GPUs^{e:.2f}" if e is not None else f"{comm}: -")
    if "flow_over_analytic_cpu" in report:
        print("flow / analytic CPU: " + ", ".join(f"{r:.1f}x"
                                                  for r in report["flow_over_analytic_cpu"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
