"""Lossless vs lossy incast, head-of-line blocking and PFC deadlock detection."""

from __future__ import annotations

import pytest

from netsim.packet import PacketConfig
from netsim.packet.telemetry import find_pause_cycle
from netsim.packet.testbeds import ClockwiseRouter, dumbbell, hol_layout, ring, star
from netsim.scenario.traffic import Flow
from netsim.validation.invariants import check_conservation

SMALL = dict(buffer_bytes=2_000_000, ib_timeout=8)  # 2 MB switch, 1 ms retransmit timer


def _incast(run, pfc):
    fab = star(17, host_gbps=400, latency_ns=500)
    flows = [Flow(f"h{i}", "h16", 200_000) for i in range(16)]
    return run(fab, flows, pfc=pfc, **SMALL), flows


def test_incast_with_pfc_is_lossless_and_pauses(run):
    res, flows = _incast(run, True)
    assert res.drops == 0
    assert res.pfc_pauses > 0
    assert all(f.fct_ns is not None and f.retransmits == 0 for f in res.flows)
    check_conservation(res.ledger)
    # Every pause was answered by a resume, and the senders' ports record time paused.
    assert res.pfc_resumes == res.pfc_pauses
    assert sum(p.paused_ns for p in res.ports) > 0
    # 16 x 200 kB through one 400G port: the last byte cannot arrive before the port drained it.
    wire = 16 * 200_000 * (4096 + 82) / 4096 * 8 / 400e9 * 1e9
    assert max(f.fct_ns for f in res.flows) >= wire


def test_incast_without_pfc_drops_and_go_back_n_recovers(run):
    res, flows = _incast(run, False)
    assert res.drops > 0 and res.pfc_pauses == 0
    assert all(not f.failed and f.delivered_bytes == f.bytes for f in res.flows)
    assert sum(f.retransmits for f in res.flows) > 0
    assert res.nacks + res.timeouts > 0
    check_conservation(res.ledger)
    assert res.ledger["retransmitted"] == sum(f.retransmits for f in res.flows)


def _hol(run, pfc):
    fab = hol_layout(3, host_gbps=100, trunk_gbps=400, latency_ns=500)
    hot = [Flow("b", "c", 3_000_000)] + [Flow(f"e{i}", "c", 3_000_000) for i in range(3)]
    victim = Flow("a", "d", 1_000_000, start_ps=20_000_000)
    return run(fab, hot + [victim], pfc=pfc, buffer_bytes=1_000_000, ecn=False, ib_timeout=8)


def test_head_of_line_blocking_hurts_the_victim_only_with_pfc(run):
    line = 100 * 4096 / (4096 + 82)  # Gb/s of goodput at 100G
    lossy = _hol(run, False).flows[-1]
    lossless_res = _hol(run, True)
    lossless = lossless_res.flows[-1]
    assert lossy.throughput_gbps == pytest.approx(line, rel=0.03)  # victim unaffected
    assert lossless.throughput_gbps < 0.8 * line  # victim behind pauses on the shared trunk
    victims = [v["flow"] for v in lossless_res.hol_victims]
    assert len(lossless_res.flows) - 1 in victims
    trunk = next(p for p in lossless_res.ports if (p.src, p.dst) == ("s1", "s2"))
    assert trunk.pfc_pauses_received > 0 and trunk.paused_ns > 0


def test_pfc_deadlock_on_a_cyclic_route_is_detected(run):
    """Three-hop clockwise routes around a 4-switch ring close a cycle of buffer dependencies.

    Each ring link carries three flows (3:1 overload), two of them in transit at the next
    switch: once the exiting packets drained, every ingress queue still holds more transit
    bytes than its resume level, waiting for a paused ring port.
    """
    fab = ring(4, gbps_=100, latency_ns=500)
    flows = [Flow(f"h{i}", f"h{(i + 3) % 4}", 2_000_000) for i in range(4)]
    res = run(fab, flows, router=ClockwiseRouter(fab), pfc_xoff_bytes=40_000,
              buffer_bytes=4_000_000, ecn=False, max_time_ps=1_000_000_000,
              sample_interval_ps=2_000_000)
    assert res.deadlocks, "expected a cycle of paused ports"
    cyc = res.deadlocks[0]
    assert len(cyc["links"]) == 4 and set(cyc["nodes"]) == {"s0", "s1", "s2", "s3"}
    assert not res.completed  # a real deadlock never drains


def test_find_pause_cycle_needs_queued_data():
    class Fake:
        L_src = [0, 1, 2]
        L_dst = [1, 2, 0]
        paused_set = {0, 1, 2}
        P_data = [[1], [1], [1]]

    assert sorted(find_pause_cycle(Fake())) == [0, 1, 2]
    Fake.P_data = [[1], [], [1]]
    assert find_pause_cycle(Fake()) is None


