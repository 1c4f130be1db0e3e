"""``predict(job, fabric, hardware, ...) -> Prediction``: one training iteration, end to end.

Symmetry keeps it fast: every DP replica and every TP rank of a stage runs the same task
list, so the pipeline is executed once per stage (``p`` task lists of ``2 m v`` ops); the
network is priced for *every* group (all TP, PP and DP groups of the job, on their real
GPUs), and a stage waits for its slowest group, as a synchronous iteration does.

Per layer and micro-batch (Megatron-LM, Narayanan et al. 2021 section 2.3): two TP
all-reduces of ``b s h`` bf16 activations forward, two backward (two more in a recomputed
forward). Each pipeline boundary carries ``b s h`` bf16 (divided by ``tp`` with the
scatter/gather optimisation) per micro-batch each way. DP reduces the gradients of a stage's
parameters (all-reduce, or reduce-scatter + all-gather with the distributed optimizer);
tied embeddings are all-reduced between the first and last stage.

Exposed communication of a kind is counterfactual: ``iteration_s`` minus the iteration time
with that kind's communication made free; the same with all kinds gives ``total``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import netsim.workload.layout as layout
from netsim.model.efficiency import OVERLAP_SM_FRACTION
from netsim.model.hardware import HardwareProfile, get_hardware
from netsim.workload.comm import (
    AnalyticCommModel,
    CommBatch,
    CommModel,
    Locality,
    RecordingCommModel,
    fabric_locality,
    synthetic_locality,
)
from netsim.workload.compute import (
    ComputeModel,
    RooflineCompute,
    attention_task,
    layer_tasks,
    logit_tasks,
    optimizer_task,
)
from netsim.workload.host import HostCost, host_bound_s, stage_calls
from netsim.workload.job import JobSpec
from netsim.workload.layout import layer_kinds
from netsim.workload.pipeline import PipelineRun, simulate_pipeline
from netsim.workload.schedules import CLOSED_FORM, closed_form_pipeline
from netsim.workload.volumes import cp_kv_width, ep_bytes, fsdp_calls, fsdp_shard_ranks

KINDS = ("tp", "cp", "ep", "pp", "dp", "embedding")


@dataclass
class Prediction:
    """What one iteration of a job costs. ``to_json()`` gives the CLI's keys."""

    iteration_s: float
    tokens_per_s: float
    mfu: float
    """Model FLOPs (no recomputation) / (iteration x GPUs x peak)."""
    hfu: float
    """Executed FLOPs (with recomputation) / (iteration x GPUs x peak)."""
    bubble_fraction: float
    """Pipeline idle time of the busiest stage / iteration time."""
    bubble_s: float
    exposed_comm_s: dict[str, float]
    """Per kind (tp, cp, ep, pp, dp, embedding) and ``total``: seconds the iteration would
    save."""
    comm_s: dict[str, float]
    """Raw time of one call of each kind (tp: one all-reduce; cp: one layer's forward KV
    ring; ep: one all-to-all; pp: one transfer; dp: all grads; fsdp_layer: one layer's FSDP
    all-gather + reduce-scatter (+ HSDP all-reduce); fsdp_iteration: every FSDP call of an
    iteration on the busiest stage, ``netsim.workload.volumes.fsdp_calls`` times each)."""
    compute_s: float
    """Compute time of the busiest stage (forward + backward tasks, exposed TP included)."""
    optimizer_s: float
    pipeline_s: float
    """End of the last backward."""
    micro_batches: int
    model_flops: float
    gpus: int
    mfu_causal: float = 0.0
    """MFU with the attention core counted causally (half the score and context FLOPs), the
    convention of FlashAttention's own FLOP counts; ``mfu`` counts it whole (PaLM, Megatron)."""
    critical_path: list[dict] = field(default_factory=list)
    job: dict = field(default_factory=dict)
    host_s: float = 0.0
    """Processor-sharing bound of a shared host (CPU trainer; 0 for a GPU job)."""
    model_name: str = ""
    """The model's own name (preset, or the config.json's ``_name_or_path`` / folder)."""
    schedule: dict = field(default_factory=dict)
    """Pipeline schedule, layers per stage and per virtual stage, micro-batches per stage."""
    contention: dict = field(default_factory=dict)
    """Time multiplier of each kind from sharing links with the kinds that overlap it
    (flow-engine comm model only; ``netsim.workload.contention``)."""
    sequence: dict = field(default_factory=dict)
    """The sequence length priced and where it came from: ``{"seq", "source"}``."""
    interval: dict = field(default_factory=dict)
    """With a calibration: ``{"low_s", "high_s", "half_width", "basis", "extrapolation"}`` of
    ``iteration_s`` (``netsim.diagnose.coverage.interval``: the calibration's held-out error,
    widened by how far the job lies outside its runs)."""
    calibration_gaps: list = field(default_factory=list)
    """With a calibration: the collectives this prediction priced that it has no fit of that
    kind for, each ``{"kind", "op", "scope", "fallback"}`` (``fallback``: the fit of other
    kinds' calls that priced it, ``op/scope``, or ``uncalibrated``: the hardware profile)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (contract keys first)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class _CommTimes:
    """Per-stage communication times, seconds (the slowest group of the stage)."""

    tp: np.ndarray  # (p,) one TP all-reduce (or reduce-scatter + all-gather with SP)
    cp: np.ndarray  # (p,) one layer's forward KV ring (backward passes twice the bytes)
    ep: np.ndarray  # (p,) one dispatch (or combine) all-to-all of an MoE layer
    fsdp_ag: np.ndarray  # (p,) FSDP parameter all-gather of one dense layer
    fsdp_rs: np.ndarray  # (p,) its gradient reduce-scatter (+ HSDP all-reduce)
    fsdp_ag_moe: np.ndarray  # (p,) the same for an MoE layer (experts over their own group)
    fsdp_rs_moe: np.ndarray
    pp: np.ndarray  # (p,) one transfer from stage s to s + 1 (mod p)
    dp_layer: np.ndarray  # (p,) reduction of one layer's gradients
    dp_all: np.ndarray  # (p,) reduction of all of the stage's gradients
    dp_gather: np.ndarray  # (p,) param all-gather (distributed optimizer), else 0
    embedding: float  # tied-embedding all-reduce between first and last stage

    def without(self, kinds: Sequence[str]) -> _CommTimes:
        z = {k: np.zeros_like(getattr(self, k)) for k in ("tp", "cp", "ep", "pp") if k in kinds}
        if "dp" in kinds:
            z.update({k: np.zeros_like(getattr(self, k))
                      for k in ("dp_layer", "dp_all", "dp_gather", "fsdp_ag", "fsdp_rs",
                                "fsdp_ag_moe", "fsdp_rs_moe")})
        if "embedding" in kinds:
            z["embedding"] = 0.0
        return dataclasses.replace(self, **z)


def predict(job: JobSpec, fabric=None, hardware: HardwareProfile | None = None,
            calibration=None, placement: Sequence[int] | None = None,
            comm_model: CommModel | None = None, compute_model: ComputeModel | None = None,
            progress: Callable[[str], None] | None = None,
            contention: bool = True,
            stragglers: Mapping[int, float] | None = None) -> Prediction:
    """Predict one training iteration of ``job``.

    Parameters
    ----------
    job : JobSpec
        Model, parallel degrees, batch, schedule and overlap switches.
    fabric : topologies.Fabric, optional
        Where the job runs; without one a rail-optimised fabric of ``hardware`` servers is
        assumed (``netsim.workload.comm.synthetic_locality``).
    hardware : HardwareProfile, optional
        Defaults to the preset named by ``job.gpu``.
    calibration : netsim.diagnose.calibration.Calibration, optional
        Fitted compute throughputs and alpha-beta parameters; replaces the roofline and the
        analytic defaults where it has data.
    placement : sequence of int, optional
        GPU position (in ``fabric.gpus``) of every rank; default rank r -> GPU r.
    comm_model, compute_model : optional
        Explicit models (override ``calibration``).
    progress : callable, optional
        Called with a short message at each phase.
    contention : bool
        With a flow-engine comm model, let the kinds that overlap in the pipeline's steady
        state (EP, PP, CP, and DP when it overlaps the backward) share links
        (``netsim.workload.contention``); ``False`` prices each kind alone.
    stragglers : mapping of int to float, optional
        Rank -> slowdown of its compute (``netsim predict --straggler``). A synchronous
        iteration waits for the slowest replica, so each pipeline stage's compute runs at the
        largest slowdown of a straggler in that stage (exact for one straggler, or several in
        one replica or one stage; an upper bound for stragglers in different stages of
        different replicas).

    Returns
    -------
    Prediction

    Raises
    ------
    ValueError
        If the job needs more GPUs than the fabric has, or the placement is invalid.
    """
    say = progress or (lambda _msg: None)
    hw = hardware or get_hardware(job.gpu)
    model = job.model_config()
    if fabric is not None:
        loc = fabric_locality(fabric)
    else:  # a fabric just big enough for the job (and its placement)
        span = job.world if placement is None else max(job.world, int(np.max(placement)) + 1)
        loc = synthetic_locality(span, hw)
    if job.world > loc.num_gpus:
        raise ValueError(f"job needs {job.world} GPUs, the fabric has {loc.num_gpus}")
    if comm_model is None:
        comm_model = calibration.comm_model(hw) if calibration else AnalyticCommModel(hw)
    if compute_model is None:
        compute_model = calibration.compute_model(hw) if calibration else RooflineCompute(hw)
    if calibration is not None and hasattr(calibration, "coverage_gaps"):
        comm_model = RecordingCommModel(comm_model)
    say("placing ranks")
    grid4 = layout.gpu_grid(job, placement)
    grid = grid4.reshape(job.pp, job.dp * job.cp, job.tp)
    say("pricing collectives")
    comm = _comm_times(job, model, grid4, loc, comm_model)
    say("pricing compute")
    comp = _compute_times(job, model, hw, compute_model)
    if stragglers:
        comp = dataclasses.replace(comp, stage_scale=straggler_stage_scale(job, stragglers))
    say("executing the pipeline")
    factors: dict[str, float] = {}
    if contention and hasattr(comm_model, "sharing") and loc is not None:
        say("pricing overlapping kinds together")
        comm, factors = _contend(job, model, grid4, loc, comm_model, comp, comm)
    crit, run = _iterate(job, comp, comm)
    host = calibration.host_cost() if calibration and hasattr(calibration, "host_cost") \
        else HostCost()
    host_s = host_bound_s(_stage_work_s(job, model, comp, host), grid, loc.server,
                          hw.host_cores * host.utilization)
    full = max(crit, host_s)  # netsim.workload.host: processor sharing, work-conserving
    exposed = {}
    for kind in KINDS:
        without = _iterate(job, comp, comm.without([kind]))[0]
        exposed[kind] = max(0.0, full - max(without, host_s))
    exposed["total"] = max(0.0, full - max(_iterate(job, comp, comm.without(KINDS))[0], host_s))
    pred = _report(job, model, hw, comp, comm, full, run, exposed)
    pred.host_s = host_s
    pred.contention = factors
    if isinstance(comm_model, RecordingCommModel):
        pred.calibration_gaps = calibration.coverage_gaps(comm_model.used)
    if calibration is not None and hasattr(calibration, "interval"):
        pred.interval = calibration.interval(job, full)
    return pred


def _contend(job: JobSpec, model, grid4, loc, cm, comp, comm) -> tuple[_CommTimes, dict]:
    """Scale the kinds that overlap by their measured slowdown when sharing links."""
    from netsim.workload.contention import contention_factors, kind_batches

    batches = kind_batches(job, model, grid4)
    if len(batches) < 2:
        return comm, {}
    _, run = _iterate(job, comp, comm)
    m, v = job.micro_batches, job.virtual_stages
    dense, moe = _stage_kinds(job, model)
    busy = {"ep": float((m * moe * (6 if job.recompute else 4) * comm.ep).max()),
            "pp": float((m * v * 2 * comm.pp).max()),
            "cp": float((m * (dense + moe) * 3 * comm.cp).max()),
            "dp": float(comm.dp_all.max())}
    f = contention_factors(cm, batches, loc, busy, run.makespan_s)
    scaled = {k: getattr(comm, k) * f[k] for k in ("ep", "pp", "cp") if k in f}
    if "dp" in f:
        scaled.update(dp_layer=comm.dp_layer * f["dp"], dp_all=comm.dp_all * f["dp"])
    return dataclasses.replace(comm, **scaled), {k: float(x) for k, x in f.items()}


def straggler_stage_scale(job: JobSpec, stragglers: Mapping[int, float]) -> np.ndarray:
    """(p,) compute slowdown of each stage: its slowest straggler's (in the job's rank order)."""
    scale = np.ones(job.pp)
    stage_of = np.empty(job.world, dtype=np.int64)
    stage_of[layout.rank_ids(job)] = np.arange(job.pp)[:, None, None, None]
    for rank, factor in stragglers.items():
        if not 0 <= rank < job.world:
            raise ValueError(f"straggler rank {rank} is outside the job's {job.world} ranks")
        if not factor > 0:
            raise ValueError(f"straggler factor of rank {rank} must be positive, got {factor}")
        stage = int(stage_of[rank])
        scale[stage] = max(scale[stage], factor)
    return scale


def _stage_work_s(job: JobSpec, model, comp: _ComputeTimes, host: HostCost) -> np.ndarray:
    """CPU work of one rank of each stage in an iteration (``netsim.workload.host``)."""
    m = job.micro_batches
    layer = comp.tf + comp.tb + (comp.tf if job.recompute else 0.0)
    layer_m = comp.tf_moe + comp.tb_moe + (comp.tf_moe if job.recompute else 0.0)
    dense, moe = _stage_kinds(job, model)
    work = m * (dense * layer + moe * layer_m) + comp.optimizer
    work[-1] += m * (comp.logits_f + comp.logits_b)
    if comp.stage_scale is not None:
        work = work * comp.stage_scale
    return work + np.array([host.work_s(*stage_calls(job, model, s)) for s in range(job.pp)])


def _stage_kinds(job: JobSpec, model) -> tuple[np.ndarray, np.ndarray]:
    """(dense layers, MoE layers) of each physical stage."""
    dense, moe = layer_kinds(model.moe_layers(), job.stage_layers())
    v, p = job.virtual_stages, job.pp
    return dense.reshape(v, p).sum(axis=0), moe.reshape(v, p).sum(axis=0)


def _comm_times(job: JobSpec, model, grid4: np.ndarray, loc: Locality,
                cm: CommModel) -> _CommTimes:
    """Price every group of every kind, all stages' groups of a kind concurrently (they run
    at the same time in the iteration); keep the slowest group per stage."""
    p = job.pp
    stages = range(p)
    act = job.micro_batch * model.seq // job.cp * model.hidden * job.act_bytes
    tp_g = [layout.tp_groups(grid4, q) for q in stages]
    if job.sequence_parallel:  # Korthikanti et al. 2022 section 4.2.2: g = RS, g-bar = AG
        tp = (_per_stage(cm, "reduce_scatter", "tp", tp_g, [act] * p, loc)
              + _per_stage(cm, "all_gather", "tp", tp_g, [act] * p, loc))
    else:
        tp = _per_stage(cm, "all_reduce", "tp", tp_g, [act] * p, loc)
    split = job.tp if (job.scatter_gather or job.sequence_parallel) else 1
    pairs = [np.stack([grid4[q].ravel(), grid4[(q + 1) % p].ravel()], axis=1) for q in stages]
    pp = _per_stage(cm, "send", "pp", pairs, [act / split] * p, loc) if p > 1 else np.zeros(p)
    dp_layer, dp_all, gather = _dp_times(job, model, grid4, loc, cm)
    fsdp = _fsdp_times(job, model, grid4, loc, cm)
    emb = 0.0
    if p > 1 and model.tied_embeddings:
        ends = [np.stack([grid4[0].ravel(), grid4[-1].ravel()], axis=1)]
        emb_bytes = model.vocab * model.hidden / job.tp * job.grad_bytes
        emb = float(_per_stage(cm, "all_reduce", "embedding", ends, [emb_bytes], loc)[0])
    return _CommTimes(tp=tp, cp=_cp_times(job, model, grid4, loc, cm),
                      ep=_ep_times(job, model, grid4, loc, cm), fsdp_ag=fsdp[0],
                      fsdp_rs=fsdp[1], fsdp_ag_moe=fsdp[2], fsdp_rs_moe=fsdp[3],
                      pp=pp, dp_layer=dp_layer, dp_all=dp_all, dp_gather=gather, embedding=emb)


def _cp_times(job: JobSpec, model, grid4, loc, cm) -> np.ndarray:
    """Ring attention (Megatron-Core / Transformer Engine context parallelism): each layer's
    forward passes every CP rank's K and V chunk once around the CP ring (``cp - 1`` steps,
    an all-gather's traffic); the backward passes K, V and their gradients (twice that)."""
    p = job.pp
    if job.cp == 1:
        return np.zeros(p)
    kv_bytes = job.micro_batch * model.seq // job.cp * cp_kv_width(model, job.tp) * job.act_bytes
    groups = [layout.cp_groups(grid4, q) for q in range(p)]
    return _per_stage(cm, "all_gather", "cp", groups, [kv_bytes * job.cp] * p, loc)


