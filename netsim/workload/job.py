"""The job description (``JobSpec``), its overlap switches, and the rank grid of a job.

Rank order follows Megatron-Core's default ``tp-cp-ep-dp-pp`` (innermost first):
``rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))``, expert-parallel groups
carved out of ``cp x dp`` (``netsim.workload.layout``; ``shared/reference/nccl-roce.md``
section 6.1). A placement maps rank -> GPU index on the fabric; without one, rank r runs on
GPU r, the linear order a scheduler hands out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.model.models import ModelConfig, get_model

AXES = ("tp", "cp", "dp", "pp")


@dataclass(frozen=True, kw_only=True, slots=True)
class Overlap:
    """Which communication runs under computation. Defaults are Megatron-LM's out of the box.

    Megatron-LM's arguments default ``--overlap-grad-reduce``, ``--overlap-param-gather``,
    ``--use-distributed-optimizer``, ``--overlap-p2p-communication`` and ``--tp-comm-overlap``
    to off; MegaScale (section 3.3) turns all of them on (``Overlap.megascale()``).
    """

    dp_grad_reduce: bool = False
    """DP gradient reduction runs bucket by bucket under the backward pass."""
    dp_param_gather: bool = False
    """Distributed-optimizer parameter all-gather runs under the next forward pass."""
    pp_send_recv: bool = False
    """Pipeline sends do not block the sending stage (off the critical path)."""
    tp_comm: bool = False
    """Tensor-parallel collectives are hidden behind the GEMMs (exposed = max(0, comm - gemm))."""
    cp_comm: bool = True
    """Ring-attention KV passing runs under the attention blocks (Transformer Engine's
    context parallelism always overlaps it): exposed = max(0, comm - attention compute)."""
    ep_comm: bool = False
    """Expert all-to-all hidden behind the other micro-batch's compute (DeepSeek-V3's DualPipe,
    Megatron-Core's ``--overlap-moe-expert-parallel-comm``): exposed = max(0, comm - layer)."""

    @classmethod
    def megascale(cls) -> Overlap:
        """Every overlap MegaScale describes (DP, PP and TP, section 3.3)."""
        return cls(dp_grad_reduce=True, dp_param_gather=True, pp_send_recv=True, tp_comm=True)


