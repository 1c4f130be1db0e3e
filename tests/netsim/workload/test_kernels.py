"""Compute for today's kernels (``netsim.model.efficiency``, ``netsim.workload.compute``): one
set of efficiencies with sources, FP8 GEMMs, grouped-GEMM experts, FlashAttention's cost."""

from __future__ import annotations

import pytest

from netsim.model.efficiency import (
    ATTENTION_FRACTION,
    FP8_FRACTION,
    GROUPED_RELATIVE,
    GROUPED_TOKENS,
    MAMF_FRACTION,
    TRAINING_FACTOR,
    grouped_gemm_fraction,
)
from netsim.model.hardware import get_hardware
from netsim.workload import JobSpec, predict
from netsim.workload.compute import RooflineCompute, TaskShape, layer_tasks


def test_profiles_take_the_one_efficiency_set():
    a100, h100, h800 = (get_hardware(n) for n in ("a100", "h100", "h800"))
    assert a100.gemm_efficiency == pytest.approx(MAMF_FRACTION["a100"] * TRAINING_FACTOR)
    assert h100.gemm_efficiency == pytest.approx(MAMF_FRACTION["h100"] * TRAINING_FACTOR)
    assert h800.fp8_gemm_efficiency == pytest.approx(FP8_FRACTION * TRAINING_FACTOR)
    assert h100.attention_efficiency == pytest.approx(ATTENTION_FRACTION["h100"] * TRAINING_FACTOR)
    assert h100.fp8_peak_flops_per_s == 1979e12 and a100.fp8_peak_flops_per_s == 0


def test_grouped_gemm_fraction_follows_the_published_points():
    for tokens, rel in zip(GROUPED_TOKENS, GROUPED_RELATIVE, strict=True):
        assert grouped_gemm_fraction(tokens) == pytest.approx(rel)
    assert grouped_gemm_fraction(16384) == 1.0
    assert grouped_gemm_fraction(64) == pytest.approx(GROUPED_RELATIVE[0] / 4)
    values = [grouped_gemm_fraction(t) for t in (32, 128, 300, 700, 2000, 5000)]
    assert values == sorted(values)


def test_fp8_runs_gemms_at_the_fp8_rate_and_is_refused_without_fp8_cores():
    hw = get_hardware("h100")
    cm = RooflineCompute(hw)
    task = TaskShape("forward", 1e15, 0.0)
    bf16, fp8 = cm.task_s(task), cm.task_s(TaskShape("forward", 1e15, 0.0, fp8=True))
    assert bf16 / fp8 == pytest.approx(hw.fp8_peak_flops_per_s * hw.fp8_gemm_efficiency
                                       / (hw.peak_flops_per_s * hw.gemm_efficiency))
    with pytest.raises(ValueError, match="no FP8"):
        RooflineCompute(get_hardware("a100")).task_s(TaskShape("forward", 1.0, 0.0, fp8=True))
    job = JobSpec(model="llama3-8b", gpu="h100", dp=8, global_batch=64)
    assert predict(job.replace(fp8=True)).iteration_s < 0.8 * predict(job).iteration_s


def test_flash_attention_costs_the_causal_half_and_backward_two_and_a_half():
    hw = get_hardware("h100")
    cm = RooflineCompute(hw)
    rate = hw.peak_flops_per_s * hw.attention_efficiency
    fwd = TaskShape("forward", 4e12, 0.0, attn_flops=4e12)
    bwd = TaskShape("backward", 8e12, 0.0, attn_flops=8e12)
    assert cm.task_s(fwd) == pytest.approx(2e12 / rate)
    assert cm.task_s(bwd) == pytest.approx(2.5 * 2e12 / rate)
    plain = RooflineCompute(hw.replace(flash_attention=False))
    assert plain.task_s(fwd) == pytest.approx(4e12 / (hw.peak_flops_per_s * hw.gemm_efficiency))


def test_expert_gemms_slow_down_with_few_tokens_per_expert():
    """Mixtral-style layer: with EP 8 an expert sees 8x the tokens of EP 1; its grouped GEMM runs
    at a higher fraction, so the MoE layer's forward costs less per FLOP."""
    from netsim.model.models import get_model

    model = get_model("mixtral-8x7b").replace(seq=256)
    cm = RooflineCompute(get_hardware("h100"))
    one, _ = layer_tasks(model, 1, 1, True, moe=True, ep=1)
    eight, _ = layer_tasks(model, 1, 1, True, moe=True, ep=8)
    assert one.tokens_per_expert * 8 == eight.tokens_per_expert
    assert cm.task_s(eight) < cm.task_s(one)
