"""Flow engine: line rate, fair sharing over time, conservation, failures, the DCQCN model."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow import SharingModel, simulate_flows
from netsim.scenario.traffic import Flow, permutation

S = 50_000_000


def _nic_bps(fabric):
    """NIC goodput: line rate times the RoCEv2 payload fraction."""
    line = float(fabric.link_capacity_bps[fabric.link_kind == "host"].max())
    return line * SharingModel().wire_efficiency


def test_single_flow_runs_at_line_rate(fabric_400g):
    f = fabric_400g
    res = simulate_flows(f, [Flow(f.nics[0], f.nics[9], S)])
    assert 0 < res.latency_ps[0] < 10_000_000  # propagation: nanoseconds to microseconds
    transfer_s = (res.finish_ps[0] - res.latency_ps[0]) / 1e12
    assert transfer_s == pytest.approx(S * 8 / _nic_bps(f), rel=1e-9)


def test_incast_shares_the_receiver_link(fabric_400g):
    f = fabric_400g
    n = 5
    flows = [Flow(f.nics[i], f.nics[31], S) for i in range(1, n + 1)]
    res = simulate_flows(f, flows)
    np.testing.assert_allclose(res.first_rate_bps, _nic_bps(f) / n, rtol=1e-9)
    np.testing.assert_allclose((res.finish_ps - res.latency_ps) / 1e12, n * S * 8 / _nic_bps(f),
                               rtol=1e-9)


def test_late_arrival_closed_form(fabric_400g):
    # A alone until t1, both at B/2, then B alone: B ends at 2S/B; A at t1 + 2 (S - B t1)/B
    f = fabric_400g
    b = _nic_bps(f)
    t1_s = 0.25 * S * 8 / b
    flows = [Flow(f.nics[1], f.nics[31], S, 0), Flow(f.nics[2], f.nics[31], S, round(t1_s * 1e12))]
    res = simulate_flows(f, flows)
    done_s = (res.finish_ps - res.latency_ps) / 1e12
    assert done_s[0] == pytest.approx(t1_s + 2 * (S * 8 / b - t1_s), rel=1e-9)
    assert done_s[1] == pytest.approx(2 * S * 8 / b, rel=1e-9)


def test_bytes_are_conserved_on_every_path(fabric_400g, rng):
    f = fabric_400g
    flows = permutation(f, S, rng, qps=2)
    res = simulate_flows(f, flows)
    total_bytes = res.links.bytes_per_link
    kinds = f.link_kind
    # NIC->ToR links: exactly one flow of S bytes leaves every NIC
    up = np.array([int(np.flatnonzero((f.link_src == f.node_index[n]) & (kinds == "host"))[0])
                   for n in f.nics])
    np.testing.assert_allclose(total_bytes[up], S)
    # bytes into the ToR tier equal bytes out of it (no loss, no duplication)
    tor_nodes = {f.node_index[t] for t in f.switches["tor"]}
    into = total_bytes[np.isin(f.link_dst, list(tor_nodes))].sum()
    out = total_bytes[np.isin(f.link_src, list(tor_nodes))].sum()
    assert into == pytest.approx(out)


def test_failed_uplinks_rehash_onto_survivors(fabric_400g):
    f = fabric_400g
    tor0 = f.node_index[f.switches["tor"][0]]
    ups = np.flatnonzero((f.link_src == tor0) & (f.link_kind == "tor-agg"))
    failed = ups[1:]  # one uplink of ToR 0 survives
    flows = [Flow(f.nics[i], f.nics[i + 8], S) for i in range(8)]
    res = simulate_flows(f, flows, failed_links=failed)
    assert np.all(res.links.bytes_per_link[failed] == 0)
    assert res.links.bytes_per_link[ups[0]] == pytest.approx(8 * S)
    # all eight flows squeeze through one 400G uplink
    done_s = (res.finish_ps - res.latency_ps) / 1e12
    np.testing.assert_allclose(done_s, 8 * S * 8 / _nic_bps(f), rtol=1e-9)


def test_dcqcn_derates_only_contended_links(fabric_400g):
    f = fabric_400g
    model = SharingModel("dcqcn", dcqcn_efficiency=0.9, wire_efficiency=1.0)
    alone = simulate_flows(f, [Flow(f.nics[0], f.nics[1], S)], model=model)
    line = float(f.link_capacity_bps[f.link_kind == "host"].max())
    assert alone.first_rate_bps[0] == pytest.approx(line)
    pair = simulate_flows(f, [Flow(f.nics[0], f.nics[2], S), Flow(f.nics[1], f.nics[2], S)],
                          model=model)
    np.testing.assert_allclose(pair.first_rate_bps, 0.9 * line / 2)


def test_bad_endpoint_is_named(fabric_400g):
    with pytest.raises(ValueError, match="nope"):
        simulate_flows(fabric_400g, [Flow("nope", fabric_400g.nics[0], S)])
