"""All-to-all load mode against the exact engine: same bytes on every link, same or shorter time.

Load mode routes the exact engine's QPs (same QP numbers, so the same ECMP paths) and takes the
time of the hottest link; the exact engine runs every QP as a commodity of the fluid problem.
Per-link bytes must agree exactly; the load-mode time is a lower bound of the exact one, equal
when the hottest link stays saturated to the end (tolerance measured below, on fabrics where a
network link, not the NIC, is the bottleneck).
"""

from __future__ import annotations

import numpy as np
import pytest

from netsim.collectives import run_collective
from netsim.collectives.load import alltoall_load
from netsim.collectives.nccl import NcclConfig
from topologies import Clos3Spec, clos3

SIZE = 1 << 28


@pytest.fixture(scope="module")
def oversubscribed():
    """48 single-GPU servers on 3:1 ToRs: the ECMP-hashed ToR uplinks are the bottleneck."""
    return clos3(Clos3Spec(name="a2a-3to1", servers=48, gpus_per_server=1, nics_per_server=1,
                           servers_per_tor_group=12, switch_radix=16, tor_down_up=(3, 1)))


PXN, NO_PXN, QPS4 = NcclConfig(), NcclConfig(pxn=False), NcclConfig(qps_per_connection=4)
CASES = [("two_tier", PXN), ("two_tier", NO_PXN), ("two_tier", QPS4), ("rail_pod", PXN),
         ("rail_pod", NO_PXN), ("rail_pod", QPS4), ("oversubscribed", PXN)]


@pytest.mark.parametrize(("fab", "cfg"), CASES,
                         ids=[f"{f}-{i}" for i, (f, _) in enumerate(CASES)])
def test_load_mode_puts_the_exact_bytes_on_every_link(request, fab, cfg):
    fabric = request.getfixturevalue(fab)
    n = len(fabric.gpus)
    exact = run_collective(fabric, "alltoall", n, SIZE, cfg)
    load = alltoall_load(fabric, n, SIZE, cfg)
    np.testing.assert_allclose(load.extra["link_bytes"], exact.links.bytes_per_link,
                               rtol=1e-9, atol=1e-3)
    assert (load.connections, load.qps) == (exact.connections, exact.qps)
    # a lower bound of the fluid run, and close to it: the hottest link stays busy
    assert load.time_s <= exact.time_s * (1 + 1e-9)
    assert load.time_s >= exact.time_s * (1 - 0.05), (load.time_s, exact.time_s)
    if fab == "oversubscribed":  # the case where ECMP placement, not the NIC, sets the time
        assert str(fabric.link_kind[load.extra["bottleneck_link"]]) == "tor-agg"


def test_failed_link_moves_the_bytes_the_same_way(two_tier):
    up = np.flatnonzero(np.asarray(two_tier.link_kind) == "tor-agg")[:1]
    exact = run_collective(two_tier, "alltoall", 32, SIZE, failed_links=up)
    load = alltoall_load(two_tier, 32, SIZE, failed_links=up)
    np.testing.assert_allclose(load.extra["link_bytes"], exact.links.bytes_per_link, rtol=1e-9)
    assert load.extra["link_bytes"][up].sum() == 0


def test_busbw_closed_form_on_one_server(rail_pod):
    # 8 ranks of one server: NVLink only. Each GPU sends 7/8 S over its NVLink port, so
    # time = 7/8 S / B_nvlink + latency, busbw = (S / time) x 7/8.
    cfg = NcclConfig()
    res = alltoall_load(rail_pod, 8, SIZE, cfg)
    b = float(np.asarray(rail_pod.link_capacity_bps)[np.asarray(rail_pod.link_kind) == "nvlink"][0])
    from netsim.flow.sharing import SharingModel

    data_s = 7 / 8 * SIZE * 8 / (b * SharingModel().wire_efficiency * cfg.proto_efficiency)
    assert res.time_s == pytest.approx(data_s + cfg.alpha_nvlink_s + cfg.base_latency_s, rel=1e-9)


@pytest.mark.parametrize("cfg", [PXN, NO_PXN], ids=["pxn", "no-pxn"])
def test_chunk_size_and_heap_setting_change_no_result(oversubscribed, cfg, monkeypatch):
    """Issue 28's speed settings (chunk size, glibc heap thresholds) move no bit of a result."""
    import netsim.collectives.load as load_mod
    from netsim.flow.heap_tuning import retain_freed_memory

    n = len(oversubscribed.gpus)
    runs = []
    for chunk in (4_000_000, 100):  # one chunk; a source server or so per chunk
        monkeypatch.setattr(load_mod, "_CHUNK_QPS", chunk)
        runs.append(alltoall_load(oversubscribed, n, SIZE, cfg))
    retain_freed_memory()
    runs.append(alltoall_load(oversubscribed, n, SIZE, cfg))
    for r in runs[1:]:
        assert np.array_equal(r.extra["link_bytes"], runs[0].extra["link_bytes"])
        assert (r.time_s, r.qps, r.connections) == (runs[0].time_s, runs[0].qps,
                                                     runs[0].connections)
