"""FSDP (issue #27): expert shards over the expert-data-parallel group, reshard-after-forward
and gradient accumulation without resharding, checked against closed forms of the bus bytes
an iteration moves."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.model.models import get_model
from netsim.workload import JobSpec, predict
from netsim.workload.comm import bus_factor
from netsim.workload.volumes import fsdp_calls

BUS_BPS = 1e9  # the fake network moves 1 GB of bus bytes per second


class BusBytes:
    """Comm model whose call time is its bus bytes / ``BUS_BPS``; records every batch."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int, float]] = []

    def batch_s(self, batch, loc):
        groups = np.atleast_2d(batch.groups)
        n = groups.shape[1]
        sizes = batch.sizes()
        self.calls += [(batch.op, batch.kind, n, float(s)) for s in np.unique(sizes)]
        return sizes * bus_factor(batch.op, n) / BUS_BPS


class FreeCompute:
    """Every compute task takes no time: the iteration is its exposed communication."""

    def task_s(self, task) -> float:
        return 0.0


def _gather_and_reduce_bus(params: float, shard: int, job: JobSpec) -> tuple[float, float]:
    """Bus bytes of one all-gather (bf16) and one reduce-scatter (fp32) of a layer sharded
    over ``shard`` ranks."""
    f = (shard - 1) / shard
    return params * job.act_bytes * f, params * job.grad_bytes * f


def test_moe_experts_are_sharded_over_the_expert_data_parallel_group():
    job = JobSpec(model="mixtral-8x7b", gpu="h100", tp=1, pp=1, dp=8, ep=4, seq=1024,
                  global_batch=16, fsdp=True)
    model = get_model("mixtral-8x7b").replace(seq=1024)
    cm = BusBytes()
    pred = predict(job, comm_model=cm, compute_model=FreeCompute())
    experts = model.expert_params() / job.ep  # one rank's experts
    shared = model.layer_params(True) - model.expert_params()
    gathers = {(n, size) for op, kind, n, size in cm.calls if op == "all_gather"}
    assert (8, shared * 2) in gathers  # attention, norms, router over cp x dp = 8
    assert (2, experts * 2) in gathers  # experts over cp x dp / ep = 2 ranks, not 8
    ag_s, rs_s = _gather_and_reduce_bus(shared, 8, job)
    ag_e, rs_e = _gather_and_reduce_bus(experts, 2, job)
    m = job.micro_batches
    per_layer = 2 * m * (ag_s + ag_e) + m * (rs_s + rs_e)  # gather fwd + bwd, reduce, per mb
    assert pred.comm_s["fsdp_iteration"] * BUS_BPS == pytest.approx(model.layers * per_layer,
                                                                    rel=1e-12)


def test_hsdp_experts_replicate_across_the_expert_shard_groups():
    job = JobSpec(model="mixtral-8x7b", gpu="h100", tp=1, pp=1, dp=16, ep=4, seq=1024,
                  global_batch=16, fsdp=True, dp_replicate=2)
    cm = BusBytes()
    predict(job, comm_model=cm, compute_model=FreeCompute())
    model = get_model("mixtral-8x7b").replace(seq=1024)
    experts = model.expert_params() / job.ep
    groups = {(op, n) for op, kind, n, size in cm.calls if size == pytest.approx(experts * 2)
              or size == pytest.approx(experts * 4) or size == pytest.approx(experts * 4 / 2)}
    # 16 / 4 = 4 expert-data-parallel ranks: shards over 2, all-reduce across 2 replicas
    assert ("all_gather", 2) in groups and ("reduce_scatter", 2) in groups
    assert ("all_reduce", 2) in groups


def test_hsdp_replicas_must_divide_the_expert_data_parallel_ranks():
    with pytest.raises(ValueError, match="expert-data-parallel"):
        JobSpec(model="mixtral-8x7b", tp=1, pp=1, dp=8, ep=4, seq=1024, global_batch=16,
                fsdp=True, dp_replicate=4)


