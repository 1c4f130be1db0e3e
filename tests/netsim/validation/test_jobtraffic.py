"""The job's traffic patterns as packet scenarios (netsim.validation.jobtraffic)."""

from __future__ import annotations

import pytest

from netsim.validation.jobtraffic import JobScenario, run_scenario


def _tor(sc: JobScenario, host: int) -> int:
    return host // sc.hosts_per_tor


def test_dp_ring_crosses_tors_and_is_a_ring() -> None:
    sc = JobScenario("dp_ring", tors=4, hosts_per_tor=3, spines=3)
    pairs = sc.pairs()
    assert sorted(a for a, _ in pairs) == list(range(sc.hosts)) == sorted(b for _, b in pairs)
    assert all(_tor(sc, a) != _tor(sc, b) for a, b in pairs)


def test_pp_and_all_to_all_shapes() -> None:
    sc = JobScenario("pp_send", tors=3, hosts_per_tor=2, spines=2)
    assert all(_tor(sc, b) == (_tor(sc, a) + 1) % sc.tors for a, b in sc.pairs())
    a2a = JobScenario("all_to_all", tors=2, hosts_per_tor=2, spines=2, msg_bytes=300_000)
    assert len(a2a.pairs()) == 4 * 3
    assert all(f.size_bytes == 100_000 for f in a2a.flows())  # msg / (hosts - 1) per pair


def test_incast_bystanders_avoid_the_hot_port() -> None:
    sc = JobScenario("incast8", tors=4, hosts_per_tor=4, spines=4)
    pairs = sc.pairs()
    senders = [a for a, b in pairs if b == 0]
    bystanders = [(a, b) for a, b in pairs if b != 0]
    assert len(senders) == 8 and bystanders
    assert all(_tor(sc, b) == 0 and _tor(sc, a) != 0 and a not in senders for a, b in bystanders)
    with pytest.raises(ValueError, match="more than 16"):
        JobScenario("incast16", tors=2, hosts_per_tor=8)


def test_run_scenario_reports_the_study_metrics() -> None:
    sc = JobScenario("incast8", nic_gbps=100, uplink_gbps=100, tors=3, hosts_per_tor=4, spines=4,
                     msg_bytes=200_000)
    r = run_scenario(sc, "dcqcn", seed=1)
    assert r["completed"] and r["flows"] == len(sc.pairs())
    assert 0.5 < r["goodput"] <= 1.0 + 1e-9
    assert r["fct_p50_us"] <= r["fct_p99_us"] <= r["makespan_us"] + 1e-9
    for key in ("pfc_pauses", "paused_us", "hol_victims", "ecn_marks", "cnps"):
        assert r[key] >= 0
