"""DCQCN fairness when flows start apart, per byte-counter reading (docs/congestion-control.md).

An n:1 incast of 100 MB flows on ``testbeds.star`` (1 us cables, seed 1) whose senders start
``--stagger-us`` apart; prints, per reading of ``rpg_byte_reset`` (default 32767 x 64 B, bytes,
off), the aggregate (share of line-rate goodput) and Jain's index over the second half of the
time all flows are active, the mean rate per flow and the PFC pauses.

Run: ``python benchmarks/dcqcn_stagger.py [--n 8] [--gbps 400] [--stagger-us 200]`` (about a
minute per reading on an idle core).
"""

from __future__ import annotations

import argparse

import numpy as np

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, star
from netsim.scenario.traffic import Flow

GOODPUT = 4096 / (4096 + 82)
READINGS = {"default (32767 x 64 B)": {}, "bytes (32767 B)": {"rpg_byte_reset_unit_bytes": 1},
            "off (HPCC ns-3)": {"rpg_byte_reset_bytes": 0}}


def one(n: int, gbps: int, stagger_ps: int, params: dict) -> str:
    fab = star(n + 1, host_gbps=gbps, latency_ns=1000)
    flows = [Flow(f"h{i + 1}", "h0", 100_000_000, start_ps=i * stagger_ps) for i in range(n)]
    res = simulate_packets(fab, flows, PacketConfig(cc="dcqcn", cc_params=params), seed=1,
                           router=ShortestPathRouter(fab))
    t = res.time_ns[1:]
    first = min(f.fct_ns for f in res.flows)
    idx = np.nonzero((t >= (n - 1) * stagger_ps / 1000) & (t <= first))[0]
    idx = idx[len(idx) // 2:]
    rates = res.flow_rates_gbps()[idx]
    m = rates.mean(axis=0)
    return (f"window {(t[idx[-1]] - t[idx[0]]) / 1e6:.2f} ms, aggregate "
            f"{rates.sum(axis=1).mean() / (gbps * GOODPUT):.3f}, Jain "
            f"{m.sum() ** 2 / (n * (m ** 2).sum()):.3f}, rates {np.round(m).astype(int).tolist()} "
            f"Gb/s, pauses {res.pfc_pauses}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--gbps", type=int, default=400)
    ap.add_argument("--stagger-us", type=float, default=200.0)
    a = ap.parse_args(argv)
    for name, params in READINGS.items():
        print(f"{name}: {one(a.n, a.gbps, int(a.stagger_us * 1e6), params)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
