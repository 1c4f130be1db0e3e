"""Benchmark: wall and CPU time of the scheduler replay (``netsim cluster simulate``).

Run: ``python benchmarks/bench_cluster.py [--jobs 25,50,100] [--oversub 1,2]
[--policy linear,random,topo] [--servers 256] [--solver fast,plain] [--json]``.

``--servers 1536``: the 12,288-GPU megascale fabric. ``--solver plain``: the max-min
allocations by the plain numpy loop (``netsim.flow.maxmin.maxmin_rates_plain``, what every
allocation ran before the compiled kernel and its trace re-runs); ``fast`` is the default
path. Both give the same replay, bit for bit, so a side-by-side run shows the speed-up alone.

Each case (job count x fabric x policy) runs in a fresh child process (imports and the fabric
build timed apart): a replay of ``jobs`` jobs from the seeded generator (seed 0) on a
2,048-GPU fabric with the megascale layout (256 servers, 64 per ToR set, 1:1) or its 2:1
variant (48-port switches, 16 uplinks per ToR). Printed per case: wall and CPU seconds
(the machine is shared: wall time carries other users' load, so the load average is printed
and CPU time is the figure to compare), predictions made, mean slowdown; then per policy the
scaling exponent of CPU time against the job count (least squares in log-log).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
from _child import run_child

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from topologies import Clos3Spec, clos3
from tuner import cluster
import_s = time.perf_counter() - t0
n, oversub, policy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
servers, solver = int(sys.argv[4]), sys.argv[5]
if solver == "plain":
    import netsim.flow.maxmin as mm
    mm.maxmin_rates_fast = lambda *args: None
t0 = time.perf_counter()
extra = dict(switch_radix=48, tor_down_up=(2, 1)) if oversub == 2 else {}
fabric = clos3(Clos3Spec(name=f"megascale-{8 * servers}-{oversub}to1", servers=servers,
                         servers_per_tor_group=64, **extra))
build_s = time.perf_counter() - t0
jobs = cluster.generate_jobs(n, len(fabric.gpus), 0)
t0, c0 = time.perf_counter(), time.process_time()
res = cluster.simulate(fabric, jobs, (policy,), seed=0)[policy].to_json()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"jobs": n, "oversub": oversub, "policy": policy, "gpus": 8 * servers,
                  "solver": solver, "import_s": import_s,
                  "build_s": build_s, "wall_s": wall, "cpu_s": cpu,
                  "mean_slowdown": res["mean_slowdown"], "p95_slowdown": res["p95_slowdown"],
                  "max_rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default="25,50,100")
    ap.add_argument("--oversub", default="1", help="comma list of 1 (1:1) and 2 (2:1)")
    ap.add_argument("--policy", default="linear,random,topo")
    ap.add_argument("--servers", type=int, default=256, help="256: 2,048 GPUs; 1536: 12,288")
    ap.add_argument("--solver", default="fast", help="comma list of fast and plain")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for o in args.oversub.split(","):
        for n in args.jobs.split(","):
            for p in args.policy.split(","):
                for sv in args.solver.split(","):
                    rows.append(run_child(_CHILD, n, o, p, str(args.servers), sv, jobs=int(n),
                                          oversub=int(o), policy=p, solver=sv))
                    if not args.json:
                        _print_row(rows[-1])
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"rows": rows, "loadavg": load}, indent=2))
        return 0
    print(f"load average while measured: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"on {os.cpu_count()} cores")
    _print_totals(rows)
    return 0


def _print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['jobs']:>4} jobs {r['oversub']}:1 {r['policy']:<6} {r['solver']:<5} "
              f"error: {r['error']}")
        return
    print(f"{r['jobs']:>4} jobs {r['oversub']}:1 {r['policy']:<6} {r['solver']:<5} "
          f"wall {r['wall_s']:7.1f} s  "
          f"cpu {r['cpu_s']:7.1f} s  mean slowdown {r['mean_slowdown']:.4f}  "
          f"p95 {r['p95_slowdown']:.4f}  rss {r['max_rss_MiB']:.0f} MiB", flush=True)


def _print_totals(rows: list[dict]) -> None:
    ok = [r for r in rows if "error" not in r]
    for sv in sorted({r["solver"] for r in ok}):
        for o in sorted({r["oversub"] for r in ok}):
            _print_scaling([r for r in ok if r["solver"] == sv and r["oversub"] == o], sv, o)


def _print_scaling(ok: list[dict], solver: str, o: int) -> None:
    for n in sorted({r["jobs"] for r in ok}):
        sel = [r for r in ok if r["jobs"] == n]
        print(f"{n:>4} jobs {o}:1 {solver} all policies: wall "
              f"{sum(r['wall_s'] for r in sel):.1f} s, cpu {sum(r['cpu_s'] for r in sel):.1f} s")
    for p in sorted({r["policy"] for r in ok}):
        sel = sorted((r for r in ok if r["policy"] == p), key=lambda r: r["jobs"])
        if len(sel) > 1:
            k = np.polyfit(np.log([r["jobs"] for r in sel]),
                           np.log([r["cpu_s"] for r in sel]), 1)[0]
            print(f"{o}:1 {solver} {p}: CPU time ~ jobs^{k:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
