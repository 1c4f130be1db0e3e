"""MegaScale's model and optimizer changes (Jiang et al., NSDI'24, arXiv:2402.15627, section 3)
as switches of the iteration predictor, each with its physical effect:

* ``ptb`` (parallel transformer block, section 3.1): attention and MLP read the same
  LayerNorm output and their outputs are summed, so the two tensor-parallel all-reduces of a
  layer's pass fuse into one: every ``tp`` collective is priced at half its time
  (``PTBComm`` wraps the comm model).
* ``swa_window`` (sliding-window attention, section 3.1): each token attends to at most
  ``window`` earlier tokens instead of all of them; the attention-core FLOPs of a layer shrink
  from the causal ``s^2/2`` pairs to ``w s - w^2/2`` pairs (``MegaScaleCompute``). Model FLOPs
  for MFU are still counted with full attention, as the predictor does for every job.
  A config.json's own ``sliding_window`` (Mistral, Gemma-2) is priced the same way over its
  windowed layers (``model_pair_fraction``) unless ``swa_window`` replaces it.
* ``efficient_ops`` (section 3.3: FlashAttention-2, fused LayerNorm/GeLU kernels):
  FlashAttention is switched on, which removes the ``5 a s^2`` softmax/dropout bytes of the
  element-wise traffic (Korthikanti et al. 2022, Eq. 2). The element-wise bytes left are
  scaled by ``fused_bytes_fraction``, default 1.0 (no further saving), a derivation from the
  predictor's own byte accounting: its proxy counts each stored activation of the layer once
  and has no term for the intermediates an unfused chain of LayerNorm/GeLU kernels writes and
  re-reads, so fusing them removes launches (not modelled) but no counted bytes. The published
  step agrees: Table 3 row 7 gains x1.029 in MFU for all efficient operators together, and
  FlashAttention alone already gives x1.046 in this model at that row (``experiments/
  scale_mfu/megascale_published.md``), so no value below 1.0 is supported by the data.
* ``lamb`` (section 3.1): LAMB keeps accuracy at a 4x larger batch (the paper trains at 3x);
  the global batch is multiplied by ``lamb_batch_factor`` (default 3), which gives each
  pipeline 3x the micro-batches and so 3x fewer bubble slots per token.

``apply(job, hw, opts)`` returns the transformed job, hardware profile and the comm/compute
model wrappers to pass to ``predict``. Nothing here is fitted; the window of ``--megascale``
(512 tokens) is an assumption (the paper does not state it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from netsim.model.hardware import HardwareProfile
from netsim.workload.comm import AnalyticCommModel, CommBatch, CommModel
from netsim.workload.compute import ComputeModel, RooflineCompute, TaskShape
from netsim.workload.job import Overlap


@dataclass(frozen=True, slots=True)
class MegaScaleOpts:
    """Which of MegaScale's algorithmic optimizations are on."""

    ptb: bool = False
    swa_window: int = 0
    """Attention window in tokens; 0 = full (causal) attention."""
    efficient_ops: bool = False
    lamb: bool = False
    lamb_batch_factor: int = 3
    fused_bytes_fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.swa_window < 0:
            raise ValueError("swa_window must be >= 0 (0 = full attention)")
        if self.lamb_batch_factor < 1:
            raise ValueError("lamb_batch_factor must be >= 1")
        if not 0.0 < self.fused_bytes_fraction <= 1.0:
            raise ValueError("fused_bytes_fraction must be in (0, 1]")

    @classmethod
    def megascale(cls, swa_window: int = 512, lamb: bool = False) -> MegaScaleOpts:
        """Every switch on (``--megascale``) but LAMB's larger batch, which changes the job and
        is taken only when asked (``lamb``); the window is this module's assumption."""
        return cls(ptb=True, swa_window=swa_window, efficient_ops=True, lamb=lamb)


def opts_from_dict(data: dict) -> MegaScaleOpts:
    """The ``megascale_opts`` mapping of a job file; unknown keys are an error naming them."""
    if not isinstance(data, dict):
        raise ValueError("job file: megascale_opts must be a mapping, e.g. {ptb: true}")
    known = set(MegaScaleOpts.__dataclass_fields__)
    bad = sorted(set(data) - known)
    if bad:
        raise ValueError(f"job file: megascale_opts has unknown keys {bad}; "
                         f"use {', '.join(sorted(known))}")
    return MegaScaleOpts(**data)