def _ep_times(job: JobSpec, model, grid4, loc, cm) -> np.ndarray:
    """One all-to-all of every stage's EP groups (dispatch and combine cost the same)."""
    p = job.pp
    if job.ep == 1:
        return np.zeros(p)
    groups = [layout.expert_groups(job, grid4, q)[0] for q in range(p)]
    return _per_stage(cm, "all_to_all", "ep", groups, [ep_bytes(job, model)] * p, loc)


def _dp_times(job: JobSpec, model, grid4, loc, cm):
    """Gradient reduction: dense weights over cp x dp, experts over cp x dp / ep (Megatron-Core
    expert-data-parallel groups); per layer and for the whole stage."""
    p = job.pp
    if job.fsdp:
        return np.zeros(p), np.zeros(p), np.zeros(p)
    op = "reduce_scatter" if job.distributed_optimizer else "all_reduce"
    dense_g = [layout.replica_groups(grid4, q) for q in range(p)]
    expert_g = [layout.expert_groups(job, grid4, q)[1] for q in range(p)]
    dense_b = [_stage_params(job, model, q) / job.tp * job.grad_bytes for q in range(p)]
    expert_b = [_stage_expert_params(job, model, q) / (job.tp * job.ep) * job.grad_bytes
                for q in range(p)]
    has_exp = any(expert_b)
    dp_all = _per_stage(cm, op, "dp", dense_g, dense_b, loc)
    if has_exp:
        dp_all = dp_all + _per_stage(cm, op, "dp", expert_g, expert_b, loc)
    dense_layer = model.layer_params() / job.tp * job.grad_bytes
    dp_layer = _per_stage(cm, op, "dp", dense_g, [dense_layer] * p, loc)
    if has_exp:  # an MoE layer: its attention/router/shared part, then its experts
        n_dense, n_moe = _stage_kinds(job, model)
        moe_dense = (model.layer_params(True) - model.expert_params()) / job.tp * job.grad_bytes
        moe_exp = model.expert_params() / (job.tp * job.ep) * job.grad_bytes
        t_moe = (_per_stage(cm, op, "dp", dense_g, [moe_dense] * p, loc)
                 + _per_stage(cm, op, "dp", expert_g, [moe_exp] * p, loc))
        dp_layer = (n_dense * dp_layer + n_moe * t_moe) / np.maximum(n_dense + n_moe, 1)
    gather = np.zeros(p)
    if job.distributed_optimizer:
        params = [g / job.grad_bytes * job.act_bytes for g in dense_b]
        gather = _per_stage(cm, "all_gather", "dp", dense_g, params, loc)
        if has_exp:
            params = [g / job.grad_bytes * job.act_bytes for g in expert_b]
            gather = gather + _per_stage(cm, "all_gather", "dp", expert_g, params, loc)
    return dp_layer, dp_all, gather


