"""Collision slowdown from the first max-min allocation: closed forms, the flow engine's own
first allocation, QPs against collisions on the 12,288-GPU job."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.collision import collision_slowdown, fabric_paths


@pytest.fixture(scope="module")
def leaf_spine():
    from topologies import load_fabric

    return load_fabric("leaf-spine-64")   # 8 leaves x 8 servers, 100G hosts and uplinks


def _one_uplink_router(fabric, tor: str = "tor0"):
    """ECMP with a single choice: every uplink of ``tor`` but the one to agg0 is down."""
    from topologies.routing import Router

    down = [fabric.link_id(tor, a) for a in fabric.switches["agg"] if a != "agg0"]
    return Router(fabric, seed=0, failed_links=down)


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_forced_collision_closed_form(leaf_spine, k) -> None:
    # k pairs tor0 -> tor1, 2 channels each, all on tor0->agg0->tor1 (100G): 2k channels
    # share the link, each gets 100/(2k) G against 50 G (its NIC's half) on a non-blocking
    # fabric, so every group is max(1, k)x slower, whatever the QP count
    paths = fabric_paths(leaf_spine, router=_one_uplink_router(leaf_spine))
    groups = np.stack([np.arange(k), 8 + np.arange(k)], axis=1)
    for qps in (1, 4):
        sd = collision_slowdown(leaf_spine, groups, qps=qps, paths=paths)
        np.testing.assert_allclose(sd.per_group, float(k), rtol=1e-9)
        assert sd.flows == 2 * k
        assert sd.hot_link["qps"] == 2 * k * qps
        # offered: 2k channels at 50 G (payload) on one 100 G link
        assert sd.hot_link["over"] == pytest.approx(k * _wire(), rel=1e-9)


def _wire() -> float:
    from netsim.flow import SharingModel

    return SharingModel().wire_efficiency


def test_slowdown_is_the_flow_engines_first_allocation(leaf_spine) -> None:
    # the same pairs as independent flows in the flow engine: its first allocation gives each
    # channel flow the rate the slowdown implies (NIC half-rate / slowdown)
    from netsim.flow import simulate_flows
    from netsim.scenario.traffic import Flow

    router = _one_uplink_router(leaf_spine)
    groups = np.array([[0, 8], [1, 9], [2, 10]])
    sd = collision_slowdown(leaf_spine, groups, paths=fabric_paths(leaf_spine, router=router))
    g = leaf_spine.gpus
    flows = [Flow(g[a], g[b], 1 << 20, 0, 1) for a, b in groups for _ in range(2)]
    res = simulate_flows(leaf_spine, flows, router=router)
    half_nic = 100e9 * _wire() / 2
    np.testing.assert_allclose(half_nic / res.first_rate_bps.reshape(-1, 2).min(axis=1),
                               sd.per_group, rtol=1e-9)


def test_no_network_edge_no_slowdown(small_clos) -> None:
    inside = np.arange(8).reshape(1, 8)                 # one server: NVLink only
    sd = collision_slowdown(small_clos, inside)
    assert sd.flows == 0 and sd.worst == 1.0 and sd.hot_link is None
    lone = collision_slowdown(small_clos, np.array([[0, 8]]))   # one pair alone on the fabric
    assert lone.worst == 1.0


def test_more_qps_lower_collisions_on_the_full_fabric_job() -> None:
    # gpt3-175b on all 12,288 GPUs of megascale in the scheduler's order: the 10,752 PP
    # stage pairs collide on ToR uplinks with 1 QP; more QPs spread them over the ECMP paths
    from topologies import load_fabric
    from tuner.jobs import load_job
    from tuner.placement import place
    from tuner.search import job_groups

    fabric = load_fabric("megascale")
    job = load_job("gpt3-175b", dp=192)
    assert job.world == len(fabric.gpus) == 12288
    pp = job_groups(job, place(fabric, job, "linear").gpu_of_rank)["pp"]
    paths = fabric_paths(fabric, 0)
    one, eight = (collision_slowdown(fabric, pp, qps=q, paths=paths) for q in (1, 8))
    assert one.worst > 1.0 and one.hot_link["over"] > 1.0
    assert eight.worst < one.worst and eight.mean < one.mean
    assert (one.per_group >= 1.0).all() and (eight.per_group >= 1.0).all()
