"""DCQCN physics on one congested port (issue 17): n long flows (100 MB, the issue's "long")
into one receiver at 100G and 400G with the NIC-default parameters, and two flows sharing
one trunk.

Criteria from the issue: aggregate >= 0.9 of line rate and Jain >= 0.95 over the second half
of the period all flows are active, PFC pauses at least 10x fewer than with CC none, and the
bottleneck queue mostly (here: at least half the samples) between Kmin and Kmax. The default
run checks the PFC reduction on a short case; the matrix is slow. Where the engine misses a
criterion the case is ``xfail(strict=True)`` with the measured figure and its cause, and, where
the HPCC ns-3 reference was run on the same scenario (``tests/data/hpcc-ns3/physics.json.gz``,
``netsim/validation/physics_ref.py``), the reference's figure: a miss the reference shares is a property
of DCQCN with these parameters, not of this engine (docs/congestion-control.md, "NIC defaults
on one port").
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, dumbbell, star
from netsim.scenario.traffic import Flow

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


#: Byte-counter readings compared: the default (32767 x 64 B), mstflint's literal bytes
#: (32767 B) and the HPCC ns-3 reference's model (no byte counter).
READINGS = {"default": (), "bytes": (("rpg_byte_reset_unit_bytes", 1),),
            "off": (("rpg_byte_reset_bytes", 0),)}


@cache
def _long(n: int, gbps: int, cc: str, reading: str = "default") -> dict:
    kw = {"cc_params": dict(READINGS[reading])} if cc == "dcqcn" else {}
    return one_port(n, gbps, LONG_BYTES, cc, **kw)


def test_dcqcn_cuts_pfc_pauses_tenfold_in_an_8_to_1_incast():
    none = one_port(8, 400, 10_000_000, "none")
    dcqcn = one_port(8, 400, 10_000_000, "dcqcn")
    assert none["pauses"] > 0 and none["stuck"] == dcqcn["stuck"] == 0
    assert dcqcn["pauses"] * 10 <= none["pauses"]
    assert none["aggregate"] >= 0.99  # PFC keeps the port busy without CC


# Queue inside Kmin-Kmax (150 KB - 1.5 MB), share of the window, where ours misses 0.5: ours
# (NIC defaults, 100 MB flows, seed 1; `python tests/netsim/packet/test_cc_physics.py`) /
# HPCC ns-3 on the same scenario (tests/data/hpcc-ns3/physics.json.gz, RngRun 1-4).
_QUEUE = {
    (2, 100): "0.47; HPCC ns-3 re-paced 0.32-0.38 (plain 0.37-0.53, RngRun 1-4)",
    (2, 400): "0.37; HPCC ns-3 0.16-0.19, re-paced 0.14-0.19 (RngRun 1-4)",
    (8, 400): "0.34; HPCC ns-3 re-paced 0.28-0.30 (RngRun 1-4)",
}
_SHARED = ("the reference keeps the queue under Kmin as much of the time: with few flows or at "
           "400 G (Kmin is 3 us of line rate) DCQCN's sawtooth dips below Kmin")


@pytest.mark.slow
@pytest.mark.parametrize("gbps", [100, 400])
@pytest.mark.parametrize("n", [2, 8, 16])
def test_nic_default_dcqcn_keeps_the_port_busy_fair_and_pause_free(n, gbps):
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
        request.applymarker(pytest.mark.xfail(strict=True, reason=_QUEUE[(n, gbps)] + "; " + _SHARED))
    assert _long(n, gbps, "dcqcn")["queue_inside"] >= 0.5


@pytest.mark.slow
@pytest.mark.parametrize("n, gbps", [(2, 400), (16, 100)])
def test_the_reference_model_without_a_byte_counter_meets_them_too(n, gbps):
    """The HPCC ns-3 reference has no byte counter; ours without one meets the same criteria."""
    none, got = _long(n, gbps, "none"), _long(n, gbps, "dcqcn", "off")
    assert got["aggregate"] >= 0.9 and got["jain"] >= 0.95
    assert got["pauses"] * 10 <= none["pauses"]


@pytest.mark.slow
def test_the_byte_counter_read_in_bytes_loses_capacity():
    """mstflint's literal reading (32767 B, rpg_byte_reset_unit_bytes=1) fires every 0.65-1.3 us
    at 200-400 Gb/s and undoes each 4 us cut: the 2:1 incast at 400G stays below 0.9 of line
    rate (docs/congestion-control.md, "NIC defaults on one port"). The evidence for the unit."""
    assert _long(2, 400, "dcqcn", "bytes")["aggregate"] < 0.9


@cache
def _trunk(stagger_ps: int, reading: str = "default") -> float:
    """Aggregate of two 400G flows sharing one 400G trunk (the second starts *stagger_ps* later)."""
    fab = dumbbell(2, 2, host_gbps=400, core_gbps=400, latency_ns=1000)
    flows = [Flow("l0", "r0", LONG_BYTES), Flow("l1", "r1", LONG_BYTES, start_ps=stagger_ps)]
    cfg = PacketConfig(cc="dcqcn", cc_params=dict(READINGS[reading]))
    res = simulate_packets(fab, flows, cfg, seed=1, router=ShortestPathRouter(fab))
    rates = res.flow_rates_gbps()[_steady(res)]
    return rates.sum(axis=1).mean() / (400 * GOODPUT)


@pytest.mark.slow
@pytest.mark.parametrize("stagger_ps", [0, 20_000_000])
def test_two_flows_on_one_trunk_reach_line_rate(stagger_ps):
    assert _trunk(stagger_ps) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("stagger_ps", [0, 20_000_000])
def test_two_flows_on_one_trunk_reach_line_rate_without_the_byte_counter(stagger_ps):
    assert _trunk(stagger_ps, "off") >= 0.9


def _table(readings: list[str], rows: list[tuple[int, int]], trunk: bool = True) -> None:
    """Print the docs table (docs/congestion-control.md, "NIC defaults on one port")."""
    for n, gbps in rows:
        none = _long(n, gbps, "none")["pauses"]
        cells = []
        for r in readings:
            g = _long(n, gbps, "dcqcn", r)
            cells.append(f"{g['aggregate']:.2f} / {g['jain']:.2f} / {g['queue_inside']:.2f} / "
                         f"{g['pauses']}" + (f" vs {none}" if r == readings[0] else ""))
        print(f"| {gbps}G, {n} | " + " | ".join(cells) + " |", flush=True)
    if not trunk:
        return
    cells = [f"{_trunk(0, r):.2f} / {_trunk(20_000_000, r):.2f}" for r in readings]
    print("| 400G trunk, 2 (together / staggered 20 us) | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Measure the physics table (100 MB flows, seed 1).")
    ap.add_argument("--readings", default="default,bytes,off", help="of " + ", ".join(READINGS))
    ap.add_argument("--rows", default="2x100,8x100,16x100,2x400,8x400,16x400", help="NxGBPS,...")
    ap.add_argument("--no-trunk", action="store_true", help="skip the trunk row")
    a = ap.parse_args()
    _table(a.readings.split(","), [tuple(int(v) for v in r.split("x")) for r in a.rows.split(",")],
           trunk=not a.no_trunk)
