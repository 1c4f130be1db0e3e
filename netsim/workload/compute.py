"""Compute durations of the per-rank tasks: a roofline from the hardware profile, or a fit.

``RooflineCompute``: ``t = GEMM FLOPs / (peak x gemm_efficiency) + element-wise bytes /
(HBM x memory_efficiency)``, with today's kernels priced apart (efficiencies and their sources:
``netsim.model.efficiency``): FP8 GEMMs at the FP8 peak and its efficiency; routed-expert GEMMs
as grouped GEMMs, slower when an expert gets few tokens; the attention core, with FlashAttention,
at FlashAttention's cost: the causal mask halves the ``4 s^2 d`` per head forward, the backward
executes 2.5 times the forward (it recomputes the scores; the ``mode="bwd"`` FLOP count of
``benchmarks/benchmark_flash_attention.py`` in Dao-AILab/flash-attention), at the
FlashAttention efficiency. Without FlashAttention the attention core runs as GEMMs (full
score matrix, Megatron-LM 2021's batched matmuls). ``FittedCompute`` (from ``netsim.diagnose.calibration``) uses the
per-phase throughput and per-task overhead fitted on trainer traces,
``t = overhead_s + FLOPs / flops_per_s``, and falls back to the roofline for phases the
traces did not cover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from netsim.model.efficiency import grouped_gemm_fraction
from netsim.model.hardware import HardwareProfile
from netsim.model.models import ModelConfig

OPTIMIZER_BYTES_PER_PARAM = 30  # Adam, fp32 master/m/v + fp32 grad read, bf16 param write


@dataclass(frozen=True, slots=True)
class TaskShape:
    """What one compute task does, per GPU."""

    phase: str
    """forward, backward, logits_forward, logits_backward, optimizer."""
    flops: float
    """Matmul FLOPs on this GPU."""
    bytes: float
    """HBM bytes of the memory-bound kernels on this GPU."""
    layers: int = 1
    """Transformer layers the task covers (per-layer overheads scale with it)."""
    attn_flops: float = 0.0
    """The part of ``flops`` in the attention core (scores and context, causal mask not
    subtracted)."""
    expert_flops: float = 0.0
    """The part of ``flops`` in routed-expert GEMMs (grouped GEMMs)."""
    tokens_per_expert: float = 0.0
    """Tokens one routed expert processes in the task (sets the grouped-GEMM efficiency)."""
    fp8: bool = False
    """The task's GEMMs (not attention) run in FP8."""


class ComputeModel(Protocol):
    """Anything that prices a compute task in seconds."""

    def task_s(self, task: TaskShape) -> float: ...


CAUSAL_FRACTION = 0.5
"""Share of the attention core a causal FlashAttention kernel executes."""
FLASH_BACKWARD_RATIO = 2.5
"""FlashAttention backward FLOPs over forward FLOPs (it recomputes the scores)."""


class RooflineCompute:
    """Roofline from a hardware profile (data-sheet peaks x stated efficiencies)."""

    def __init__(self, hw: HardwareProfile) -> None:
        self.hw = hw
        self.flops_per_s = hw.peak_flops_per_s * hw.gemm_efficiency
        self.fp8_flops_per_s = hw.fp8_peak_flops_per_s * hw.fp8_gemm_efficiency
        self.bytes_per_s = hw.hbm_bytes_per_s * hw.memory_efficiency

    def task_s(self, task: TaskShape) -> float:
        gemm_rate = self.flops_per_s
        if task.fp8:
            if not self.fp8_flops_per_s > 0:
                raise ValueError(f"gpu {self.hw.name} has no FP8 tensor cores: drop --fp8 "
                                 "or choose --gpu h100/h800/h200")
            gemm_rate = self.fp8_flops_per_s
        dense = task.flops - task.attn_flops - task.expert_flops
        expert_rate = gemm_rate * grouped_gemm_fraction(task.tokens_per_expert)
        return (dense / gemm_rate + task.expert_flops / expert_rate
                + self.attention_s(task) + task.bytes / self.bytes_per_s)

    def attention_s(self, task: TaskShape) -> float:
        """The attention core: FlashAttention's causal cost at its efficiency, or GEMMs."""
        if not self.hw.flash_attention:
            return task.attn_flops / self.flops_per_s
        ratio = FLASH_BACKWARD_RATIO / 2 if task.phase == "backward" else 1.0
        rate = self.hw.peak_flops_per_s * self.hw.attention_efficiency
        return task.attn_flops * CAUSAL_FRACTION * ratio / rate


