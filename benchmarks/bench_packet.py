"""Benchmark of the packet engine against a bare simpy timeout loop in the same process.

Reference scenario (issue 3): a permutation of 2 MB flows on fat-tree-k8 (128 hosts), 400G
links, 4096 B MTU, lossless (PFC on), DCQCN. Prints data packets and events per wall second
and per CPU second (the steadier figure on a shared machine), events per packet, and the
ratio of the engine's event rate to simpy's; ``--scaling`` adds a curve over flow sizes
(0.25x to 2x the size: cost should be linear in packets) and ``--memory`` the peak traced
Python memory of each run, measured in a separate untimed run (it should stay flat as flows
grow: the engine holds the packets in flight, not the flows' bytes).

Run: ``python benchmarks/bench_packet.py [--cc dcqcn] [--size 2MB] [--scaling] [--memory]
[--json]`` (about a minute on 2 shared cores). ``--profile`` prints pyinstrument's top entries.
``--baseline REF`` also runs the same scenario on git revision REF (exported to a temporary
directory), alternating fresh child processes of both versions ``--reps`` times, and prints
the median packets per CPU second of each and their ratio: before/after in one run, on a
loaded machine both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import simpy

from netsim.packet import PacketConfig, simulate_packets
from netsim.scenario.traffic import permutation
from topologies import FatTreeSpec, fat_tree
from topologies.units import parse_bytes


def simpy_rate(n_events: int = 300_000) -> tuple[float, float]:
    """Events per wall second and per CPU second of ``yield env.timeout(1)`` in a process."""
    env = simpy.Environment()

    def ticker(env):
        while True:
            yield env.timeout(1)

    env.process(ticker(env))
    t0, c0 = time.perf_counter(), time.process_time()
    env.run(until=n_events)
    return n_events / (time.perf_counter() - t0), n_events / (time.process_time() - c0)


def engine_run(fabric, size: int, cc: str, seed: int = 0):
    flows = permutation(fabric, size, np.random.default_rng(seed))
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate_packets(fabric, flows, PacketConfig(cc=cc, pfc=True), seed=seed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return res, wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="dcqcn", choices=["none", "dcqcn", "swift", "hybrid"])
    ap.add_argument("--size", default="2MB", help="bytes per flow (default 2MB)")
    ap.add_argument("--k", type=int, default=8, help="fat-tree radix (default 8: 128 hosts)")
    ap.add_argument("--gbps", type=float, default=400.0, help="link speed (default 400)")
    ap.add_argument("--scaling", action="store_true",
                    help="also run 0.25x, 0.5x and 2x the size")
    ap.add_argument("--memory", action="store_true",
                    help="peak traced memory of each run (a separate, untimed run)")
    ap.add_argument("--profile", action="store_true", help="print pyinstrument's profile")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--baseline", default=None, metavar="REF",
                    help="compare with git revision REF side by side (child processes)")
    ap.add_argument("--reps", type=int, default=3, help="runs per version with --baseline")
    ap.add_argument("--htsim", default=None, metavar="BIN",
                    help="path of htsim's htsim_roce: run benchmarks/bench_htsim.py (matched "
                         "settings, whole processes) on the same permutation, per --hosts")
    ap.add_argument("--hosts", default="128,432,1024",
                    help="fat-tree sizes for --htsim (K^3/4 hosts: 128, 432, 1024)")
    args = ap.parse_args(argv)
    if args.htsim:  # the like-for-like comparison lives in bench_htsim.py (issue 28)
        from bench_htsim import main as htsim_main

        return htsim_main(["--htsim", args.htsim, "--hosts", str(args.hosts),
                           "--reps", str(max(args.reps, 3)), "--size", args.size])
    if args.baseline:
        return compare_with(args)

    fabric = fat_tree(FatTreeSpec(k=args.k, link_speed_gbps=args.gbps))
    size = parse_bytes(args.size)
    simpy_wall, simpy_cpu = simpy_rate()
    if args.profile:
        from pyinstrument import Profiler

        prof = Profiler()
        prof.start()
    res, wall, cpu = engine_run(fabric, size, args.cc)
    if args.profile:
        prof.stop()
        print(prof.output_text(unicode=False, color=False, show_all=False))
    rows = [_row(res, wall, cpu, size, simpy_wall, simpy_cpu)]
    if args.scaling:
        for frac in (0.25, 0.5, 2.0):
            r, w, c = engine_run(fabric, int(size * frac), args.cc)
            rows.append(_row(r, w, c, int(size * frac), simpy_wall, simpy_cpu))
        rows.sort(key=lambda r: r["size_B"])
    if args.memory:
        for r in rows:
            tracemalloc.start()
            engine_run(fabric, r["size_B"], args.cc)
            r["peak_MiB"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
    out = {"scenario": f"permutation on fat-tree-k{args.k} ({len(fabric.nics)} hosts), "
                       f"{args.gbps:g}G, MTU 4096, PFC on, cc={args.cc}",
           "simpy_events_per_wall_s": simpy_wall, "simpy_events_per_cpu_s": simpy_cpu,
           "runs": rows}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(out["scenario"])
    print(f"bare simpy timeout loop: {simpy_wall:,.0f} events/wall s, {simpy_cpu:,.0f} events/CPU s")
    hdr = ("size_B", "data_pkts", "events", "ev/pkt", "wall_s", "cpu_s", "pkts/wall_s",
           "pkts/cpu_s", "events/cpu_s", "ratio_to_simpy", "all_done")
    hdr += ("peak_MiB",) if args.memory else ()
    print("  ".join(f"{h:>12}" for h in hdr))
    for r in rows:
        print("  ".join(f"{r[h]:>12,.3f}" if isinstance(r[h], float) else f"{r[h]!s:>12}"
                        for h in hdr))
    return 0


_CHILD = """
import json, sys, time
import numpy as np
from netsim.packet import PacketConfig, simulate_packets
from netsim.scenario.traffic import permutation
from topologies import FatTreeSpec, fat_tree
k, gbps, size, cc = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fabric = fat_tree(FatTreeSpec(k=k, link_speed_gbps=gbps))
flows = permutation(fabric, size, np.random.default_rng(0))
c0 = time.process_time()
res = simulate_packets(fabric, flows, PacketConfig(cc=cc, pfc=True), seed=0)
cpu = time.process_time() - c0
print(json.dumps({"pkts": res.data_packets, "events": res.events, "cpu_s": cpu,
                  "done": res.completed}))
