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
from netsim.scenario.traffic import Flow  # noqa: E402

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


def test_dcqcn_incast_finishes_near_line_rate_not_at_the_rate_floor(incast_rows):
    """A QP cut to rpg_min_rate must speed up when DCQCN's timer raises its rate.

    The bottleneck drains 16 x 2 MB at 400G in ``ideal`` (wire bytes / line rate). If the
    pending departure kept the floor rate (1 Mb/s: 33 ms per 4 KB packet), the incast would
    take tens of ms; recovery timers (300 us) bound the extra time to well under 2x ideal.
    """
    npkts = -(-2_000_000 // 4096)
    wire = (npkts - 1) * (4096 + 82) + (2_000_000 - (npkts - 1) * 4096 + 82)
    ideal_ns = 16 * wire * 8 / 400
    res = incast_rows["dcqcn"]["res"]
    fct = max(f.fct_ns for f in res.flows)
    assert res.timeouts == 0
    assert ideal_ns <= fct < 2 * ideal_ns


@pytest.mark.parametrize("cc", ["swift", "hybrid"])
def test_window_below_ack_coalescing_asks_for_acks(run, cc):
    """A 2-packet window (ACKs are coalesced per 4) must not wait for the 4.3 s timeout.

    The requester sets AckReq on the packet that closes its window, so each round is: two
    back-to-back packets, store-and-forward of the second over two switches, three
    propagation delays, and the ACK back (three propagations + three 84 B serializations).
    """
    fab = dumbbell(1, 1, host_gbps=400, core_gbps=400, latency_ns=1000)
    n = 40
    res = run(fab, [Flow("l0", "r0", n * 4096)], cc=cc, cc_params={"max_cwnd_pkts": 2})
    ser_ns, ctrl_ns, prop_ns = (4096 + 82) * 8 / 400, 84 * 8 / 400, 1000
    round_ns = 4 * ser_ns + 3 * prop_ns + 3 * prop_ns + 3 * ctrl_ns
    expected_ns = (n // 2 - 1) * round_ns + 4 * ser_ns + 3 * prop_ns
    f = res.flows[0]
    assert f.timeouts == 0 and not f.failed
    assert f.fct_ns == pytest.approx(expected_ns, rel=1e-6)


def test_cnp_interval_follows_the_cc_parameter(run):
    """The notification point uses min_time_between_cnps_us unless cnp_interval_ps is set."""
    from netsim.packet import PacketConfig

    assert PacketConfig(cc="dcqcn").cnp_interval_for_cc() == 4_000_000  # ConnectX default 4 us
    slow = PacketConfig(cc="dcqcn", cc_params={"min_time_between_cnps_us": 50})
    assert slow.cnp_interval_for_cc() == 50_000_000
    assert slow.replace(cnp_interval_ps=7).cnp_interval_for_cc() == 7
    fab = star(5, host_gbps=400, latency_ns=1000)
    flows = [Flow(f"h{i}", "h4", 2_000_000) for i in range(4)]
    fast = run(fab, flows, cc="dcqcn")
    sparse = run(fab, flows, cc="dcqcn", cc_params={"min_time_between_cnps_us": 50})
    assert fast.completed and sparse.completed
    # at most one CNP per QP per 50 us over the run
    assert sparse.cnps <= 4 * (sparse.sim_time_ns / 50_000 + 1)
    assert sparse.cnps < fast.cnps


def test_cc_hops_passes_each_qps_switch_count_to_swift():
    from netsim.packet import PacketConfig
    from netsim.packet.build import _make_qps, build_sim
    from netsim.packet.testbeds import ShortestPathRouter

    fab = dumbbell(1, 1, host_gbps=400, core_gbps=400, latency_ns=1000)
    flows = [Flow("l0", "r0", 8192)]
    for on, hops in ((False, 0), (True, 2)):
        cfg = PacketConfig(cc="swift", cc_hops=on)
        sim = build_sim(fab, cfg, np.random.default_rng(0))
        (qp,), = _make_qps(sim, fab, flows, cfg, ShortestPathRouter(fab), np.random.default_rng(0))
        assert qp.cc.params.hops == hops
