"""Physics of the prediction with both comm models (analytic alpha-beta and the flow engine).

* A free network leaves compute plus the 1F1B bubble: ``(m + p - 1)(t_f + t_b)`` for uniform
  stages (Narayanan et al. 2021 section 2.2), with ``t_f, t_b`` recomputed here from the
  model's FLOPs and the hardware's roofline, plus the first stage's optimizer step.
* More NIC bandwidth never makes an iteration slower.
* Two DP groups whose rings cross one ToR uplink share it on the flow model (each gets half);
  alpha-beta prices every group alone and cannot see it.
"""

from __future__ import annotations

import pytest

from netsim.model.hardware import A100
from netsim.workload import JobSpec, Overlap, predict
from netsim.workload.flowcomm import FlowCommModel
from topologies import Clos3Spec, clos3

# 8 servers of 8 GPUs, 4 servers per ToR set, one 200G uplink per ToR (7:1 oversubscribed):
# any ring that leaves its ToR set shares that single uplink with every other one. The agg
# tier has three times more up than down capacity, so ECMP collisions above the ToR never
# bind and the shared uplink is the only bottleneck (with 1:1 aggs they add to it).
TINY = Clos3Spec(name="tiny-7to1", servers=8, switch_radix=8, port_speed_gbps=200,
                 tor_downlink_split=1, tor_down_up=(7, 1), agg_down_up=(1, 3),
                 servers_per_tor_group=4)
OPT_BYTES_PER_PARAM = 30  # Adam: fp32 master, m, v, grad read; bf16 param write


@pytest.fixture(scope="module")
def tiny():
    return clos3(TINY)


def _flow(fabric, hw):
    return FlowCommModel(fabric, hw)


def _roofline_s(flops: float, nbytes: float, hw) -> float:
    return flops / (hw.peak_flops_per_s * hw.gemm_efficiency) + nbytes / (
        hw.hbm_bytes_per_s * hw.memory_efficiency)


@pytest.mark.parametrize("comm", ["analytic", "flow"])
@pytest.mark.parametrize("p,m", [(4, 16), (2, 8), (8, 8)])
def test_free_network_is_compute_plus_1f1b_bubble(tiny, comm, p, m):
    hw = A100.infinite_network()
    job = JobSpec(model="gpt3-1.3b", tp=8, pp=p, dp=1, global_batch=m, vocab=1)
    fabric = tiny if comm == "flow" else None
    cm = _flow(tiny, hw) if comm == "flow" else None
    pred = predict(job, fabric, hw, comm_model=cm)
    model = job.model_config()
    tokens = job.micro_batch * model.seq
    lv = model.layers // p
    flops = model.layer_flops_fwd(tokens) / job.tp
    nbytes = model.layer_elementwise_bytes_fwd(tokens, job.micro_batch, job.tp, hw.flash_attention)
    t_f = lv * _roofline_s(flops, nbytes, hw)
    t_b = lv * _roofline_s(2 * flops, 2 * nbytes, hw)  # backward = 2 x forward (Narayanan 5.1)
    params0 = lv * model.layer_params() + model.vocab * model.hidden
    opt0 = _roofline_s(0.0, OPT_BYTES_PER_PARAM * params0 / job.tp, hw)
    closed = (m + p - 1) * (t_f + t_b) + opt0
    # the last stage's logit head (vocab 1) is the only non-uniformity; it can lengthen at most
    # the 2 (m + p - 1) ops of the critical path by its own time
    lf = _roofline_s(model.logit_flops_fwd(tokens) / job.tp, 12.0 * tokens / job.tp, hw)
    lb = _roofline_s(2 * model.logit_flops_fwd(tokens) / job.tp, 12.0 * tokens / job.tp, hw)
    slack = (m + p - 1) * (lf + lb)
    assert closed - 1e-12 <= pred.iteration_s <= closed + slack
    assert slack < 1e-4 * closed
    assert pred.exposed_comm_s["total"] == 0.0
    assert pred.bubble_s == pytest.approx((p - 1) * (t_f + t_b), rel=1e-4)


def _jobs():
    return [
        JobSpec(model="gpt3-1.3b", tp=8, pp=2, dp=4, global_batch=32),
        JobSpec(model="gpt3-2.7b", tp=4, pp=2, dp=8, global_batch=64, distributed_optimizer=True,
                overlap=Overlap.megascale()),
        JobSpec(model="gpt3-1.3b", tp=2, pp=4, dp=8, global_batch=64, virtual_stages=2),
    ]