@pytest.mark.parametrize("reshard,accumulate,calls", [
    (True, False, (4, 4, 4)),    # PyTorch's defaults: gather fwd + bwd, reduce, every mb
    (False, False, (4, 0, 4)),   # params kept from forward to backward
    (False, True, (1, 0, 1)),    # gathered once, gradients reduced once
    (True, True, (1, 4, 1)),     # resharded after each forward: gathered again backward
])
def test_fsdp_settings_set_the_bytes_per_iteration(reshard, accumulate, calls):
    job = JobSpec(model="llama3-8b", gpu="h100", tp=1, pp=1, dp=4, global_batch=16,
                  fsdp=True, fsdp_reshard_after_forward=reshard,
                  fsdp_accumulate_unsharded=accumulate)
    assert job.micro_batches == 4
    c = fsdp_calls(job)
    assert (c.gather_forward, c.gather_backward, c.reduce) == calls
    model = get_model("llama3-8b")
    ag, rs = _gather_and_reduce_bus(model.layer_params(), 4, job)
    expected = model.layers * ((calls[0] + calls[1]) * ag + calls[2] * rs) / BUS_BPS
    pred = predict(job, comm_model=BusBytes(), compute_model=FreeCompute())
    assert pred.comm_s["fsdp_iteration"] == pytest.approx(expected, rel=1e-12)
    # nothing to hide the calls under: the iteration is exactly its FSDP traffic
    assert pred.iteration_s == pytest.approx(expected, rel=1e-12)


def test_fsdp_settings_need_fsdp():
    with pytest.raises(ValueError, match="--fsdp"):
        JobSpec(model="llama3-8b", dp=4, fsdp_accumulate_unsharded=True)
    with pytest.raises(ValueError, match="--fsdp"):
        JobSpec(model="llama3-8b", dp=4, fsdp_reshard_after_forward=False)


def _predict_json(capsys, *flags: str) -> dict:
    import json

    from tuner.cli import main

    assert main(["predict", "--model", "llama3-8b", "--gpu", "h100", "--dp", "8",
                 "--global-batch", "32", "--fsdp", "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_predict_flags_and_job_file_set_the_fsdp_settings(capsys, tmp_path):
    default = _predict_json(capsys)
    assert default["job"]["fsdp_reshard_after_forward"] is True  # PyTorch's default
    assert default["job"]["fsdp_accumulate_unsharded"] is False
    kept = _predict_json(capsys, "--no-fsdp-reshard-after-forward")
    once = _predict_json(capsys, "--no-fsdp-reshard-after-forward",
                         "--fsdp-accumulate-unsharded")
    assert kept["job"]["fsdp_reshard_after_forward"] is False
    assert once["job"]["fsdp_accumulate_unsharded"] is True
    per_layer = default["comm_s"]["fsdp_layer"]
    assert kept["comm_s"]["fsdp_layer"] == per_layer  # one call costs the same ...
    # ... but an iteration makes fewer: 3 m, 2 m, then 2 calls of each layer's kind
    assert (default["comm_s"]["fsdp_iteration"] > kept["comm_s"]["fsdp_iteration"]
            > once["comm_s"]["fsdp_iteration"])
    job = tmp_path / "job.yaml"
    job.write_text("model: llama3-8b\ngpu: h100\ndp: 8\nglobal_batch: 32\nfsdp: true\n"
                   "fsdp_reshard_after_forward: false\nfsdp_accumulate_unsharded: true\n")
    from tuner.cli import main

    assert main(["predict", "--job", str(job), "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["comm_s"] == once["comm_s"]


def test_fsdp_layer_of_an_all_moe_model_is_its_moe_layer():
    job = JobSpec(model="mixtral-8x7b", gpu="h100", tp=1, pp=1, dp=8, ep=4, seq=1024,
                  global_batch=16, fsdp=True)
    model = get_model("mixtral-8x7b").replace(seq=1024)
    pred = predict(job, comm_model=BusBytes(), compute_model=FreeCompute())
    shared = model.layer_params(True) - model.expert_params()
    ag_s, rs_s = _gather_and_reduce_bus(shared, 8, job)
    ag_e, rs_e = _gather_and_reduce_bus(model.expert_params() / job.ep, 2, job)
    expected = (ag_s + rs_s + ag_e + rs_e) / BUS_BPS  # no dense layer to report instead
    assert pred.comm_s["fsdp_layer"] == pytest.approx(expected, rel=1e-12)