def _fsdp_times(job: JobSpec, model, grid4, loc, cm):
    """torchtitan FSDP2 per layer: (all-gather, reduce-scatter) of a dense layer, then of an
    MoE layer, each (p,). Parameters (bf16) are all-gathered over the shard group, gradients
    reduce-scattered (``reduce_dtype`` fp32 = ``grad_bytes``); with HSDP the shards are then
    all-reduced across ``dp_replicate`` replicas. Dense parameters shard over cp x dp / R
    ranks; routed experts (``1/ep`` of them per rank) over the expert-data-parallel ranks
    cp x dp / (ep R), as torchtitan's ``dp_shard_mod_ep`` mesh. How often each runs per
    iteration: ``netsim.workload.volumes.fsdp_calls``."""
    p = job.pp
    if not job.fsdp:
        return (np.zeros(p),) * 4
    dense_n, exp_n = fsdp_shard_ranks(job)
    dense_g = [layout.split_replicas(job, grid4, q, dense_n) for q in range(p)]
    ag, rs = _fsdp_part(job, cm, loc, dense_g, model.layer_params() / job.tp, dense_n)
    if not model.moe:
        return ag, rs, ag, rs
    shared = (model.layer_params(True) - model.expert_params()) / job.tp
    ag_m, rs_m = _fsdp_part(job, cm, loc, dense_g, shared, dense_n)
    exp_g = [layout.split_groups(layout.expert_groups(job, grid4, q)[1], exp_n)
             for q in range(p)]
    ag_e, rs_e = _fsdp_part(job, cm, loc, exp_g, model.expert_params() / (job.tp * job.ep),
                            exp_n)
    return ag, rs, ag_m + ag_e, rs_m + rs_e


