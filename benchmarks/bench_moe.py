"""Benchmark: the expert-parallel all-to-all and the prediction of a DeepSeek-V3-shaped MoE
iteration on the flow engine, from 4,096 to 65,536 GPUs.

Run: ``python benchmarks/bench_moe.py [--gpus 4096,16384,65536] [--what a2a,predict]
[--json]``.

Each case runs in a fresh child process (imports and the fabric build timed apart). The
fabric is ``benchmarks/fabrics/clos-<gpus>.yaml`` (MegaScale's Clos grown to that size; made
on the fly for sizes without a file). The job is the packaged ``deepseek-v3`` job (tp 1,
pp 16, ep 64, dp = gpus / 16) on A100 profiles (the fabric's 200G NICs).

``a2a``: one ``FlowCommModel`` batch of every EP group's all-to-all of the job (all stages at
once: gpus / 64 groups of 64), i.e. what ``predict`` prices for the ``ep`` kind;
``a2a-random``: the same groups on a random permutation of the GPUs (seed 0).
``predict``: ``netsim.workload.predict`` of the whole iteration with the flow engine.

Printed per case: wall and CPU seconds (the host is shared: CPU time is the figure to read,
the load average is printed), flow-engine runs, and the result; then the scaling exponent of
CPU time against GPUs (least squares in log-log).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
from _child import run_child

HERE = Path(__file__).parent

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from topologies import load_fabric
from topologies.files import spec_from_dict, build
from netsim.model.hardware import A100
from netsim.workload import JobSpec, predict
from netsim.workload.comm import CommBatch, fabric_locality
from netsim.workload.flowcomm import FlowCommModel
from netsim.workload.layout import expert_groups, gpu_grid
from tuner.jobs import load_job
import_s = time.perf_counter() - t0
what, n = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
fabric = build(spec_from_dict({"kind": "clos3", "base": "megascale", "name": f"clos-{n}",
                               "servers": n // 8}))
build_s = time.perf_counter() - t0
job = load_job("deepseek-v3", dp=n // 16, gpu="a100")
t0, c0 = time.perf_counter(), time.process_time()
cm = FlowCommModel(fabric, A100)
if what in ("a2a", "a2a-random"):
    from netsim.workload.volumes import ep_bytes
    place = (__import__("numpy").random.default_rng(0).permutation(n) if what == "a2a-random"
             else None)
    g4 = gpu_grid(job, place)
    groups = __import__("numpy").concatenate([expert_groups(job, g4, q)[0] for q in range(job.pp)])
    t = cm.batch_s(CommBatch("all_to_all", "ep", groups, ep_bytes(job, job.model_config())),
                   fabric_locality(fabric))
    result = {"groups": len(groups), "a2a_max_s": float(t.max()), "a2a_mean_s": float(t.mean())}
else:
    pred = predict(job, fabric, A100, comm_model=cm)
    result = {"iteration_s": pred.iteration_s, "mfu": pred.mfu,
              "exposed_ep_s": pred.exposed_comm_s["ep"]}
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"what": what, "gpus": n, "import_s": import_s, "build_s": build_s,
                  "wall_s": wall, "cpu_s": cpu, "runs": cm.runs, **result,
                  "max_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def exponent(rows: list[dict]) -> float:
    """Least-squares slope of log CPU seconds against log GPUs."""
    ok = [r for r in rows if "error" not in r]
    if len(ok) < 2:
        return float("nan")
    x = np.log([r["gpus"] for r in ok])
    y = np.log([max(r["cpu_s"], 1e-6) for r in ok])
    return float(np.polyfit(x, y, 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="4096,16384,65536")
    ap.add_argument("--what", default="a2a,predict")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(x) for x in args.gpus.split(",")]
    out = {"load_avg": os.getloadavg(), "cases": []}
    for what in args.what.split(","):
        rows = [run_child(_CHILD, what, str(n), what=what, gpus=n) for n in sizes]
        out["cases"] += rows
        out[f"exponent_{what}"] = exponent(rows)
        if not args.json:
            for r in rows:
                print(json.dumps(r))
            print(f"{what}: CPU-time exponent vs GPUs {out[f'exponent_{what}']:.2f} "
                  f"(load average {out['load_avg'][0]:.1f})")
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
