"""Benchmark: the packet engine from 128 NIC endpoints up to the megascale fabric (issue 28, item 4).

Run: ``python benchmarks/bench_packet_scale.py [--endpoints 128,512,2048,12288] [--size 2MB]
[--repeat 3] [--repeat-above 2048] [--csv benchmarks/results/packet_scale28.csv]``, and
``--render docs/performance.md`` to put the CSV's table between the ``pscale28`` markers.

Traffic: one step of the default job's heaviest network traffic, a permutation of ``--size``
(2 MB) flows over every NIC of a clos3 fabric of ``endpoints / 8`` MegaScale servers (12,288 NICs
is the ``megascale`` preset itself; 200G NIC links, 400G switch links), NIC to NIC, the
default 4096 B MTU, PFC on, DCQCN, one QP per flow (``netsim.scenario.traffic.permutation``, seed 0). Each point runs in a fresh child
process: the packet engine (``simulate_packets``), then the flow engine (``simulate_flows``,
max-min) on the same flows. Per point: data packets, events, events per data packet, the packet
run's CPU (``time.process_time`` around the call), the child's max RSS (after the packet run,
before the flow run), the fabric build's CPU, makespan and mean FCT of both engines, the flow
engine's CPU, and the 1-minute load average. Points up to ``--repeat-above`` endpoints run
``--repeat`` times and keep the run with the least packet CPU; larger ones run once.
Prints the least-squares growth exponents (log-log against endpoints) of events, CPU and RSS.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

import numpy as np
from _child import run_child

from topologies.units import parse_bytes

_CHILD = r"""
import json, resource, sys, time
import numpy as np
from topologies import Clos3Spec, clos3, load_fabric
from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.build_mode import engine_build
from netsim.flow.engine import simulate_flows
from netsim.scenario.traffic import permutation
n, size = int(sys.argv[1]), int(sys.argv[2])
c0 = time.process_time()
fabric = load_fabric("megascale") if n == 12288 else clos3(Clos3Spec(name=f"clos3-{n}", servers=n // 8))
build_cpu_s = time.process_time() - c0
flows = permutation(fabric, size, np.random.default_rng(0))
c0 = time.process_time()
res = simulate_packets(fabric, flows, PacketConfig(cc="dcqcn", pfc=True), seed=0)
cpu_s = time.process_time() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
done = [f.completion_ns for f in res.flows if f.completion_ns is not None]
c0 = time.process_time()
fl = simulate_flows(fabric, flows, "maxmin", seed=0)
flow_cpu_s = time.process_time() - c0
fct = (fl.finish_ps - fl.start_ps).astype(np.float64) / 1e3  # ns
print(json.dumps({"endpoints": n, "nics": len(fabric.nics), "links": int(fabric.num_links),
    "flows": len(flows), "size_bytes": size, "engine": engine_build(),
    "data_packets": res.data_packets, "events": res.events, "cpu_s": cpu_s,
    "max_rss_MiB": rss, "build_cpu_s": build_cpu_s, "finished": len(done),
    "packet_makespan_us": max(done) / 1e3 if done else float("nan"),
    "packet_mean_fct_us": float(np.mean(done)) / 1e3 if done else float("nan"),
    "timeouts": res.timeouts, "pfc_pauses": res.pfc_pauses, "ecn_marks": res.ecn_marks,
    "flow_cpu_s": flow_cpu_s, "flow_makespan_us": float(fct.max()) / 1e3,
    "flow_mean_fct_us": float(fct.mean()) / 1e3}))
"""

COLS = ["endpoints", "links", "flows", "size_bytes", "engine", "reps", "data_packets", "events",
        "events_per_packet", "cpu_s", "cpu_s_runs", "max_rss_MiB", "build_cpu_s", "finished",
        "packet_makespan_us", "packet_mean_fct_us", "timeouts", "pfc_pauses", "ecn_marks", "flow_cpu_s", "flow_makespan_us",
        "flow_mean_fct_us", "loadavg_1min"]


def run_point(n: int, size: int, repeat: int) -> dict:
    """The run with the least packet CPU of ``repeat`` fresh children (every run's CPU kept)."""
    runs = [run_child(_CHILD, str(n), str(size), endpoints=n) for _ in range(max(1, repeat))]
    ok = [r for r in runs if "cpu_s" in r]
    if not ok:
        return runs[-1]
    best = min(ok, key=lambda r: r["cpu_s"])
    return {**best, "reps": len(ok), "events_per_packet": best["events"] / best["data_packets"],
            "cpu_s_runs": " ".join(f"{r['cpu_s']:.2f}" for r in ok),
            "loadavg_1min": os.getloadavg()[0]}


def growth(rows: list[dict]) -> dict[str, float]:
    """Least-squares exponent of events, packet CPU and RSS against endpoints (log-log)."""
    ok = [r for r in rows if "cpu_s" in r]
    if len(ok) < 2:
        return {}
    x = np.log([float(r["endpoints"]) for r in ok])
    return {k: float(np.polyfit(x, np.log([float(r[k]) for r in ok]), 1)[0])
            for k in ("events", "cpu_s", "max_rss_MiB")}


def _rss_per_endpoint(rows: list[dict]) -> float:
    """KiB of max RSS per endpoint beyond the smallest point (its fixed start-up excluded)."""
    lo, hi = rows[0], rows[-1]
    return ((float(hi["max_rss_MiB"]) - float(lo["max_rss_MiB"])) * 1024
            / (float(hi["endpoints"]) - float(lo["endpoints"])))


def render(doc: Path, path: Path) -> None:
    """The CSV as a table, with the growth exponents, between DOC's pscale28 markers."""
    from _results import render_between

    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    g = growth(rows)
    lines = ["| NIC endpoints | links | data packets | events | events / packet | packet CPU s "
             "(least) | CPU s of each run | CPU us / event | max RSS MiB | ECN marks | "
             "packet makespan us | flow makespan us | packet mean FCT us | flow mean FCT us | "
             "flow CPU s | load (1 min) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f = {k: float(v) for k, v in r.items() if k not in ("engine", "cpu_s_runs")}
        lines.append(
            f"| {f['endpoints']:,.0f} | {f['links']:,.0f} | {f['data_packets']:,.0f} | "
            f"{f['events']:,.0f} | {f['events_per_packet']:.2f} | {f['cpu_s']:.1f} | "
            f"{r['cpu_s_runs']} | {f['cpu_s'] / f['events'] * 1e6:.2f} | "
            f"{f['max_rss_MiB']:,.0f} | {f['ecn_marks']:,.0f} | {f['packet_makespan_us']:.1f} | "
            f"{f['flow_makespan_us']:.1f} | {f['packet_mean_fct_us']:.1f} | "
            f"{f['flow_mean_fct_us']:.1f} | {f['flow_cpu_s']:.2f} | {f['loadavg_1min']:.1f} |")
    if g:
        lines.append("")
        lines.append(f"Growth against endpoints (least squares, log-log, {len(rows)} points): "
                     f"events ~ n^{g['events']:.2f}, packet CPU ~ n^{g['cpu_s']:.2f}, max RSS ~ "
                     f"n^{g['max_rss_MiB']:.2f}; max RSS above the smallest point's: "
                     f"{_rss_per_endpoint(rows):.0f} KiB per endpoint. Engine build: "
                     f"{rows[-1]['engine']}.")
    render_between(doc, "\n".join(lines), "<!-- pscale28:begin -->", "<!-- pscale28:end -->")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--endpoints", default="128,512,2048,12288",
                   help="NIC counts (multiples of 8; 12288 is the megascale preset)")
    p.add_argument("--size", default="2MB", help="bytes per flow (default 2MB)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--repeat-above", type=int, default=2048,
                   help="points with more endpoints than this run once")
    p.add_argument("--csv", default="benchmarks/results/packet_scale28.csv")
    p.add_argument("--append", action="store_true", help="add the points to --csv's rows")
    p.add_argument("--render", default=None, metavar="DOC", help="render --csv into DOC, run nothing")
    args = p.parse_args(argv)
    if args.render:
        render(Path(args.render), Path(args.csv))
        return 0
    size = parse_bytes(args.size)
    path = Path(args.csv)
    rows = []
    if args.append and path.exists():
        with path.open() as fh:
            rows = list(csv.DictReader(fh))
    for n in (int(s) for s in args.endpoints.split(",")):
        if n % 8:
            raise SystemExit(f"--endpoints: {n} is not a multiple of 8 (NICs per server)")
        row = run_point(n, size, args.repeat if n <= args.repeat_above else 1)
        print(json.dumps(row), flush=True)
        if "cpu_s" in row:
            rows.append(row)
    rows.sort(key=lambda r: int(r["endpoints"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, COLS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    print(json.dumps({"growth": growth(rows)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
