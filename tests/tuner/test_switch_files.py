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
