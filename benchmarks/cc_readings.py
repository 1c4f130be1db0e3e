"""Sensitivity of one-port DCQCN to the disputed firmware readings (docs/congestion-control.md).

Runs an n:1 incast of 20 MB flows on ``testbeds.star`` at 400G, 1 us cables, seed 1, NIC-default
DCQCN (byte counter 32767 x 64 B), once per reading, and prints the aggregate goodput over the whole run (share of line
rate), the median bottleneck queue and the PFC pauses.

Run: ``python benchmarks/cc_readings.py [--size 20MB] [--n 2 8]`` (about a minute).
"""

from __future__ import annotations

import argparse

import numpy as np

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, star
from netsim.scenario.traffic import Flow
from topologies.units import parse_bytes

READINGS = {
    "defaults": {},
    "dce_tcp_g_reading=new_weight": {"cc_params": {"dce_tcp_g_reading": "new_weight"}},
    "clamp_ati_reading=timer_only": {"cc_params": {"clamp_ati_reading": "timer_only"}},
    "byte counter in bytes (mstflint)": {"cc_params": {"rpg_byte_reset_unit_bytes": 1}},
    "byte counter off (HPCC ns-3)": {"cc_params": {"rpg_byte_reset_bytes": 0}},
    "ecn_mark_at=enqueue": {"ecn_mark_at": "enqueue"},
    "min_time_between_cnps_us=2": {"cc_params": {"min_time_between_cnps_us": 2}},
}


def one(n: int, size: int, **kw) -> tuple[float, float, int]:
    fab = star(n + 1, host_gbps=400, latency_ns=1000)
    flows = [Flow(f"h{i + 1}", "h0", size) for i in range(n)]
    res = simulate_packets(fab, flows, PacketConfig(cc="dcqcn", **kw), seed=1,
                           router=ShortestPathRouter(fab))
    fct_s = max(f.fct_ns for f in res.flows) * 1e-9
    agg = n * size * 8 / fct_s / (400e9 * 4096 / 4178)
    q = res.queue_bytes[:, fab.link_id("s0", "h0")]
    return agg, float(np.median(q)), res.pfc_pauses


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="20MB")
    ap.add_argument("--n", type=int, nargs="+", default=[2, 8])
    args = ap.parse_args(argv)
    size = parse_bytes(args.size)
    head = " | ".join(f"{n}:1 aggregate / median queue KB / pauses" for n in args.n)
    print(f"| reading | {head} |")
    print("|---|" + "---|" * len(args.n))
    for name, kw in READINGS.items():
        cells = []
        for n in args.n:
            agg, q, p = one(n, size, **kw)
            cells.append(f"{agg:.2f} / {q / 1e3:.0f} / {p}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
