"""Benchmark: the recommendation run (``netsim recommend``) on megascale with GPT-3 175B.

Run: ``python benchmarks/bench_recommend.py [--job gpt3-175b] [--budget 16] [--json]``.

Prints the wall and CPU time of each step of :func:`tuner.recommend.recommend` (from its
progress callback), the whole run, and the congestion-control search alone with 1 and 2 local
worker processes (the parallel speed-up of the ``concurrent.futures`` evaluations).
"""

from __future__ import annotations

import argparse
import json
import time

from topologies import load_fabric
from tuner.ccsearch import hot_spot, make_executor, search_cc
from tuner.jobs import load_job
from tuner.placement import place
from tuner.recommend import RecommendOptions, recommend


def steps(fabric, job, budget: int) -> tuple[dict, float, float]:
    """Wall time of every step of one recommendation run, plus the totals (wall, CPU)."""
    marks: list[tuple[str, float]] = []
    t0, c0 = time.perf_counter(), time.process_time()
    recommend(fabric, job, RecommendOptions(budget=budget),
              progress=lambda name, _f: marks.append((name, time.perf_counter())))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out, prev = {}, t0
    for (name, t), (_, t_next) in zip(marks, marks[1:] + [("end", t0 + wall)], strict=False):
        out[name] = out.get(name, 0.0) + (t_next - t)
        prev = t
    del prev
    return out, wall, cpu


def cc_scaling(fabric, job, budget: int) -> dict[int, float]:
    """Wall time of the CC search with 1 and 2 worker processes (same seed, same points)."""
    hot = hot_spot(fabric, job, place(fabric, job, "topo").gpu_of_rank)
    out = {}
    for workers in (1, 2):
        with make_executor(workers=workers) as ex:
            t0 = time.perf_counter()
            search_cc(hot, budget=budget, executor=ex, seed=0)
            out[workers] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", default="megascale")
    ap.add_argument("--job", default="gpt3-175b")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fabric, job = load_fabric(a.fabric), load_job(a.job)
    per_step, wall, cpu = steps(fabric, job, a.budget)
    scaling = cc_scaling(fabric, job, a.budget)
    doc = {"fabric": fabric.name, "job": a.job, "gpus": job.world, "budget": a.budget,
           "wall_s": wall, "cpu_s": cpu, "steps_wall_s": per_step, "cc_search_wall_s": scaling,
           "cc_speedup_2_workers": scaling[1] / scaling[2]}
    if a.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"recommend {a.job} ({job.world} GPUs) on {fabric.name}, budget {a.budget}: "
          f"{wall:.1f} s wall, {cpu:.1f} s CPU (main process)")
    for name, s in per_step.items():
        print(f"  {name:22s} {s:7.2f} s")
    print(f"CC search: 1 worker {scaling[1]:.1f} s, 2 workers {scaling[2]:.1f} s, "
          f"speed-up {scaling[1] / scaling[2]:.2f}x")


if __name__ == "__main__":
    main()
