"""Measure how much traffic kinds slow each other when they share links (issue 18).

Run: ``python benchmarks/contention_moe.py [--fabric megascale] [--dp 128] [--random]``.

The job is DeepSeek-V3-shaped (tp 1, pp 16, ep 64, first/last stage 3/2 layers); its EP
all-to-alls (every stage), DP per-layer reduce-scatters and PP sends (every other stage
boundary, one round) are priced alone and pairwise together in one max-min allocation
(``netsim.workload.contention.joint_slowdown``); printed: each kind's slowest-call time
together / alone, and the CPU seconds of each joint allocation.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from netsim.model.hardware import A100
from netsim.workload import FlowCommModel, JobSpec, layout
from netsim.workload.comm import CommBatch, fabric_locality
from netsim.workload.contention import joint_slowdown
from netsim.workload.volumes import ep_bytes
from topologies import load_fabric


def batches(job: JobSpec, grid4: np.ndarray) -> dict[str, CommBatch]:
    m = job.model_config()
    p = job.pp
    ep = np.concatenate([layout.expert_groups(job, grid4, q)[0] for q in range(p)])
    dense = np.concatenate([layout.replica_groups(grid4, q) for q in range(p)])
    pairs = np.concatenate([np.stack([grid4[q].ravel(), grid4[q + 1].ravel()], axis=1)
                            for q in range(0, p - 1, 2)])
    act = job.micro_batch * m.seq * m.hidden * job.act_bytes
    return {"ep": CommBatch("all_to_all", "ep", ep, ep_bytes(job, m)),
            "dp": CommBatch("reduce_scatter", "dp", dense, m.layer_params() * 4.0),
            "pp": CommBatch("send", "pp", pairs, act)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", default="megascale")
    ap.add_argument("--dp", type=int, default=128)
    ap.add_argument("--random", action="store_true", help="random placement (seed 0)")
    args = ap.parse_args()
    fabric = load_fabric(args.fabric)
    loc = fabric_locality(fabric)
    job = JobSpec(model="deepseek-v3", gpu="a100", tp=1, pp=16, dp=args.dp, ep=64,
                  first_stage_layers=3, last_stage_layers=2, global_batch=args.dp * 16)
    place = (np.random.default_rng(0).permutation(len(fabric.gpus))[:job.world]
             if args.random else None)
    b = batches(job, layout.gpu_grid(job, place))
    cm = FlowCommModel(fabric, A100)
    for pair in (("ep", "dp"), ("ep", "pp"), ("dp", "pp")):
        t0 = time.process_time()
        s = joint_slowdown(cm, [b[k] for k in pair], loc)
        print(f"{'+'.join(pair):6s} " + ", ".join(f"{k} x{v:.2f}" for k, v in s.items())
              + f"  (CPU {time.process_time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