def _fsdp_part(job: JobSpec, cm, loc, groups, params: float, shard: int):
    """(all-gather, reduce-scatter [+ replica all-reduce]) of ``params`` elements per rank
    sharded over ``groups`` (per stage: (shard groups, replica groups))."""
    p = job.pp
    shard_g, repl_g = [g for g, _ in groups], [r for _, r in groups]
    ag = _per_stage(cm, "all_gather", "dp", shard_g, [params * job.act_bytes] * p, loc)
    rs = _per_stage(cm, "reduce_scatter", "dp", shard_g, [params * job.grad_bytes] * p, loc)
    if job.dp_replicate > 1:
        rs = rs + _per_stage(cm, "all_reduce", "dp", repl_g,
                             [params * job.grad_bytes / shard] * p, loc)
    return ag, rs


def _per_stage(cm: CommModel, op: str, kind: str, groups: list[np.ndarray],
               sizes: list[float], loc: Locality) -> np.ndarray:
    """One concurrent batch of every stage's groups; the slowest group of each stage."""
    if groups[0].shape[-1] <= 1:
        return np.zeros(len(groups))
    counts = [g.shape[0] for g in groups]
    batch = CommBatch(op, kind, np.concatenate(groups),
                      np.repeat(np.asarray(sizes, dtype=np.float64), counts),
                      slowest_of=np.repeat(np.arange(len(groups)), counts))
    t = np.asarray(cm.batch_s(batch, loc), dtype=np.float64)
    return np.array([seg.max() for seg in np.split(t, np.cumsum(counts)[:-1])])


