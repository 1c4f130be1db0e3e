"""PFC-aware sharing (netsim.flow.pfc) on crafted cases with hand-derived answers.

Every link has capacity 1. Answers follow from the three rules of the model (FIFO egress:
throughput in proportion to queued bytes; one XOFF threshold per switch, so paused ingress
ports share a congested egress port-fairly, a port feeding two congested egresses with half its
weight at each; a PAUSE stops every flow of the paused port).
"""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow.engine import simulate_flows
from netsim.flow.maxmin import Incidence, maxmin_rates
from netsim.flow.pfc import pfc_rates, waterfill
from netsim.flow.sharing import SharingModel
from netsim.scenario.traffic import Flow

S = 50_000_000


def rates(paths, num_links, model="pfc"):
    indptr = np.r_[0, np.cumsum([len(p) for p in paths])]
    inc = Incidence.from_csr(indptr, np.concatenate(paths), num_links)
    cap = np.ones(num_links)
    return pfc_rates(inc, cap) if model == "pfc" else maxmin_rates(inc, cap)


def test_waterfill_weighted_level():
    # one link of capacity 3: demands 0.5 (weight 1), inf (weight 1), inf (weight 2):
    # 0.5 + L + 2L = 3 -> L = 5/6
    lam = waterfill(np.zeros(3, np.int64), np.array([0.5, np.inf, np.inf]),
                    np.array([1.0, 1.0, 2.0]), np.array([3.0]))
    np.testing.assert_allclose(lam, [5 / 6])
    assert np.isinf(waterfill(np.zeros(2, np.int64), np.array([1.0, 1.0]), np.ones(2),
                              np.array([3.0]))).all()


def test_incast_on_distinct_ingress_ports_is_maxmin():
    # links 0..2: sender uplinks; 3: the receiver's downlink
    got = rates([[0, 3], [1, 3], [2, 3]], 4)
    np.testing.assert_allclose(got, [1 / 3] * 3)


def test_flows_merged_on_one_ingress_port_share_its_port_share():
    # S1 -> S2 trunk (link 2) carries flows 0 and 1 into S2; flow 2 enters S2 on its own port 3;
    # all leave on link 4. Port-fair at link 4: trunk 1/2 (split 1/4, 1/4), port 3 1/2.
    got = rates([[0, 2, 4], [1, 2, 4], [3, 4]], 5)
    np.testing.assert_allclose(got, [0.25, 0.25, 0.5])
    np.testing.assert_allclose(rates([[0, 2, 4], [1, 2, 4], [3, 4]], 5, "maxmin"), [1 / 3] * 3)


def test_sender_feeding_two_congested_receivers_gets_half_weight_at_each():
    # sender port 1 carries flows to receivers 4 and 5; ports 0 and 2 send one flow each.
    # Port 1 splits its threshold over two queues: weights 1 : 1/2 -> 2/3 and 1/3.
    got = rates([[0, 4], [1, 4], [1, 5], [2, 5]], 6)
    np.testing.assert_allclose(got, [2 / 3, 1 / 3, 1 / 3, 2 / 3])


def test_head_of_line_victim_is_paused_with_its_port():
    # ports 0, 1, 2 incast into link 4; port 0 also sends to an idle receiver (link 5).
    # Port 0 gets 1/3 at link 4 and is paused: its flow to link 5 drops to 1/3 as well
    # (max-min would give it 2/3).
    got = rates([[0, 4], [1, 4], [2, 4], [0, 5]], 6)
    np.testing.assert_allclose(got, [1 / 3, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(rates([[0, 4], [1, 4], [2, 4], [0, 5]], 6, "maxmin")[3], 2 / 3)


def test_back_pressure_reaches_the_switch_upstream():
    # trunk 2 (S1 -> S2) gets 1/2 of link 4 at S2 and is paused; S1 shares the trunk's 1/2
    # port-fairly between its ports 0 and 1 (1/4 each). Port 0 also sends to an idle link 5 at
    # S1: paused with it, that flow gets 1/4 too.
    got = rates([[0, 2, 4], [1, 2, 4], [3, 4], [0, 5]], 6)
    np.testing.assert_allclose(got, [0.25, 0.25, 0.5, 0.25])


def test_conservation_and_capacity_on_random_paths():
    rng = np.random.default_rng(5)
    # a two-tier up-down fabric: 8 host uplinks 0..7 -> 2 trunks 8, 9 -> 8 downlinks 10..17
    paths = []
    for _ in range(20):
        s, d = rng.integers(0, 8, 2)
        paths.append([int(s), 8 + int(rng.integers(0, 2)), 10 + int(d)])
    got = rates(paths, 18)
    load = np.zeros(18)
    for p, r in zip(paths, got, strict=True):
        load[p] += r
    assert np.all(load <= 1 + 1e-9)
    assert np.all(got > 0)


def test_sharing_model_accepts_pfc():
    m = SharingModel("pfc", wire_efficiency=1.0)
    inc = Incidence.from_csr(np.array([0, 2, 4, 6, 8]), np.array([0, 4, 1, 4, 1, 5, 2, 5]), 6)
    np.testing.assert_allclose(m.rates(inc, np.ones(6) * 100.0),
                               [200 / 3, 100 / 3, 100 / 3, 200 / 3])


def test_pfc_needs_ordered_paths():
    # a matrix (or entries) loses the hop order of each path
    with pytest.raises(ValueError, match="path order"):
        pfc_rates(Incidence.from_matrix(np.ones((2, 2))), np.ones(2))


def test_engine_head_of_line_victim_on_a_fabric(fabric_400g):
    # NICs 1, 2, 3 incast into NIC 0 (one ToR); NIC 1 also sends to NIC 5 of the same ToR.
    # pfc: NIC 1's port gets 1/3 at NIC 0's downlink and is paused, so its flow to NIC 5 runs
    # at 1/3 too; max-min lets that flow take the 2/3 left on NIC 1's uplink.
    f = fabric_400g
    n = f.nics
    flows = [Flow(n[1], n[0], S), Flow(n[2], n[0], S), Flow(n[3], n[0], S), Flow(n[1], n[5], S)]
    b = float(f.link_capacity_bps[f.link_kind == "host"].max()) * SharingModel().wire_efficiency
    pfc = simulate_flows(f, flows, model="pfc")
    mm = simulate_flows(f, flows, model="maxmin")
    np.testing.assert_allclose(pfc.first_rate_bps, [b / 3] * 4, rtol=1e-9)
    np.testing.assert_allclose(mm.first_rate_bps, [b / 3, b / 3, b / 3, 2 * b / 3], rtol=1e-9)
    # bytes are conserved either way: every flow delivers its size
    assert np.all(pfc.finish_ps > 0) and np.all(pfc.throughput_bps <= b * (1 + 1e-9))
