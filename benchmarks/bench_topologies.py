"""Benchmark: build megascale and a 4x larger clos3, route 1,000,000 flows; time and peak memory.

Run: ``python benchmarks/bench_topologies.py [--flows N] [--json]``. Prints, per fabric, the
array build time (best of --repeat), the (lazy) networkx graph build time (once), the time to route N random NIC-to-NIC
flows (no failures, and with 1% of the ToR uplinks failed), and the peak traced memory of each
step (tracemalloc on a second, untimed run; numpy reports its buffers to it), the growth of
max RSS while the graph is built, and the process's max RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc

import numpy as np

from topologies import load_fabric
from topologies.routing import Router, qp_udp_sport

REPEAT = 3  # the machine is shared: report the best of a few runs of each timed step


def _timed(fn, repeat: int | None = None):
    """Run ``fn`` a few times; return its result, the best wall time and that run's CPU time.

    CPU time (``process_time``) is the steadier figure on a shared machine: other users'
    load stretches wall time but not the work this process does.
    """
    best = (float("inf"), 0.0)
    out = None
    for _ in range(repeat or REPEAT):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        run = (time.perf_counter() - t0, time.process_time() - c0)
        best = min(best, run)
    return out, best[0], best[1]


def _peak_mib(fn) -> float:
    """Peak traced memory of a second run of ``fn`` (tracing slows it, so it is not timed)."""
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2 ** 20


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(name: str, flows: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    fabric, t_build, c_build = _timed(lambda: load_fabric(name))
    rss0 = _rss_mib()
    _, t_graph, c_graph = _timed(lambda: fabric._build_graph(), repeat=1)
    rss_graph = _rss_mib() - rss0  # growth of max RSS: an upper bound on what the graph holds
    n = len(fabric.nics)
    src = rng.integers(0, n, flows)
    dst = (src + rng.integers(1, n, flows)) % n
    sport = qp_udp_sport(rng.integers(1, 1 << 24, flows), rng.integers(1, 1 << 24, flows))
    router = Router(fabric, seed=seed)
    (_, links), t_route, c_route = _timed(lambda: router.route_many(src, dst, sport))
    ups = fabric.wiring.tor_up.ravel()
    failed = rng.choice(ups, max(1, len(ups) // 100), replace=False)
    frouter, t_fprep, _ = _timed(lambda: Router(fabric, seed=seed, failed_links=failed))
    _, t_froute, c_froute = _timed(lambda: frouter.route_many(src, dst, sport))
    return {
        "fabric": name, "gpus": len(fabric.gpus), "directed_links": fabric.num_links,
        "build_s": t_build, "build_cpu_s": c_build,
        "build_peak_MiB": _peak_mib(lambda: load_fabric(name)),
        "graph_s": t_graph, "graph_cpu_s": c_graph, "graph_rss_growth_MiB": rss_graph,
        "flows": flows, "route_s": t_route, "route_cpu_s": c_route,
        "route_peak_MiB": _peak_mib(lambda: router.route_many(src, dst, sport)),
        "links_per_flow": links.size / flows,
        "failed_links": len(failed), "failed_router_s": t_fprep, "route_failed_s": t_froute,
        "route_failed_cpu_s": c_froute,
        "route_failed_peak_MiB": _peak_mib(lambda: frouter.route_many(src, dst, sport)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=1_000_000)
    ap.add_argument("--fabrics", nargs="+", default=["megascale", "megascale-4x"])
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs per step")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    global REPEAT
    REPEAT = args.repeat
    rows = [bench(f, args.flows) for f in args.fabrics]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        print(json.dumps({"results": rows, "max_rss_MiB": rss}, indent=2))
        return
    for r in rows:
        print(f"{r['fabric']}: {r['gpus']} GPUs, {r['directed_links']} directed links")
        print(f"  build arrays    {r['build_s']:6.2f} s (cpu {r['build_cpu_s']:5.2f} s)  "
              f"peak {r['build_peak_MiB']:6.1f} MiB")
        print(f"  networkx graph  {r['graph_s']:6.2f} s (cpu {r['graph_cpu_s']:5.2f} s)  "
              f"max RSS +{r['graph_rss_growth_MiB']:.1f} MiB")
        print(f"  route {r['flows']} flows {r['route_s']:6.2f} s (cpu {r['route_cpu_s']:5.2f} s)"
              f"  peak {r['route_peak_MiB']:6.1f} MiB, {r['links_per_flow']:.2f} links/flow, "
              f"{r['flows'] / r['route_s'] / 1e6:.2f} M flows/s")
        print(f"  route, {r['failed_links']} ToR uplinks failed {r['route_failed_s']:6.2f} s "
              f"(cpu {r['route_failed_cpu_s']:5.2f} s)  peak {r['route_failed_peak_MiB']:6.1f} "
              f"MiB, router setup {r['failed_router_s']:.2f} s")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(f"scaling {b['gpus'] / a['gpus']:.0f}x GPUs: build x{b['build_s'] / a['build_s']:.1f}"
              f", graph x{b['graph_s'] / a['graph_s']:.1f}, route x{b['route_s'] / a['route_s']:.1f}")
    print(f"max RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
