"""Swift against its equations (Kumar et al., SIGCOMM 2020, Algorithm 1)."""

from __future__ import annotations

import pytest

from netsim.cc import SwiftParams, make_cc
from netsim.cc.params import flow_scaling_ps

US = 1_000_000  # ps
MTU = 4096


def swift(clock, line_rate_bps, base_rtt_ps, **params):
    return make_cc("swift", line_rate_bps=line_rate_bps, base_rtt_ps=base_rtt_ps, clock=clock,
                   params=params)


def test_initial_window_is_one_bdp_and_target_adds_the_budgets(clock, line_rate_bps,
                                                               base_rtt_ps):
    cc = swift(clock, line_rate_bps, base_rtt_ps, hops=4)
    assert cc.cwnd_bytes == pytest.approx(line_rate_bps * base_rtt_ps / 8e12)
    p = cc.params
    fs = flow_scaling_ps(cc.cwnd_bytes / MTU, p.fs_range_us, p.fs_min_cwnd_pkts,
                         p.fs_max_cwnd_pkts)
    expect = base_rtt_ps + (p.base_target_us + 4 * p.hop_scaling_us) * US + fs
    assert cc.target_delay_ps() == pytest.approx(expect)


def test_flow_scaling_spans_fs_range_between_min_and_max_cwnd():
    p = SwiftParams()
    assert flow_scaling_ps(p.fs_min_cwnd_pkts, p.fs_range_us, p.fs_min_cwnd_pkts,
                           p.fs_max_cwnd_pkts) == pytest.approx(p.fs_range_us * US)
    assert flow_scaling_ps(p.fs_max_cwnd_pkts, p.fs_range_us, p.fs_min_cwnd_pkts,
                           p.fs_max_cwnd_pkts) == pytest.approx(0, abs=1e-6)
    assert flow_scaling_ps(1000, p.fs_range_us, p.fs_min_cwnd_pkts, p.fs_max_cwnd_pkts) == 0


def test_additive_increase_below_target(clock, line_rate_bps, base_rtt_ps):
    cc = swift(clock, line_rate_bps, base_rtt_ps)
    w = cc.cwnd_bytes / MTU
    cc.on_ack(2 * MTU, base_rtt_ps, False)  # RTT = base < target
    assert cc.cwnd_bytes / MTU == pytest.approx(w + 1.0 * 2 / w)  # ai * acked / cwnd
    # a whole window of ACKs adds about ai = 1 packet
    w = cc.cwnd_bytes / MTU
    for _ in range(int(w)):
        cc.on_ack(MTU, base_rtt_ps, False)
    assert cc.cwnd_bytes / MTU == pytest.approx(w + 1.0, rel=0.02)


def test_multiplicative_decrease_above_target_is_bounded_by_max_mdf(clock, line_rate_bps,
                                                                    base_rtt_ps):
    cc = swift(clock, line_rate_bps, base_rtt_ps)
    w0, target = cc.cwnd_bytes, cc.target_delay_ps()
    rtt = int(target * 1.2)
    cc.on_ack(MTU, rtt, False)
    assert cc.cwnd_bytes == pytest.approx(w0 * (1 - 0.8 * (rtt - target) / rtt))
    # at most once per RTT
    w1 = cc.cwnd_bytes
    clock.advance(rtt - 1)
    cc.on_ack(MTU, 100 * rtt, False)
    assert cc.cwnd_bytes == w1
    # a huge RTT: the cut is bounded by max_mdf = 0.5
    clock.advance(clock.now_ps + 100 * rtt)
    cc.on_ack(MTU, 100 * rtt, False)
    assert cc.cwnd_bytes == pytest.approx(w1 * 0.5)


def test_cnps_are_ignored_and_subpacket_windows_are_paced(clock, line_rate_bps, base_rtt_ps):
    cc = swift(clock, line_rate_bps, base_rtt_ps)
    w = cc.cwnd_bytes
    cc.on_cnp()
    assert cc.cwnd_bytes == w and cc.rate_bps == line_rate_bps
    for k in range(20):  # drive the window below one packet with huge RTTs
        clock.advance((k + 1) * 1000 * US)
        cc.on_ack(MTU, 500 * US, False)
    assert cc.cwnd_bytes < MTU
    assert cc.rate_bps == pytest.approx(cc.cwnd_bytes * 8e12 / (500 * US))
    assert cc.cwnd_bytes >= cc.params.min_cwnd_bytes


def test_timeouts_cut_then_reset_to_the_floor(clock, line_rate_bps, base_rtt_ps):
    cc = swift(clock, line_rate_bps, base_rtt_ps, retx_reset_threshold=3)
    w = cc.cwnd_bytes
    cc.on_timeout()
    assert cc.cwnd_bytes == pytest.approx(w * 0.5)
    clock.advance(10 * base_rtt_ps)
    cc.on_timeout()
    assert cc.cwnd_bytes == pytest.approx(w * 0.25)
    clock.advance(20 * base_rtt_ps)
    cc.on_timeout()
    assert cc.cwnd_bytes == cc.params.min_cwnd_bytes
    cc.on_ack(MTU, base_rtt_ps, False)  # an ACK resets the timeout count
    assert cc._retx == 0


def test_window_never_leaves_its_bounds(clock, line_rate_bps, base_rtt_ps, rng):
    cc = swift(clock, line_rate_bps, base_rtt_ps)
    t = 0
    for _ in range(5000):
        t += int(rng.integers(1, 10 * US))
        clock.advance(t)
        cc.on_ack(int(rng.integers(1, 64 * MTU)), int(rng.integers(base_rtt_ps, 40 * US)),
                  False)
        assert cc.params.min_cwnd_bytes <= cc.cwnd_bytes <= 1000 * MTU
        assert 0 < cc.rate_bps <= line_rate_bps


def test_nack_cuts_by_max_mdf_once_per_rtt(clock, line_rate_bps, base_rtt_ps):
    from netsim.cc import make_cc

    cc = make_cc("swift", line_rate_bps=line_rate_bps, base_rtt_ps=base_rtt_ps, clock=clock)
    w0 = cc.cwnd_bytes
    cc.on_nack()
    assert cc.cwnd_bytes == pytest.approx(w0 * (1 - cc.params.max_mdf))
    cc.on_nack()  # same RTT: no second cut
    assert cc.cwnd_bytes == pytest.approx(w0 * (1 - cc.params.max_mdf))
    clock.advance(clock.now_ps + cc.rtt_ps)
    cc.on_nack()
    assert cc.cwnd_bytes == pytest.approx(w0 * (1 - cc.params.max_mdf) ** 2)
    assert cc.nacks == 3
