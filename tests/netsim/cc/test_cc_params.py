"""Parameter dataclasses, the factory and the notification point."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.cc import (
    CC_NAMES,
    CnpGenerator,
    CongestionControl,
    DcqcnParams,
    EcnParams,
    HybridParams,
    SwiftParams,
    make_cc,
    params_for,
    parse_cc_params,
)


@pytest.mark.parametrize("cls", [DcqcnParams, SwiftParams, HybridParams, EcnParams])
def test_from_dict_rejects_unknown_keys_naming_them(cls):
    with pytest.raises(ValueError, match="bogus_knob") as err:
        cls.from_dict({"bogus_knob": 1})
    assert "valid ones are" in str(err.value)


@pytest.mark.parametrize("cls", [DcqcnParams, SwiftParams, HybridParams, EcnParams])
def test_round_trip_through_dict(cls):
    p = cls()
    assert cls.from_dict(p.to_dict()) == p


def test_firmware_defaults_are_the_connectx_values():
    p = DcqcnParams()
    assert (p.rpg_time_reset_us, p.rpg_byte_reset, p.rpg_threshold) == (300, 32767, 1)
    assert (p.rpg_ai_rate_mbps, p.rpg_hai_rate_mbps, p.rpg_min_rate_mbps) == (5, 50, 1)
    assert (p.rpg_gd, p.rpg_min_dec_fac_pct, p.dce_tcp_g, p.initial_alpha_value) == (
        11, 50, 1019, 1023)
    assert p.rate_reduce_monitor_period_us == 4
    # Fixed-point conversions: gd = 11 is the paper's alpha/2 cut, g = 5/1024 per update.
    assert p.cut_scale == 0.5
    assert p.g == pytest.approx(5 / 1024)


def test_string_values_are_converted_and_bad_ones_name_the_field():
    p = DcqcnParams.from_dict(parse_cc_params(["rpg_ai_rate_mbps=10", "clamp_tgt_rate=true",
                                               "rpg_gd=10"]))
    assert (p.rpg_ai_rate_mbps, p.clamp_tgt_rate, p.rpg_gd) == (10.0, True, 10)
    with pytest.raises(ValueError, match="rpg_gd"):
        DcqcnParams.from_dict({"rpg_gd": "eleven"})
    with pytest.raises(ValueError, match="rpg_threshold"):
        DcqcnParams.from_dict({"rpg_threshold": 1.5})
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_cc_params(["rpg_gd"])


def test_invalid_values_are_rejected_with_the_field_name():
    with pytest.raises(ValueError, match="kmax_bytes"):
        EcnParams(kmin_bytes=200, kmax_bytes=100)
    with pytest.raises(ValueError, match="max_mdf"):
        SwiftParams(max_mdf=1.5)
    with pytest.raises(ValueError, match="dce_tcp_g"):
        HybridParams(dce_tcp_g=2000)


def test_ecn_marking_is_the_red_ramp():
    e = EcnParams(kmin_bytes=150_000, kmax_bytes=1_500_000, pmax=0.2)
    assert e.mark_probability(0) == 0.0
    assert e.mark_probability(150_000) == 0.0
    mid = (150_000 + 1_500_000) / 2
    assert e.mark_probability(mid) == pytest.approx(0.1)
    assert e.mark_probability(1_500_000) == pytest.approx(0.2)
    assert e.mark_probability(1_500_001) == 1.0
    q = np.linspace(0, 2e6, 101)
    p = e.mark_probability(q)
    assert p.shape == q.shape and np.all(np.diff(p[q <= 1.5e6]) >= 0)


def test_presets_follow_their_sources():
    hpcc = DcqcnParams.preset("hpcc", line_rate_bps=100_000_000_000)
    assert hpcc.g == pytest.approx(1 / 256)  # HPCC ns-3 EWMA_GAIN
    assert hpcc.rpg_ai_rate_mbps == pytest.approx(20.0)  # 5 Mb/s x 100/25
    assert hpcc.byte_reset_bytes == 0
    paper = DcqcnParams.preset("paper", line_rate_bps=100_000_000_000)
    assert (paper.rpg_time_reset_us, paper.dce_tcp_rtt_us) == (55.0, 50.0)
    with pytest.raises(ValueError, match="preset"):
        DcqcnParams.preset("nope")


def test_make_cc_builds_every_algorithm_behind_the_protocol(clock, line_rate_bps, base_rtt_ps):
    for name in CC_NAMES:
        cc = make_cc(name, line_rate_bps=line_rate_bps, base_rtt_ps=base_rtt_ps, clock=clock)
        assert isinstance(cc, CongestionControl)
        assert cc.name == name
        assert cc.rate_bps == line_rate_bps  # every QP starts at line rate
    assert make_cc("dcqcn", line_rate_bps=line_rate_bps, base_rtt_ps=base_rtt_ps, clock=clock,
                   params={"rpg_gd": 10}).params.rpg_gd == 10


def test_make_cc_errors(clock):
    with pytest.raises(ValueError, match="unknown congestion control"):
        make_cc("cubic", line_rate_bps=1, base_rtt_ps=1, clock=clock)
    with pytest.raises(ValueError, match="line_rate_bps"):
        make_cc("none", line_rate_bps=0, base_rtt_ps=1, clock=clock)
    with pytest.raises(ValueError, match="no parameters"):
        params_for("none", {"x": 1})
    with pytest.raises(ValueError, match="beta"):
        make_cc("swift", line_rate_bps=1, base_rtt_ps=1, clock=clock, params={"beta": 0})


def test_cnp_generator_sends_at_most_one_per_interval_per_qp():
    g = CnpGenerator(min_interval_ps=2_000_000)
    times = range(0, 10_000_000, 500_000)  # a marked packet every 0.5 us for 10 us
    sent = [t for t in times if g.should_send("a", t)]
    assert sent == list(range(0, 10_000_000, 2_000_000))
    assert g.should_send("b", 9_500_000)  # another QP has its own interval
    assert g.sent == 6 and g.suppressed == len(times) - 5
    assert CnpGenerator(0).should_send("a", 0) and CnpGenerator.for_cc("dcqcn").min_interval_ps \
        == 4_000_000


def test_dcqcn_preset_key_then_overrides(clock):
    cc = make_cc("dcqcn", line_rate_bps=100_000_000_000, base_rtt_ps=1, clock=clock,
                 params={"preset": "hpcc", "rpg_time_reset_us": 100})
    assert cc.params.rpg_ai_rate_mbps == pytest.approx(20.0)  # preset, scaled to 100G
    assert cc.params.rpg_time_reset_us == 100.0  # override


def test_byte_counter_unit_is_a_named_parameter():
    # firmware value 32767 in 64 B units by default (docs/congestion-control.md: why 64)
    p = DcqcnParams()
    assert (p.rpg_byte_reset, p.rpg_byte_reset_unit_bytes) == (32767, 64)
    assert p.byte_reset_bytes == 32767 * 64
    # mstflint's literal reading ("Given in Bytes") is one key away
    assert DcqcnParams.from_dict({"rpg_byte_reset_unit_bytes": "1"}).byte_reset_bytes == 32767
    # the older key still sets B in bytes and wins over the firmware value and unit
    old = DcqcnParams.from_dict({"rpg_byte_reset_bytes": "0", "rpg_byte_reset": 100})
    assert old.byte_reset_bytes == 0
    assert old.replace(rpg_byte_reset_bytes=4096).byte_reset_bytes == 4096
    assert p.replace(rpg_byte_reset=16384).byte_reset_bytes == 16384 * 64
    with pytest.raises(ValueError, match="rpg_byte_reset_unit_bytes"):
        DcqcnParams(rpg_byte_reset_unit_bytes=0)
    with pytest.raises(ValueError, match="rpg_byte_reset_bytes"):
        DcqcnParams(rpg_byte_reset_bytes=-1)
