"""Expert-parallel groups placed to keep their all-to-all under as few ToR sets as possible."""

from __future__ import annotations

import json

import numpy as np
import pytest

from netsim.model.hf import HF_PRESETS
from netsim.workload import JobSpec
from netsim.workload.layout import expert_groups, gpu_grid
from topologies.builders import Clos3Spec
from topologies.files import build
from tuner.placement import GpuLocality, job_traffic, place
from tuner.search import ep_shift_rings, job_groups
from tuner.traffic_report import dominant_summary


@pytest.fixture(scope="module")
def fabric():
    return build(Clos3Spec(name="clos-32", servers=32, servers_per_tor_group=8))


@pytest.fixture(scope="module")
def moe_job(tmp_path_factory):
    cfg = dict(HF_PRESETS["mixtral-8x7b"][0], num_hidden_layers=4, hidden_size=512,
               num_attention_heads=8, num_key_value_heads=2, intermediate_size=1024,
               num_local_experts=64, num_experts_per_tok=4, max_position_embeddings=4096)
    path = tmp_path_factory.mktemp("moe") / "config.json"
    path.write_text(json.dumps(cfg))
    return JobSpec(model=str(path), gpu="a100", tp=1, pp=1, dp=64, ep=32, global_batch=512)


def _tor_sets(job, gpu_of_rank, loc: GpuLocality) -> int:
    """ToR sets (servers_per_tor_group blocks: the ToR of GPU 0 of a server) all EP groups span."""
    ep, _ = expert_groups(job, gpu_grid(job, gpu_of_rank), 0)
    first = loc.server[ep] * loc.gpus_per_server  # local GPU 0 of each member's server
    return sum(len(np.unique(loc.tor[row])) for row in first)


def test_ep_dominates_and_topo_keeps_groups_under_fewer_tor_sets(fabric, moe_job):
    loc = GpuLocality.from_fabric(fabric)
    traffic = job_traffic(moe_job)
    assert traffic.total("ep") > traffic.total("dp")
    # the scheduler hands out servers alternating between two ToR sets
    free = [s for pair in zip(range(0, 8), range(8, 16), strict=True) for s in pair]
    lin = place(fabric, moe_job, "linear", free)
    topo = place(fabric, moe_job, "topo", free, search_iterations=500)
    assert _tor_sets(moe_job, topo.gpu_of_rank, loc) < _tor_sets(moe_job, lin.gpu_of_rank, loc)
    assert topo.cross_tor_bytes < lin.cross_tor_bytes
    text = dominant_summary(moe_job, topo.gpu_of_rank, fabric)
    assert text.startswith("ep (") and "all-to-all" in text


def test_qp_search_sees_the_all_to_all(moe_job):
    groups = job_groups(moe_job, np.arange(moe_job.world))
    assert "ep" in groups
    rings = ep_shift_rings(np.arange(8)[None, :], shifts=4)
    # every ring visits all members once, and shift k sends i -> i + k
    assert all(sorted(r.tolist()) == list(range(8)) for r in rings)
    assert rings[0].tolist() == list(range(8))
