"""Compare the congestion-control algorithms on one bottleneck (fluid) and in the packet engine.

``python -m netsim.validation.study fluid`` runs :func:`netsim.cc.fluid.simulate_bottleneck` for every
algorithm and N senders; ``python -m netsim.validation.study packet`` runs a 16:1 incast on a star and
4 staggered flows through one trunk (dumbbell) in :func:`netsim.packet.simulate_packets`. Both
print one row per run; the figures in ``docs/congestion-control.md`` come from these commands.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator

import numpy as np

from netsim.cc.base import CC_NAMES
from netsim.cc.fluid import simulate_bottleneck
from topologies.units import PS_PER_MS, PS_PER_US


def fluid_rows(ns=(2, 4, 8), seed: int = 0, duration_ms: float = 20.0) -> Iterator[dict]:
    """One row per (algorithm, N): utilization, Jain, queue over the second half of the run."""
    for cc in CC_NAMES:
        for n in ns:
            t0 = time.perf_counter()
            res = simulate_bottleneck(cc, n, capacity_bps=400e9, base_rtt_ps=5 * PS_PER_US,
                                      duration_ps=int(duration_ms * PS_PER_MS),
                                      rng=np.random.default_rng(seed),
                                      start_ps=[i * 200 * PS_PER_US for i in range(n)])
            half = int(duration_ms * PS_PER_MS / 2)
            q = res.queue_bytes[res.time_ps >= half]
            yield {"cc": cc, "n": n, "utilization": res.utilization(half),
                   "jain": res.jain_fairness(half), "queue_mean_KB": q.mean() / 1e3,
                   "queue_max_KB": q.max() / 1e3, "cnps": int(res.cnps.sum()),
                   "wall_s": time.perf_counter() - t0}


def _packet_case(case: str):
    from netsim.packet.testbeds import dumbbell, star
    from netsim.scenario.traffic import Flow

    if case == "incast":
        fab = star(17)
        flows = [Flow(f"h{i}", "h16", 2_000_000, 0, 1) for i in range(16)]
        return fab, flows, fab.link_id("s0", "h16")
    fab = dumbbell(4, 4)
    flows = [Flow(f"l{i}", f"r{i}", 20_000_000, i * 50 * PS_PER_US, 1) for i in range(4)]
    return fab, flows, fab.link_id("s0", "s1")


def packet_rows(cases=("incast", "dumbbell"), seed: int = 1,
                cc_params: dict | None = None) -> Iterator[dict]:
    """One row per (case, algorithm): FCTs, bottleneck queue, PFC, ECN and CNP counts."""
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter

    for case in cases:
        fab, flows, bottleneck = _packet_case(case)
        for cc in CC_NAMES:
            params = (cc_params or {}).get(cc, {})
            res = simulate_packets(fab, flows, PacketConfig(cc=cc, cc_params=params), seed=seed,
                                   router=ShortestPathRouter(fab))
            fct = np.array([f.fct_ns if f.fct_ns is not None else np.nan for f in res.flows])
            port = next(p for p in res.ports if p.link_id == bottleneck)
            yield {"case": case, "cc": cc, "completed": res.completed,
                   "fct_max_us": np.nanmax(fct) / 1e3, "fct_mean_us": np.nanmean(fct) / 1e3,
                   "queue_mean_KB": res.queue_bytes[:, bottleneck].mean() / 1e3,
                   "queue_max_KB": port.max_queue_bytes / 1e3, "pfc_pauses": res.pfc_pauses,
                   "ecn_marks": res.ecn_marks, "cnps": res.cnps, "timeouts": res.timeouts,
                   "wall_s": res.wall_s}


def _print(rows: Iterator[dict]) -> None:
    header = None
    for row in rows:
        if header is None:
            header = list(row)
            print("  ".join(f"{h:>13}" for h in header))
        cells = [f"{v:13.3f}" if isinstance(v, float) else f"{v!s:>13}" for v in row.values()]
        print("  ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m netsim.validation.study fluid|packet``."""
    ap = argparse.ArgumentParser(prog="python -m netsim.validation.study", description=__doc__)
    ap.add_argument("what", choices=("fluid", "packet"))
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    if args.what == "fluid":
        _print(fluid_rows(seed=0 if args.seed is None else args.seed))
    else:
        _print(packet_rows(seed=1 if args.seed is None else args.seed))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
