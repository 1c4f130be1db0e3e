"""experiments/retransmit: packet engine and closed form agree; the physics of a flap."""

from __future__ import annotations

import pytest

from experiments.retransmit.study import closed_form_point, job_survival, packet_point

# NCCL_IB_TIMEOUT=14: T = 67 ms; retry 3 -> a 201 ms window, the error at 268 ms
T14 = 4.096e-6 * 2**14


@pytest.mark.parametrize("flap_s", [0.001, 0.1])
def test_short_flap_survives_and_stalls_until_the_next_retry_in_both_models(flap_s) -> None:
    c = closed_form_point(14, 3, flap_s, False)
    p = packet_point(14, 3, flap_s, False, flows=2)
    assert c["qp_survives"] and p["job_survives"] and p["qp_survival"] == 1.0
    assert p["stall_s"] >= flap_s and c["stall_s"] >= flap_s
    # the packet engine adds a few microseconds of round trips to the retry time
    assert p["stall_s"] == pytest.approx(c["stall_s"], rel=1e-3, abs=1e-4)


def test_flap_beyond_the_window_kills_the_qp_at_the_detection_time() -> None:
    flap = 2 * 3 * T14  # twice the survivable window
    c = closed_form_point(14, 3, flap, False)
    p = packet_point(14, 3, flap, False, flows=2)
    assert not c["qp_survives"] and not p["job_survives"] and p["qp_survival"] == 0.0
    assert c["detection_s"] == pytest.approx(4 * T14)
    assert p["detection_s"] == pytest.approx(c["detection_s"], rel=1e-3)


def test_adaptive_retransmission_recovers_a_short_flap_sooner() -> None:
    fixed = packet_point(14, 3, 0.01, False, flows=2)
    adaptive = packet_point(14, 3, 0.01, True, flows=2)
    assert adaptive["job_survives"] and fixed["job_survives"]
    assert 0.01 <= adaptive["stall_s"] < 0.5 * fixed["stall_s"]
    c_fixed, c_adaptive = (closed_form_point(14, 3, 0.01, a) for a in (False, True))
    assert c_adaptive["stall_s"] < c_fixed["stall_s"]


def test_a_longer_window_raises_job_survival() -> None:
    short, long = (job_survival(w, 1.0, 6.0, 10) for w in (1.0, 30.0))
    assert 0.0 <= short < long <= 1.0
