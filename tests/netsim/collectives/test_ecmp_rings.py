"""ECMP on collectives: persistent QPs, ring slowdown vs hashing statistics, failures."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.collectives import CollectiveCall, run_collective, simulate_calls
from netsim.collectives.nccl import NcclConfig
from netsim.flow import SharingModel
from netsim.flow.stats import max_load_distribution

S = 1 << 28


def _strided(n_tors=4, per_tor=8):
    # rank order 0, 8, 16, 24, 1, 9, ...: every ring edge goes from ToR t to ToR t+1
    return [t * per_tor + i for i in range(per_tor) for t in range(n_tors)]


def _cfg(qps=1):
    return NcclConfig(channels=1, qps_per_connection=qps, alpha_net_us=0, alpha_nvlink_us=0,
                      base_latency_us=0)


def test_connections_keep_their_qps_across_calls(two_tier):
    a = run_collective(two_tier, "allreduce", _strided(), S, _cfg(), seed=3)
    b = run_collective(two_tier, "allreduce", _strided(), S, _cfg(), seed=3)
    assert a.time_s == b.time_s
    assert a.links.hottest == b.links.hottest
    # back-to-back calls of one communicator in one run: same paths, same duration
    first, second = simulate_calls(two_tier, [CollectiveCall("allreduce", _strided(), S),
                                              CollectiveCall("allreduce", _strided(), S,
                                                             start_s=a.time_s * 1.01)],
                                   _cfg(), seed=3)
    assert first.time_s == pytest.approx(second.time_s, rel=1e-9)


def test_ring_slowdown_matches_hash_statistics(two_tier):
    # a lockstep ring runs at the pace of its most collided uplink: 8 edges per ToR on 8 uplinks
    b_Bps = 400e9 * SharingModel().wire_efficiency / 8
    n = 32
    ideal = 2 * (n - 1) / n * S / b_Bps
    slow = np.array([run_collective(two_tier, "allreduce", _strided(), S, _cfg(), seed=s).time_s
                     for s in range(60)]) / ideal
    p = max_load_distribution(8, 8, 4)
    k = np.arange(len(p))
    mean = float((p * np.maximum(k, 1)).sum())
    sd = float(np.sqrt((p * np.maximum(k, 1) ** 2).sum() - mean ** 2))
    assert abs(slow.mean() - mean) <= 4 * sd / np.sqrt(len(slow)) + 0.02 * mean


def test_more_qps_per_connection_speed_up_the_ring(two_tier):
    def mean_busbw(q):
        return np.mean([run_collective(two_tier, "allreduce", _strided(), S, _cfg(q),
                                       seed=s).busbw_GBps for s in range(20)])
    b1, b4 = mean_busbw(1), mean_busbw(4)
    assert b4 > 1.2 * b1


def test_failed_uplink_is_avoided(two_tier):
    f = two_tier
    tor0 = f.node_index[f.switches["tor"][0]]
    ups = np.flatnonzero((f.link_src == tor0) & (f.link_kind == "tor-agg"))
    res = run_collective(f, "allreduce", _strided(), S, _cfg(4), failed_links=ups[:4])
    assert np.all(res.links.bytes_per_link[ups[:4]] == 0)
    assert res.links.bytes_per_link[ups[4:]].sum() > 0
    # ToR 0's 8 edges x 4 QPs now share 4 uplinks: never faster than with all 8 alive
    healthy = run_collective(f, "allreduce", _strided(), S, _cfg(4))
    assert res.time_s >= healthy.time_s * (1 - 1e-9)
