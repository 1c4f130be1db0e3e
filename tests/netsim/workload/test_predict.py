"""Physics of the iteration model: free network, monotone bandwidth, closed forms, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from netsim.model.hardware import A100, H100
from netsim.model.models import get_model
from netsim.workload import (
    AnalyticCommModel,
    CommBatch,
    JobSpec,
    Overlap,
    bus_factor,
    predict,
    rank_grid,
    synthetic_locality,
)

JOBS = [
    JobSpec(model="gpt3-1.3b", tp=2, pp=2, dp=4, global_batch=64),
    JobSpec(model="gpt3-6.7b", tp=8, pp=4, dp=4, global_batch=128, virtual_stages=2),
    JobSpec(model="gpt3-13b", tp=4, pp=5, dp=8, global_batch=320, recompute=True),
    JobSpec(model="gpt3-2.7b", tp=1, pp=1, dp=64, global_batch=256, micro_batch=2),
    JobSpec(model="gpt3-6.7b", tp=8, pp=2, dp=16, global_batch=256, distributed_optimizer=True,
            overlap=Overlap.megascale()),
]


@pytest.mark.parametrize("job", JOBS, ids=lambda j: f"{j.model}-t{j.tp}p{j.pp}d{j.dp}")
def test_infinite_network_is_compute_plus_bubble(job):
    pred = predict(job, hardware=A100.infinite_network())
    assert pred.exposed_comm_s["total"] == 0.0
    assert pred.iteration_s == pytest.approx(pred.compute_s + pred.bubble_s + pred.optimizer_s,
                                             rel=1e-12)


def test_infinite_network_pipeline_matches_closed_form():
    """Uniform stages (no logit layer cost): (m + p - 1)(t_f + t_b) + optimizer."""
    job = JobSpec(model="gpt3-1.3b", tp=1, pp=4, dp=1, global_batch=16, vocab=1)
    pred = predict(job, hardware=A100.infinite_network())
    m, p = job.micro_batches, job.pp
    per_mb = pred.compute_s / m  # busiest stage computes m (t_f + t_b)
    assert pred.pipeline_s == pytest.approx((m + p - 1) * per_mb, rel=1e-3)
    assert pred.bubble_fraction == pytest.approx((p - 1) * per_mb / pred.iteration_s, rel=1e-3)


@pytest.mark.parametrize("job", JOBS, ids=lambda j: f"{j.model}-t{j.tp}p{j.pp}d{j.dp}")
def test_doubling_nic_bandwidth_never_slows(job):
    times = [predict(job, hardware=A100.scaled_network(f)).iteration_s for f in (0.5, 1, 2, 4)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(times, times[1:], strict=False))


def test_network_bound_job_speeds_up_with_bandwidth():
    job = JobSpec(model="gpt3-2.7b", tp=1, pp=1, dp=64, global_batch=64)
    slow = predict(job, hardware=A100).iteration_s
    fast = predict(job, hardware=A100.scaled_network(2)).iteration_s
    assert fast < slow


def test_dp_all_reduce_matches_ring_closed_form():
    """Unoverlapped DP all-reduce, one layer: 2(n-1)/n S / B + latency, B = NIC x efficiency."""
    hw = A100
    loc = synthetic_locality(64, hw)
    groups = np.arange(64).reshape(8, 8).T  # stride-8 groups: one GPU per server, one rail
    size = 1e9
    t = AnalyticCommModel(hw).batch_s(CommBatch("all_reduce", "dp", groups, size), loc)
    bw = hw.nic_bps * hw.net_efficiency / 8
    latency = 8.4e-6 + 2 * 7 * hw.net_latency_s  # NCCL base + one hop per ring step
    assert np.allclose(t, latency + 2 * 7 / 8 * size / bw, rtol=1e-12)


def test_bus_factors():
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert bus_factor("send", 2) == 1.0


def test_mfu_definition():
    job = JobSpec(model="gpt3-175b", tp=8, pp=8, dp=192, global_batch=6144)
    pred = predict(job)
    model = get_model("gpt3-175b")
    tokens = 6144 * 2048
    flops = 72 * 6144 * 2048 * 96 * 12288**2 * (1 + 2048 / (6 * 12288) + 50257 / (12 * 96 * 12288))
    assert model.model_flops(tokens) == pytest.approx(flops, rel=1e-2)  # biases/norms excluded
    assert pred.mfu == pytest.approx(pred.model_flops / (pred.iteration_s * 12288 * 312e12))
    assert pred.tokens_per_s == pytest.approx(tokens / pred.iteration_s)
    assert 0 < pred.bubble_fraction < 1 and 0 < pred.mfu < 1


def test_overlap_never_hurts():
    base = JobSpec(model="gpt3-13b", tp=8, pp=4, dp=8, global_batch=256,
                   distributed_optimizer=True)
    t0 = predict(base).iteration_s
    for switch in ("dp_grad_reduce", "dp_param_gather", "pp_send_recv", "tp_comm"):
        job = base.replace(overlap=Overlap(**{switch: True}))
        assert predict(job).iteration_s <= t0 * (1 + 1e-12), switch
    assert predict(base.replace(overlap=Overlap.megascale())).iteration_s < t0


def test_interleaving_reduces_bubble():
    job = JobSpec(model="gpt3-6.7b", tp=8, pp=4, dp=2, global_batch=32)
    plain = predict(job.replace(virtual_stages=1), hardware=A100.infinite_network())
    inter = predict(job.replace(virtual_stages=4), hardware=A100.infinite_network())
    assert inter.bubble_s == pytest.approx(plain.bubble_s / 4, rel=0.05)


@pytest.mark.parametrize("kwargs,msg", [
    (dict(gpus=100, tp=8, pp=8, dp=2), "!= gpus"),
    (dict(tp=1, pp=7, dp=1), "not divisible by pp"),
    (dict(tp=1, pp=1, dp=3, global_batch=10), "not divisible by dp"),
    (dict(tp=3, pp=1, dp=1), "divisible by tp"),
    (dict(tp=1, pp=4, dp=1, global_batch=6, virtual_stages=2), "interleaved"),
    (dict(tp=0), "tp must be >= 1"),
])
def test_impossible_configs_refused(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        JobSpec(model="gpt3-1.3b", **kwargs)


def test_from_dict_round_trip_and_unknown_key():
    job = JobSpec(model="gpt3-13b", tp=4, pp=5, dp=8, overlap=Overlap(tp_comm=True))
    assert JobSpec.from_dict(job.to_dict()) == job
    with pytest.raises(ValueError, match="unknown key"):
        JobSpec.from_dict({"model": "gpt3-13b", "tensor": 2})


def test_rank_grid_megatron_order():
    """tp-dp-pp: rank = tp_rank + tp (dp_rank + dp pp_rank) (nccl-roce.md 6.1)."""
    job = JobSpec(model="gpt3-1.3b", tp=2, pp=4, dp=2)
    grid = rank_grid(job)
    assert grid[0, 0].tolist() == [0, 1] and grid[0, 1].tolist() == [2, 3]
    assert grid[:, 0, 0].tolist() == [0, 4, 8, 12]


def test_placement_changes_scope():
    """TP spread over servers is slower than TP inside one server."""
    job = JobSpec(model="gpt3-6.7b", tp=8, pp=1, dp=2, global_batch=16)
    linear = predict(job)
    spread = predict(job, placement=[8 * (r % 8) + r // 8 for r in range(16)],
                     hardware=A100)
    assert spread.comm_s["tp"] > linear.comm_s["tp"]
    with pytest.raises(ValueError, match="same GPU"):
        predict(job, placement=[0] * 16)


def test_h100_faster_than_a100():
    job = JobSpec(model="gpt3-13b", tp=8, pp=2, dp=4, global_batch=64)
    assert predict(job, hardware=H100).iteration_s < predict(job, hardware=A100).iteration_s
    assert math.isfinite(predict(job, hardware=H100).mfu)