def _stage_params(job: JobSpec, model, stage: int) -> float:
    """Dense parameters held by pipeline stage ``stage`` (all TP ranks together): attention,
    norms, dense feed-forwards, MoE routers and shared experts, and the embedding (first
    stage) and output layer (last stage: the tied copy or the untied projection)."""
    dense, moe = _stage_kinds(job, model)
    n = dense[stage] * model.layer_params()
    if moe[stage]:
        n += moe[stage] * (model.layer_params(True) - model.expert_params())
    if stage == 0 or stage == job.pp - 1:
        n += model.vocab * model.hidden
    return float(n)


def _stage_expert_params(job: JobSpec, model, stage: int) -> float:
    """Routed-expert parameters of pipeline stage ``stage`` (all EP and TP ranks together)."""
    return float(_stage_kinds(job, model)[1][stage] * model.expert_params())


@dataclass(frozen=True, slots=True)
class _ComputeTimes:
    tf: float  # one dense layer forward, one micro-batch
    tb: float  # one dense layer backward
    tf_moe: float  # one MoE layer forward
    tb_moe: float
    attn_f: float  # attention core of one layer forward (ring attention hides under it)
    logits_f: float
    logits_b: float
    optimizer: np.ndarray  # (p,)
    stage_scale: np.ndarray | None = None  # (p,) straggler slowdown of each stage's compute


