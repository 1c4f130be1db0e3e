"""Congestion control inside the packet engine (netsim.cc algorithms driven by real packets).

Shared with the congestion-control owner: these check the engine's side of the contract
(pacing at ``rate_bps``, windows, CNPs through the notification point, ECN echo on ACKs).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("netsim.cc")

from netsim.packet.testbeds import dumbbell, star  # noqa: E402
from netsim.traffic import Flow  # noqa: E402

GOODPUT_400G = 400 * 4096 / (4096 + 82)  # Gb/s of payload at 400G line rate


def _jain(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(x.sum() ** 2 / (len(x) * (x**2).sum()))


def test_dcqcn_shares_a_bottleneck_fairly_and_fully(run):
    """4 staggered long flows through one 400G trunk with firmware-default DCQCN."""
    fab = dumbbell(4, 4, host_gbps=400, core_gbps=400, latency_ns=1000)
    flows = [Flow(f"l{i}", f"r{i}", 30_000_000, i * 20_000_000) for i in range(4)]
    res = run(fab, flows, cc="dcqcn", sample_interval_ps=10_000_000)
    assert res.completed and res.drops == 0 and res.cnps > 0
    t = res.time_ns[1:]
    first_done = min(f.start_ns + f.fct_ns for f in res.flows)
    steady = (t > 1_000_000) & (t < first_done - 10_000)  # after convergence, all 4 active
    assert steady.sum() >= 50
    rates = res.flow_rates_gbps()[steady].mean(axis=0)
    assert rates.sum() / GOODPUT_400G >= 0.90
    assert _jain(rates) >= 0.95
    q = res.queue_bytes[1:, fab.link_id("s0", "s1")][steady]
    cfg_kmax = 1_500_000
    assert q.max() < cfg_kmax  # bounded below the marking ramp's top
    assert q.mean() < 150_000 * 2  # and hovering around Kmin, not at the PFC threshold


@pytest.fixture(scope="module")
def incast_rows():
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter

    fab = star(17, host_gbps=400, latency_ns=1000)
    # 2 MB each: at 1 MB the senders put everything on the wire (21 us at 400G) before
    # DCQCN's 4 us cuts bite, and it would tie with none by physics, not by a bug.
    flows = [Flow(f"h{i}", "h16", 2_000_000) for i in range(16)]
    port = fab.link_id("s0", "h16")
    rows = {}
    for cc in ("none", "dcqcn", "swift", "hybrid"):
        res = simulate_packets(fab, flows, PacketConfig(cc=cc), seed=1,
                               router=ShortestPathRouter(fab))
        rows[cc] = {"res": res, "q_mean": float(res.queue_bytes[:, port].mean()),
                    "fct_mean": float(np.mean([f.fct_ns for f in res.flows])),
                    "pauses": res.pfc_pauses, "cnps": res.cnps}
    return rows


def test_incast_every_cc_is_lossless_and_completes(incast_rows):
    for cc, row in incast_rows.items():
        res = row["res"]
        assert res.completed and res.drops == 0, cc
        assert res.ledger["delivered_bytes"] == 16 * 2_000_000


def test_incast_cc_modes_are_measurably_different(incast_rows):
    """A CC mode that changed nothing would tie with another on every metric."""
    r = incast_rows
    for a, b in itertools.combinations(r, 2):
        diffs = [abs(r[a][k] - r[b][k]) / max(r[a][k], r[b][k], 1) for k in ("q_mean", "fct_mean", "pauses")]
        assert max(diffs) > 0.05, f"{a} and {b} look the same: {diffs}"
    assert r["none"]["pauses"] > 0 and r["none"]["cnps"] == 0
    assert r["dcqcn"]["cnps"] > 0 and r["swift"]["cnps"] == 0
    # reacting to congestion keeps the incast queue shorter than line-rate senders held by PFC
    for cc in ("dcqcn", "swift", "hybrid"):
        assert r[cc]["q_mean"] < r["none"]["q_mean"], cc
        assert r[cc]["pauses"] <= r["none"]["pauses"], cc
