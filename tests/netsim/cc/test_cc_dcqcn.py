"""DCQCN reaction point against its equations (fake clock, no network)."""

from __future__ import annotations

import pytest

from netsim.cc import DcqcnParams, make_cc

US = 1_000_000  # ps
REL = 1e-12  # float round-off of a few operations


def dcqcn(clock, line_rate_bps, **params):
    return make_cc("dcqcn", line_rate_bps=line_rate_bps, base_rtt_ps=5 * US, clock=clock,
                   params=params)


def test_first_cnp_cuts_by_half_alpha_and_sets_target(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps)
    clock.advance(10 * US)
    cc.on_cnp()
    alpha0 = 1023 / 1024  # initial_alpha_value
    assert cc.rate_bps == pytest.approx(line_rate_bps * (1 - alpha0 / 2), rel=REL)
    assert cc.target_bps == line_rate_bps  # R_T = R_C before the cut


def test_alpha_decays_by_one_minus_g_per_update_without_cnps(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps)
    cc.on_cnp()
    g = DcqcnParams().g
    for k in (1, 7, 100):
        clock.advance(k * US)  # dce_tcp_rtt = 1 us: k updates since the first CNP
        assert cc.alpha == pytest.approx((1023 / 1024) * (1 - g) ** k, rel=1e-9)


