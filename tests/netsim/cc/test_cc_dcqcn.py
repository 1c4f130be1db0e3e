"""DCQCN reaction point against its equations (fake clock, no network)."""

from __future__ import annotations

import pytest

from netsim.cc import DcqcnParams, make_cc

US = 1_000_000  # ps
REL = 1e-12  # float round-off of a few operations


def dcqcn(clock, line_rate_bps, **params):
    return make_cc("dcqcn", line_rate_bps=line_rate_bps, base_rtt_ps=5 * US, clock=clock,
                   params=params)


def test_first_cut_comes_at_the_next_monitor_period_with_half_alpha(clock, line_rate_bps):
    # mstflint: "the flow rate is reduced at the beginning of the next
    # rate_reduce_monitor_period interval"; HPCC ns-3 CheckRateDecreaseMlx.
    cc = dcqcn(clock, line_rate_bps)
    clock.advance(10 * US)
    cc.on_cnp()
    assert cc.rate_bps == line_rate_bps and cc.cuts == 0
    clock.advance(14 * US - 1)
    assert cc.cuts == 0
    clock.advance(14 * US)
    g = DcqcnParams().g
    alpha = (1023 / 1024) * (1 - g) ** 4  # four alpha updates without CNP since the first
    assert cc.cuts == 1
    assert cc.rate_bps == pytest.approx(line_rate_bps * (1 - alpha / 2), rel=REL)
    assert cc.target_bps == line_rate_bps


def test_alpha_decays_by_one_minus_g_per_update_without_cnps(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps)
    cc.on_cnp()
    g = DcqcnParams().g
    for k in (1, 7, 100):
        clock.advance(k * US)  # dce_tcp_rtt = 1 us: k updates since the first CNP
        assert cc.alpha == pytest.approx((1023 / 1024) * (1 - g) ** k, rel=1e-9)