def layer_tasks(model: ModelConfig, micro_batch: int, tp: int,
                flash_attention: bool, moe: bool = False,
                cp: int = 1, ep: int = 1, fp8: bool = False) -> tuple[TaskShape, TaskShape]:
    """Forward and backward task of one transformer layer (an MoE layer with ``moe``) for one
    micro-batch on one GPU; context parallelism splits the sequence (and its balanced causal
    attention work) over ``cp`` ranks, expert parallelism spreads the routed tokens' expert
    work evenly (balanced routing): an expert sees the tokens of its ``ep`` ranks' micro-batches
    times ``top_k / experts``.

    Backward costs twice the forward in FLOPs and in element-wise traffic (Narayanan et al.
    2021 section 5.1).
    """
    tokens = micro_batch * model.seq
    flops = model.layer_flops_fwd(tokens, moe) / (tp * cp)
    attn = model.layer_attn_flops_fwd(tokens) / (tp * cp)
    expert, per_expert = 0.0, 0.0
    if moe and model.experts:
        expert = tokens * expert_gemm_flops(model) / (tp * cp)
        per_expert = ep * tokens / cp * model.top_k / model.experts
    nbytes = model.layer_elementwise_bytes_fwd(tokens, micro_batch, tp, flash_attention) / cp
    fwd = TaskShape("forward", flops, nbytes, attn_flops=attn, expert_flops=expert,
                    tokens_per_expert=per_expert, fp8=fp8)
    return fwd, TaskShape("backward", 2 * flops, 2 * nbytes, attn_flops=2 * attn,
                          expert_flops=2 * expert, tokens_per_expert=per_expert, fp8=fp8)


def expert_gemm_flops(model: ModelConfig) -> float:
    """Forward FLOPs per token of its ``top_k`` routed experts (``netsim.model.flops``)."""
    mats = 3 if model.gated else 2
    return 2.0 * model.top_k * mats * model.hidden * model.expert_ffn


def attention_task(model: ModelConfig, micro_batch: int, tp: int, cp: int = 1) -> TaskShape:
    """The attention core (scores and context) of one layer's forward on one GPU: the work a
    ring attention hides its KV passing behind."""
    flops = model.layer_attn_flops_fwd(micro_batch * model.seq) / (tp * cp)
    return TaskShape("forward", flops, 0.0, 0, attn_flops=flops)


def logit_tasks(model: ModelConfig, micro_batch: int, tp: int,
                cp: int = 1) -> tuple[TaskShape, TaskShape]:
    """Output layer + cross-entropy of one micro-batch (vocabulary split over tp)."""
    tokens = micro_batch * model.seq // cp
    flops = model.logit_flops_fwd(tokens) / tp
    nbytes = 3.0 * 4 * tokens * model.vocab / tp  # fp32 logits: write, softmax read + write
    return (TaskShape("logits_forward", flops, nbytes, 0),
            TaskShape("logits_backward", 2 * flops, nbytes, 0))


def optimizer_task(params_on_gpu: float) -> TaskShape:
    """Adam step over the parameters this GPU updates (memory-bound)."""
    return TaskShape("optimizer", 0.0, OPTIMIZER_BYTES_PER_PARAM * params_on_gpu, 0)
