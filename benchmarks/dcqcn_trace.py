"""Trace DCQCN's reaction point in an n:1 incast: every CNP, cut and increase event per QP.

The evidence behind docs/congestion-control.md ("NIC defaults on one port"): it runs an n:1
incast on ``testbeds.star`` (1 us cables, seed 1) with DCQCN and prints, per QP, each cut (rate
before -> after, target, alpha) and each increase event (phase, rate, target, the stage
counters T and BC), then the bottleneck queue and the per-flow rates every ``--every-us``.

Run: ``python benchmarks/dcqcn_trace.py --n 2 --gbps 400 --size 20MB --until-us 130``
(``--cc-param rpg_byte_reset_bytes=0`` to compare, ``--qp 1`` for one QP's events).
"""

from __future__ import annotations

import argparse

import numpy as np

from netsim.cc import dcqcn as D
from netsim.cc.params import parse_cc_params
from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, star
from netsim.scenario.traffic import Flow
from topologies.units import parse_bytes


def record(log: list) -> None:
    """Wrap ``Dcqcn.on_cnp``, ``_cut`` and ``_increase`` so each call appends to *log*."""
    on_cnp, cut, inc = D.Dcqcn.on_cnp, D.Dcqcn._cut, D.Dcqcn._increase

    def on_cnp_logged(self):
        log.append((self.clock.now_ps, id(self), "cnp", self.rate_bps, self.target_bps, None))
        on_cnp(self)

    def cut_logged(self, now):
        before = self.rate_bps
        cut(self, now)
        log.append((now, id(self), "cut", before, self.rate_bps, self.target_bps,
                    self._alpha.value_))

    def inc_logged(self):
        before = self.rate_bps
        inc(self)
        log.append((self.clock.now_ps, id(self), "inc:" + self.last_phase, before, self.rate_bps,
                    self.target_bps, self.stages))

    D.Dcqcn.on_cnp, D.Dcqcn._cut, D.Dcqcn._increase = on_cnp_logged, cut_logged, inc_logged


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2)
    ap.add_argument("--gbps", type=int, default=400)
    ap.add_argument("--size", default="20MB")
    ap.add_argument("--until-us", type=float, default=130.0, help="events up to this time")
    ap.add_argument("--qp", type=int, default=None, help="only this QP's events (0-based)")
    ap.add_argument("--every-us", type=float, default=25.0, help="queue/rate print period")
    ap.add_argument("--cc-param", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    log: list = []
    record(log)
    fab = star(args.n + 1, host_gbps=args.gbps, latency_ns=1000)
    flows = [Flow(f"h{i + 1}", "h0", parse_bytes(args.size)) for i in range(args.n)]
    cfg = PacketConfig(cc="dcqcn", cc_params=parse_cc_params(args.cc_param))
    res = simulate_packets(fab, flows, cfg, seed=1, router=ShortestPathRouter(fab))
    qps = {key: i for i, key in enumerate(dict.fromkeys(e[1] for e in log))}
    print(f"FCT ms {[round(f.fct_ns / 1e6, 3) for f in res.flows]}, PFC pauses {res.pfc_pauses}, "
          f"CNPs {sum(1 for e in log if e[2] == 'cnp')}")
    for e in log:
        t_us = e[0] / 1e6
        if t_us > args.until_us:
            break
        if e[2] == "cnp" or (args.qp is not None and qps[e[1]] != args.qp):
            continue
        extra = f"alpha {e[6]:.3f}" if e[2] == "cut" else f"(T, BC) {e[6]}"
        print(f"{t_us:10.3f} us qp{qps[e[1]]} {e[2]:13s} {e[3] / 1e9:8.3f} -> {e[4] / 1e9:8.3f} "
              f"Gb/s, target {e[5] / 1e9:8.3f}, {extra}")
    t_us = res.time_ns / 1e3
    q = res.queue_bytes[:, fab.link_id("s0", "h0")]
    rates = res.flow_rates_gbps()
    step = max(1, int(np.searchsorted(t_us, args.every_us)))
    for k in range(0, len(t_us), step):
        print(f"{t_us[k]:9.1f} us queue {q[k] / 1e3:8.1f} KB rates Gb/s "
              f"{np.round(rates[max(k - 1, 0)], 1).tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
