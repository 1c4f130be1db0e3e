"""experiments/ecmp_split: the physics the study's claims rest on, on small fabrics."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.ecmp_split.study import BinsForm, collision_point, fabric_summary, iteration_point


def _mean(fabric, pattern, qps, hashing, servers=128, seeds=(1, 2, 3)):
    return float(np.mean([collision_point(fabric, servers, pattern, qps, hashing, s)["mean"]
                          for s in seeds]))


def test_the_fabrics_differ_only_in_the_split() -> None:
    split, nosplit = fabric_summary("split", 256), fabric_summary("nosplit", 256)
    assert split["gpus"] == nosplit["gpus"] == 2048
    assert split["host_ports"] == 2 * nosplit["host_ports"] == 64
    assert split["tor_up"] == nosplit["tor_up"] == 32


def test_split_downlinks_collide_less_than_400g_ports() -> None:
    for pattern in ("pairs", "dp_ring"):
        assert _mean("split", pattern, 1, "per_switch") < _mean("nosplit", pattern, 1,
                                                               "per_switch")


def test_more_qps_per_connection_spread_the_load() -> None:
    one, eight = (_mean("split", "dp_ring", q, "per_switch") for q in (1, 8))
    assert 1.0 <= eight < one


def test_one_hash_seed_everywhere_polarizes_across_the_core() -> None:
    # 256 servers without the split need 2 pods: flows cross the core tier
    per_switch = _mean("nosplit", "pairs", 1, "per_switch", servers=256, seeds=(1, 2))
    polarized = _mean("nosplit", "pairs", 1, "polarized", servers=256, seeds=(1, 2))
    assert polarized > 1.5 * per_switch


def test_slowdowns_are_never_below_one() -> None:
    r = collision_point("split", 128, "alltoall", 2, "per_switch", 1, alltoall_servers=16)
    assert min(r["slowdowns"]) >= 1.0 and r["groups"] == 8 * 16 * 15


def test_closed_form_of_one_tier() -> None:
    # no collision possible when every link holds all connections
    assert BinsForm(n=4, m=2, c=4).mean_slowdown() == pytest.approx(1.0)
    # two connections on two unit links: half the time they share one -> 0.5 x 1 + 0.5 x 2
    assert BinsForm(n=2, m=2, c=1).mean_slowdown() == pytest.approx(1.5)
    # the split's larger uplink-to-downlink ratio lowers the expected slowdown at one tier
    assert BinsForm(64, 32, 2).mean_slowdown() < BinsForm(32, 32, 1).mean_slowdown()


def test_scattered_placement_pays_for_collisions_contiguous_barely() -> None:
    cont = iteration_point("split", 128, "contiguous", 1, "per_switch", 1)
    scat = iteration_point("split", 128, "scattered", 1, "per_switch", 1)
    assert cont["iteration_nonblocking_s"] == pytest.approx(scat["iteration_nonblocking_s"],
                                                            rel=1e-6)
    assert 0.0 <= cont["ecmp_cost"] < scat["ecmp_cost"]
