"""Operator files that are right (issue #26 item 5): cable length per tier from the fabric
file, not from the link latency."""

from __future__ import annotations

import pytest

from topologies import load_fabric
from topologies.builders import AGG_CORE_CABLE_M, HOST_CABLE_M, TOR_AGG_CABLE_M
from topologies.files import build, spec_from_dict
from tuner.render import headroom_bytes
from tuner.switchports import cable_lengths_m, headroom_ports


def test_cable_length_per_tier_defaults_from_sonic():
    """Fails on the old code: every port was 100 m (500 ns link latency / 5 ns per metre)."""
    rows = {r["link_kind"]: r for r in headroom_ports(load_fabric("megascale"))}
    assert {k: r["cable_m"] for k, r in rows.items()} == {
        "host": HOST_CABLE_M, "tor-agg": TOR_AGG_CABLE_M, "agg-core": AGG_CORE_CABLE_M}
    assert (HOST_CABLE_M, TOR_AGG_CABLE_M, AGG_CORE_CABLE_M) == (5.0, 40.0, 300.0)
    for r in rows.values():
        assert r["headroom_bytes"] == headroom_bytes(int(r["port_speed_gbps"] * 1e9), r["cable_m"])


@pytest.mark.parametrize("data, expect", [
    ({"kind": "clos3", "servers": 64, "host_cable_m": 3, "tor_agg_cable_m": 30,
      "agg_core_cable_m": 150}, {"host": 3.0, "tor-agg": 30.0, "agg-core": 150.0}),
    ({"kind": "fat_tree", "k": 4, "host_cable_m": 2}, {"host": 2.0, "tor-agg": 40.0,
                                                       "agg-core": 300.0}),
    ({"kind": "leaf_spine", "uplink_cable_m": 80}, {"host": 5.0, "tor-agg": 80.0}),
])
def test_cable_length_comes_from_the_fabric_file(data, expect):
    fabric = build(spec_from_dict(data))
    assert cable_lengths_m(fabric) == expect
    got = {r["link_kind"]: r["cable_m"] for r in headroom_ports(fabric)}
    assert got == {k: v for k, v in expect.items() if k in got}


def test_latency_no_longer_sets_the_cable():
    slow = build(spec_from_dict({"kind": "clos3", "servers": 64, "host_latency_ns": 5000}))
    fast = build(spec_from_dict({"kind": "clos3", "servers": 64, "host_latency_ns": 100}))
    assert headroom_ports(slow) == headroom_ports(fast)


def test_each_kept_value_says_where_it_comes_from():
    """Fails on the old rows: every CC value read "vendor default kept", Pmax 0.2 included,
    though 0.2 is the HPCC ns-3 simulator's value (Cumulus RoCE: 100; SONiC's lossless WRED
    profile: 5%), and the two switch OSes' ECN defaults differ."""
    from tuner import ccreport
    from tuner.ccsearch import search_job_cc
    from tuner.render import Setting

    cc = search_job_cc([], ["DP rings: 2 QPs on t0->a0 (400G tor-agg), offered 0.50x"])
    rows: list[Setting] = []
    ccreport.settings_rows(cc, rows)
    by = {r.name: r.reason for r in rows}
    assert by["ECN Pmax"].startswith("simulator's value kept") and "HPCC" in by["ECN Pmax"]
    for name in ("ECN Kmin (bytes)", "ECN Kmax (bytes)"):
        assert by[name].startswith("Cumulus 5.14 RoCE default kept") and "SONiC" in by[name]
    nic = [r for r in rows if r.scope == "nic"]
    assert nic and all(r.reason.startswith("ConnectX firmware default kept") for r in nic)
    assert not any("vendor default" in r.reason for r in rows)


def test_pfc_watchdog_row_fits_the_retry_window():
    from tuner import sonic
    from tuner.switchports import watchdog_row

    row = watchdog_row(load_fabric("megascale"), {"NCCL_IB_TIMEOUT": "18",
                                                  "NCCL_IB_RETRY_CNT": "7"})
    assert row.name == "PFC watchdog" and "drop" in row.recommended
    assert f"detection {sonic.PFCWD_DETECTION_MS} ms" in row.recommended
    assert "7.52 s" in row.reason          # 4.096 us x 2^18 x 7
    with pytest.raises(ValueError):        # a drop period NCCL's QPs would not survive
        watchdog_row(load_fabric("megascale"), {"NCCL_IB_TIMEOUT": "10",
                                                "NCCL_IB_RETRY_CNT": "7"})
