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

from netsim.hardware import HardwareProfile, get_hardware
from netsim.workload.comm import (
    AnalyticCommModel,
    CommBatch,
    CommModel,
    Locality,
    fabric_locality,
    synthetic_locality,
)
from netsim.workload.compute import (
    ComputeModel,
    RooflineCompute,
    layer_tasks,
    logit_tasks,
    optimizer_task,
)
from netsim.workload.host import HostCost, host_bound_s, stage_calls
from netsim.workload.job import JobSpec, rank_grid
from netsim.workload.pipeline import PipelineRun, simulate_pipeline

KINDS = ("tp", "pp", "dp", "embedding")


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
    """Per kind (tp, pp, dp, embedding) and ``total``: seconds the iteration would save."""
    comm_s: dict[str, float]
    """Raw time of one call of each kind (tp: one all-reduce; pp: one transfer; dp: all grads)."""
    compute_s: float
    """Compute time of the busiest stage (forward + backward tasks, exposed TP included)."""
    optimizer_s: float
    pipeline_s: float
    """End of the last backward."""
    micro_batches: int
    model_flops: float
    gpus: int
    critical_path: list[dict] = field(default_factory=list)
    job: dict = field(default_factory=dict)
    host_s: float = 0.0
    """Processor-sharing bound of a shared host (CPU trainer; 0 for a GPU job)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (contract keys first)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class _CommTimes:
    """Per-stage communication times, seconds (the slowest group of the stage)."""

    tp: np.ndarray  # (p,) one TP all-reduce of a layer
    pp: np.ndarray  # (p,) one transfer from stage s to s + 1 (mod p)
    dp_layer: np.ndarray  # (p,) reduction of one layer's gradients
    dp_all: np.ndarray  # (p,) reduction of all of the stage's gradients
    dp_gather: np.ndarray  # (p,) param all-gather (distributed optimizer), else 0
    embedding: float  # tied-embedding all-reduce between first and last stage

    def without(self, kinds: Sequence[str]) -> _CommTimes:
        z = {k: np.zeros_like(getattr(self, k)) for k in ("tp", "pp") if k in kinds}
        if "dp" in kinds:
            z.update(dp_layer=np.zeros_like(self.dp_layer), dp_all=np.zeros_like(self.dp_all),
                     dp_gather=np.zeros_like(self.dp_gather))
        if "embedding" in kinds:
            z["embedding"] = 0.0
        return dataclasses.replace(self, **z)


def predict(job: JobSpec, fabric=None, hardware: HardwareProfile | None = None,
            calibration=None, placement: Sequence[int] | None = None,
            comm_model: CommModel | None = None, compute_model: ComputeModel | None = None,
            progress: Callable[[str], None] | None = None,
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
    calibration : netsim.calibration.Calibration, optional
        Fitted compute throughputs and alpha-beta parameters; replaces the roofline and the
        analytic defaults where it has data.
    placement : sequence of int, optional
        GPU position (in ``fabric.gpus``) of every rank; default rank r -> GPU r.
    comm_model, compute_model : optional
        Explicit models (override ``calibration``).
    progress : callable, optional
        Called with a short message at each phase.
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
    say("placing ranks")
    grid = rank_grid(job, placement)
    say("pricing collectives")
    comm = _comm_times(job, model, grid, loc, comm_model)
    say("pricing compute")
    comp = _compute_times(job, model, hw, compute_model)
    if stragglers:
        comp = dataclasses.replace(comp, stage_scale=straggler_stage_scale(job, stragglers))
    say("executing the pipeline")
    crit, run = _iterate(job, comp, comm)
    host = calibration.host_cost() if calibration and hasattr(calibration, "host_cost") \
        else HostCost()
    host_s = host_bound_s(_stage_work_s(job, model, comp, host), grid, loc.server,
                          hw.host_cores)
    full = max(crit, host_s)  # netsim.workload.host: processor sharing, work-conserving
    exposed = {}
    for kind in KINDS:
        without = _iterate(job, comp, comm.without([kind]))[0]
        exposed[kind] = max(0.0, full - max(without, host_s))
    exposed["total"] = max(0.0, full - max(_iterate(job, comp, comm.without(KINDS))[0], host_s))
    pred = _report(job, model, hw, comp, comm, full, run, exposed)
    pred.host_s = host_s
    return pred


def straggler_stage_scale(job: JobSpec, stragglers: Mapping[int, float]) -> np.ndarray:
    """(p,) compute slowdown of each stage: its slowest straggler's (rank order tp-dp-pp)."""
    scale = np.ones(job.pp)
    for rank, factor in stragglers.items():
        if not 0 <= rank < job.world:
            raise ValueError(f"straggler rank {rank} is outside the job's {job.world} ranks")
        if not factor > 0:
            raise ValueError(f"straggler factor of rank {rank} must be positive, got {factor}")
        stage = rank // (job.tp * job.dp)
        scale[stage] = max(scale[stage], factor)
    return scale


