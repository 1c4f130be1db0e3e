"""Collectives on non-blocking fabrics against their closed forms (nccl-tests definitions)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.collectives import CollectiveCall, busbw_factor, run_collective, run_concurrent
from netsim.collectives.nccl import NcclConfig
from netsim.flow import SharingModel

S = 1 << 30
ALPHA_US = 5.0


def _nic_Bps(fabric):
    """NIC goodput B in bytes/s: line rate times the RoCEv2 payload fraction."""
    line = float(fabric.link_capacity_bps[fabric.link_kind == "host"].max())
    return line * SharingModel().wire_efficiency / 8


def _cfg(**kw):
    base = dict(alpha_net_us=ALPHA_US, alpha_nvlink_us=ALPHA_US, base_latency_us=0.0)
    base.update(kw)
    return NcclConfig(**base)


@pytest.mark.parametrize("channels,qps", [(1, 1), (4, 1), (2, 4)])
def test_ring_allreduce_closed_form(one_tor, channels, qps):
    n, b = 8, _nic_Bps(one_tor)
    res = run_collective(one_tor, "allreduce", n, S, _cfg(channels=channels,
                                                          qps_per_connection=qps))
    want = 2 * (n - 1) / n * S / b + 2 * (n - 1) * ALPHA_US * 1e-6
    assert res.time_s == pytest.approx(want, rel=0.01)
    assert res.algbw_GBps == pytest.approx(S / res.time_s / 1e9)


def test_ring_busbw_reaches_link_bandwidth(one_tor):
    # without per-step latency, busbw is the NIC bandwidth B itself
    res = run_collective(one_tor, "allreduce", 8, S, _cfg(alpha_net_us=0, alpha_nvlink_us=0))
    assert res.busbw_GBps == pytest.approx(_nic_Bps(one_tor) / 1e9, rel=1e-6)


@pytest.mark.parametrize("op", ["allgather", "reducescatter"])
def test_ring_allgather_reducescatter_closed_form(one_tor, op):
    n, b = 8, _nic_Bps(one_tor)
    res = run_collective(one_tor, op, n, S, _cfg())
    assert res.time_s == pytest.approx((n - 1) / n * S / b + (n - 1) * ALPHA_US * 1e-6, rel=0.01)
    assert res.busbw_GBps == pytest.approx(res.algbw_GBps * (n - 1) / n)


def test_alltoall_and_sendrecv_are_nic_bound(one_tor):
    n, b = 8, _nic_Bps(one_tor)
    a2a = run_collective(one_tor, "alltoall", n, S, _cfg(alpha_net_us=0))
    # every rank sends (n-1)/n of S through its NIC
    assert a2a.time_s == pytest.approx((n - 1) / n * S / b, rel=1e-6)
    sr = run_collective(one_tor, "sendrecv", n, S, _cfg(alpha_net_us=0))
    assert sr.time_s == pytest.approx(S / b, rel=1e-6)
    assert sr.busbw_GBps == pytest.approx(b / 1e9, rel=1e-6)


def test_broadcast_pipeline(one_tor):
    n, b = 8, _nic_Bps(one_tor)
    cfg = _cfg(alpha_net_us=0, channels=1)
    res = run_collective(one_tor, "broadcast", n, S, cfg)
    # chain of n-1 hops, chunked: S/B plus the fill of (n-2) chunks
    assert res.time_s == pytest.approx((S + (n - 2) * cfg.chunk_bytes) / b, rel=1e-6)


def test_multi_gpu_servers_use_every_rail(rail_pod):
    # 32 ranks on 4 servers of 8 GPUs: the ring crosses servers on 8 rails (16 channels)
    n, servers, b = 32, 4, _nic_Bps(rail_pod)
    res = run_collective(rail_pod, "allreduce", n, S, _cfg(alpha_net_us=0, alpha_nvlink_us=0))
    # each server sends 2(n-1)/n x S over its 8 NICs of bandwidth B (the NVLink hops are faster)
    assert res.time_s == pytest.approx(2 * (n - 1) / n * S / (8 * b), rel=1e-6)
    assert res.servers == servers


def test_hierarchical_matches_its_phases(rail_pod):
    cfg = _cfg(algo="hierarchical", alpha_net_us=0, alpha_nvlink_us=0)
    res = run_collective(rail_pod, "allreduce", 32, S, cfg)
    names = [p["name"] for p in res.phases]
    assert names == ["intra-reducescatter", "inter-allreduce", "intra-allgather"]
    # the inter-server phase: 8 rail rings of 4 servers, each all-reducing S/8 at NIC speed B
    inter = res.phases[1]["time_s"]
    assert inter == pytest.approx(2 * 3 / 4 * (S / 8) / _nic_Bps(rail_pod), rel=1e-6)


def test_tree_busbw_close_to_ring_on_nonblocking(one_tor):
    ring = run_collective(one_tor, "allreduce", 8, S, _cfg(alpha_net_us=0, alpha_nvlink_us=0))
    tree = run_collective(one_tor, "allreduce", 8, S, _cfg(algo="tree", alpha_net_us=0,
                                                           alpha_nvlink_us=0))
    assert tree.algo == "tree"
    assert 0.4 < tree.busbw_GBps / ring.busbw_GBps <= 1.05


def test_concurrent_groups_share_the_nic(one_tor):
    # two all-reduces on the same 8 GPUs at once each get half the bandwidth
    cfg = _cfg(alpha_net_us=0, alpha_nvlink_us=0)
    alone = run_collective(one_tor, "allreduce", 8, S, cfg).time_s
    ends = run_concurrent(one_tor, [CollectiveCall("allreduce", 8, S),
                                    CollectiveCall("allreduce", 8, S)], cfg)
    np.testing.assert_allclose(ends, 2 * alone, rtol=1e-6)
    # staggered: the second starts when the first is half done; total work is conserved
    ends = run_concurrent(one_tor, [CollectiveCall("allreduce", 8, S),
                                    CollectiveCall("allreduce", 8, S, start_s=alone / 2)], cfg)
    assert max(ends) == pytest.approx(2 * alone, rel=1e-6)
    assert ends[0] == pytest.approx(1.5 * alone, rel=1e-6)


def test_busbw_factors_are_nccl_tests():
    assert busbw_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert busbw_factor("alltoall", 8) == pytest.approx(7 / 8)
    assert busbw_factor("broadcast", 8) == 1.0


def test_bad_inputs_name_the_field(one_tor):
    with pytest.raises(ValueError, match="op="):
        run_collective(one_tor, "allsum", 8, S)
    with pytest.raises(ValueError, match="ranks"):
        run_collective(one_tor, "allreduce", 9, S)
    with pytest.raises(ValueError, match="channels"):
        NcclConfig(channels=0)