def test_alpha_rises_toward_one_with_a_cnp_every_update(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps, dce_tcp_g=1024 - 64)  # g = 1/16 for a short test
    cc.on_cnp()  # alpha = a0 at t = 0
    a0, g = 1023 / 1024, 1 / 16
    cc_alpha = []
    for k in range(1, 60):
        clock.advance(k * US - US // 2)
        cc.on_cnp()  # one CNP inside every update period
        clock.advance(k * US)
        cc_alpha.append(cc.alpha)
    # alpha_k = 1 - (1 - a0)(1 - g)^k: it approaches 1 monotonically
    assert cc_alpha[-1] == pytest.approx(1 - (1 - a0) * (1 - g) ** 59, rel=1e-9)
    # start from a low alpha to see the rise clearly
    cc2 = dcqcn(clock, line_rate_bps, dce_tcp_g=1024 - 64, initial_alpha_value=0)
    t0 = clock.now_ps
    cc2.on_cnp()
    for k in range(1, 80):
        clock.advance(t0 + k * US - US // 2)
        cc2.on_cnp()
    clock.advance(t0 + 79 * US)
    assert cc2.alpha == pytest.approx(1 - (1 - g) ** 79, rel=1e-9)
    assert cc2.alpha > 0.99


def test_cut_uses_current_alpha_and_is_limited_to_one_per_monitor_period(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps)
    cc.on_cnp()  # cut 1 at t = 0
    r1 = cc.rate_bps
    clock.advance(1 * US)
    cc.on_cnp()  # inside the 4 us period: deferred to t = 4 us
    assert cc.rate_bps == r1 and cc.cuts == 1
    clock.advance(4 * US - 1)
    assert cc.cuts == 1
    clock.advance(4 * US)
    assert cc.cuts == 2
    g = DcqcnParams().g
    # updates at 1, 2, 3, 4 us; the CNP at 1 us (just after the update at 1 us) lifts the 2nd
    alpha = (1023 / 1024) * (1 - g)
    alpha = ((1 - g) * alpha + g) * (1 - g) ** 2
    assert cc.alpha == pytest.approx(alpha, rel=1e-12)
    assert cc.rate_bps == pytest.approx(r1 * (1 - alpha / 2), rel=REL)


def test_min_dec_fac_bounds_a_single_cut(clock, line_rate_bps):
    # gd = 10: cut = 1 - alpha (up to ~100%), floored at 1 - 70% = 30% of the rate
    cc = dcqcn(clock, line_rate_bps, rpg_gd=10, rpg_min_dec_fac_pct=30)
    cc.on_cnp()
    assert cc.rate_bps == pytest.approx(0.3 * line_rate_bps, rel=REL)


def test_fast_recovery_halves_the_gap_for_F_timer_stages(clock, line_rate_bps):
    f = 5  # the DCQCN paper's F
    cc = dcqcn(clock, line_rate_bps, rpg_threshold=f, rpg_byte_reset_bytes=0)
    cc.on_cnp()
    r_t, gap = cc.target_bps, cc.target_bps - cc.rate_bps
    for k in range(1, f + 1):
        clock.advance(k * 300 * US)  # rpg_time_reset = 300 us
        assert cc.last_phase == "fast"
        assert cc.target_bps == r_t
        assert r_t - cc.rate_bps == pytest.approx(gap / 2 ** k, rel=1e-9)
    # after F stages the rate is within 2^-F of the cut's depth from the target
    assert r_t - cc.rate_bps <= gap / 2 ** f * (1 + 1e-9)


def test_additive_then_hyper_increase_steps(clock, line_rate_bps):
    p = DcqcnParams()
    ai, hai = p.rpg_ai_rate_mbps * 1e6, p.rpg_hai_rate_mbps * 1e6
    cc = dcqcn(clock, line_rate_bps, clamp_tgt_rate=True)
    cc.on_cnp()
    clock.advance(4 * US)
    cc.on_cnp()  # second cut: R_T = R_C < line rate, so AI/HAI are not capped
    cc.on_send(p.rpg_byte_reset_bytes)  # BC = 1 <= F: fast recovery
    assert cc.last_phase == "fast"
    t_before, r_before = cc.target_bps, cc.rate_bps
    cc.on_send(p.rpg_byte_reset_bytes)  # BC = 2 > F, T = 0: additive
    assert cc.last_phase == "additive"
    assert cc.target_bps - t_before == pytest.approx(ai, rel=1e-9)
    assert cc.rate_bps == pytest.approx((r_before + cc.target_bps) / 2, rel=REL)
    clock.advance(604 * US)  # two timer events: T = 2 > F and BC = 2 > F
    assert cc.stages == (2, 2)
    assert cc.last_phase == "hyper"
    t_before, r_before = cc.target_bps, cc.rate_bps
    cc.on_send(p.rpg_byte_reset_bytes)
    assert cc.last_phase == "hyper"
    assert cc.target_bps - t_before == pytest.approx(hai, rel=1e-9)
    assert cc.rate_bps == pytest.approx((r_before + cc.target_bps) / 2, rel=REL)


def test_target_clamping_follows_clamp_tgt_rate(clock, line_rate_bps):
    loose = dcqcn(clock, line_rate_bps)  # firmware: clamp_tgt_rate = 0
    tight = dcqcn(clock, line_rate_bps, clamp_tgt_rate=True)
    for cc in (loose, tight):
        cc.on_cnp()
    clock.advance(5 * US)
    first_cut = loose.rate_bps
    for cc in (loose, tight):
        cc.on_cnp()  # second cut, no increase event in between
    assert loose.target_bps == line_rate_bps  # keeps the pre-congestion target
    assert tight.target_bps == pytest.approx(first_cut, rel=REL)  # R_T = R_C


def test_rate_stays_between_min_rate_and_line_rate(clock, line_rate_bps, rng):
    cc = dcqcn(clock, line_rate_bps, rpg_min_rate_mbps=1000)
    t = 0
    for _ in range(3000):
        t += int(rng.integers(1, 20 * US))
        clock.advance(t)
        if rng.random() < 0.6:
            cc.on_cnp()
        else:
            cc.on_send(int(rng.integers(1, 200_000)))
        assert 1e9 <= cc.rate_bps <= line_rate_bps
        assert cc.target_bps <= line_rate_bps
    for _ in range(60_000):  # 60 ms sending at the allowed rate without CNPs: back to line
        t += 1 * US  # rate (hyper increase grows ~HAI per 32 KB sent), and the timer stops
        clock.advance(t)
        cc.on_send(int(cc.rate_bps * US / 8e12))
    assert cc.rate_bps == line_rate_bps
    assert clock.pending() == 0


def test_an_uncongested_qp_schedules_nothing(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps)
    for _ in range(1000):
        cc.on_send(4096)
        cc.on_ack(4096, 5 * US, False)
    assert clock.pending() == 0 and cc.rate_bps == line_rate_bps


def test_rate_on_first_cnp(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps, rate_to_set_on_first_cnp_mbps=100_000)
    cc.on_cnp()
    assert cc.rate_bps == 100e9 and cc.target_bps == 100e9