def test_deadlock_is_classified_as_a_cycle_and_the_watchdog_breaks_it(run):
    fab = ring(4, gbps_=100, latency_ns=500)
    flows = [Flow(f"h{i}", f"h{(i + 3) % 4}", 2_000_000) for i in range(4)]
    kw = dict(router=ClockwiseRouter(fab), pfc_xoff_bytes=40_000, buffer_bytes=4_000_000,
              ecn=False, max_time_ps=1_000_000_000, sample_interval_ps=2_000_000)
    stuck = run(fab, flows, **kw)
    assert stuck.stuck == 4
    reasons = {p["link"]: p["reason"] for p in stuck.paused_at_end}
    ring_links = set(stuck.deadlocks[0]["links"])
    assert ring_links <= reasons.keys() and all(reasons[lid] == "cycle" for lid in ring_links)
    # A watchdog (SONiC pfcwd; here: the stormed port ignores PAUSE for a while) breaks the
    # cycle; what overflows downstream is lost and retransmitted (262 us timer here).
    kw["max_time_ps"] = 100_000_000_000
    freed = run(fab, flows, pfc_watchdog_ps=200_000_000, ib_timeout=6, **kw)
    assert freed.pfc_counters["watchdog_storms"] > 0
    assert freed.stuck == 0 and all(f.fct_ns is not None for f in freed.flows)


def _crossing_incasts(run, sample_ps, **kw):
    """Incasts both ways over one 400G trunk (``l1..3 -> r0`` and ``r1..3 -> l0``, plus pairs
    ``l_i <-> r_i``): both trunk directions pause each other's ingress for a few us at a time,
    a cycle of two paused ports that drains every time (issue 26: the old sampled detector
    counted it at 1 us sampling and not at 5 us)."""
    fab = dumbbell(4, 4, host_gbps=100, core_gbps=400, latency_ns=500)
    flows = [Flow(f"l{i}", "r0", 1_000_000) for i in range(1, 4)]
    flows += [Flow(f"r{i}", "l0", 1_000_000) for i in range(1, 4)]
    flows += [Flow(f"l{i}", f"r{i}", 1_000_000) for i in range(1, 4)]
    flows += [Flow(f"r{i}", f"l{i}", 1_000_000) for i in range(1, 4)]
    return run(fab, flows, buffer_bytes=1_000_000, ecn=False, pfc_xoff_bytes=40_000,
               sample_interval_ps=sample_ps, **kw)


def test_transient_pause_cycle_is_not_a_deadlock_at_any_sampling(run):
    for sample_ps in (1_000_000, 2_000_000, 5_000_000):
        res = _crossing_incasts(run, sample_ps)
        assert res.stuck == 0 and all(f.fct_ns is not None for f in res.flows)
        assert res.deadlocks == [], sample_ps
    # The cycle is there: a window shorter than its stalls (1 us) counts it.
    short = _crossing_incasts(run, 5_000_000, pfc_deadlock_ps=1_000_000)
    assert short.deadlocks and all(len(d["links"]) == 2 for d in short.deadlocks)


def test_deadlock_count_does_not_depend_on_the_sampling_interval(run):
    fab = ring(4, gbps_=100, latency_ns=500)
    flows = [Flow(f"h{i}", f"h{(i + 3) % 4}", 2_000_000) for i in range(4)]
    kw = dict(router=ClockwiseRouter(fab), pfc_xoff_bytes=40_000, buffer_bytes=4_000_000,
              ecn=False, max_time_ps=1_000_000_000)
    runs = {s: run(fab, flows, sample_interval_ps=s, **kw)
            for s in (1_000_000, 2_000_000, 5_000_000)}
    assert {len(r.deadlocks) for r in runs.values()} == {1}  # one episode, counted once
    assert len({repr(r.deadlocks) for r in runs.values()}) == 1  # same time, same links
    d = runs[1_000_000].deadlocks[0]
    # counted when the cycle had stalled for the whole window, not at a sample
    assert d["t_ns"] - d["stalled_since_ns"] == pytest.approx(PacketConfig().pfc_deadlock_ps / 1000)
    assert len({repr(r.deadlocks) for r in _transients(run)}) == 1


def _transients(run):
    return [_crossing_incasts(run, s, pfc_deadlock_ps=500_000) for s in (1_000_000, 5_000_000)]


def test_deadlock_window_is_validated():
    with pytest.raises(ValueError, match="pfc_deadlock_ps"):
        PacketConfig(pfc_deadlock_ps=0)
    assert PacketConfig(pfc_deadlock_ps=None).pfc_deadlock_ps is None
