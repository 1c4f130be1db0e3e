"""Builder counts against closed forms (fat-tree, MegaScale derivation, leaf-spine)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from topologies import Clos3Spec, LeafSpineSpec, clos3, fat_tree, leaf_spine
from topologies.units import gbps


def _degree(fabric, role, kind=None):
    """Out-degree per switch of ``role``, optionally counting only links of ``kind``."""
    src_role = fabric.node_role[fabric.link_src]
    sel = src_role == role
    if kind is not None:
        sel &= fabric.link_kind == kind
    counts = np.bincount(fabric.link_src[sel], minlength=len(fabric.nodes))
    return counts[fabric.node_role == role]


@pytest.mark.parametrize("k", [2, 4, 6, 8, 12])
def test_fat_tree_closed_forms(k):
    f = fat_tree(k)
    assert len(f.gpus) == len(f.nics) == len(f.servers) == k ** 3 // 4
    sw = {t: len(v) for t, v in f.switches.items()}
    assert sw == {"tor": k * k // 2, "agg": k * k // 2, "core": k * k // 4}
    assert sum(sw.values()) == 5 * k * k // 4
    for role in ("tor", "agg", "core"):  # every switch uses exactly its k ports
        assert (_degree(f, role) == k).all()
    kinds = f.link_kind[0::2]
    assert (kinds == "host").sum() == k ** 3 // 4
    assert (kinds == "tor-agg").sum() == (kinds == "agg-core").sum() == k ** 3 // 4


def test_megascale_counts_match_derivation(megascale):
    s = Clos3Spec()  # the MegaScale parameters (NSDI'24 §3.6)
    nics = s.servers * s.nics_per_server                          # 12,288 x 200G
    assert s.servers * s.gpus_per_server == 12_288
    tor_down = tor_up = s.switch_radix // 2                       # 1:1 -> 32 down, 32 up
    host_ports = tor_down * s.tor_downlink_split                  # 64 x 200G per ToR
    tors = nics // host_ports                                     # 192
    tors_per_pod = s.switch_radix // 2                            # an agg's 32 downlinks
    pods = tors // tors_per_pod                                   # 6
    aggs = pods * tor_up                                          # 32 per pod -> 192
    plane_size = max(d for d in range(1, tor_up + 1)
                     if tor_up % d == 0 and d * pods <= s.switch_radix)   # 8
    cores = (tor_up // plane_size) * (s.switch_radix // 2)        # 4 planes x 32 = 128
    assert (tors, pods, aggs, plane_size, cores) == (192, 6, 192, 8, 128)
    f = megascale
    assert len(f.gpus) == 12_288 and len(f.nics) == nics and len(f.servers) == 1536
    assert {t: len(v) for t, v in f.switches.items()} == {"tor": tors, "agg": aggs,
                                                          "core": cores}
    kinds = f.link_kind[0::2]
    assert (kinds == "tor-agg").sum() == tors * tor_up == 6144
    assert (kinds == "agg-core").sum() == aggs * (s.switch_radix // 2) == 6144
    assert (_degree(f, "tor", "host") == host_ports).all()
    assert (_degree(f, "tor", "tor-agg") == tor_up).all()
    assert (_degree(f, "agg") == s.switch_radix).all()
    assert (_degree(f, "core") == plane_size * pods).all()        # 48 of 64 ports used
    host = f.link_kind == "host"
    assert (f.link_capacity_bps[host] == gbps(200)).all()
    assert (f.link_capacity_bps[f.link_kind == "tor-agg"] == gbps(400)).all()
    # uplinks carry as much as downlinks at every tier (1:1)
    assert f.link_capacity_bps[host].sum() == f.link_capacity_bps[f.link_kind == "tor-agg"].sum()


def test_multi_rail_wiring(megascale):
    f, w = megascale, megascale.wiring
    tor = w.nic_tor.reshape(len(f.servers), f.nics_per_server)    # (server, rail)
    groups = tor.reshape(-1, 64, f.nics_per_server)               # 64 servers per ToR group
    assert (groups == groups[:, :1, :]).all()                     # rail r of a group: one ToR
    assert all(len(set(g[0].tolist())) == f.nics_per_server for g in groups)


def test_every_pair_connected(k4, k8, leafspine, megascale):
    for f in (k4, k8, leafspine):
        assert nx.is_strongly_connected(f.graph)
    n = len(megascale.nodes)
    adj = sp.coo_matrix((np.ones(megascale.num_links), (megascale.link_src, megascale.link_dst)),
                        shape=(n, n))
    ncomp, _ = connected_components(adj, directed=True, connection="strong")
    assert ncomp == 1


def test_arrays_match_graph(k8):
    g = k8.graph
    assert g.number_of_edges() == k8.num_links
    for u, v, d in g.edges(data=True):
        i = d["link_id"]
        assert k8.nodes[k8.link_src[i]] == u and k8.nodes[k8.link_dst[i]] == v
        assert d["capacity_bps"] == k8.link_capacity_bps[i] and d["kind"] == k8.link_kind[i]
        assert d["phys"] == i // 2 and k8.link_id(u, v) == i
        assert g.has_edge(v, u) and g[v][u]["phys"] == d["phys"]
    roles = nx.get_node_attributes(g, "role")
    assert set(roles.values()) == {"gpu", "nic", "tor", "agg", "core"}


def test_server_membership(megascale):
    f = megascale
    gpus = f.server_gpus("srv7")
    assert len(gpus) == 8
    nics = [f.gpu_nic(x) for x in gpus]
    assert len(set(nics)) == 8 and {f.nic_server(x) for x in nics} == {"srv7"}
    g = f.graph
    assert g.has_edge("srv7-gpu3", "srv7-nvsw") and g.has_edge("srv7-gpu3", nics[3])
    assert g["srv7-gpu3"]["srv7-nvsw"]["kind"] == "nvlink"
    assert len(np.unique(f.nic_ip)) == len(f.nics)


def test_shared_nic_rails():
    f = clos3(Clos3Spec(name="t", servers=8, gpus_per_server=8, nics_per_server=4,
                        servers_per_tor_group=4, switch_radix=8))
    nics = [f.gpu_nic(x) for x in f.server_gpus("srv0")]
    assert nics == [f"srv0-nic{i // 2}" for i in range(8)]   # two GPUs per rail NIC


def test_leaf_spine_counts(leafspine):
    s = LeafSpineSpec()
    f = leafspine
    assert len(f.gpus) == s.leaves * s.servers_per_leaf
    assert {t: len(v) for t, v in f.switches.items()} == {"tor": s.leaves, "agg": s.spines,
                                                          "core": 0}
    assert (_degree(f, "agg") == s.leaves).all()
    multi = leaf_spine(LeafSpineSpec(leaves=8, spines=4, servers_per_leaf=4, nics_per_server=2,
                                     gpus_per_server=2))
    assert len(multi.servers) == 8 // 2 * 4 and len(multi.nics) == 2 * len(multi.servers)


def test_oversubscribed_clos_counts():
    f = clos3(Clos3Spec(name="o", servers=96, gpus_per_server=1, nics_per_server=1,
                        nic_speed_gbps=100, port_speed_gbps=100, switch_radix=16,
                        tor_downlink_split=1, tor_down_up=(3, 1), servers_per_tor_group=12))
    assert (_degree(f, "tor", "host") == 12).all() and (_degree(f, "tor", "tor-agg") == 4).all()
    # 8 ToRs fit under one pod of 8-downlink aggs: a 2-tier fabric, 4 aggs, no core
    assert {t: len(v) for t, v in f.switches.items()} == {"tor": 8, "agg": 4, "core": 0}


def test_megascale_4x_counts():
    from topologies import load_fabric

    f = load_fabric("megascale-4x")
    tors = 4 * 1536 * 8 // 64                       # 768
    pods = tors // 32                               # 24
    s = max(d for d in (1, 2, 4, 8, 16, 32) if d * pods <= 64)   # 2
    assert (tors, pods, s) == (768, 24, 2)
    assert {t: len(v) for t, v in f.switches.items()} == {
        "tor": tors, "agg": pods * 32, "core": (32 // s) * 32}
    assert (_degree(f, "core") == s * pods).all()
    assert len(np.unique(f.nic_ip)) == len(f.nics) == 49_152
