"""Compute durations of the per-rank tasks: a roofline from the hardware profile, or a fit.

``RooflineCompute``: ``t = matmul FLOPs / (peak x gemm_efficiency) + element-wise bytes /
(HBM x memory_efficiency)``. ``FittedCompute`` (from ``netsim.diagnose.calibration``) uses the
per-phase throughput and per-task overhead fitted on trainer traces,
``t = overhead_s + FLOPs / flops_per_s``, and falls back to the roofline for phases the
traces did not cover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


class ComputeModel(Protocol):
    """Anything that prices a compute task in seconds."""

    def task_s(self, task: TaskShape) -> float: ...


class RooflineCompute:
    """Roofline from a hardware profile (data-sheet peaks x stated efficiencies)."""

    def __init__(self, hw: HardwareProfile) -> None:
        self.flops_per_s = hw.peak_flops_per_s * hw.gemm_efficiency
        self.bytes_per_s = hw.hbm_bytes_per_s * hw.memory_efficiency

    def task_s(self, task: TaskShape) -> float:
        return task.flops / self.flops_per_s + task.bytes / self.bytes_per_s


def layer_tasks(model: ModelConfig, micro_batch: int, tp: int,
                flash_attention: bool, moe: bool = False,
                cp: int = 1) -> tuple[TaskShape, TaskShape]:
    """Forward and backward task of one transformer layer (an MoE layer with ``moe``) for one
    micro-batch on one GPU; context parallelism splits the sequence (and its balanced causal
    attention work) over ``cp`` ranks, expert parallelism spreads the routed tokens' expert
    work evenly (balanced routing).

    Backward costs twice the forward in FLOPs and in element-wise traffic (Narayanan et al.
    2021 section 5.1).
    """
    tokens = micro_batch * model.seq
    flops = model.layer_flops_fwd(tokens, moe) / (tp * cp)
    nbytes = model.layer_elementwise_bytes_fwd(tokens, micro_batch, tp, flash_attention) / cp
    return (TaskShape("forward", flops, nbytes), TaskShape("backward", 2 * flops, 2 * nbytes))


def attention_task(model: ModelConfig, micro_batch: int, tp: int, cp: int = 1) -> TaskShape:
    """The attention core (scores and context) of one layer's forward on one GPU: the work a
    ring attention hides its KV passing behind."""
    flops = model.layer_attn_flops_fwd(micro_batch * model.seq) / (tp * cp)
    return TaskShape("forward", flops, 0.0, 0)


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