@pytest.mark.parametrize("comm", ["analytic", "flow"])
@pytest.mark.parametrize("job", _jobs(), ids=lambda j: f"t{j.tp}p{j.pp}d{j.dp}")
def test_doubling_nic_bandwidth_never_slows(tiny, comm, job):
    times = []
    for factor in (0.5, 1.0, 2.0, 4.0):
        hw = A100.scaled_network(factor)
        cm = _flow(tiny, hw) if comm == "flow" else None
        times.append(predict(job, tiny, hw, comm_model=cm).iteration_s)
    assert all(b <= a * (1 + 1e-12) for a, b in zip(times, times[1:], strict=False)), times
    assert times[-1] < times[0]  # these jobs do expose network time


def _dp_job():
    return JobSpec(model="gpt3-1.3b", tp=8, pp=2, dp=2, global_batch=8)


def _placement(servers_of_stage: list[list[int]]) -> list[int]:
    """Rank -> GPU for tp 8, dp 2, pp 2 (rank = t + 8 (d + 2 q)): stage q, replica d on server
    ``servers_of_stage[q][d]``."""
    return [8 * servers_of_stage[r // 16][(r // 8) % 2] + r % 8 for r in range(32)]


def test_dp_groups_sharing_an_uplink_contend_on_the_flow_model_only(tiny):
    """Stage 0 on servers {0, 4}, stage 1 on {1, 5}: on every rail both stages' DP rings cross
    the one uplink of ToR set {0..3} and of ToR set {4..7}. Each ring alone would run at the
    NIC rate; sharing the uplink, each gets half, so the bandwidth part of the DP all-reduce
    doubles. Alpha-beta prices each group alone and gives the uncontended time."""
    hw, job = A100, _dp_job()
    shared = _placement([[0, 4], [1, 5]])
    flow = predict(job, tiny, hw, placement=shared, comm_model=_flow(tiny, hw))
    alpha_beta = predict(job, tiny, hw, placement=shared)
    n = job.dp
    grad_bytes = job.grad_bytes * (job.model_config().layers // job.pp
                                   * job.model_config().layer_params()
                                   + job.model_config().vocab * job.model_config().hidden) / job.tp
    bw_term = 2 * (n - 1) / n * grad_bytes / (hw.nic_bps * hw.net_efficiency / 8)
    latency = 8.4e-6 + 2 * (n - 1) * hw.net_latency_s  # NCCL base + one network step per step
    assert alpha_beta.comm_s["dp"] == pytest.approx(latency + bw_term, rel=1e-9)
    assert flow.comm_s["dp"] == pytest.approx(latency + 2 * bw_term, rel=1e-6)
    assert flow.iteration_s > alpha_beta.iteration_s


def test_dp_groups_under_one_tor_do_not_contend(tiny):
    """Linear placement keeps each DP ring inside its ToR set: no shared uplink, and the flow
    model gives the alpha-beta time (same bandwidth and latencies by construction)."""
    hw, job = A100, _dp_job()
    flow = predict(job, tiny, hw, comm_model=_flow(tiny, hw))
    alpha_beta = predict(job, tiny, hw)
    assert flow.comm_s["dp"] == pytest.approx(alpha_beta.comm_s["dp"], rel=1e-6)
    assert flow.iteration_s == pytest.approx(alpha_beta.iteration_s, rel=1e-6)


def test_flow_sees_cross_tor_pipeline_contention(tiny):
    """Stage 0 on servers {0, 1}, stage 1 on {4, 5}: on every rail the two stage-boundary
    transfers (0 <-> 4, 1 <-> 5) cross the same single ToR uplink and get half of it each, so
    the bandwidth part of a PP transfer doubles. With stage 1 on {2, 3} (same ToR set) nothing
    is shared. Alpha-beta gives both placements the same time."""
    hw, job = A100, _dp_job()
    model = job.model_config()
    p2p_bytes = job.micro_batch * model.seq * model.hidden * job.act_bytes / job.tp
    data = p2p_bytes / (hw.nic_bps * hw.net_efficiency / 8)
    latency = 8.4e-6 + hw.net_latency_s  # NCCL base + one network step
    near, far = _placement([[0, 1], [2, 3]]), _placement([[0, 1], [4, 5]])
    same = predict(job, tiny, hw, placement=near, comm_model=_flow(tiny, hw))
    cross = predict(job, tiny, hw, placement=far, comm_model=_flow(tiny, hw))
    assert same.comm_s["pp"] == pytest.approx(latency + data, rel=1e-6)
    assert cross.comm_s["pp"] == pytest.approx(latency + 2 * data, rel=1e-6)
    for placement in (near, far):
        assert predict(job, tiny, hw, placement=placement).comm_s["pp"] == pytest.approx(
            latency + data, rel=1e-9)
