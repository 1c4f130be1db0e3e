"""Closed forms on idle paths: line-rate goodput and store-and-forward FCT."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.packet import PacketConfig
from netsim.packet.testbeds import dumbbell
from netsim.scenario.traffic import Flow
from netsim.validation.invariants import check_capacity, check_conservation
from topologies.units import PS_PER_S


def _ser_ps(nbytes: int, rate_bps: int) -> int:
    return nbytes * 8 * PS_PER_S // rate_bps


def _tandem_finish_ps(ser_ps: list[int], hops: int, prop_ps: int) -> int:
    """Last-bit arrival of back-to-back packets through equal store-and-forward hops."""
    prev = []  # finish times at the previous hop
    t = 0
    for s in ser_ps:  # NIC: back to back
        t += s
        prev.append(t)
    for _ in range(hops - 1):
        cur, free = [], 0
        for s, arr in zip(ser_ps, prev, strict=False):
            free = max(arr + prop_ps, free) + s
            cur.append(free)
        prev = cur
    return prev[-1] + prop_ps


@pytest.mark.parametrize("size", [4096, 100 * 4096, 100 * 4096 + 1000])
def test_single_flow_fct_is_serialization_plus_propagation(run, size):
    fab = dumbbell(1, 1, host_gbps=400, core_gbps=400, latency_ns=1000)
    cfg = PacketConfig()
    res = run(fab, [Flow("l0", "r0", size)])
    rate = 400 * 10**9
    n = -(-size // cfg.mtu_bytes)
    last = size - (n - 1) * cfg.mtu_bytes
    full_ps = _ser_ps(cfg.wire_bytes, rate)
    last_ps = _ser_ps(last + cfg.header_bytes + cfg.wire_gap_bytes, rate)
    # First hop: the NIC sends all packets back to back; then each of the 2 switches
    # forwards the last packet store-and-forward; 3 propagation delays of 1 us.
    if last == cfg.mtu_bytes:
        expected_ps = (n - 1) * full_ps + 3 * last_ps + 3 * 1_000_000
    else:
        # A short last packet catches up with the previous one at each switch and waits for it
        # (store-and-forward): the tail is the previous packet's finish plus the short one.
        expected_ps = _tandem_finish_ps([full_ps] * (n - 1) + [last_ps], hops=3, prop_ps=1_000_000)
    f = res.flows[0]
    assert not f.failed and f.retransmits == 0
    assert f.fct_ns * 1000 == pytest.approx(expected_ps, abs=1)


def test_single_flow_goodput_is_line_rate_times_mtu_share(run):
    fab = dumbbell(1, 1, host_gbps=400, core_gbps=400, latency_ns=500)
    cfg = PacketConfig()
    res = run(fab, [Flow("l0", "r0", 8_000_000)], sample_interval_ps=2_000_000)
    t = res.time_ns
    dlv = res.flow_delivered_bytes[:, 0]
    i1, i2 = len(t) // 4, 3 * len(t) // 4
    goodput_bps = (dlv[i2] - dlv[i1]) * 8 / ((t[i2] - t[i1]) * 1e-9)
    expected = 400e9 * cfg.mtu_bytes / cfg.wire_bytes
    assert goodput_bps == pytest.approx(expected, rel=0.01)
    # and the whole-flow throughput approaches it (latency is ~1% of this FCT)
    assert res.flows[0].throughput_gbps * 1e9 == pytest.approx(expected, rel=0.03)


def test_bottleneck_link_caps_goodput(run):
    """A 100G core between 400G hosts: the flow gets the core's goodput, not the NIC's."""
    fab = dumbbell(1, 1, host_gbps=400, core_gbps=100, latency_ns=500)
    cfg = PacketConfig()
    res = run(fab, [Flow("l0", "r0", 4_000_000)], sample_interval_ps=2_000_000, buffer_bytes=2_000_000)
    t, dlv = res.time_ns, res.flow_delivered_bytes[:, 0]
    i1, i2 = len(t) // 4, 3 * len(t) // 4
    goodput = (dlv[i2] - dlv[i1]) * 8 / ((t[i2] - t[i1]) * 1e-9)
    assert goodput == pytest.approx(100e9 * cfg.mtu_bytes / cfg.wire_bytes, rel=0.01)
    assert res.drops == 0 and res.pfc_pauses > 0  # the 4:1 speed step is absorbed by PFC


def test_conservation_and_capacity_on_two_flows(run):
    fab = dumbbell(2, 2, host_gbps=100, core_gbps=100, latency_ns=500)
    flows = [Flow("l0", "r0", 600_000), Flow("l1", "r1", 600_000, start_ps=3_000_000)]
    res = run(fab, flows)
    check_conservation(res.ledger)
    assert res.ledger["delivered_bytes"] == sum(f.size_bytes for f in flows)
    assert res.ledger["in_flight"] >= 0
    tx = np.zeros(fab.num_links)
    for p in res.ports:
        tx[p.link_id] = p.tx_bytes
    check_capacity(tx, fab.link_capacity_bps, int(res.sim_time_ns * 1000))
    # The shared core carried both flows' wire bytes: utilisation close to 1 while both ran.
    core = next(p for p in res.ports if (p.src, p.dst) == ("s0", "s1"))
    assert core.tx_bytes >= 2 * 600_000


def test_check_conservation_catches_a_leak():
    with pytest.raises(AssertionError, match="not conserved"):
        check_conservation({"injected": 10, "delivered": 8, "dropped": 1})
    with pytest.raises(AssertionError, match="retransmissions"):
        check_conservation({"injected": 10, "delivered": 10, "dropped": 0, "unique": 9,
                            "retransmitted": 0})
    with pytest.raises(AssertionError, match="capacity"):
        check_capacity([2000], [8000], 10**12 // 10**6)  # 8 kb/s for 1 us carries < 1 B
