"""Today's jobs: config.json models, GQA/SwiGLU/MoE FLOPs, CP, SP, EP, uneven stages, FSDP."""

from __future__ import annotations

import json

import numpy as np
import pytest

from netsim.model.hf import HF_PRESETS, model_from_hf
from netsim.model.models import ModelConfig, get_model
from netsim.workload import JobSpec, Overlap, predict
from netsim.workload.layout import expert_groups, gpu_grid, rank_ids, stage_layers

# Published parameter counts (the safetensors totals of the Hugging Face repos; the model
# cards print 8.03B, 70.6B, 405.9B, 46.7B and 671B). Computed from config.json alone.
PUBLISHED_PARAMS = {"llama3-8b": 8_030_261_248, "llama3-70b": 70_553_706_496,
                    "llama3-405b": 405_853_388_800, "mixtral-8x7b": 46_702_792_704}


@pytest.mark.parametrize("name,count", sorted(PUBLISHED_PARAMS.items()))
def test_presets_reproduce_published_parameter_counts(name, count):
    assert get_model(name).params() == count


def test_deepseek_v3_total_and_active_parameters():
    m = get_model("deepseek-v3")
    assert m.params() == pytest.approx(671e9, rel=2e-3)  # report: 671B total (without MTP)
    assert m.num_moe_layers == 58 and m.kv_lora_rank == 512
    # 37B activated per token (report abstract): dense part + top-8 and shared experts
    active = m.params() - m.num_moe_layers * m.expert_params() * (1 - 8 / 256)
    assert active == pytest.approx(37e9, rel=0.03)


def test_gated_ffn_has_three_matrices_and_gqa_shrinks_kv():
    plain = ModelConfig(layers=1, hidden=64, heads=8, ffn_hidden=128, bias=False)
    gated = plain.replace(gated=True)
    gqa = plain.replace(kv_heads=2)
    ffn_plain = plain.layer_gemm_flops_fwd(1) - 2 * 4 * 64 * 64
    assert gated.layer_gemm_flops_fwd(1) - plain.layer_gemm_flops_fwd(1) == pytest.approx(
        ffn_plain / 2)  # 3 h f vs 2 h f
    # K and V projections go from h x h to h x (2 x 8) each
    assert plain.layer_gemm_flops_fwd(1) - gqa.layer_gemm_flops_fwd(1) == 2 * 2 * 64 * (64 - 16)


def test_moe_flops_count_router_active_and_shared_experts_only():
    base = dict(layers=2, hidden=32, heads=4, ffn_hidden=64, gated=True, bias=False, seq=16)
    moe = ModelConfig(**base, experts=8, top_k=2, moe_ffn_hidden=16, shared_experts=1)
    dense_part = moe.layer_flops_fwd(1) - 2 * 3 * 32 * 64
    expected = dense_part + 2 * (32 * 8 + 3 * 3 * 32 * 16)  # router + (2 + 1) experts
    assert moe.layer_flops_fwd(1, moe=True) == pytest.approx(expected)
    # the parameters hold every expert
    assert moe.layer_params(True) - moe.layer_params() == (32 * 8 + 9 * 3 * 32 * 16
                                                            - 3 * 32 * 64)


def test_config_json_file_and_name(tmp_path):
    cfg, _ = HF_PRESETS["mixtral-8x7b"]
    d = tmp_path / "my-moe"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    job = JobSpec(model=str(d / "config.json"), tp=1, pp=1, dp=8, ep=8, seq=4096)
    assert job.model_config().name == "my-moe"
    assert job.model_config().params() == PUBLISHED_PARAMS["mixtral-8x7b"]
    pred = predict(job)
    assert pred.model_name == "my-moe" and pred.exposed_comm_s["ep"] > 0


@pytest.mark.parametrize("change,msg", [
    ({"num_hidden_layers": None}, "num_hidden_layers"),
    ({"hidden_act": "tanh"}, "hidden_act"),
    ({"num_key_value_heads": 5}, "num_key_value_heads"),
    ({"num_local_experts": 8, "n_routed_experts": 16}, "contradictory"),
    ({"num_experts_per_tok": 9}, "num_experts_per_tok"),
    ({"hidden_size": 4100}, "head_dim"),
])
def test_bad_config_names_the_key(change, msg):
    cfg = dict(HF_PRESETS["mixtral-8x7b"][0])
    cfg.update(change)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    with pytest.raises(ValueError, match=msg):
        model_from_hf(cfg, "x")


def test_uneven_stages_megatron_rule_and_overrides():
    assert stage_layers(126, 16, 1).tolist() == [7] + [8] * 14 + [7]
    assert stage_layers(126, 16, 4)[[0, 1, -1]].tolist() == [1, 2, 1]
    assert stage_layers(61, 16, 1, 3, 2).tolist() == [3] + [4] * 14 + [2]
    with pytest.raises(ValueError, match="first-stage-layers"):
        stage_layers(61, 16, 1)
    with pytest.raises(ValueError, match="do not divide evenly"):
        stage_layers(61, 16, 1, 4, 3)
    with pytest.raises(ValueError, match="virtual_stages"):
        stage_layers(64, 4, 2, 7, 7)
    job = JobSpec(model="llama3-405b", gpu="h100", tp=8, pp=16, dp=1, global_batch=32)
    assert job.stage_layer_counts().sum() == 126