def _stage_work_s(job: JobSpec, model, comp: _ComputeTimes, host: HostCost) -> np.ndarray:
    """CPU work of one rank of each stage in an iteration (``netsim.workload.host``)."""
    p, m = job.pp, job.micro_batches
    layer = comp.tf + comp.tb + (comp.tf if job.recompute else 0.0)
    work = m * (model.layers // p) * layer + comp.optimizer
    work[-1] += m * (comp.logits_f + comp.logits_b)
    if comp.stage_scale is not None:
        work = work * comp.stage_scale
    return work + np.array([host.work_s(*stage_calls(job, model, s)) for s in range(p)])


def _comm_times(job: JobSpec, model, grid: np.ndarray, loc: Locality,
                cm: CommModel) -> _CommTimes:
    """Price every group of every kind, all stages' groups of a kind concurrently (they run
    at the same time in the iteration); keep the slowest group per stage."""
    p, b, s, h = job.pp, job.micro_batch, model.seq, model.hidden
    stages = range(p)
    act = b * s * h * job.act_bytes
    tp = _per_stage(cm, "all_reduce", "tp", [grid[q].reshape(job.dp, job.tp) for q in stages],
                    [act] * p, loc)
    p2p_bytes = act / (job.tp if job.scatter_gather else 1)
    pairs = [np.stack([grid[q].ravel(), grid[(q + 1) % p].ravel()], axis=1) for q in stages]
    pp = _per_stage(cm, "send", "pp", pairs, [p2p_bytes] * p, loc) if p > 1 else np.zeros(p)
    op = "reduce_scatter" if job.distributed_optimizer else "all_reduce"
    dp_groups = [grid[q].T for q in stages]  # (tp, dp): the DP group of every TP rank
    grad = [_stage_params(job, model, q) / job.tp * job.grad_bytes for q in stages]
    layer_grad = model.layer_params() / job.tp * job.grad_bytes
    dp_all = _per_stage(cm, op, "dp", dp_groups, grad, loc)
    dp_layer = _per_stage(cm, op, "dp", dp_groups, [layer_grad] * p, loc)
    gather = np.zeros(p)
    if job.distributed_optimizer:
        params = [g / job.grad_bytes * job.act_bytes for g in grad]
        gather = _per_stage(cm, "all_gather", "dp", dp_groups, params, loc)
    emb = 0.0
    if p > 1:
        ends = [np.stack([grid[0].ravel(), grid[-1].ravel()], axis=1)]
        emb_bytes = model.vocab * h / job.tp * job.grad_bytes
        emb = float(_per_stage(cm, "all_reduce", "embedding", ends, [emb_bytes], loc)[0])
    return _CommTimes(tp=tp, pp=pp, dp_layer=dp_layer, dp_all=dp_all, dp_gather=gather,
                      embedding=emb)


def _per_stage(cm: CommModel, op: str, kind: str, groups: list[np.ndarray],
               sizes: list[float], loc: Locality) -> np.ndarray:
    """One concurrent batch of every stage's groups; the slowest group of each stage."""
    if groups[0].shape[-1] <= 1:
        return np.zeros(len(groups))
    counts = [g.shape[0] for g in groups]
    batch = CommBatch(op, kind, np.concatenate(groups),
                      np.repeat(np.asarray(sizes, dtype=np.float64), counts))
    t = np.asarray(cm.batch_s(batch, loc), dtype=np.float64)
    return np.array([seg.max() for seg in np.split(t, np.cumsum(counts)[:-1])])


def _stage_params(job: JobSpec, model, stage: int) -> float:
    """Parameters held by pipeline stage ``stage`` (all TP ranks together)."""
    n = model.layers // job.pp * model.layer_params()
    if stage == 0 or stage == job.pp - 1:
        n += model.vocab * model.hidden  # word embedding on the first, its tied copy on the last
    return float(n)


@dataclass(frozen=True, slots=True)
class _ComputeTimes:
    tf: float  # one layer forward, one micro-batch
    tb: float  # one layer backward
    logits_f: float
    logits_b: float
    optimizer: np.ndarray  # (p,)
    stage_scale: np.ndarray | None = None  # (p,) straggler slowdown of each stage's compute


def _compute_times(job: JobSpec, model, hw: HardwareProfile, cm: ComputeModel) -> _ComputeTimes:
    f, bwd = layer_tasks(model, job.micro_batch, job.tp, hw.flash_attention)
    lf, lb = logit_tasks(model, job.micro_batch, job.tp)
    shard = job.dp if job.distributed_optimizer else 1
    opt = np.array([cm.task_s(optimizer_task(_stage_params(job, model, q) / job.tp / shard))
                    for q in range(job.pp)])
    return _ComputeTimes(tf=cm.task_s(f), tb=cm.task_s(bwd), logits_f=cm.task_s(lf),
                         logits_b=cm.task_s(lb), optimizer=opt)


def _iterate(job: JobSpec, comp: _ComputeTimes, comm: _CommTimes) -> tuple[float, PipelineRun]:
    """Run the pipeline, then each stage's gradient reduction and optimizer step."""
    p, v, m = job.pp, job.virtual_stages, job.micro_batches
    lv = job.model_config().layers // (p * v)
    ov = job.overlap
    nq = p * v
    stage = np.arange(nq) % p
    tp_f = 2 * comm.tp[stage]  # two all-reduces per layer each way
    e_f = np.maximum(0.0, tp_f - comp.tf) if ov.tp_comm else tp_f
    e_b = np.maximum(0.0, tp_f - comp.tb) if ov.tp_comm else tp_f
    sc = np.ones(nq) if comp.stage_scale is None else comp.stage_scale[stage]
    fwd = lv * (sc * comp.tf + e_f)
    bwd = lv * (sc * comp.tb + e_b + ((sc * comp.tf + e_f) if job.recompute else 0.0))
    fwd[-1] += sc[-1] * comp.logits_f
    bwd[-1] += sc[-1] * comp.logits_b
    run = simulate_pipeline(fwd, bwd, comm.pp[stage], m, p, v, blocking_send=not ov.pp_send_recv)
    done = np.empty(p)
    for s in range(p):
        if ov.dp_grad_reduce:
            t = _overlapped_reduce(run.chunk_last_bwd_s[s], lv, comm.dp_layer[s])
        else:
            t = run.stage_end_s[s] + comm.dp_all[s]
        if s in (0, p - 1) and p > 1:
            t += comm.embedding
        t = max(t, run.stage_end_s[s]) + comp.optimizer[s] * (
            1.0 if comp.stage_scale is None else comp.stage_scale[s])
        gather = comm.dp_gather[s]
        if ov.dp_param_gather:  # hidden under the next iteration's warm-up forwards
            gather = max(0.0, gather - min(p - s, m) * fwd[s])
        done[s] = t + gather
    return float(done.max()), run


def _overlapped_reduce(chunks: np.ndarray, layers: int, per_layer_s: float) -> float:
    """End of a stream that reduces each layer's gradients as its last backward produces them."""
    ready = []
    for start, end in chunks:
        ready += [start + (i + 1) * (end - start) / layers for i in range(layers)]
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
        bubble_fraction=bubble / iteration_s,
        bubble_s=bubble,
        exposed_comm_s=exposed,
        comm_s={"tp": float(comm.tp.max()), "pp": float(comm.pp.max()),
                "dp": float(comm.dp_all.max() + comm.dp_gather.max()),
                "embedding": comm.embedding},
        compute_s=busy,
        optimizer_s=float(comp.optimizer.max()),
        pipeline_s=run.makespan_s,
        micro_batches=job.micro_batches,
        model_flops=model.model_flops(tokens),
        gpus=job.world,
        critical_path=run.critical_path,
        job=job.to_dict(),
    )