"""


def _child(root: str, args, size: int) -> dict:
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(args.k), str(args.gbps), str(size),
                          args.cc], capture_output=True, text=True, env=env, check=True, cwd=root)
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare_with(args) -> int:
    """Packets per CPU second of this tree and of ``args.baseline``, alternating children."""
    here = str(Path(__file__).resolve().parents[1])
    size = parse_bytes(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        tar = subprocess.run(["git", "-C", here, "archive", args.baseline], capture_output=True,
                             check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        runs: dict[str, list[dict]] = {"baseline": [], "this tree": []}
        for _ in range(args.reps):
            runs["baseline"].append(_child(tmp, args, size))
            runs["this tree"].append(_child(here, args, size))
    rate = {k: statistics.median(r["pkts"] / r["cpu_s"] for r in v) for k, v in runs.items()}
    out = {"scenario": f"permutation of {args.size} on fat-tree-k{args.k}, {args.gbps:g}G, "
                       f"cc={args.cc}", "baseline": args.baseline, "reps": args.reps,
           "pkts_per_cpu_s": rate, "events_per_pkt": {
               k: v[0]["events"] / v[0]["pkts"] for k, v in runs.items()},
           "ratio_this_to_baseline": rate["this tree"] / rate["baseline"]}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(out["scenario"], f"(median of {args.reps} alternating child runs per version)")
    for k in runs:
        print(f"  {k:>10}: {rate[k]:,.0f} data packets / CPU s, "
              f"{out['events_per_pkt'][k]:.2f} events / packet")
    print(f"  ratio this tree / {args.baseline}: {out['ratio_this_to_baseline']:.3f}")
    return 0


def _row(res, wall, cpu, size, simpy_wall, simpy_cpu) -> dict:
    return {"size_B": size, "data_pkts": res.data_packets, "events": res.events,
            "ev/pkt": res.events / res.data_packets, "wall_s": wall, "cpu_s": cpu,
            "pkts/wall_s": res.data_packets / wall, "pkts/cpu_s": res.data_packets / cpu,
            "events/cpu_s": res.events / cpu,
            "ratio_to_simpy": (res.events / cpu) / simpy_cpu,
            "all_done": res.completed}


if __name__ == "__main__":
    raise SystemExit(main())