def test_dce_tcp_g_readings(clock, line_rate_bps):
    assert DcqcnParams().g == pytest.approx(5 / 1024)  # old_weight: g = 1 - G/1024
    assert DcqcnParams(dce_tcp_g_reading="new_weight").g == pytest.approx(1019 / 1024)
    cc = dcqcn(clock, line_rate_bps, dce_tcp_g_reading="new_weight")
    cc.on_cnp()
    clock.advance(2 * US)
    assert cc.alpha == pytest.approx((1023 / 1024) * (5 / 1024) ** 2, rel=1e-9)
    with pytest.raises(ValueError, match="dce_tcp_g_reading"):
        DcqcnParams(dce_tcp_g_reading="sideways")


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
    cc2 = dcqcn(clock, line_rate_bps, dce_tcp_g=1024 - 64, initial_alpha_value=0)
    t0 = clock.now_ps
    cc2.on_cnp()
    for k in range(1, 80):
        clock.advance(t0 + k * US - US // 2)
        cc2.on_cnp()
    clock.advance(t0 + 79 * US)
    assert cc2.alpha == pytest.approx(1 - (1 - g) ** 79, rel=1e-9)
    assert cc2.alpha > 0.99


def test_cuts_only_on_the_grid_and_only_after_a_cnp_in_the_interval(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps)
    cc.on_cnp()  # first CNP at 0: grid points 4, 8, 12 ... us
    clock.advance(4 * US)
    r1 = cc.rate_bps
    assert cc.cuts == 1
    clock.advance(5 * US)
    cc.on_cnp()
    clock.advance(6 * US)
    cc.on_cnp()  # two CNPs in one interval: one cut at 8 us
    clock.advance(8 * US)
    assert cc.cuts == 2
    g = DcqcnParams().g
    alpha = (1023 / 1024) * (1 - g) ** 5  # updates 1..5 us without CNP
    alpha = ((1 - g) * alpha + g) * (1 - g) ** 2  # 6 us (CNP at 5 us), 7, 8
    assert cc.rate_bps < r1
    clock.advance(12 * US)
    assert cc.cuts == 2  # no CNP in (8, 12]: no cut, the grid sleeps
    clock.advance(13 * US)
    cc.on_cnp()
    clock.advance(16 * US - 1)
    assert cc.cuts == 2
    clock.advance(16 * US)
    assert cc.cuts == 3  # the next grid point after the CNP


def test_cut_uses_the_alpha_of_the_grid_point(clock, line_rate_bps):
    cc = dcqcn(clock, line_rate_bps, rpg_byte_reset_bytes=0)
    cc.on_cnp()
    clock.advance(2 * US + US // 2)
    cc.on_cnp()  # sets the flag of the update at 3 us
    clock.advance(4 * US)
    g = DcqcnParams().g
    alpha = (1023 / 1024) * (1 - g) ** 2
    alpha = ((1 - g) * alpha + g) * (1 - g)
    assert cc.alpha == pytest.approx(alpha, rel=1e-12)
    assert cc.rate_bps == pytest.approx(line_rate_bps * (1 - alpha / 2), rel=REL)


def test_min_dec_fac_bounds_a_single_cut(clock, line_rate_bps):
    # gd = 10: cut = 1 - alpha (up to ~100%), floored at 1 - 70% = 30% of the rate
    cc = dcqcn(clock, line_rate_bps, rpg_gd=10, rpg_min_dec_fac_pct=30)
    cc.on_cnp()
    clock.advance(4 * US)
    assert cc.rate_bps == pytest.approx(0.3 * line_rate_bps, rel=REL)


def test_fast_recovery_halves_the_gap_for_F_timer_stages(clock, line_rate_bps):
    f = 5  # the DCQCN paper's F
    cc = dcqcn(clock, line_rate_bps, rpg_threshold=f, rpg_byte_reset_bytes=0)
    cc.on_cnp()
    clock.advance(4 * US)  # the cut
    r_t, gap = cc.target_bps, cc.target_bps - cc.rate_bps
    for k in range(1, f + 1):
        clock.advance(4 * US + k * 300 * US)  # rpg_time_reset = 300 us after the cut
        assert cc.last_phase == "fast"
        assert cc.target_bps == r_t
        assert r_t - cc.rate_bps == pytest.approx(gap / 2 ** k, rel=1e-9)
    assert r_t - cc.rate_bps <= gap / 2 ** f * (1 + 1e-9)


def test_timer_only_phases_follow_hpcc_ns3(clock, line_rate_bps):
    # Byte counter off: stage < F fast, == F additive, > F hyper (rdma-hw.cc RateIncEventMlx).
    cc = dcqcn(clock, line_rate_bps, rpg_byte_reset_bytes=0, clamp_tgt_rate=True)
    cc.on_cnp()
    clock.advance(4 * US)
    phases = []
    for k in range(1, 5):
        clock.advance(4 * US + k * 300 * US)
        phases.append(cc.last_phase)
    assert phases == ["fast", "additive", "hyper", "hyper"]


def test_additive_then_hyper_increase_steps(clock, line_rate_bps):
    p = DcqcnParams()
    ai, hai = p.rpg_ai_rate_mbps * 1e6, p.rpg_hai_rate_mbps * 1e6
    cc = dcqcn(clock, line_rate_bps, clamp_tgt_rate=True)
    cc.on_cnp()
    clock.advance(4 * US)
    cc.on_cnp()
    clock.advance(8 * US)  # second cut: R_T = R_C < line rate, so AI/HAI are not capped
    assert cc.cuts == 2
    cc.on_send(p.byte_reset_bytes)  # BC = 1 <= F: fast recovery
    assert cc.last_phase == "fast"
    t_before, r_before = cc.target_bps, cc.rate_bps
    cc.on_send(p.byte_reset_bytes)  # BC = 2 > F, T = 0: additive
    assert cc.last_phase == "additive"
    assert cc.target_bps - t_before == pytest.approx(ai, rel=1e-9)
    assert cc.rate_bps == pytest.approx((r_before + cc.target_bps) / 2, rel=REL)
    clock.advance(608 * US)  # two timer events: T = 2 > F and BC = 2 > F
    assert cc.stages == (2, 2)
    assert cc.last_phase == "hyper"
    t_before, r_before = cc.target_bps, cc.rate_bps
    cc.on_send(p.byte_reset_bytes)
    assert cc.last_phase == "hyper"
    assert cc.target_bps - t_before == pytest.approx(hai, rel=1e-9)
    assert cc.rate_bps == pytest.approx((r_before + cc.target_bps) / 2, rel=REL)


def _two_cuts(clock, cc, timer_between=False):
    cc.on_cnp()
    clock.advance(4 * US)
    first = cc.rate_bps
    if timer_between:
        clock.advance(304 * US)  # one timer increase event
    cc.on_cnp()
    clock.advance(clock.now_ps + 4 * US)
    return first


def test_target_clamping_follows_the_two_clamp_flags(line_rate_bps):
    from tests.netsim.cc.conftest import FakeClock

    # Firmware defaults clamp_tgt_rate 0, clamp_tgt_rate_after_time_inc 1: a cut sets
    # R_T = R_C only if a timer increase happened since the previous cut.
    c1 = FakeClock()
    fw = dcqcn(c1, line_rate_bps)
    _two_cuts(c1, fw)
    assert fw.target_bps == line_rate_bps  # byte counter / no increase: target kept
    c2 = FakeClock()
    fw_t = dcqcn(c2, line_rate_bps)
    _two_cuts(c2, fw_t, timer_between=True)
    assert fw_t.target_bps < line_rate_bps  # a timer increase came between: clamped
    c3 = FakeClock()
    tight = dcqcn(c3, line_rate_bps, clamp_tgt_rate=True)
    first = _two_cuts(c3, tight)
    assert tight.target_bps == pytest.approx(first, rel=REL)  # always R_T = R_C
    c4 = FakeClock()
    never = dcqcn(c4, line_rate_bps, clamp_tgt_rate_after_time_inc=False)
    _two_cuts(c4, never, timer_between=True)
    assert never.target_bps == line_rate_bps


def test_presets_and_cnp_interval_defaults():
    from netsim.cc import CnpGenerator

    assert DcqcnParams().min_time_between_cnps_us == 4.0
    assert CnpGenerator.for_cc("dcqcn", {"preset": "paper"}).min_interval_ps == 50 * US
    assert CnpGenerator.for_cc("dcqcn", {}).min_interval_ps == 4 * US


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
