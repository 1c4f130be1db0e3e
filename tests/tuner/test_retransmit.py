"""Retransmit recommendation: IB timeout closed form, retry window vs flaps, survival model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.retransmit import (
    RetransmitSetting,
    evaluate,
    ib_timeout_ps,
    parse_flaps,
    recommend_retransmit,
    retry_times_ps,
)


def test_ib_timeout_formula() -> None:
    # 4.096 us x 2^T (IBTA; NCCL env.rst): 18 ~ 1.07 s, 20 ~ 4.3 s, 22 ~ 17.2 s
    for t in (1, 14, 18, 20, 22, 31):
        assert ib_timeout_ps(t) == pytest.approx(4.096e-6 * 2**t * 1e12, rel=1e-12)
    assert RetransmitSetting(20, 7).timeout_s == pytest.approx(4.294967296)
    # NCCL's documented "~30 s" for the defaults is T x retry_cnt; detection adds the last wait
    assert RetransmitSetting(20, 7).survivable_flap_s == pytest.approx(30.06, abs=0.01)
    assert RetransmitSetting(20, 7).failure_detection_s == pytest.approx(8 * 4.294967296)
    with pytest.raises(ValueError, match="NCCL_IB_TIMEOUT"):
        ib_timeout_ps(0)


@pytest.mark.parametrize("spec", ["max=5s", "max=12s", "0.2s,1s,3s", "lognormal:median=1s,p99=6s",
                                  "max=300ms"])
def test_window_exceeds_max_flap(spec: str) -> None:
    flaps = parse_flaps(spec)
    rec = recommend_retransmit(flaps, margin=1.5)
    s = rec.recommended.setting
    assert s.survivable_flap_s > 1.5 * flaps.design_flap_s
    assert rec.recommended.survival_per_flap >= rec.default.survival_per_flap - 1e-12
    # minimal: the next shorter timeout with the most retries no longer covers the flap
    if s.timeout > 1:
        assert RetransmitSetting(s.timeout - 1, 7).survivable_flap_s <= 1.5 * flaps.design_flap_s \
            or RetransmitSetting(s.timeout - 1, 7).failure_detection_s >= s.failure_detection_s


def test_max_flap_detection_faster_than_defaults() -> None:
    rec = recommend_retransmit(parse_flaps("max=5s"))
    assert rec.recommended.setting.failure_detection_s < rec.default.setting.failure_detection_s
    assert rec.recommended.job_survival == 1.0 and rec.default.job_survival == 1.0
    assert rec.env()["NCCL_IB_TIMEOUT"] == str(rec.recommended.setting.timeout)


def test_stall_is_next_retry_after_flap() -> None:
    s = RetransmitSetting(18, 7)
    t = s.timeout_s
    d = np.array([0.1 * t, 1.5 * t, 6.9 * t, 7.5 * t])
    stall = s.stall_s(d)
    np.testing.assert_allclose(stall[:3], [t, 2 * t, 7 * t])
    assert math.isinf(stall[3])


def test_survival_matches_lognormal_cdf() -> None:
    flaps = parse_flaps("lognormal:median=1s,p99=6s")
    s = RetransmitSetting(18, 3)            # window 3.2 s: a real fraction of flaps fails
    r = evaluate(s, flaps)
    assert r.survival_per_flap == pytest.approx(flaps.survival_closed_form(s.survivable_flap_s),
                                                abs=1e-3)
    assert 0.0 < r.survival_per_flap < 1.0
    many = parse_flaps("lognormal:median=1s,p99=6s,count=10")
    assert evaluate(s, many).job_survival == pytest.approx(r.survival_per_flap ** 10)


def test_adaptive_ladder_recovers_short_flaps_sooner() -> None:
    plain, adaptive = RetransmitSetting(20, 7), RetransmitSetting(20, 7, adaptive=True)
    times = retry_times_ps(20, 7, adaptive=True)
    assert times[0] == 4_000_000 and np.all(np.diff(times) > 0)
    assert times[-1] <= ib_timeout_ps(20) * 7
    assert adaptive.stall_s(np.array([0.01]))[0] < plain.stall_s(np.array([0.01]))[0]


@pytest.mark.parametrize("bad", ["lognormal:median=1s", "max=-1s", "soon", "lognormal:median=5s,p99=1s"])
def test_bad_flap_spec(bad: str) -> None:
    with pytest.raises(ValueError, match="flaps"):
        parse_flaps(bad)


def _flap_run(timeout: int, retry_cnt: int, flap_ps: int):
    """One 2 MB flow over a dumbbell whose trunk flaps for ``flap_ps`` 50 us after the start."""
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter, dumbbell
    from netsim.scenario.faults import LinkFlap
    from netsim.scenario.traffic import Flow

    fab = dumbbell(1, 1, host_gbps=100, core_gbps=100)
    cfg = PacketConfig(ib_timeout=timeout, retry_cnt=retry_cnt, max_time_ps=200 * 10**9)
    res = simulate_packets(fab, [Flow("l0", "r0", 2_000_000)], cfg, seed=0,
                           router=ShortestPathRouter(fab),
                           flaps=[LinkFlap(fab.link_id("s0", "s1"), 50_000_000, flap_ps)])
    return res.flows[0]


def test_packet_engine_confirms_recommendation() -> None:
    flap_ps = 5 * 10**9  # 5 ms: scaled down from seconds so the test stays short
    rec = recommend_retransmit(parse_flaps("max=5ms"))
    s = rec.recommended.setting
    assert not _flap_run(s.timeout, s.retry_cnt, flap_ps).failed
    short = RetransmitSetting(s.timeout - 1, 3)             # window 3.1 ms < 5 ms
    assert short.survivable_flap_s < 5e-3
    assert _flap_run(short.timeout, short.retry_cnt, flap_ps).failed


def test_packet_engine_agrees_with_window_boundary() -> None:
    # T = 4.096 us x 2^8 = 1.05 ms: 4 retries cover 4.19 ms (< 5 ms flap), 5 cover 5.24 ms
    assert _flap_run(8, 4, 5 * 10**9).failed
    assert not _flap_run(8, 5, 5 * 10**9).failed


def test_multipath_links_see_at_most_the_detection_time():
    from tuner.retransmit import (
        LINK_DETECT_S,
        RetransmitSetting,
        evaluate,
        outage_s,
        parse_flaps,
        recommend_retransmit,
    )

    flaps = parse_flaps("max=5s")
    # 4.2 ms x 7 = 29 ms window: outlasts the 10 ms detection, not a 5 s flap
    short = RetransmitSetting(10, 7)
    host = evaluate(short, flaps)
    fabric = evaluate(short, flaps, multipath=True)
    assert host.survival_per_flap < 0.01
    assert fabric.survival_per_flap == 1.0
    assert fabric.expected_stall_s <= LINK_DETECT_S + short.timeout_s
    assert outage_s([1.0], multipath=True, detect_s=0.5).tolist() == [0.5]
    rec = recommend_retransmit(flaps)
    # the host links still set the window: it outlasts the design flap, not the detection
    assert rec.recommended.setting.survivable_flap_s > 5.0
    assert rec.fabric is not None and rec.fabric.survival_per_flap == 1.0
    assert "host links" in rec.reason and "ECMP repair" in rec.reason