def swa_pair_fraction(seq: int, window: int) -> float:
    """Attended (query, key) pairs with a window of ``window`` over those of causal attention."""
    if window <= 0 or window >= seq:
        return 1.0
    return (window * seq - window * window / 2.0) / (seq * seq / 2.0)


def model_pair_fraction(model) -> float:
    """``swa_pair_fraction`` of a config.json's own sliding window (``model.sliding_window``),
    averaged over the model's layers (Gemma-2 windows every other layer); 1.0 without one."""
    if not model.sliding_window or not model.sliding_layers:
        return 1.0
    windowed = swa_pair_fraction(model.seq, model.sliding_window)
    return (model.sliding_layers * windowed + model.layers - model.sliding_layers) / model.layers


def needs_apply(opts: MegaScaleOpts, model) -> bool:
    """Whether ``apply`` changes anything: a switch is on or the model has its own window."""
    return opts != MegaScaleOpts() or model_pair_fraction(model) < 1.0


class PTBComm:
    """Comm model wrapper: one fused TP all-reduce per layer pass instead of two."""

    def __init__(self, inner: CommModel) -> None:
        self.inner = inner

    def batch_s(self, batch: CommBatch, loc) -> np.ndarray:
        t = np.asarray(self.inner.batch_s(batch, loc), dtype=np.float64)
        return 0.5 * t if batch.kind == "tp" else t

    def __getattr__(self, name):  # sharing etc. of a flow-engine model
        return getattr(self.inner, name)


class MegaScaleCompute:
    """Compute model wrapper: fewer attention FLOPs (SWA), less element-wise traffic (fusion)."""

    def __init__(self, inner: ComputeModel, attn_flops_fwd_layer: float, pair_fraction: float,
                 bytes_fraction: float) -> None:
        self.inner = inner
        self.attn = attn_flops_fwd_layer
        self.pairs = pair_fraction
        self.bytes = bytes_fraction

    def task_s(self, task: TaskShape) -> float:
        if task.phase in ("forward", "backward") and task.layers > 0:
            mult = 1.0 if task.phase == "forward" else 2.0
            saved = mult * task.layers * self.attn * (1.0 - self.pairs)
            task = replace(task, flops=max(0.0, task.flops - saved),
                           attn_flops=max(0.0, task.attn_flops - saved),
                           bytes=task.bytes * self.bytes)
        return self.inner.task_s(task)


def apply(job, hw: HardwareProfile, opts: MegaScaleOpts, comm_model: CommModel | None = None,
          compute_model: ComputeModel | None = None):
    """The job, hardware and model wrappers with ``opts`` applied (pass them to ``predict``)."""
    if opts.lamb:
        job = replace(job, global_batch=job.batch * opts.lamb_batch_factor)
    if opts.efficient_ops:
        hw = hw.replace(flash_attention=True)
    comm = comm_model or AnalyticCommModel(hw)
    if opts.ptb:
        comm = PTBComm(comm)
    comp = compute_model or RooflineCompute(hw)
    model = job.model_config()
    pairs = (swa_pair_fraction(model.seq, opts.swa_window) if opts.swa_window
             else model_pair_fraction(model))
    frac = opts.fused_bytes_fraction if opts.efficient_ops else 1.0
    if pairs < 1.0 or frac < 1.0:
        attn = model.layer_attn_flops_fwd(job.micro_batch * model.seq) / (job.tp * job.cp)
        comp = MegaScaleCompute(comp, attn, pairs, frac)
    return job, hw, comm, comp


def ablation_steps(window: int = 512) -> list[tuple[str, MegaScaleOpts, Overlap]]:
    """Cumulative switches in the row order of the paper's Table 3 (baseline, +PTB, +SWA,
    +TP overlap, +PP overlap, +DP overlap, +efficient operators, +LAMB batch x3). Its row 8
    (data pipeline and problematic-code fixes, section 6.3) has no switch here."""
    algo = MegaScaleOpts(ptb=True, swa_window=window)
    ops = replace(algo, efficient_ops=True)
    tp = Overlap(tp_comm=True)
    pp = replace(tp, pp_send_recv=True)
    return [("baseline", MegaScaleOpts(), Overlap()),
            ("+PTB", MegaScaleOpts(ptb=True), Overlap()),
            ("+SWA", algo, Overlap()),
            ("+TP overlap", algo, tp),
            ("+PP overlap", algo, pp),
            ("+DP overlap", algo, Overlap.megascale()),
            ("+efficient operators", ops, Overlap.megascale()),
            ("+LAMB (batch x3)", replace(ops, lamb=True), Overlap.megascale())]