def _compute_times(job: JobSpec, model, hw: HardwareProfile, cm: ComputeModel) -> _ComputeTimes:
    kw = dict(cp=job.cp, ep=job.ep, fp8=job.fp8)
    f, bwd = layer_tasks(model, job.micro_batch, job.tp, hw.flash_attention, **kw)
    fm, bm = layer_tasks(model, job.micro_batch, job.tp, hw.flash_attention, moe=True, **kw)
    lf, lb = logit_tasks(model, job.micro_batch, job.tp, job.cp)
    return _ComputeTimes(tf=cm.task_s(f), tb=cm.task_s(bwd), tf_moe=cm.task_s(fm),
                         tb_moe=cm.task_s(bm),
                         attn_f=cm.task_s(attention_task(model, job.micro_batch, job.tp, job.cp)),
                         logits_f=cm.task_s(lf), logits_b=cm.task_s(lb),
                         optimizer=_optimizer_s(job, model, cm))


def _optimizer_s(job: JobSpec, model, cm: ComputeModel) -> np.ndarray:
    """Adam over the parameters one GPU updates: dense / tp, experts / (tp ep), each sharded
    over its data-parallel group by the distributed optimizer or FSDP."""
    sharded = job.distributed_optimizer or job.fsdp
    dense_shard = job.cp * job.dp // (job.dp_replicate if job.fsdp else 1) if sharded else 1
    exp_shard = max(1, job.expert_dp // (job.dp_replicate if job.fsdp else 1)) if sharded else 1
    out = []
    for q in range(job.pp):
        n = (_stage_params(job, model, q) / job.tp / dense_shard
             + _stage_expert_params(job, model, q) / (job.tp * job.ep) / exp_shard)
        out.append(cm.task_s(optimizer_task(n)))
    return np.array(out)


def _layer_times(job: JobSpec, comp: _ComputeTimes, comm: _CommTimes, moe: bool):
    """(forward, backward) of one layer on each physical stage, exposed communication
    included; ``moe`` for an MoE layer (with its dispatch and combine all-to-alls)."""
    ov = job.overlap
    tf, tb = (comp.tf_moe, comp.tb_moe) if moe else (comp.tf, comp.tb)
    attn_f = comp.attn_f
    if comp.stage_scale is not None:  # stragglers: a stage's compute runs slower
        tf, tb, attn_f = tf * comp.stage_scale, tb * comp.stage_scale, attn_f * comp.stage_scale

    def exposed(comm_s, under_s, hidden):
        return np.maximum(0.0, comm_s - under_s) if hidden else comm_s

    tp2 = 2 * comm.tp  # two all-reduces (or RS + AG pairs) per layer each way
    fwd = tf + exposed(tp2, tf, ov.tp_comm) + exposed(comm.cp, attn_f, ov.cp_comm)
    bwd = tb + exposed(tp2, tb, ov.tp_comm) + exposed(2 * comm.cp, 2 * attn_f, ov.cp_comm)
    if moe:  # DualPipe always runs a chunk's all-to-all under the other direction's compute
        a2a = 2 * comm.ep  # dispatch + combine, forward; their gradients backward
        hide = ov.ep_comm or job.pipeline_schedule == "dualpipe"
        if hide and job.ep > 1:  # the all-to-all holds SMs the compute beside it lacks
            fwd = fwd + tf * (1 / OVERLAP_SM_FRACTION - 1)
            bwd = bwd + tb * (1 / OVERLAP_SM_FRACTION - 1)
        fwd = fwd + exposed(a2a, tf, hide)
        bwd = bwd + exposed(a2a, tb, hide)
    if job.recompute:
        bwd = bwd + fwd
    ag, rs = (comm.fsdp_ag_moe, comm.fsdp_rs_moe) if moe else (comm.fsdp_ag, comm.fsdp_rs)
    once = job.fsdp_accumulate_unsharded  # gathered / reduced once per iteration instead
    fsdp_f = 0.0 if once else ag
    fsdp_b = (ag if job.fsdp_reshard_after_forward else 0.0) + (0.0 if once else rs)
    fwd = fwd + np.maximum(0.0, fsdp_f - tf)  # FSDP2 prefetches the next layer's gather
    bwd = bwd + np.maximum(0.0, fsdp_b - tb)
    return fwd, bwd


def _fsdp_once_s(job: JobSpec, model, comp: _ComputeTimes, comm: _CommTimes) -> np.ndarray:
    """(p,) exposed FSDP time each stage pays once per iteration (gradient accumulation
    without resharding: one forward gather and one gradient reduction per layer, each
    exposed beyond its layer's compute), charged at the stage's end as the DP reduction is."""
    if not (job.fsdp and job.fsdp_accumulate_unsharded):
        return np.zeros(job.pp)
    scale = 1.0 if comp.stage_scale is None else comp.stage_scale
    dense, moe = _stage_kinds(job, model)

    def layer(tf, tb, ag, rs):
        return np.maximum(0.0, ag - tf * scale) + np.maximum(0.0, rs - tb * scale)

    return (dense * layer(comp.tf, comp.tb, comm.fsdp_ag, comm.fsdp_rs)
            + moe * layer(comp.tf_moe, comp.tb_moe, comm.fsdp_ag_moe, comm.fsdp_rs_moe))


def _fsdp_layer_s(job: JobSpec, model, comm: _CommTimes) -> float:
    """One layer's FSDP all-gather + reduce-scatter (+ all-reduce), the costlier of the layer
    kinds (dense, MoE) the model has."""
    dense, moe = _stage_kinds(job, model)
    out = 0.0
    if dense.any():
        out = float((comm.fsdp_ag + comm.fsdp_rs).max())
    if moe.any():
        out = max(out, float((comm.fsdp_ag_moe + comm.fsdp_rs_moe).max()))
    return out


def fsdp_iteration_s(job: JobSpec, model, comm: _CommTimes) -> float:
    """FSDP seconds on the wire per iteration of the busiest stage (calls x call times)."""
    if not job.fsdp:
        return 0.0
    c = fsdp_calls(job)
    dense, moe = _stage_kinds(job, model)
    g = c.gather_forward + c.gather_backward
    per = (dense * (g * comm.fsdp_ag + c.reduce * comm.fsdp_rs)
           + moe * (g * comm.fsdp_ag_moe + c.reduce * comm.fsdp_rs_moe))
    return float(per.max())


def _iterate(job: JobSpec, comp: _ComputeTimes, comm: _CommTimes) -> tuple[float, PipelineRun]:
    """Run the pipeline, then each stage's gradient reduction and optimizer step."""
    p, v, m = job.pp, job.virtual_stages, job.micro_batches
    model = job.model_config()
    dense, moe = layer_kinds(model.moe_layers(), job.stage_layers())
    stage = np.arange(p * v) % p
    fd, bd = _layer_times(job, comp, comm, False)
    fm, bm = _layer_times(job, comp, comm, True)
    fwd = dense * fd[stage] + moe * fm[stage]
    bwd = dense * bd[stage] + moe * bm[stage]
    last = 1.0 if comp.stage_scale is None else comp.stage_scale[-1]
    fwd[-1] += last * comp.logits_f
    bwd[-1] += last * comp.logits_b
    if job.pipeline_schedule in CLOSED_FORM:
        run = closed_form_pipeline(job.pipeline_schedule, fwd, bwd, comm.pp, m, p)
    else:
        run = simulate_pipeline(fwd, bwd, comm.pp[stage], m, p, v,
                                blocking_send=not job.overlap.pp_send_recv)
    once = _fsdp_once_s(job, model, comp, comm)
    return float(_stage_done(job, comp, comm, run, fwd, dense + moe, once).max()), run


def _stage_done(job: JobSpec, comp: _ComputeTimes, comm: _CommTimes, run: PipelineRun,
                fwd: np.ndarray, per_q: np.ndarray, fsdp_once: np.ndarray) -> np.ndarray:
    """End of each stage's gradient reduction, optimizer step and parameter gather
    (``fsdp_once``: the stage's once-per-iteration FSDP time)."""
    p, m = job.pp, job.micro_batches
    ov = job.overlap
    done = np.empty(p)
    for s in range(p):
        layers_s = per_q[s::p]
        if ov.dp_grad_reduce and not job.fsdp:
            t = _overlapped_reduce(run.chunk_last_bwd_s[s], layers_s, comm.dp_layer[s])
        else:
            t = run.stage_end_s[s] + comm.dp_all[s] + fsdp_once[s]
        if s in (0, p - 1) and p > 1:
            t += comm.embedding
        t = max(t, run.stage_end_s[s]) + comp.optimizer[s] * (
            1.0 if comp.stage_scale is None else comp.stage_scale[s])
        gather = comm.dp_gather[s]
        if ov.dp_param_gather:  # hidden under the next iteration's warm-up forwards
            gather = max(0.0, gather - min(p - s, m) * fwd[s])
        done[s] = t + gather
    return done


def _overlapped_reduce(chunks: np.ndarray, layers, per_layer_s: float) -> float:
    """End of a stream that reduces each layer's gradients as its last backward produces them
    (``layers``: layers of each chunk of the stage)."""
    ready = []
    for (start, end), n in zip(chunks, np.broadcast_to(layers, len(chunks)), strict=True):
        n = int(n)
        ready += [start + (i + 1) * (end - start) / n for i in range(n)]
    t = 0.0
    for r in sorted(ready):
        t = max(t, r) + per_layer_s
    return t


def _report(job: JobSpec, model, hw: HardwareProfile, comp: _ComputeTimes, comm: _CommTimes,
            iteration_s: float, run: PipelineRun, exposed: dict) -> Prediction:
    tokens = job.batch * model.seq
    peak = iteration_s * job.world * hw.peak_flops_per_s
    busy = float(run.stage_busy_s.max())
    bubble = max(0.0, run.makespan_s - busy)
    return Prediction(
        iteration_s=iteration_s,
        tokens_per_s=tokens / iteration_s,
        mfu=model.model_flops(tokens) / peak,
        hfu=model.hardware_flops(tokens, job.recompute) / peak,
        mfu_causal=(model.model_flops(tokens) - 1.5 * model.layers
                    * model.layer_attn_flops_fwd(tokens)) / peak,
        bubble_fraction=bubble / iteration_s,
        bubble_s=bubble,
        exposed_comm_s=exposed,
        comm_s={"tp": float(comm.tp.max()), "cp": float(comm.cp.max()),
                "ep": float(comm.ep.max()), "pp": float(comm.pp.max()),
                "dp": float(comm.dp_all.max() + comm.dp_gather.max()),
                "fsdp_layer": _fsdp_layer_s(job, model, comm),
                "fsdp_iteration": fsdp_iteration_s(job, model, comm),
                "embedding": comm.embedding},
        compute_s=busy,
        optimizer_s=float(comp.optimizer.max()),
        pipeline_s=run.makespan_s,
        micro_batches=job.micro_batches,
        model_flops=model.model_flops(tokens),
        gpus=job.world,
        critical_path=run.critical_path,
        job=job.to_dict(),
        model_name=model.name,
        sequence={"seq": model.seq, "source": model.seq_source or f"preset {model.name}"},
        schedule=schedule_summary(job),
    )


def schedule_summary(job: JobSpec) -> dict[str, Any]:
    """The pipeline schedule a report states (MFU moves by tens of percent with it)."""
    per_q = job.stage_layers()
    return {"schedule": job.pipeline_schedule, "virtual_stages": job.virtual_stages,
            "micro_batches": job.micro_batches,
            "micro_batches_per_stage_in_flight": min(job.micro_batches, job.pp),
            "stage_layers": [int(x) for x in job.stage_layer_counts()],
            "virtual_stage_layers": [int(x) for x in per_q],
            "uneven": bool(per_q.min() != per_q.max())}