SCHEDULES = ("1f1b", "interleaved", "dualpipe", "zb")
"""Pipeline schedules: 1F1B (PipeDream-Flush), interleaved 1F1B (``virtual_stages`` > 1),
DeepSeek-V3's DualPipe and zero-bubble ZB-H1 (``netsim.workload.schedules``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class JobSpec:
    """One 3D-parallel training job. ``JobSpec.from_dict`` reads the YAML job-file keys."""

    model: str = "gpt3-175b"
    """Model preset name (``netsim.model.models.MODELS``) or a transformers ``config.json`` path."""
    gpu: str = "a100"
    """Hardware preset name (``netsim.model.hardware.HARDWARE``)."""
    gpus: int = 0
    """World size; 0 means tp x cp x pp x dp. Given without ``dp``, dp = gpus / (tp x cp x pp)
    (``infer_dp``)."""
    tp: int = 1
    """Tensor-parallel degree."""
    pp: int = 1
    """Pipeline-parallel degree (stages)."""
    dp: int = 1
    """Data-parallel degree."""
    cp: int = 1
    """Context-parallel degree (ring attention over sequence chunks)."""
    ep: int = 1
    """Expert-parallel degree (divides cp x dp; MoE models)."""
    sequence_parallel: bool = False
    """Megatron sequence parallelism with TP: reduce-scatter + all-gather instead of
    all-reduce."""
    first_stage_layers: int | None = None
    """Layers of the first pipeline stage (Megatron-Core ``--decoder-first-pipeline-num-layers``)."""
    last_stage_layers: int | None = None
    """Layers of the last pipeline stage (``--decoder-last-pipeline-num-layers``)."""
    capacity_factor: float = 1.0
    """MoE expert capacity factor sizing the dispatch/combine all-to-all (1: dropless)."""
    fsdp: bool = False
    """FSDP / ZeRO-3 as torchtitan's FSDP2: parameters all-gathered per layer in forward and
    backward, gradients reduce-scattered, over the data-parallel shard group."""
    dp_replicate: int = 1
    """HSDP replicas: FSDP shards over dp / dp_replicate ranks, replicas all-reduce."""
    fsdp_reshard_after_forward: bool = True
    """FSDP2 ``fully_shard(reshard_after_forward=...)``: True (PyTorch's default for every
    module but the root) frees the gathered parameters after forward and all-gathers them again
    in backward; False keeps them from forward to backward (no backward all-gather)."""
    fsdp_accumulate_unsharded: bool = False
    """Gradient accumulation without resharding (FSDP2 ``set_requires_gradient_sync(False)`` and
    ``set_reshard_after_backward(False)`` on every micro-batch but the last; PyTorch's defaults
    are True for both, i.e. off here): the forward all-gather and the gradient reduce-scatter
    run once per iteration instead of once per micro-batch."""
    global_batch: int = 0
    """Sequences per iteration; 0 means 4 x pp x dp x micro_batch (m = 4 pp micro-batches)."""
    micro_batch: int = 1
    """Sequences per micro-batch."""
    seq: int | None = None
    """Sequence length override."""
    vocab: int | None = None
    """Vocabulary override."""
    layers: int | None = None
    """Layer-count override."""
    hidden: int | None = None
    """Width override."""
    heads: int | None = None
    """Head-count override."""
    kv_heads: int | None = None
    """Key/value head override (grouped-query attention)."""
    ffn_hidden: int | None = None
    """Feed-forward width override."""
    virtual_stages: int = 1
    """Model chunks per pipeline stage (interleaved 1F1B when > 1)."""
    schedule: str | None = None
    """Pipeline schedule (``SCHEDULES``); None: interleaved with virtual stages, else 1F1B."""
    fp8: bool = False
    """Transformer-layer GEMMs in FP8 (Transformer Engine / DeepSeek-V3): the GPU's FP8 peak at
    its FP8 efficiency; attention, logits and communication stay BF16."""
    moe_node_limit: int = 0
    """Node-limited routing (DeepSeek-V3 section 2.1.2: each token to at most M = 4 nodes):
    a token crosses the network to at most this many nodes; 0: unlimited."""
    recompute: bool = False
    """Full activation recomputation (Megatron ``--recompute-granularity full``)."""
    distributed_optimizer: bool = False
    """Shard optimizer state over DP: reduce-scatter grads, all-gather params."""
    scatter_gather: bool = True
    """Split pipeline activations over the TP ranks (Narayanan et al. 2021 section 4.1)."""
    act_bytes: int = 2
    """Bytes per activation element sent over TP and PP (bf16; 4 for an fp32 run)."""
    grad_bytes: int = 4
    """Bytes per gradient element reduced over DP (Megatron reduces bf16 runs' grads in fp32)."""
    order: str = "tp-cp-ep-dp-pp"
    """Rank order, innermost axis first."""
    overlap: Overlap = field(default_factory=Overlap)
    """Communication/computation overlap switches."""

    def __post_init__(self) -> None:
        validate(self)

    @property
    def world(self) -> int:
        """Number of ranks."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def batch(self) -> int:
        """Global batch in sequences (default applied)."""
        return self.global_batch or 4 * self.pp * self.dp * self.micro_batch

    @property
    def pipeline_schedule(self) -> str:
        """The schedule that runs: ``schedule``, or interleaved 1F1B with virtual stages and
        plain 1F1B without."""
        return self.schedule or ("interleaved" if self.virtual_stages > 1 else "1f1b")

    @property
    def expert_dp(self) -> int:
        """Ranks that reduce an expert's gradients (cp x dp / ep)."""
        return self.cp * self.dp // self.ep

    def stage_layers(self):
        """Layers of each virtual stage ``q = chunk x pp + stage`` (``layout.stage_layers``)."""
        from netsim.workload.layout import stage_layers

        return stage_layers(self.model_config().layers, self.pp, self.virtual_stages,
                            self.first_stage_layers, self.last_stage_layers)

    def stage_layer_counts(self):
        """Layers of each physical pipeline stage."""
        return self.stage_layers().reshape(self.virtual_stages, self.pp).sum(axis=0)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per iteration, m = B / (dp b)."""
        return self.batch // (self.dp * self.micro_batch)

    def model_config(self) -> ModelConfig:
        """The preset with this job's overrides applied."""
        return get_model(self.model).replace(seq=self.seq, vocab=self.vocab, layers=self.layers,
                                             seq_source="job seq" if self.seq else None,
                                             hidden=self.hidden, heads=self.heads,
                                             ffn_hidden=self.ffn_hidden, kv_heads=self.kv_heads)

    def replace(self, **changes: Any) -> JobSpec:
        """Return a validated copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "job") -> JobSpec:
        """Build from a mapping (a YAML job file); every refusal is one ``InputError`` line
        naming ``source``, the key, the value and an example (``JOB_RULES``)."""
        from inputspec import InputError, from_dict

        if not isinstance(data, Mapping):
            raise InputError(source, None, data, "a mapping of keys such as model, tp, pp, dp",
                             {"model": "gpt3-175b", "tp": 8})
        data = dict(data)
        if isinstance(data.get("overlap"), str):
            presets = {"megascale": Overlap.megascale(), "none": Overlap()}
            if data["overlap"] not in presets:
                raise InputError(source, "overlap", data["overlap"], "megascale, none or a "
                                 "mapping of dp_grad_reduce, dp_param_gather, pp_send_recv, "
                                 "tp_comm, cp_comm, ep_comm to true/false", "megascale")
            data["overlap"] = presets[data["overlap"]]
        job = from_dict(cls, infer_dp(data), source, rules=JOB_RULES)
        check_job_size(job, source)
        return job

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (round-trips through ``from_dict``)."""
        return dataclasses.asdict(self)


def infer_dp(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with ``dp`` set to gpus / (tp x cp x pp) when ``gpus`` is given without ``dp``
    (Megatron-LM's rule: the data-parallel size fills the world), else unchanged; sizes that
    do not divide are left for ``validate`` to refuse."""
    out = dict(data)
    gpus, degrees = out.get("gpus"), [out.get(k, 1) for k in ("tp", "cp", "pp")]
    if "dp" in out or not all(type(v) is int and v > 0 for v in (gpus, *degrees)):
        return out
    per = degrees[0] * degrees[1] * degrees[2]
    if gpus % per == 0:
        out["dp"] = gpus // per
    return out


def validate(job: JobSpec) -> None:
    """Refuse a configuration that cannot exist, naming the reason and the fix."""
    from netsim.workload.layout import parse_order
    from netsim.workload.validate import validate_parallel

    for name in ("tp", "pp", "dp", "cp", "ep", "dp_replicate", "micro_batch", "virtual_stages",
                 "grad_bytes", "act_bytes"):
        if getattr(job, name) < 1:
            raise ValueError(f"job.{name} must be >= 1, got {getattr(job, name)}")
    if job.gpus and job.gpus != job.world:
        raise ValueError(f"tp x cp x pp x dp = {job.tp} x {job.cp} x {job.pp} x {job.dp} = "
                         f"{job.world} != gpus {job.gpus}: change --gpus or the degrees")
    parse_order(job.order)
    model = job.model_config()
    job.stage_layers()
    if model.hidden % job.tp or model.heads % job.tp:
        raise ValueError(f"hidden {model.hidden} / heads {model.heads} not divisible by tp {job.tp}")
    validate_parallel(job, model)
    if job.batch % (job.dp * job.micro_batch):
        raise ValueError(f"global_batch {job.batch} not divisible by dp x micro_batch = "
                         f"{job.dp * job.micro_batch}")
    if job.virtual_stages > 1 and job.micro_batches % job.pp:
        raise ValueError(f"interleaved schedule needs micro-batches ({job.micro_batches}) "
                         f"divisible by pp ({job.pp}); change --global-batch")
    validate_schedule(job)


def validate_schedule(job: JobSpec) -> None:
    """Refuse a schedule the degrees cannot run (reason and fix named)."""
    name = job.pipeline_schedule
    if name not in SCHEDULES:
        raise ValueError(f"job.schedule {job.schedule!r}: choose one of {', '.join(SCHEDULES)}")
    if name == "interleaved" and job.virtual_stages < 2:
        raise ValueError("schedule interleaved needs --virtual-stages >= 2")
    if name in ("1f1b", "dualpipe", "zb") and job.virtual_stages > 1:
        raise ValueError(f"schedule {name} runs one chunk per stage: drop --virtual-stages "
                         "or use --schedule interleaved")
    if name == "dualpipe" and (job.pp % 2 or job.micro_batches % 2):
        raise ValueError(f"DualPipe needs an even pp ({job.pp}) and an even number of "
                         f"micro-batches ({job.micro_batches}) (DeepSeek-V3 section 3.2.1)")
    if job.moe_node_limit < 0:
        raise ValueError("job.moe_node_limit must be >= 0 (0: unlimited)")


def rank_grid(job: JobSpec, placement: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """GPU index of every rank as an array indexed ``[pp_rank, replica, tp_rank]``.

    The replica axis is ``dp_rank x cp + cp_rank`` (just ``dp_rank`` without context
    parallelism); ``netsim.workload.layout.gpu_grid`` keeps dp and cp apart.
    ``placement[r]`` is the GPU (position in ``fabric.gpus``) of rank r; ``None`` is linear.
    """
    from netsim.workload.layout import gpu_grid

    return gpu_grid(job, placement).reshape(job.pp, job.dp * job.cp, job.tp)


def _bytes_choices() -> tuple[int, ...]:
    return (1, 2, 4, 8)


def _gpu_choices() -> tuple[str, ...]:
    from netsim.model.hardware import HARDWARE

    return tuple(HARDWARE)


#: Bounds of the job-file keys beyond their types (``inputspec.Rule`` keyword arguments).
JOB_RULES: dict[str, dict[str, Any]] = {
    **{k: dict(min=1, max=2**24, example=8) for k in ("tp", "pp", "dp")},
    "cp": dict(min=1, max=2**20, example=2),
    "ep": dict(min=1, max=2**20, example=8),
    "dp_replicate": dict(min=1, max=2**24, example=2),
    "first_stage_layers": dict(min=0, max=2**16, example=7),
    "last_stage_layers": dict(min=0, max=2**16, example=7),
    "capacity_factor": dict(gt=0, max=1024, example=1.25),
    "gpus": dict(min=0, max=2**40, example=1024),
    "global_batch": dict(min=0, max=2**40, example=1536),
    "micro_batch": dict(min=1, max=2**24, example=1),
    "virtual_stages": dict(min=1, max=1024, example=2),
    "seq": dict(min=1, max=2**24, example=2048),
    "vocab": dict(min=1, max=2**24, example=51200),
    "layers": dict(min=1, max=2**16, example=96),
    "hidden": dict(min=1, max=2**24, example=12288),
    "heads": dict(min=1, max=2**20, example=96),
    "kv_heads": dict(min=1, max=2**20, example=8),
    "ffn_hidden": dict(min=0, max=2**26, example=49152),
    "act_bytes": dict(choices=_bytes_choices, example=2),
    "grad_bytes": dict(choices=_bytes_choices, example=4),
    "gpu": dict(choices=_gpu_choices, example="a100"),
    "order": dict(example="tp-cp-ep-dp-pp"),
    "schedule": dict(choices=SCHEDULES, example="interleaved"),
    "moe_node_limit": dict(min=0, max=2**20, example=4),
}

#: Bytes per rank a job needs at least: the fabric it runs on (1,940 B per GPU measured on
#: megascale under tracemalloc, rounded up to 2 KiB).
JOB_BYTES_PER_RANK = 2048
#: Pipeline executor cost per (stage x chunk x micro-batch): predict of job `tiny` with 7,200
#: more micro-batches per pipeline took 6.4 s and 36 MB more (2 stages; 2-core machine at load
#: ~30): 0.44 ms and 2.5 KB each, rounded up.
PIPELINE_S_PER_TASK = 5e-4
PIPELINE_BYTES_PER_TASK = 4096


def check_job_size(job: JobSpec, source: str = "job") -> None:
    """Refuse a job whose ranks or pipeline schedule would not fit in memory or time
    (estimate and limit named)."""
    from inputspec import check_memory, check_time

    check_memory(job.world * JOB_BYTES_PER_RANK, f"a job of {job.world:,} ranks",
                 f"{JOB_BYTES_PER_RANK:,} B per rank for the fabric it runs on", source)
    m = job.batch // max(1, job.dp * job.micro_batch)
    tasks = job.pp * job.virtual_stages * m
    how = (f"pp {job.pp} x virtual_stages {job.virtual_stages} x {m:,} micro-batches "
           f"(global_batch {job.batch:,} / (dp x micro_batch)) = {tasks:,} steps")
    check_memory(tasks * PIPELINE_BYTES_PER_TASK, "its pipeline schedule",
                 f"{how} x {PIPELINE_BYTES_PER_TASK:,} B", source)
    check_time(tasks * PIPELINE_S_PER_TASK, "predicting it",
               f"{how} x {PIPELINE_S_PER_TASK * 1e3:g} ms", source)
