"""The DCQCN+Swift hybrid reacts to both signals, and differs from both parents."""

from __future__ import annotations

import pytest

from netsim.cc import make_cc

US = 1_000_000  # ps
MTU = 4096


def build(name, clock, line_rate_bps, base_rtt_ps, **params):
    return make_cc(name, line_rate_bps=line_rate_bps, base_rtt_ps=base_rtt_ps, clock=clock,
                   params=params)


def test_cnp_gives_the_dcqcn_cut_of_the_window(clock, line_rate_bps, base_rtt_ps):
    h = build("hybrid", clock, line_rate_bps, base_rtt_ps)
    s = build("swift", clock, line_rate_bps, base_rtt_ps)
    w_h, w_s = h.cwnd_bytes, s.cwnd_bytes
    h.on_cnp()
    s.on_cnp()
    assert h.cwnd_bytes == pytest.approx(w_h * (1 - (1023 / 1024) / 2))  # alpha0 = 1023/1024
    assert s.cwnd_bytes == w_s  # Swift ignores CNPs
    # a second CNP inside the 4 us monitor period only feeds alpha
    clock.advance(2 * US)
    w = h.cwnd_bytes
    h.on_cnp()
    assert h.cwnd_bytes == w and h.ecn_cuts == 1


def test_rtt_drives_increase_and_decrease(clock, line_rate_bps, base_rtt_ps):
    h = build("hybrid", clock, line_rate_bps, base_rtt_ps)
    d = build("dcqcn", clock, line_rate_bps, base_rtt_ps)
    w = h.cwnd_bytes
    h.on_ack(MTU, base_rtt_ps, False)
    assert h.cwnd_bytes > w  # below target: AI
    target = h.target_delay_ps()
    w = h.cwnd_bytes
    rtt = int(target * 1.5)
    h.on_ack(MTU, rtt, False)
    assert h.cwnd_bytes == pytest.approx(w * (1 - 0.8 * (rtt - target) / rtt))
    r = d.rate_bps
    d.on_ack(MTU, 10 * rtt, False)
    assert d.rate_bps == r  # DCQCN ignores RTTs


def test_signals_do_not_stack_and_ecn_echo_holds(clock, line_rate_bps, base_rtt_ps):
    h = build("hybrid", clock, line_rate_bps, base_rtt_ps)
    h.on_cnp()
    w = h.cwnd_bytes
    h.on_ack(MTU, 3 * base_rtt_ps, False)  # high RTT within the RTT of the CNP cut: no 2nd cut
    assert h.cwnd_bytes == w
    h.on_ack(MTU, base_rtt_ps, True)  # below target but ECN-echoed: hold
    assert h.cwnd_bytes == w
    h.on_ack(MTU, base_rtt_ps, False)
    assert h.cwnd_bytes > w


def test_tighter_delay_target_than_swift(clock, line_rate_bps, base_rtt_ps):
    h = build("hybrid", clock, line_rate_bps, base_rtt_ps)
    s = build("swift", clock, line_rate_bps, base_rtt_ps)
    assert base_rtt_ps < h.target_delay_ps() < s.target_delay_ps()
    # an RTT between the two targets: Swift still grows, the hybrid already backs off
    rtt = int((h.target_delay_ps() + s.target_delay_ps()) / 2)
    w_h, w_s = h.cwnd_bytes, s.cwnd_bytes
    h.on_ack(MTU, rtt, False)
    s.on_ack(MTU, rtt, False)
    assert h.cwnd_bytes < w_h and s.cwnd_bytes > w_s


def test_at_most_one_decrease_per_rtt_from_either_signal(clock, line_rate_bps, base_rtt_ps):
    h = build("hybrid", clock, line_rate_bps, base_rtt_ps)
    h.on_ack(MTU, base_rtt_ps, False)  # an RTT sample: base RTT (5 us)
    h.on_cnp()
    w = h.cwnd_bytes
    clock.advance(base_rtt_ps - 1)  # past the 4 us monitor period, within the RTT
    h.on_cnp()
    assert h.cwnd_bytes == w and h.ecn_cuts == 1
    clock.advance(base_rtt_ps)  # one RTT after the cut: the next CNP cuts again
    h.on_cnp()
    assert h.ecn_cuts == 2 and h.cwnd_bytes == pytest.approx(w * (1 - h.alpha / 2))
