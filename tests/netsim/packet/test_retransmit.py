"""RC retransmission: the IB timeout formula, retry exhaustion and stalls under link flaps."""

from __future__ import annotations

import math

import pytest

from netsim.packet import PacketConfig
from netsim.packet.testbeds import dumbbell
from netsim.scenario.faults import LinkFlap
from netsim.scenario.traffic import Flow

US = 1_000_000  # ps


def test_rto_is_4096ns_times_two_to_the_timeout():
    assert PacketConfig(ib_timeout=20).rto_ps == 4_096_000 * 2**20  # ~4.3 s, NCCL default
    assert PacketConfig(ib_timeout=18).rto_ps / 1e12 == pytest.approx(1.07, rel=0.01)
    assert PacketConfig(ib_timeout=0).rto_ps is None  # 0 = infinite (IB spec)
    with pytest.raises(ValueError, match="retry_cnt"):
        PacketConfig(retry_cnt=8)


FLAP_CFG = dict(ib_timeout=4, retry_cnt=2, sample_interval_ps=US // 2)  # rto = 65.536 us
T_DOWN = 20 * US


def _flap_run(run, down_ps, **extra):
    fab = dumbbell(1, 1, host_gbps=100, core_gbps=100, latency_ns=500)
    core = fab.link_id("s0", "s1")
    flaps = [LinkFlap(core, T_DOWN, down_ps)] if down_ps else []
    # 500 kB at 100G is on the wire by 41 us: after link-up nothing new is sent, so no
    # out-of-sequence packet can trigger a NACK and only the timer recovers the lost window.
    return run(fab, [Flow("l0", "r0", 500_000)], flaps=flaps, **(FLAP_CFG | extra))


def _resume_time_ns(res) -> float:
    """First sample after the flap at which the receiver got new bytes."""
    t, dlv = res.time_ns, res.flow_delivered_bytes[:, 0]
    stalled = next(i for i in range(len(t)) if t[i] > T_DOWN / 1000 and dlv[i] == dlv[i - 1])
    return next(t[i] for i in range(stalled, len(t)) if dlv[i] > dlv[stalled])


def test_flap_longer_than_the_retry_budget_errors_the_qp(run):
    rto = PacketConfig(**FLAP_CFG).rto_ps
    budget = rto * (FLAP_CFG["retry_cnt"] + 1)
    res = _flap_run(run, budget + 50 * US)
    f = res.flows[0]
    assert f.failed and f.fct_ns is None
    assert f.timeouts == FLAP_CFG["retry_cnt"] + 1
    # The QP errors (and the run ends) budget after its last progress, just before the flap.
    assert res.sim_time_ns * 1000 == pytest.approx(T_DOWN + budget, abs=2 * US)


@pytest.mark.parametrize("down_us", [50, 100])
def test_short_flap_stalls_until_the_next_retransmission_after_link_up(run, down_us):
    rto = PacketConfig(**FLAP_CFG).rto_ps
    clean = _flap_run(run, 0).flows[0]
    res = _flap_run(run, down_us * US)
    f = res.flows[0]
    assert not f.failed and f.delivered_bytes == f.bytes and f.timeouts >= 1
    # Retransmissions go at last progress + k x rto; the first after link-up gets through.
    t_up = T_DOWN + down_us * US
    k = math.ceil((t_up - T_DOWN) / rto)
    t_retx = T_DOWN + k * rto
    one_way = 3 * 500_000 + 3 * (4096 + 82) * 80  # 3 links: propagation + serialization
    # (the last ACK before the flap may still land up to ~1.5 us after it; samples are 0.5 us)
    assert t_retx + one_way <= _resume_time_ns(res) * 1000 <= t_retx + one_way + 3 * US
    assert f.timeouts == k
    # The stall adds about t_retx - T_DOWN to the clean FCT (plus the resent window).
    assert f.fct_ns - clean.fct_ns == pytest.approx((t_retx - T_DOWN) / 1000, abs=10_000)


def test_link_back_after_the_last_retry_still_errors(run):
    """Up after retry_cnt x rto but before the error: the last retransmission was lost."""
    rto = PacketConfig(**FLAP_CFG).rto_ps
    res = _flap_run(run, FLAP_CFG["retry_cnt"] * rto + 30 * US)  # back 30 us after the last try
    assert res.flows[0].failed
    assert res.flows[0].timeouts == FLAP_CFG["retry_cnt"] + 1


def test_adaptive_retransmission_recovers_sooner_with_the_same_budget(run):
    fixed = _flap_run(run, 100 * US).flows[0]
    adaptive = _flap_run(run, 100 * US, adaptive_retrans=True).flows[0]
    assert not adaptive.failed
    assert adaptive.fct_ns < fixed.fct_ns - 10_000  # tens of us sooner than 2 x rto
    assert adaptive.timeouts > fixed.timeouts  # more, shorter tries
    rto = PacketConfig(**FLAP_CFG).rto_ps
    long = _flap_run(run, rto * 3 + 50 * US, adaptive_retrans=True)
    assert long.flows[0].failed  # same total budget (retry_cnt + 1) x rto
    assert long.sim_time_ns * 1000 == pytest.approx(T_DOWN + 3 * rto, abs=2 * US)


def test_infinite_timeout_never_errors(run):
    res = _flap_run(run, 200 * US, ib_timeout=0, max_time_ps=2_000 * US)
    f = res.flows[0]
    assert not f.failed and f.fct_ns is None  # stuck: nothing retransmits the lost window
