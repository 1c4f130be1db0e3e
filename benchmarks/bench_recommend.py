"""Benchmark: the recommendation run (``netsim recommend``) on megascale with GPT-3 175B.

Run: ``python benchmarks/bench_recommend.py [--job gpt3-175b] [--dp 16 192] [--budget 16]
[--repeat 3] [--json]``.

For every data-parallel width given (16: the packaged 1,024-GPU job; 192: all 12,288 GPUs of
megascale) it prints the median over ``--repeat`` runs of the wall time of each step of
:func:`tuner.recommend.recommend` (from its progress callback) and of the whole run, then the
congestion-control search alone with 1 and 2 local worker processes of the sweep runner (the
parallel speed-up of its evaluations; zero when the job has no congestion point, as the search
then runs no packet simulation). The machine is shared: the load average before and
after is printed with the figures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import time

from topologies import load_fabric
from tuner.ccsearch import job_scenarios, search_job_cc
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
    out: dict[str, float] = {}
    for (name, t), (_, t_next) in zip(marks, marks[1:] + [("end", t0 + wall)], strict=False):
        out[name] = out.get(name, 0.0) + (t_next - t)
    return out, wall, cpu


def median_steps(fabric, job, budget: int, repeat: int) -> dict:
    """Per-step and total medians over ``repeat`` runs."""
    runs = [steps(fabric, job, budget) for _ in range(repeat)]
    names = list(runs[0][0])
    return {"steps_wall_s": {n: statistics.median(r[0].get(n, 0.0) for r in runs) for n in names},
            "wall_s": statistics.median(r[1] for r in runs),
            "cpu_s": statistics.median(r[2] for r in runs),
            "wall_s_all": [r[1] for r in runs]}


def cc_scaling(fabric, job, budget: int) -> dict[int, float]:
    """Wall time of the CC search with 1 and 2 worker processes (same seed, same points)."""
    scenarios, found = job_scenarios(fabric, job, place(fabric, job, "topo").gpu_of_rank)
    out = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        search_job_cc(scenarios, found, budget=budget, seed=0, workers=workers)
        out[workers] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", default="megascale")
    ap.add_argument("--job", default="gpt3-175b")
    ap.add_argument("--dp", type=int, nargs="+", default=[16, 192],
                    help="data-parallel widths to run (default: 16 and 192)")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fabric = load_fabric(a.fabric)
    doc = {"fabric": fabric.name, "job": a.job, "budget": a.budget, "repeat": a.repeat,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
           "cpus": os.cpu_count(), "load_before": os.getloadavg(), "runs": []}
    for dp in a.dp:
        job = load_job(a.job, dp=dp)
        run = {"dp": dp, "gpus": job.world, **median_steps(fabric, job, a.budget, a.repeat)}
        scaling = cc_scaling(fabric, job, a.budget)
        run.update(cc_search_wall_s=scaling,
                   cc_speedup_2_workers=scaling[1] / scaling[2] if scaling[2] > 0 else 1.0)
        doc["runs"].append(run)
    doc["load_after"] = os.getloadavg()
    if a.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"{doc['date']}, {doc['cpus']} CPUs, load average before "
          f"{doc['load_before'][0]:.1f}, after {doc['load_after'][0]:.1f}")
    for run in doc["runs"]:
        print(f"recommend {a.job} dp={run['dp']} ({run['gpus']} GPUs) on {fabric.name}, budget "
              f"{a.budget}: median of {a.repeat}: {run['wall_s']:.1f} s wall "
              f"({', '.join(f'{w:.1f}' for w in run['wall_s_all'])}), {run['cpu_s']:.1f} s CPU "
              "(main process)")
        for name, s in run["steps_wall_s"].items():
            print(f"  {name:22s} {s:7.2f} s")
        sc = run["cc_search_wall_s"]
        print(f"  CC search alone: 1 worker {sc[1]:.1f} s, 2 workers {sc[2]:.1f} s, "
              f"speed-up {run['cc_speedup_2_workers']:.2f}x")


if __name__ == "__main__":
    main()
