"""DCQCN physics on one congested port (issue 17): N long flows into one receiver at 100G and
400G with the NIC-default parameters, and two flows sharing one trunk.

Criteria from the issue: aggregate >= 0.9 of line rate and Jain >= 0.95 over the second half
of the period all flows are active, the bottleneck queue mostly between Kmin and Kmax, and PFC
pauses at least 10x fewer than with CC none. The default run checks the PFC reduction on a
short case; the full matrix is slow. Where the engine with the sourced firmware semantics
misses a criterion the case is marked ``xfail(strict=True)`` with the measured evidence
(``docs/congestion-control.md``, "NIC defaults on one port"), so a fix shows up as XPASS.
"""

from __future__ import annotations

import numpy as np
import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, dumbbell, star
from netsim.traffic import Flow

GOODPUT = 4096 / (4096 + 82)  # payload share of the wire at the default MTU


def _steady(res):
    """Sample indices of the second half of the period before the first flow finishes."""
    first = min(f.fct_ns for f in res.flows if f.fct_ns is not None)
    idx = np.nonzero(res.time_ns[1:] <= first)[0]
    return idx[len(idx) // 2:]


def one_port(n: int, gbps: int, size: int, cc: str, **kw) -> dict:
    """Figures of an n:1 incast on a star at *gbps* with 1 us cables."""
    fab = star(n + 1, host_gbps=gbps, latency_ns=1000)
    flows = [Flow(f"h{i + 1}", "h0", size) for i in range(n)]
    cfg = PacketConfig(cc=cc, **kw)
    res = simulate_packets(fab, flows, cfg, seed=1, router=ShortestPathRouter(fab))
    idx = _steady(res)
    rates = res.flow_rates_gbps()[idx]
    mean = rates.mean(axis=0)
    q = res.queue_bytes[1:, fab.link_id("s0", "h0")][idx]
    return {"aggregate": rates.sum(axis=1).mean() / (gbps * GOODPUT),
            "jain": mean.sum() ** 2 / (n * (mean ** 2).sum()),
            "queue_inside": np.mean((q >= cfg.ecn_kmin_bytes) & (q <= cfg.ecn_kmax_bytes)),
            "pauses": res.pfc_pauses, "stuck": res.stuck}


def test_dcqcn_cuts_pfc_pauses_tenfold_in_an_8_to_1_incast():
    none = one_port(8, 400, 10_000_000, "none")
    dcqcn = one_port(8, 400, 10_000_000, "dcqcn")
    assert none["pauses"] > 0 and none["stuck"] == dcqcn["stuck"] == 0
    assert dcqcn["pauses"] * 10 <= none["pauses"]
    assert none["aggregate"] >= 0.99  # PFC keeps the port busy without CC


# Measured with 20 MB flows (docs/congestion-control.md): aggregate / Jain / inside Kmin-Kmax.
_MISSES = {
    (2, 400): "0.44 of line rate: the start-up overshoot above Kmax drives both QPs to ~1 Gb/s "
              "and the 5/50 Mb/s AI/HAI steps take ms to recover",
    (16, 100): "queue oscillates 5-20 MB: after ~300 us without CNPs all QPs fast-recover to "
               "the unclamped pre-congestion target at once (clamp_tgt_rate 0)",
    (2, 100): "Jain 0.85 over the window", (8, 400): "queue inside Kmin-Kmax 31% of the time",
    (16, 400): "queue inside Kmin-Kmax 39%, PFC pauses only 7x fewer",
    (8, 100): "aggregate 0.92 but queue inside Kmin-Kmax 49%",
}


@pytest.mark.slow
@pytest.mark.parametrize("gbps", [100, 400])
@pytest.mark.parametrize("n", [2, 8, 16])
def test_nic_default_dcqcn_converges_on_one_port(n, gbps, request):
    if (n, gbps) in _MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_MISSES[(n, gbps)]))
    none = one_port(n, gbps, 20_000_000, "none")
    got = one_port(n, gbps, 20_000_000, "dcqcn")
    assert got["aggregate"] >= 0.9
    assert got["jain"] >= 0.95
    assert got["queue_inside"] >= 0.5
    assert got["pauses"] * 10 <= none["pauses"]


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="0.49 (together) and 0.44 (staggered) of line rate: "
                                       "the same post-overshoot undershoot as the 2:1 incast")
@pytest.mark.parametrize("stagger_ps", [0, 20_000_000])
def test_two_flows_on_one_trunk_reach_line_rate(stagger_ps):
    fab = dumbbell(2, 2, host_gbps=400, core_gbps=400, latency_ns=1000)
    flows = [Flow("l0", "r0", 20_000_000), Flow("l1", "r1", 20_000_000, start_ps=stagger_ps)]
    res = simulate_packets(fab, flows, PacketConfig(cc="dcqcn"), seed=1,
                           router=ShortestPathRouter(fab))
    rates = res.flow_rates_gbps()[_steady(res)]
    assert rates.sum(axis=1).mean() / (400 * GOODPUT) >= 0.9
