"""DCQCN physics on one congested port (issue 17): n long flows (100 MB, the issue's "long")
into one receiver at 100G and 400G with the NIC-default parameters, and two flows sharing
one trunk.

Criteria from the issue: aggregate >= 0.9 of line rate and Jain >= 0.95 over the second half
of the period all flows are active, PFC pauses at least 10x fewer than with CC none, and the
bottleneck queue mostly (here: at least half the samples) between Kmin and Kmax. The default
run checks the PFC reduction on a short case; the matrix is slow. Where the engine misses a
criterion the case is ``xfail(strict=True)`` with the measured figure and its cause, and, where
the HPCC ns-3 reference was run on the same scenario (``tests/data/hpcc-ns3/physics.json.gz``,
``netsim/cc/physics_ref.py``), the reference's figure: a miss the reference shares is a property
of DCQCN with these parameters, not of this engine (docs/congestion-control.md, "NIC defaults
on one port").
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, dumbbell, star
from netsim.traffic import Flow

GOODPUT = 4096 / (4096 + 82)  # payload share of the wire at the default MTU
LONG_BYTES = 100_000_000  # the "long (>= 100 MB)"


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


@cache
def _long(n: int, gbps: int, cc: str, byte_reset: int | None = None) -> dict:
    kw = {} if byte_reset is None else {"cc_params": {"rpg_byte_reset_bytes": byte_reset}}
    return one_port(n, gbps, LONG_BYTES, cc, **kw)


def test_dcqcn_cuts_pfc_pauses_tenfold_in_an_8_to_1_incast():
    none = one_port(8, 400, 10_000_000, "none")
    dcqcn = one_port(8, 400, 10_000_000, "dcqcn")
    assert none["pauses"] > 0 and none["stuck"] == dcqcn["stuck"] == 0
    assert dcqcn["pauses"] * 10 <= none["pauses"]
    assert none["aggregate"] >= 0.99  # PFC keeps the port busy without CC


# Measured with 100 MB flows, seed 1 (docs/congestion-control.md has the table and commands).
_BYTE_COUNTER = ("the 32767-byte byte counter (rpg_byte_reset, bytes per mstflint) fires every "
                 "0.65-1.3 us at 200-400 Gb/s, so recovery undoes each 4 us cut")
_MISSES = {
    (2, 400): f"aggregate 0.86 ({_BYTE_COUNTER}: the queue overshoots to 1.7 MB, CNPs for "
              "queued packets then cut both QPs below 65 Gb/s where the byte counter cannot act "
              "between cuts); HPCC ns-3 (no byte counter) 0.99-1.01, re-paced 0.98-1.01 "
              "(RngRun 1-4); ours with rpg_byte_reset_bytes=0 1.00",
    (16, 100): f"PFC pauses 8408 vs 18649 with CC none (2.2x): {_BYTE_COUNTER} and the start-up "
               "drives the port into a PFC-held 15-20 MB limit cycle; HPCC ns-3 with re-pacing "
               "0-393 PAUSE frames, the queue inside Kmin-Kmax 0.99-1.00 (RngRun 1-4); ours "
               "with rpg_byte_reset_bytes=0 4 pauses",
}
# Queue inside Kmin-Kmax (150 KB - 1.5 MB), share of the window: ours / HPCC ns-3.
_QUEUE = {
    (2, 100): "0.35; HPCC ns-3 0.37-0.53, re-paced 0.32-0.38 (RngRun 1-4)",
    (2, 400): "0.13; HPCC ns-3 0.16-0.19, re-paced 0.14-0.19 (RngRun 1-4)",
    (8, 400): "0.36; HPCC ns-3 re-paced 0.28-0.30 (RngRun 1-4)",
    (16, 400): "0.43; HPCC ns-3 re-paced 0.38-0.42 (RngRun 1-4)",
    (16, 100): "0.00 (PFC-held 15-20 MB, the byte counter: see the first test); HPCC ns-3 "
               "re-paced 0.99-1.00 (RngRun 1-4), ours with rpg_byte_reset_bytes=0 1.00",
}
_SHARED = ("the reference keeps the queue under Kmin as much of the time: with few flows or at "
           "400 G (Kmin is 3 us of line rate) DCQCN's sawtooth dips below Kmin")


@pytest.mark.slow
@pytest.mark.parametrize("gbps", [100, 400])
@pytest.mark.parametrize("n", [2, 8, 16])
def test_nic_default_dcqcn_keeps_the_port_busy_fair_and_pause_free(n, gbps, request):
    if (n, gbps) in _MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=_MISSES[(n, gbps)]))
    none, got = _long(n, gbps, "none"), _long(n, gbps, "dcqcn")
    assert got["stuck"] == 0
    assert got["aggregate"] >= 0.9
    assert got["jain"] >= 0.95
    assert got["pauses"] * 10 <= none["pauses"]


@pytest.mark.slow
@pytest.mark.parametrize("gbps", [100, 400])
@pytest.mark.parametrize("n", [2, 8, 16])
def test_nic_default_dcqcn_keeps_the_queue_between_kmin_and_kmax(n, gbps, request):
    if (n, gbps) in _QUEUE:
        why = _QUEUE[(n, gbps)] + ("" if (n, gbps) == (16, 100) else "; " + _SHARED)
        request.applymarker(pytest.mark.xfail(strict=True, reason=why))
    assert _long(n, gbps, "dcqcn")["queue_inside"] >= 0.5


@pytest.mark.slow
@pytest.mark.parametrize("n, gbps", [(2, 400), (16, 100)])
def test_without_the_byte_counter_the_nic_default_misses_close(n, gbps):
    """The two NIC-default misses above close when only the byte counter is off (the HPCC
    ns-3 reference has none): the byte counter is their cause."""
    none, got = _long(n, gbps, "none"), _long(n, gbps, "dcqcn", byte_reset=0)
    assert got["aggregate"] >= 0.9 and got["jain"] >= 0.95
    assert got["pauses"] * 10 <= none["pauses"]


def _trunk(stagger_ps: int, byte_reset: int | None = None) -> float:
    """Aggregate of two 400G flows sharing one 400G trunk (the second starts *stagger_ps* later)."""
    fab = dumbbell(2, 2, host_gbps=400, core_gbps=400, latency_ns=1000)
    flows = [Flow("l0", "r0", LONG_BYTES), Flow("l1", "r1", LONG_BYTES, start_ps=stagger_ps)]
    params = {} if byte_reset is None else {"rpg_byte_reset_bytes": byte_reset}
    res = simulate_packets(fab, flows, PacketConfig(cc="dcqcn", cc_params=params), seed=1,
                           router=ShortestPathRouter(fab))
    rates = res.flow_rates_gbps()[_steady(res)]
    return rates.sum(axis=1).mean() / (400 * GOODPUT)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="0.85 (together) and 0.72 (staggered by 20 us) of line "
                                       f"rate: {_BYTE_COUNTER}; HPCC ns-3 (together) 0.97-1.01, ours "
                                       "with rpg_byte_reset_bytes=0 1.00 and 1.00")
@pytest.mark.parametrize("stagger_ps", [0, 20_000_000])
def test_two_flows_on_one_trunk_reach_line_rate(stagger_ps):
    assert _trunk(stagger_ps) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("stagger_ps", [0, 20_000_000])
def test_two_flows_on_one_trunk_reach_line_rate_without_the_byte_counter(stagger_ps):
    assert _trunk(stagger_ps, byte_reset=0) >= 0.9
