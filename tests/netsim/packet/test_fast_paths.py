"""The packet engine's speed shortcuts change no result ("no result may depend on a speed
setting"): the idle-port fast path against the plain path, compared by a digest of every
reported figure (FCTs, completions, retransmissions, pause / ECN / CNP / NACK / timeout / drop
counters, every port's counters, the sampled queue and progress series), on scenarios that
exercise PFC (pause, refresh, headroom, watchdog), ECN at dequeue and enqueue, DCQCN, Swift,
hybrid, per-hop control, drops with go-back-N and adaptive retransmission, and link flaps
with ECMP repair (``netsim/packet/digest.py``)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.packet.digest import SCENARIOS, result_digest, run_scenario
from netsim.packet.testbeds import ShortestPathRouter, star
from netsim.scenario.traffic import Flow, permutation
from netsim.validation.invariants import check_conservation
from topologies import FatTreeSpec, fat_tree


@cache
def _run(name, fast_path):
    return run_scenario(name, fast_path=fast_path)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fast_path_changes_no_result(name):
    on, off = _run(name, True), _run(name, False)
    assert result_digest(on) == result_digest(off)
    assert [f.fct_ns for f in on.flows] == [f.fct_ns for f in off.flows]
    assert on.events == off.events  # the shortcut saves work per event, not events


def test_the_scenarios_exercise_what_they_claim():
    runs = {name: _run(name, True) for name in SCENARIOS}
    assert all(r.stuck == 0 for r in runs.values())
    assert min(runs[n].pfc_pauses for n in ("incast-pfc-none", "mixed-dcqcn-pfc")) > 0
    assert runs["incast-static-xoff-refresh"].pfc_counters["refreshes"] > 0
    assert runs["mixed-swift-watchdog"].pfc_counters["watchdog_storms"] > 0
    assert runs["incast-dcqcn-enqueue-ecn"].ecn_marks > 0 and runs["incast-pfc-dcqcn"].cnps > 0
    assert runs["incast-lossy-retransmit"].drops > 0 and runs["incast-lossy-retransmit"].timeouts > 0
    assert runs["incast-lossy-adaptive"].timeouts > 0
    assert runs["incast-hybrid-perhop"].ctrl_packets > 0
    assert runs["flap-repair-dcqcn"].drops_by_reason["link_down"] > 0
    assert runs["flap-repair-dcqcn"].pfc_counters["route_updates"] > 0
    for name in ("incast-lossy-retransmit", "flap-repair-dcqcn"):
        assert runs[name].nacks > 0 or runs[name].timeouts > 0


def test_a_different_result_changes_the_digest():
    # The digest is not blind: one flow's FCT (a longer flow) changes it.
    a = run_scenario("incast-pfc-none")
    fab = star(13, host_gbps=400, latency_ns=1000)
    flows = [Flow(f"h{i + 1}", "h0", 800_000 + (4096 if i == 0 else 0)) for i in range(12)]
    b = simulate_packets(fab, flows, PacketConfig(buffer_bytes=1_000_000), seed=1,
                         router=ShortestPathRouter(fab))
    assert result_digest(a) != result_digest(b)
    assert result_digest(a) == result_digest(run_scenario("incast-pfc-none"))


def test_packets_in_flight_are_counted_when_the_run_stops_early():
    # Only the first packet in flight of each link is on the event heap (the rest wait in the
    # link's FIFO); a run cut short must still count every one of them in the ledger.
    fab = fat_tree(FatTreeSpec(k=4, link_speed_gbps=100, link_latency_ns=2000))
    flows = permutation(fab, 400_000, np.random.default_rng(0))
    res = simulate_packets(fab, flows, PacketConfig(max_time_ps=15_000_000), seed=0)
    assert res.stuck > 0
    assert res.ledger["in_flight"] > len(fab.link_src) // 4  # several per busy link
    check_conservation(res.ledger)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_commit_window_changes_no_result(name):
    # A NIC commits paced packets up to commit_ps ahead, but never past anything that could
    # change what it sends: a PAUSE's effect, the next arrival at the NIC (its ACK/NAK leaves
    # at the next packet boundary), a CNP or priority ACK on its way back, a congestion-control
    # or retransmit timer of one of its QPs, a flow start, a link or route change.
    ref = _run(name, True)
    for window in (0, 250_000, 1_000_000):
        res = run_scenario(name, commit_ps=window)
        assert result_digest(res) == result_digest(ref), window