def test_rank_order_tp_cp_ep_dp_pp():
    job = JobSpec(model="mixtral-8x7b", tp=2, cp=2, dp=4, ep=4, pp=2, sequence_parallel=True,
                  seq=4096)
    ids = rank_ids(job)  # [pp, dp, cp, tp]
    assert ids[0, 0, 0].tolist() == [0, 1] and ids[0, 0, 1, 0] == 2 and ids[0, 1, 0, 0] == 4
    assert ids[1, 0, 0, 0] == 16
    ep, edp = expert_groups(job, gpu_grid(job), 0)
    # Megatron-Core: EP groups = consecutive (cp, dp) replicas of one TP rank
    assert ep[0].tolist() == [0, 2, 4, 6] and edp[0].tolist() == [0, 8]
    assert sorted(np.concatenate([ep.ravel()]).tolist()) == list(range(16))


@pytest.mark.parametrize("kwargs,msg", [
    (dict(model="llama3-8b", ep=2, dp=2), "drop --ep"),
    (dict(model="mixtral-8x7b", tp=2, ep=2, dp=2), "--sp"),
    (dict(model="mixtral-8x7b", ep=4, dp=6), "divide cp x dp"),
    (dict(model="mixtral-8x7b", ep=16, dp=16), "experts 8 not divisible"),
    (dict(model="llama3-8b", cp=3, seq=8192), "2 x cp"),
    (dict(model="llama3-8b", sequence_parallel=True), "--sp"),
    (dict(model="llama3-8b", tp=3), "tp"),
    (dict(model="llama3-8b", dp=4, fsdp=True, distributed_optimizer=True), "drop"),
    (dict(model="llama3-8b", dp=4, dp_replicate=2), "--fsdp"),
    (dict(model="llama3-8b", order="tp-ep-cp-dp-pp", cp=2), "order"),
])
def test_parallel_layouts_refused_with_the_fix(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        JobSpec(gpu="h100", **kwargs)


def test_sp_costs_what_tp_all_reduce_costs_in_the_alpha_beta_model():
    base = dict(model="llama3-8b", gpu="h100", tp=8, pp=1, dp=1, global_batch=4)
    a = predict(JobSpec(**base))
    b = predict(JobSpec(**base, sequence_parallel=True))
    # ring RS + AG moves the bytes of a ring AR with the same number of steps; two calls pay
    # NCCL's base latency twice
    from netsim.workload.comm import NCCL_BASE_LATENCY_S

    assert b.comm_s["tp"] == pytest.approx(a.comm_s["tp"] + NCCL_BASE_LATENCY_S, rel=1e-9)


def test_cp_splits_compute_and_adds_ring_traffic():
    base = dict(model="llama3-8b", gpu="h100", tp=1, pp=1, dp=1, global_batch=8, seq=32768)
    one = predict(JobSpec(**base), hardware=None)
    cp = predict(JobSpec(**base, cp=8))
    assert cp.gpus == 8 and cp.comm_s["cp"] > 0
    # same model FLOPs on 8 x the GPUs: compute per GPU 1/8
    assert cp.model_flops == one.model_flops
    assert cp.compute_s == pytest.approx(one.compute_s / 8, rel=0.02)
    hidden = predict(JobSpec(**base, cp=8, overlap=Overlap(cp_comm=True)))
    shown = predict(JobSpec(**base, cp=8, overlap=Overlap(cp_comm=False)))
    assert shown.exposed_comm_s["cp"] >= hidden.exposed_comm_s["cp"]
    assert shown.exposed_comm_s["cp"] > 0


def test_ep_all_to_all_sized_from_tokens_topk_hidden_capacity():
    from netsim.workload.volumes import ep_bytes

    job = JobSpec(model="mixtral-8x7b", gpu="h100", tp=1, pp=1, dp=8, ep=8, seq=4096,
                  global_batch=8, capacity_factor=1.25)
    m = job.model_config()
    assert ep_bytes(job, m) == 4096 * 2 * 4096 * 2 * 1.25
    pred = predict(job)
    assert pred.comm_s["ep"] > 0 and pred.exposed_comm_s["ep"] > 0
    # the all-to-all alpha-beta: inside one server at NVLink speed
    assert pred.comm_s["ep"] < 2 * ep_bytes(job, m) / 300e9 + 1e-3
    hidden = predict(job.replace(overlap=Overlap(ep_comm=True)))
    assert hidden.exposed_comm_s["ep"] <= pred.exposed_comm_s["ep"]


def test_expert_gradients_reduce_over_expert_data_parallel_group():
    job = JobSpec(model="mixtral-8x7b", gpu="h100", tp=1, pp=1, dp=16, ep=8, seq=4096,
                  global_batch=16)
    assert job.expert_dp == 2
    moe = predict(job)
    no_ep = predict(job.replace(ep=1))
    # experts are reduced over 2 ranks instead of 16 and hold 1/8 of the bytes per GPU
    assert moe.comm_s["dp"] < no_ep.comm_s["dp"]


def test_fsdp_and_hsdp_price_per_layer_gathers():
    base = dict(model="llama3-8b", gpu="h100", tp=1, pp=1, dp=16, global_batch=16)
    fsdp = predict(JobSpec(**base, fsdp=True))
    hsdp = predict(JobSpec(**base, fsdp=True, dp_replicate=2))
    assert fsdp.comm_s["fsdp_layer"] > 0 and fsdp.comm_s["dp"] == 0
    assert hsdp.comm_s["fsdp_layer"] != fsdp.comm_s["fsdp_layer"]
    ddp = predict(JobSpec(**base))
    assert fsdp.optimizer_s < ddp.optimizer_s  # optimizer state sharded 16 ways


def test_llama3_405b_predicts_and_reports_schedule():
    job = JobSpec(model="llama3-405b", gpu="h100", tp=8, pp=16, dp=2, global_batch=32,
                  sequence_parallel=True, virtual_stages=4)
    pred = predict(job)
    assert pred.model_name == "llama3-405b"
    assert pred.schedule["schedule"] == "interleaved"
    assert pred.schedule["stage_layers"] == [7] + [8] * 14 + [7]
    assert pred.schedule["uneven"]
    assert set(pred.exposed_comm_s) >= {"tp", "cp", "ep", "pp", "dp", "total"}
    assert 0.05 < pred.mfu < 0.8


def test_flow_model_prices_ep_all_to_all_on_the_fabric(fat_tree_k4_flow):
    fabric, cm = fat_tree_k4_flow
    job = JobSpec(model="mixtral-8x7b", gpu="a100", tp=1, pp=1, dp=16, ep=8, seq=1024,
                  global_batch=16)
    flow = predict(job, fabric, comm_model=cm)
    analytic = predict(job, fabric)
    assert flow.comm_s["ep"] > 0
    # contention and ECMP can only slow the all-to-all relative to the closed form
    assert flow.comm_s["ep"] >= analytic.comm_s["ep"] * 0.99


@pytest.fixture
def fat_tree_k4_flow():
    from netsim.model.hardware import A100
    from netsim.workload import FlowCommModel
    from topologies import load_fabric

    fabric = load_fabric("fat-tree-k4")
    return fabric, FlowCommModel(fabric, A100.replace(gpus_per_server=fabric.gpus_per_server,
                                                      nics_per_server=fabric.gpus_per_server))


def test_flow_all_to_all_of_groups_that_share_servers_with_others():
    """EP groups scattered over servers (PXN relays on GPUs outside the group) are priced on
    the flow engine, and each group priced alone matches the collectives runner."""
    from netsim.collectives import run_collective
    from netsim.collectives.nccl import NcclConfig
    from netsim.model.hardware import A100
    from netsim.workload import FlowCommModel
    from netsim.workload.comm import CommBatch, fabric_locality
    from topologies.builders import Clos3Spec
    from topologies.files import build

    fabric = build(Clos3Spec(name="clos-32", servers=32, servers_per_tor_group=8))
    loc = fabric_locality(fabric)
    group = np.random.default_rng(1).permutation(len(fabric.gpus))[:16]
    batch = CommBatch("all_to_all", "ep", group[None, :], 64e6)
    steady = FlowCommModel(fabric, A100, mode="steady").batch_s(batch, loc)
    fluid = FlowCommModel(fabric, A100, mode="fluid").batch_s(batch, loc)
    assert steady[0] == pytest.approx(fluid[0], rel=1e-9)  # no answer depends on the mode
    cfg = NcclConfig(alpha_nvlink_us=A100.intra_latency_s * 1e6,
                     alpha_net_us=A100.net_latency_s * 1e6)
    alone = run_collective(fabric, "alltoall", [int(g) for g in group], int(64e6), cfg)
    # the runner lets each connection finish on its own (fluid per connection); the batch
    # model finishes a call's connections together: within 10%
    assert steady[0] == pytest.approx(alone.time_s, rel=0.10)


def test_opt_175b_fsdp_job_is_expressible_and_hides_gathers_under_big_micro_batches():
    from tuner.jobs import load_job

    job = load_job("opt-175b")
    assert job.fsdp and job.world == 992
    big = predict(job)
    small = predict(job.replace(micro_batch=1))
    # FSDP2 prefetches the next layer's all-gather under this layer: exposed only when the
    # gather outlasts the layer (micro-batch 1) -- Megatron-style overlap arithmetic
    assert big.exposed_comm_s["dp"] < 0.01 * big.iteration_s
    assert small.exposed_comm_s["dp"] > 0.1 * small.iteration_s
