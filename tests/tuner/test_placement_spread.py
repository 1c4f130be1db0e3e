"""topo's spread candidate: each heavy group in the quietest ToR set that fits, instead of
the tightest one, so that a job that must span sets leaves busy uplinks alone."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.model.hardware import A100
from netsim.workload import JobSpec, predict
from netsim.workload.flowcomm import FlowCommModel
from topologies import Clos3Spec, clos3
from tuner.background import BackgroundJob, predict_shared

# 16 servers of 8 GPUs in 4 ToR sets (A 0-3, B 4-7, C 8-11, D 12-15), one 200G uplink per
# ToR (7:1): a ring between two sets crosses both sets' uplinks
QUAD = Clos3Spec(name="quad-7to1", servers=16, switch_radix=8, port_speed_gbps=200,
                 tor_downlink_split=1, tor_down_up=(7, 1), agg_down_up=(1, 1),
                 servers_per_tor_group=4)
BG = JobSpec(model="gpt3-1.3b", tp=8, pp=1, dp=2, global_batch=8)
JOB = JobSpec(model="gpt3-1.3b", tp=8, pp=2, dp=2, global_batch=8)


def on(servers):
    return np.array([8 * s + i for s in servers for i in range(8)])


def test_spread_candidate_leaves_the_busy_set_alone():
    """The background's ring (servers 0 and 4) keeps the uplinks of sets A and B busy. Free:
    2 servers in A (the tightest fit for a 2-server group), 3 in C, 3 in D. Packing puts one
    group in A and its traffic to the other group crosses A's busy uplink; spreading puts
    the groups in C and D, whose uplinks are idle, and the job runs as fast as alone."""
    from tuner.placement import _layout, _topo_initial, background_locality, job_traffic

    quad = clos3(QUAD)
    bg = [BackgroundJob("b", BG, on([0, 4]))]
    loc = background_locality(quad, bg, seed=0)
    assert loc.tor_busy.max() > 0.9
    free = [1, 2, 8, 9, 10, 12, 13, 14]
    traffic = job_traffic(JOB)
    lay = _layout(JOB, traffic, free, 8)
    packed = lay.gpu_of_rank(_topo_initial(JOB, lay, loc, traffic))
    spread = lay.gpu_of_rank(_topo_initial(JOB, lay, loc, traffic, spread=True))
    sets = {k: sorted({int(s) // 4 for s in g // 8}) for k, g in
            (("packed", packed), ("spread", spread))}
    assert sets["packed"] == [0, 2] and sets["spread"] == [2, 3]

    def shared(g):
        return predict_shared(JOB, quad, A100, bg, placement=g, seed=0,
                              background_effect=False).prediction.iteration_s

    alone = predict(JOB, quad, A100, placement=spread,
                    comm_model=FlowCommModel(quad, A100)).iteration_s
    assert shared(spread) == pytest.approx(alone, rel=1e-9)
    assert shared(packed) > alone * 1.02  # its exposed traffic shares A's uplink


def test_topo_keeps_the_spread_layout_when_it_is_fastest():
    """The replay's topo, given the same free servers, is predicted as fast as alone."""
    from tuner.placement import compare_strategies

    quad = clos3(QUAD)
    bg = [BackgroundJob("b", BG, on([0, 4]))]
    res = compare_strategies(quad, JOB, [1, 2, 8, 9, 10, 12, 13, 14], seed=0,
                             search_iterations=300, background=bg)
    topo = res["topo"]
    assert "spread-quiet" in topo.extra["candidates"]
    alone = predict(JOB, quad, A100, placement=topo.gpu_of_rank,
                    comm_model=FlowCommModel(quad, A100)).iteration_s
    assert topo.iteration_s == pytest.approx(alone, rel=1e-9)
    assert not {int(s) // 4 for s in topo.gpu_of_rank // 8} & {0}
