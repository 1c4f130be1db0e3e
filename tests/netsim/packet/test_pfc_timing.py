"""PFC per IEEE 802.1Qbb: timing independent of the engine's speed knobs, quanta expiry and
refresh, XON re-checked when the shared buffer frees (the lost-RESUME wedge of issue 17)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.testbeds import ShortestPathRouter, hol_layout, star
from netsim.scenario.traffic import Flow, permutation
from topologies import FatTreeSpec, fat_tree

WINDOWS_PS = (0, 250_000, 500_000, 1_000_000)
BUFFER = 1_000_000  # a small shared buffer so that PFC acts: XOFF near 125 KB per ingress


def _incast(n=16, size=400_000):
    fab = star(n + 1, host_gbps=400, latency_ns=1000)
    return fab, [Flow(f"h{i + 1}", "h0", size) for i in range(n)]


def _hol():
    fab = hol_layout(3, host_gbps=100, trunk_gbps=400)
    flows = [Flow("a", "d", 1_000_000), Flow("b", "c", 1_000_000)]
    flows += [Flow(f"e{i}", "c", 1_000_000) for i in range(3)]
    return fab, flows


def _figures(res):
    return {"pauses": res.pfc_pauses,
            "headroom": max((p.headroom_max_bytes for p in res.ports), default=0),
            "fct": [f.fct_ns for f in res.flows]}


@pytest.mark.parametrize("scenario", [_incast, _hol])
def test_pfc_results_do_not_depend_on_commit_window_or_fast_path(scenario):
    fab, flows = scenario()
    router = ShortestPathRouter(fab)
    runs = [simulate_packets(fab, flows, PacketConfig(commit_ps=w, buffer_bytes=BUFFER), seed=1, router=router)
            for w in WINDOWS_PS]
    runs.append(simulate_packets(fab, flows, PacketConfig(fast_path=False, buffer_bytes=BUFFER), seed=1, router=router))
    ref = _figures(runs[0])
    assert ref["pauses"] > 0 and ref["headroom"] > 0  # the scenario exercises PFC
    for res in runs[1:]:
        got = _figures(res)
        assert got["pauses"] == pytest.approx(ref["pauses"], rel=0.01)
        assert got["headroom"] == pytest.approx(ref["headroom"], rel=0.01)
        assert np.allclose(got["fct"], ref["fct"], rtol=0.01)
        assert res.drops == 0 and res.stuck == 0


def test_headroom_covers_the_8021qbb_worst_case():
    # 16:1 at 400G, 1 us cables: a PAUSE waits for the frame in flight, crosses the cable and
    # acts after 905 quanta; the SONiC headroom must hold what arrives meanwhile.
    fab, flows = _incast()
    res = simulate_packets(fab, flows, PacketConfig(buffer_bytes=BUFFER), seed=1,
                           router=ShortestPathRouter(fab))
    used = max(p.headroom_max_bytes for p in res.ports)
    cable = 400e9 * 1e-6 / 8  # bytes on a 1 us cable at 400G
    assert used > 2 * cable  # at least the round trip of the cable is in flight
    assert res.drops_by_reason["headroom"] == 0


def test_lost_resume_no_longer_wedges_the_fabric():
    # Issue 17 item 9: fat tree k=8, 400G, 1 us links, 2 MB permutation, CC none, 480 KB
    # buffer, seed 1. XON was checked only when a packet of the paused ingress left; seven
    # links stayed paused for 10 s and 4 flows never finished. Now XON is re-checked on every
    # release at the switch.
    fab = fat_tree(FatTreeSpec(k=8, link_speed_gbps=400, link_latency_ns=1000))
    flows = permutation(fab, 2_000_000, np.random.default_rng(1))
    res = simulate_packets(fab, flows, PacketConfig(cc="none", buffer_bytes=480_000), seed=1)
    assert res.stuck == 0
    assert all(f.fct_ns is not None or f.failed for f in res.flows)
    assert not [p for p in res.paused_at_end if p["reason"] == "lost_resume"]
    assert res.pfc_pauses == res.pfc_resumes + len(res.paused_at_end)


def test_a_run_ending_with_unfinished_flows_says_so():
    fab, flows = _incast(8, 2_000_000)
    res = simulate_packets(fab, flows, PacketConfig(max_time_ps=60_000_000), seed=1,
                           router=ShortestPathRouter(fab))
    assert res.stuck == 8
    doc = res.to_json()
    assert doc["stuck"] == 8 and "paused_at_end" in doc
    warning = res.stuck_warning()
    assert warning.startswith("warning: 8 flow(s) unfinished")
    for p in res.paused_at_end:
        assert p["reason"] in ("cycle", "lost_resume", "congested")
        assert f"{p['src']}->{p['dst']}" in warning or len(res.paused_at_end) > 8


def test_pause_expires_without_refresh_and_is_refreshed_otherwise():
    # A short pause time (1000 quanta = 1.28 us at 400G) on a long 16:1 incast.
    fab, flows = _incast(16, 1_000_000)
    router = ShortestPathRouter(fab)
    quiet = simulate_packets(fab, flows, PacketConfig(pfc_pause_quanta=1000, pfc_refresh=False,
                                                           buffer_bytes=BUFFER),
                             seed=1, router=router)
    kept = simulate_packets(fab, flows, PacketConfig(pfc_pause_quanta=1000, buffer_bytes=BUFFER), seed=1, router=router)
    assert quiet.pfc_counters["expiries"] > 0
    assert kept.pfc_counters["refreshes"] > 0
    assert kept.pfc_counters["expiries"] < quiet.pfc_counters["expiries"]
    # without refresh an expired pause lets data into a full ingress: headroom overflows
    assert max(p.headroom_max_bytes for p in quiet.ports) >= max(
        p.headroom_max_bytes for p in kept.ports)


def test_acks_ride_the_qps_class_and_queue_behind_its_data():
    # h1..h8 -> h0 fill the port s0 -> h0; the ACKs of h0 -> h9 cross that port. In the QP's
    # class (ConnectX) they wait behind the incast; in a strict-priority class they do not.
    fab = star(10, host_gbps=400, latency_ns=1000)
    flows = [Flow(f"h{i}", "h0", 2_000_000) for i in range(1, 9)] + [Flow("h0", "h9", 400_000)]
    router = ShortestPathRouter(fab)
    lag = {}
    for ack_class in ("qp", "priority"):
        res = simulate_packets(fab, flows, PacketConfig(ack_class=ack_class), seed=1, router=router)
        f = res.flows[-1]
        lag[ack_class] = f.completion_ns - f.fct_ns  # last byte in -> its ACK at the sender
        assert res.stuck == 0 and res.pfc_counters["ctrl_drops"] == 0
    assert lag["priority"] < 5_000  # a few us: propagation and serialization
    assert lag["qp"] > 10 * lag["priority"]  # queued behind MBs of incast data
