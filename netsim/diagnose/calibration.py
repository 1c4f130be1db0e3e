"""Fit the workload model to measurements: compute throughput per operation shape and
alpha-beta per collective and scope, from trainer traces and microbenchmarks.

Compute: for each phase (a transformer layer's forward / backward, the logit head's forward /
backward, the optimizer step) ``t = overhead_s + x / rate`` with ``x`` the task's FLOPs from
``netsim.model.models`` (bytes for the optimizer), one point per run and phase (the median over its
records, warm-up step dropped). A layer record's time excludes the TP collectives that ran
inside it, which the comm model prices separately.

Communication: for each (op, scope) ``t = alpha_s + S f(op, n) / busbw`` (nccl-tests bus
bandwidth, ``shared/reference/nccl-roce.md`` 2.1), one point per (op, scope, size, group size).
Scope comes from the hosts of the group's ranks (one host: ``server``).

Residuals: relative RMS and worst relative error of each fit over its own points.

Shared host (``host_cores``, the CPU trainer): when the ranks of a trace time-slice ``C`` cores,
a record's wall time is its work stretched by the sharing. Every duration above is then the
record's *dedicated-core* work ``integral of min(1, C / n(t)) dt`` over it, with ``n(t)`` the
runnable ranks at time ``t`` (a rank in a compute record or between records counts 1, a rank
inside a collective ``comm_weight``; clocks aligned on the world's loss all-reduce, which ends
together on every rank). What each rank-step spends outside the fitted compute records
(collectives, framework overhead) is fitted as ``HostCost`` (``netsim.workload.host``):
``cpu_iter_s + messages x cpu_msg_s + bus bytes / cpu_bytes_per_s`` (messages: ring steps).
The run's ranks keep only part of the cores left to them busy (``host_utilization``: all of
them wait at moments, while a loopback transfer is in flight); that fraction is measured over
the run's steps (their process CPU time over their wall time; the trainer's host records
where the steps carry no CPU time) and divides the cores in the prediction.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from netsim.diagnose.coverage import holdout_error, layout_key, seen_of
from netsim.model.hardware import HardwareProfile
from netsim.model.models import ModelConfig
from netsim.traces.records import RankTrace, TraceRun
from netsim.workload.comm import (
    SCOPES,
    AlphaBeta,
    AnalyticCommModel,
    SendRing,
    bus_factor,
    ring_steps,
)
from netsim.workload.compute import OPTIMIZER_BYTES_PER_PARAM, RooflineCompute, TaskShape
from netsim.workload.host import HostCost
from netsim.workload.job import JobSpec, Overlap

SCHEMA = "netsim-calibration/1"
COMM_KINDS = ("tp", "pp", "dp", "ep", "cp")
"""Kinds a comm fit is keyed by (``op/scope/kind``), as the trainer's records name them."""
PHASES = {("forward", "layer"): "forward", ("backward", "layer"): "backward",
          ("forward", "head"): "logits_forward", ("backward", "head"): "logits_backward"}


@dataclass
class Fit:
    """``t = intercept_s + x / rate`` with its residuals over ``points`` points."""

    intercept_s: float
    rate: float
    """FLOP/s (compute), bytes/s (optimizer), bus bytes/s (comm)."""
    points: int
    rel_rms: float
    max_rel: float

    def time_s(self, x: float) -> float:
        return self.intercept_s + (x / self.rate if x else 0.0)


@dataclass
class Calibration:
    """Fitted parameters (``netsim calibrate`` writes it as JSON)."""

    compute: dict[str, Fit] = field(default_factory=dict)
    comm: dict[str, Fit] = field(default_factory=dict)
    """Keyed ``"op/scope"`` (all calls) and ``"op/scope/kind"`` (tp, pp, dp, ep or cp calls only)."""
    sources: list[str] = field(default_factory=list)
    world_size: int = 1
    """Largest world of the traces (ranks per host when all ran on one host)."""
    host_cores: float = math.inf
    """CPU cores the traced ranks shared (``math.inf``: no host model, e.g. GPU traces)."""
    host: dict[str, Any] = field(default_factory=dict)
    """``HostCost`` fields and the host fit's residuals (empty without a host model);
    ``compute_scale`` and ``iteration_fit`` (runs, residuals) after ``fit_host_on_iterations``."""
    hardware_info: dict[str, Any] = field(default_factory=dict)
    """What the traces ran on (``hardware_of``): ``name``, ``device``, ``hosts``, ``backend``;
    ``netsim predict`` refuses to apply the calibration to other hardware."""
    seen: dict[str, Any] = field(default_factory=dict)
    """The layouts and shapes of the runs (``netsim.diagnose.coverage.seen_of``): a
    prediction outside them warns and widens its interval."""

    def interval(self, job, iteration_s: float) -> dict[str, Any]:
        """The interval of a prediction of ``job`` (``netsim.diagnose.coverage.interval``)."""
        from netsim.diagnose.coverage import interval

        return interval(self, job, iteration_s)

    def host_cost(self) -> HostCost:
        """CPU cost of collectives and per-step overhead (zero without a host model)."""
        keys = ("cpu_msg_s", "cpu_bytes_per_s", "cpu_iter_s", "utilization")
        return HostCost(**{k: self.host[k] for k in keys if k in self.host})

    def comm_model(self, hw: HardwareProfile) -> AnalyticCommModel:
        """Analytic model whose (op, scope) entries are replaced by the fits."""
        return AnalyticCommModel(hw, self.comm_overrides())

    def coverage_gaps(self, used) -> list[dict[str, str]]:
        """The ``(op, scope, kind)`` calls of a prediction (``used``) this calibration has no
        fit of that kind for, each with the fit that priced it instead (``op/scope``, fitted
        on other kinds' calls, or ``all_reduce/scope`` for any op) or ``uncalibrated``. Kinds
        ``calibrate`` never keys (embedding, other) only need an ``op/scope`` fit."""
        over = self.comm_overrides()
        gaps = []
        for op, scope, kind in sorted(used):
            if (op, scope, kind) in over or (kind not in COMM_KINDS and (op, scope) in over):
                continue
            fallback = (f"{op}/{scope}" if (op, scope) in over else
                        f"all_reduce/{scope}" if ("*", scope) in over else "uncalibrated")
            gaps.append({"kind": kind, "op": op, "scope": scope, "fallback": fallback})
        return gaps

    def comm_overrides(self) -> dict:
        """``AnalyticCommModel`` overrides: ``(op, scope[, kind])`` -> the fitted parameters;
        ``("*", scope)``: the all-reduce fit for ops without one; the CP ring from the CP
        sends."""
        over = {}
        for key, f in self.comm.items():
            over[tuple(key.split("/"))] = AlphaBeta(alpha_s=f.intercept_s, busbw_Bps=f.rate)
        for scope in {k.split("/")[1] for k in self.comm}:  # other ops: the all-reduce fit
            if ("all_reduce", scope) in over:
                over[("*", scope)] = over[("all_reduce", scope)]
            send = over.get(("send", scope, "cp"))  # the CP ring: the trainer's sends
            if send is not None and ("all_gather", scope, "cp") not in over:
                over[("all_gather", scope, "cp")] = SendRing(send.alpha_s, send.busbw_Bps)
        return over

    def compute_model(self, hw: HardwareProfile) -> FittedCompute:
        return FittedCompute(self.compute, RooflineCompute(hw))

    def hardware(self, base: HardwareProfile | None = None) -> HardwareProfile:
        """A profile for the calibrated machine: all ranks of a trace in one 'server'.

        ``peak_flops_per_s`` is the fitted layer-forward rate (MFU is then relative to it).
        """
        rate = self.compute["forward"].rate if "forward" in self.compute else 1e12
        name = self.hardware_info.get("name", "calibrated")
        hw = base or HardwareProfile(name=name, peak_flops_per_s=rate, hbm_bytes=1,
                                     hbm_bytes_per_s=1e11, nvlink_bps=1e11)
        n = max(self.world_size, 1)
        return hw.replace(gpus_per_server=n, nics_per_server=n, host_cores=self.host_cores)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "sources": self.sources, "world_size": self.world_size,
                "host_cores": None if math.isinf(self.host_cores) else self.host_cores,
                "host": self.host, "hardware": self.hardware_info, "seen": self.seen,
                "compute": {k: asdict(v) for k, v in self.compute.items()},
                "comm": {k: asdict(v) for k, v in self.comm.items()}}


class FittedCompute:
    """Compute model from fits; phases without a fit use the forward rate, then the roofline."""

    def __init__(self, fits: dict[str, Fit], fallback: RooflineCompute) -> None:
        self.fits, self.fallback = fits, fallback

    def task_s(self, task: TaskShape) -> float:
        fit = self.fits.get(task.phase)
        if task.phase == "optimizer":
            return fit.time_s(task.bytes) if fit else self.fallback.task_s(task)
        if fit is None and task.phase.startswith("logits"):
            fit = self.fits.get(task.phase.removeprefix("logits_"))
            return fit.time_s(task.flops) - fit.intercept_s if fit else self.fallback.task_s(task)
        if fit is None:
            return self.fallback.task_s(task)
        return fit.intercept_s * max(task.layers, 1) + task.flops / fit.rate


# ---------------------------------------------------------------------------------------------
def fit_linear(x: np.ndarray, t: np.ndarray) -> Fit:
    """Least-squares ``t = a + x / rate`` with ``a >= 0``, ``rate > 0``."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    a, slope = 0.0, float(np.sum(t * x) / max(np.sum(x * x), 1e-300))
    if np.unique(x).size > 1:
        slope_ls, a_ls = np.polyfit(x, t, 1)
        if slope_ls > 0 and a_ls >= 0:
            a, slope = float(a_ls), float(slope_ls)
    if not slope > 0:  # x carries no signal: a pure per-task overhead
        a, slope = float(np.median(t)), 0.0
    pred = a + slope * x
    rel = (pred - t) / np.where(t > 0, t, 1.0)
    return Fit(intercept_s=a, rate=1.0 / slope if slope > 0 else math.inf, points=int(x.size),
               rel_rms=float(np.sqrt(np.mean(rel**2))), max_rel=float(np.max(np.abs(rel))))


def model_of(meta: dict) -> ModelConfig:
    """The model a trace ran: GPT-style (biases, learned positions), with the trainer's
    grouped-query attention, gated FFN and MoE keys when the trace has them."""
    m = meta["model"]
    experts = int(m.get("experts") or 0)
    moe = dict(experts=experts, top_k=int(m.get("top_k") or 0),
               moe_ffn_hidden=int(m.get("moe_ffn_hidden") or 0),
               shared_experts=int(m.get("shared_experts") or 0),
               first_dense_layers=int(m.get("first_dense_layers") or 0),
               moe_every=int(m.get("moe_every") or 1)) if experts else {}
    return ModelConfig(name=_trace_model_name(m), layers=m["layers"], hidden=m["hidden"],
                       heads=m["heads"], ffn_hidden=m.get("ffn_hidden") or 0, seq=m["seq"],
                       vocab=m["vocab"], kv_heads=int(m.get("kv_heads") or 0),
                       gated=m.get("ffn") == "gated", tied_embeddings=bool(m.get("tied", True)),
                       **moe)


def _trace_model_name(m: dict) -> str:
    digest = hashlib.sha1(json.dumps(m, sort_keys=True).encode()).hexdigest()[:10]
    return f"trace-{digest}"


def job_from_trace(run: TraceRun) -> JobSpec:
    """The ``JobSpec`` a trainer run executed (for predicting it); context and expert
    parallelism and the model's GQA / gated FFN / MoE shape from the trace's meta (the model is
    registered in ``netsim.model.models.MODELS`` under a name derived from its shape)."""
    from netsim.model.models import MODELS

    meta = run.meta
    model = model_of(meta)
    MODELS.setdefault(model.name, model)
    elem = {"float64": 8, "float32": 4}.get(meta.get("dtype", "float32"), 2)
    overlapped = any(c.get("overlapped") and c["kind"] == "dp"
                     for r in run.ranks for c in r.collectives)
    return JobSpec(model=model.name, tp=meta["tp"], pp=meta["pp"], dp=meta["dp"],
                   cp=meta.get("cp", 1), ep=meta.get("ep", 1),
                   global_batch=meta["global_batch"], micro_batch=meta["micro_batch_size"],
                   act_bytes=elem, grad_bytes=max(4, elem), scatter_gather=False,
                   distributed_optimizer=meta.get("dp_reduce") == "reduce_scatter",
                   overlap=Overlap(dp_grad_reduce=overlapped),
                   sequence_parallel=bool(meta.get("sequence_parallel")),
                   fsdp=bool(meta.get("fsdp")), fsdp_accumulate_unsharded=bool(meta.get("fsdp")),
                   **_end_stage_layers(run))


def _end_stage_layers(run: TraceRun) -> dict[str, int]:
    """``first_stage_layers`` / ``last_stage_layers`` of a run whose pipeline stages hold
    different layer counts (the trainer's ``--stage-layers``), from each rank's
    ``meta.stage_layers``; ``{}`` when even."""
    counts: dict[int, int] = {}
    for r in run.ranks:
        if "stage_layers" in r.meta:
            counts[int(r.meta.get("pp_rank", 0))] = len(r.meta["stage_layers"])
    if len(set(counts.values())) <= 1 or len(counts) != run.meta["pp"]:
        return {}
    return {"first_stage_layers": counts[0], "last_stage_layers": counts[len(counts) - 1]}


class HostTimeline:
    """Dedicated-core work of any interval of a run whose ranks shared ``cores`` CPU cores.

    ``n(t)``: the runnable ranks (inside an iteration: 1, or ``comm_weight`` while in a
    blocking collective); ``work(rank, s, e)`` integrates ``min(1, cores / n(t))`` over
    ``[s, e]`` of that rank's clock. With ``cores = math.inf`` it is the wall time ``e - s``.
    """

    def __init__(self, run: TraceRun, cores: float = math.inf, comm_weight: float = 0.5) -> None:
        self.cores = cores
        self.offset = _clock_offsets(run)
        self.blocking = [_merged([(c["start_s"], c["end_s"]) for c in r.collectives
                                  if not c.get("overlapped")]) for r in run.ranks]
        times, deltas = [], []
        for i, rank in enumerate(run.ranks):
            o = self.offset[i]
            steps = [c for c in rank.compute if c["phase"] == "iteration"]
            for c in steps or rank.compute:  # without step records: the compute records
                times += [c["start_s"] - o, c["end_s"] - o]
                deltas += [1.0, -1.0]
            for cs, ce in self.blocking[i]:
                times += [cs - o, ce - o]
                deltas += [comm_weight - 1.0, 1.0 - comm_weight]
        if not times:
            times, deltas = [0.0], [0.0]
        order = np.argsort(times, kind="stable")
        self.t = np.asarray(times)[order]
        n = np.cumsum(np.asarray(deltas)[order])[:-1]
        share = np.minimum(1.0, cores / np.maximum(n, 1e-12)) if cores < math.inf else 1.0
        self.cum = np.concatenate([[0.0], np.cumsum(share * np.diff(self.t))])

    def _global(self, s, e):
        """Integral of the share over global ``[s, e]`` (1 outside the traced span)."""
        t0, t1 = self.t[0], self.t[-1]
        outside = np.clip(np.minimum(e, t0) - s, 0, None) + np.clip(e - np.maximum(s, t1), 0, None)
        return np.interp(e, self.t, self.cum) - np.interp(s, self.t, self.cum) + outside

    def work(self, rank: int, s: float, e: float) -> float:
        """Dedicated-core seconds of ``[s, e]`` (rank-local times)."""
        if self.cores == math.inf:
            return e - s
        o = self.offset[rank]
        return float(self._global(s - o, e - o))

    def blocked(self, rank: int, s: float, e: float) -> float:
        """Dedicated-core seconds of the rank's blocking collectives inside ``[s, e]``."""
        iv = self.blocking[rank]
        if not iv.size:
            return 0.0
        cs, ce = np.maximum(iv[:, 0], s), np.minimum(iv[:, 1], e)
        keep = ce > cs
        if self.cores == math.inf:
            return float(np.sum(ce[keep] - cs[keep]))
        o = self.offset[rank]
        return float(np.sum(self._global(cs[keep] - o, ce[keep] - o)))


def _merged(intervals: list[tuple[float, float]]) -> np.ndarray:
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.asarray(out, dtype=float).reshape(-1, 2)


def _clock_offsets(run: TraceRun) -> list[float]:
    """Each rank's clock minus rank 0's: the world-wide loss all-reduce ends together."""
    world = len(run.ranks)

    def ends(rank: RankTrace) -> dict[int, float]:
        return {c["step"]: c["end_s"] for c in rank.collectives
                if c["kind"] == "other" and len(c["group"]) == world}

    ref = ends(run.ranks[0])
    out = []
    for rank in run.ranks:
        mine = ends(rank)
        common = [k for k in ref if k in mine]
        out.append(float(np.median([mine[k] - ref[k] for k in common])) if common else 0.0)
    return out


def _compute_points(run: TraceRun, skip: int,
                    tl: HostTimeline) -> dict[str, list[tuple[float, float]]]:
    if not run.meta.get("layout_known", True):
        return {}  # a profiler trace of an unknown job: no FLOPs to fit against (netsim.traces.kineto)
    meta, model = run.meta, model_of(run.meta)
    share = meta["tp"] * meta.get("cp", 1)  # a rank's part of a layer: 1/tp, 1/cp of the tokens
    tokens = meta["micro_batch_size"] * model.seq
    moe_mask = model.moe_layers()

    def x_of(key: tuple[str, bool]) -> float:
        phase, moe = key
        if phase.startswith("logits"):
            f = model.logit_flops_fwd(tokens)
        else:
            f = model.layer_flops_fwd(tokens, moe)
        return (2 if phase.endswith("backward") else 1) * f / share

    samples: dict[tuple[str, bool], list[float]] = defaultdict(list)
    for i, rank in enumerate(run.ranks):
        for c in rank.compute:
            phase = PHASES.get((c["phase"], c.get("name", "layer")))
            if c["phase"] == "optimizer" and c["step"] >= skip:
                phase = f"optimizer@{rank.meta.get('pp_rank', 0)}"
            if phase is None or c["step"] < skip:
                continue
            layer = c.get("layer")
            moe = bool(layer is not None and layer < len(moe_mask) and moe_mask[layer])
            samples[(phase, moe)].append(_record_work(tl, i, c))
    # a shared host's bound sums the work: a phase's mean record; without it, the median
    typical = np.median if tl.cores == math.inf else np.mean
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key, ts in samples.items():
        if key[0].startswith("optimizer@"):
            params = _stage_params(run, model, int(key[0].split("@")[1]))
            out["optimizer"].append((OPTIMIZER_BYTES_PER_PARAM * params, float(typical(ts))))
        else:
            out[key[0]].append((x_of(key), float(typical(ts))))
    return out


def _record_work(tl: HostTimeline, i: int, c: dict) -> float:
    """Dedicated-core seconds of a compute record: its measured thread CPU time when the
    trainer recorded one (``cpu_s``, CPU runs) and a host model is on, else the timeline's."""
    if tl.cores < math.inf and c.get("cpu_s") is not None:
        return float(c["cpu_s"])
    return tl.work(i, c["start_s"], c["end_s"]) - tl.blocked(i, c["start_s"], c["end_s"])


def _host_points(run: TraceRun, skip: int, tl: HostTimeline,
                 comm_weight: float) -> list[tuple[float, float, float]]:
    """(messages, bus bytes, CPU seconds outside the fitted compute records) per rank-step."""
    fitted = {"forward", "backward", "optimizer"}
    out = []
    for i, rank in enumerate(run.ranks):
        for it in _step_spans(rank, skip):
            s, e = it["start_s"], it["end_s"]
            cpu = tl.work(i, s, e) - (1.0 - comm_weight) * tl.blocked(i, s, e)
            if it.get("cpu_s") is not None:  # the process's measured CPU time of the step
                cpu = float(it["cpu_s"])
            for c in rank.compute:
                if c["step"] == it["step"] and c["phase"] in fitted and (
                        c["phase"] == "optimizer" or c.get("name", "layer") in ("layer", "head")):
                    cpu -= _record_work(tl, i, c)
            calls = [c for c in rank.collectives if c["step"] == it["step"]]
            msgs = sum(ring_steps(c["op"], len(c["group"])) for c in calls)
            bus = sum(c["bytes"] * bus_factor(c["op"], len(c["group"])) for c in calls)
            out.append((float(msgs), float(bus), cpu))
    return out


def _step_spans(rank: RankTrace, skip: int) -> list[dict]:
    """The step records (``phase`` iteration), or each step's span of compute records."""
    steps = [c for c in rank.compute if c["phase"] == "iteration" and c["step"] >= skip]
    if steps:
        return steps
    spans: dict[int, dict] = {}
    for c in rank.compute:
        if c["step"] >= skip:
            sp = spans.setdefault(c["step"], {"step": c["step"], "start_s": c["start_s"],
                                              "end_s": c["end_s"]})
            sp["start_s"], sp["end_s"] = min(sp["start_s"], c["start_s"]), max(sp["end_s"],
                                                                               c["end_s"])
    return [spans[k] for k in sorted(spans)]


def fit_host(points: list[tuple[float, float, float]]) -> dict[str, float]:
    """Non-negative least squares ``cpu = iter + messages x msg + bus / bytes_per_s``."""
    from scipy.optimize import nnls

    a = np.array([[1.0, c, b] for c, b, _ in points])
    y = np.array([t for _, _, t in points])
    scale = np.maximum(np.abs(a).max(axis=0), 1e-300)
    coef = nnls(a / scale, y)[0] / scale
    pred = a @ coef
    rel = (pred - y) / np.where(y > 0, y, 1.0)
    out = {"cpu_iter_s": float(coef[0]), "cpu_msg_s": float(coef[1]), "points": len(points),
           "rel_rms": float(np.sqrt(np.mean(rel**2))), "max_rel": float(np.max(np.abs(rel)))}
    if coef[2] > 0:
        out["cpu_bytes_per_s"] = float(1.0 / coef[2])
    return out


def _stage_params(run: TraceRun, model: ModelConfig, stage: int) -> float:
    """Parameters one rank of ``stage`` updates (experts: only its 1/ep of them)."""
    meta = run.meta
    per = model.layers // meta["pp"]
    mask = model.moe_layers()
    ids = range(stage * per, (stage + 1) * per)
    n = sum(model.layer_params(bool(mask[i])) for i in ids)
    ep = meta.get("ep", 1)
    if model.moe and ep > 1:
        n -= sum(model.expert_params() for i in ids if mask[i]) * (1 - 1 / ep)
    if stage in (0, meta["pp"] - 1):
        n += model.vocab * model.hidden
    shard = meta["dp"] if meta.get("dp_reduce") == "reduce_scatter" else 1
    return n / meta["tp"] / shard


def _comm_points(run: TraceRun, skip: int, tl: HostTimeline,
                 comm_weight: float) -> dict[tuple, list[float]]:
    """Per (op, scope, size, n, kind): call durations (dedicated-core CPU with a host model)."""
    # groups list layout ranks (meta "rank"), which differ from torch ranks under a placement
    host = {r.meta["rank"]: r.meta.get("host", "") for r in run.ranks}
    out: dict[tuple, list[float]] = defaultdict(list)
    for i, rank in enumerate(run.ranks):
        for c in rank.collectives:
            if c["step"] < skip or c["op"] == "recv" or len(c["group"]) < 2:
                continue
            scope = "server" if len({host.get(g, "?") for g in c["group"]}) == 1 else "tor"
            t = c["end_s"] - c["start_s"]
            if tl.cores < math.inf:
                t = comm_weight * tl.work(i, c["start_s"], c["end_s"])
            out[(c["op"], scope, int(c["bytes"]), len(c["group"]), c["kind"])].append(t)
    return out


COMM_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def fit_calibration(runs: list[TraceRun], benches: list[list[dict]] = (),
                    host_cores: float | None = None,
                    comm_weight: float | None = None) -> Calibration:
    """Fit every phase and every (op, scope) the measurements cover.

    Parameters
    ----------
    runs, benches
        Trainer traces and ``trainer.bench`` results.
    host_cores : float, optional
        CPU cores the traced ranks shared (the CPU trainer on one host). Given, durations are
        dedicated-core work (module doc) and the host cost is fitted; ``None``: wall times.
        A run whose ``host.json`` says fewer cores were left to it (other load) uses those.
    comm_weight : float, optional
        Runnable weight of a rank inside a blocking collective (gloo's CPU share), in [0, 1];
        ``None``: the one of ``COMM_WEIGHTS`` under which the host fit explains the CPU time
        outside the compute records best (smallest relative RMS residual over rank-steps).
    """
    cores = math.inf if host_cores is None else float(host_cores)
    if comm_weight is None:
        if cores == math.inf or not runs:
            comm_weight = 0.5  # unused without a host model
        else:
            fits = [fit_calibration(runs, benches, cores, w) for w in COMM_WEIGHTS]
            return min(fits, key=lambda c: c.host.get("rel_rms", math.inf))
    cpts: dict[str, list[tuple[float, float]]] = defaultdict(list)
    mpts: dict[tuple, list[float]] = defaultdict(list)
    hpts: list[tuple[float, float, float]] = []
    for run in runs:
        skip = 1 if len(run.ranks[0].iterations) > 1 else 0
        tl = HostTimeline(run, min(cores, float(run.host.get("available_cores", cores))),
                          comm_weight)
        for k, v in _compute_points(run, skip, tl).items():
            cpts[k] += v
        for k, v in _comm_points(run, skip, tl, comm_weight).items():
            mpts[k] += v
        if cores < math.inf:
            hpts += _host_points(run, skip, tl, comm_weight)
    for bench in benches:
        for r in bench:
            n = len(r.get("group") or []) or 2
            key = (r["op"], r.get("scope", "server"), int(r["size_bytes"]), n, "bench")
            mpts[key].append(r["time_s"])
    cal = Calibration(sources=[r.path for r in runs],
                      world_size=max((r.meta["world_size"] for r in runs), default=1),
                      host_cores=cores,
                      host={**fit_host(hpts), "comm_weight": comm_weight,
                            **host_utilization(runs, cores)} if hpts else {})
    cal.hardware_info = hardware_of(runs)
    cal.seen = seen_of(runs)
    for phase, pts in cpts.items():
        x, t = np.array(pts).T
        cal.compute[phase] = fit_linear(x, t)
    grouped: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (op, scope, size, n, kind), ts in mpts.items():
        point = (size * bus_factor(op, n), float(np.median(ts)))
        grouped[f"{op}/{scope}"].append(point)
        if kind in COMM_KINDS:  # the same op behaves differently per kind
            grouped[f"{op}/{scope}/{kind}"].append(point)
    for key, pts in grouped.items():
        x, t = np.array(pts).T
        cal.comm[key] = fit_linear(x, t)
    return cal


def host_utilization(runs: list[TraceRun], cores: float) -> dict[str, float]:
    """``{"utilization": u}``: the median over ``runs`` of the cores their ranks used over the
    cores left to them (``HostCost.utilization``); empty when no run recorded both.

    The cores used are measured over the steps the prediction is compared with
    (``step_cores``: the steps' process CPU time over their wall time) where the step records
    carry CPU time, else over the trainer's host window (its ``host`` records: CPU over wall
    time since the warm-up step). The window also holds what runs once after the last step (a
    profiled run's trace export: seconds of CPU on every rank), and other load on the host
    varies over it; the steps' own figure is free of both."""
    us = []
    for run in runs:
        used = step_cores(run) or run.host.get("trainer_cores")
        avail = run.host.get("available_cores", cores)
        if used and avail and not math.isinf(avail):
            us.append(min(1.0, float(used) / min(float(avail), cores)))
    return {"utilization": float(np.median(us))} if us else {}


def step_cores(run: TraceRun, skip: int = 1) -> float | None:
    """Cores the ranks of ``run`` kept busy during its steps: the step records' process CPU
    time (``cpu_s`` of the ``iteration`` records, all threads), summed over the ranks, over
    rank 0's step times, both over the steps ``TraceRun.iteration_s`` keeps (the warm-up
    dropped) that every rank recorded, stalls (``STALL_FACTOR``) left out. None when the
    records carry no CPU time."""
    ranks = getattr(run, "ranks", None)
    if not ranks:
        return None
    wall = {r["step"]: r["iteration_s"] for r in ranks[0].iterations}
    first = int(run.summary.get("start_step", min(wall, default=0))) + skip
    cpu: dict[int, list[float]] = defaultdict(list)
    for rank in ranks:
        for c in rank.compute:
            if c["phase"] == "iteration" and c.get("cpu_s") is not None and c["step"] in wall:
                cpu[c["step"]].append(float(c["cpu_s"]))
    full = [k for k, v in cpu.items() if len(v) == len(ranks) and wall[k] > 0]
    steps = [k for k in full if k >= first] or full
    if not steps:
        return None
    typical = float(np.median([wall[k] for k in steps]))
    steps = [k for k in steps if wall[k] <= STALL_FACTOR * typical]
    return sum(sum(cpu[k]) for k in steps) / sum(wall[k] for k in steps)


STALL_FACTOR = 2.0
"""A step longer than this many times the median step is a stall (a profiler's start: wall
time with the ranks waiting, not working) that the measured median step leaves out too."""


def hardware_of(runs: list[TraceRun]) -> dict[str, Any]:
    """What the traced ranks ran on: device kind, hosts, backend, the host's cores and the
    fewest any run had left (``available_cores``: less means other load shared the host),
    and a name for reports (``cpu:HOST`` for the CPU trainer, the device string otherwise)."""
    if not runs:
        return {}
    devices = sorted({str(r.meta.get("device", "?")).split(":")[0] for run in runs
                      for r in run.ranks})
    hosts = sorted({str(r.meta.get("host", "?")) for run in runs for r in run.ranks})
    kind = devices[0] if len(devices) == 1 else "+".join(devices)
    return {"name": f"{kind}:{hosts[0]}" + (f"+{len(hosts) - 1}" if len(hosts) > 1 else ""),
            "device": kind, "hosts": hosts,
            "backend": runs[0].meta.get("backend"),
            "host_cores": runs[0].host.get("host_cores"),
            "available_cores": min((r.host["available_cores"] for r in runs
                                    if r.host.get("available_cores") is not None),
                                   default=None)}


def save_calibration(cal: Calibration, path: str | Path) -> None:
    from inputspec import write_text

    write_text(path, json.dumps(cal.to_json(), indent=2))


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration JSON; one ``InputError`` line naming the file and field if bad."""
    from inputspec import InputError, check_value, from_dict, read_data

    source = f"calibration file {path}"
    data = read_data(path, "calibration", default_format="json", nonfinite=True)
    if not isinstance(data, dict):
        raise InputError(source, None, data, "a JSON object from netsim calibrate",
                         {"schema": SCHEMA})
    if data.get("schema") != SCHEMA:
        raise InputError(source, "schema", data.get("schema"), f"{SCHEMA!r}", SCHEMA)
    for key in ("compute", "comm"):
        if not isinstance(data.get(key), dict):
            raise InputError(source, key, data.get(key, None), "a mapping of name to fit",
                             {"forward": {"intercept_s": 0.0, "rate": 1e12, "points": 4,
                                          "rel_rms": 0.01, "max_rel": 0.02}})

    def fits(key: str) -> dict[str, Fit]:
        return {str(k): from_dict(Fit, v, source, prefix=f"{key}.{k}", rules=FIT_RULES)
                for k, v in data[key].items()}

    for k in data["comm"]:
        parts = str(k).split("/")
        if len(parts) not in (2, 3) or parts[1] not in SCOPES or \
                (len(parts) == 3 and parts[2] not in COMM_KINDS):
            raise InputError(source, "comm", k, f"a key op/scope[/kind] with scope one of "
                             f"{', '.join(SCOPES)} and kind one of {', '.join(COMM_KINDS)}",
                             "all_reduce/tor")

    cores = check_value(data.get("host_cores"), float | None, source, "host_cores",
                        _rule(gt=0, max=MAX_CORES, allow_inf=True))
    return Calibration(compute=fits("compute"), comm=fits("comm"),
                       sources=check_value(data.get("sources", []), list[str], source,
                                           "sources"),
                       world_size=check_value(data.get("world_size", 1), int, source,
                                              "world_size", _rule(min=1, max=MAX_WORLD_SIZE)),
                       host_cores=math.inf if cores is None else cores,
                       host=_checked_host(data.get("host") or {}, source),
                       hardware_info=_checked_hardware(data.get("hardware") or {}, source),
                       seen=_checked_seen(data.get("seen") or {}, source))


def _checked_seen(data: Any, source: str) -> dict[str, Any]:
    """The ``seen`` mapping (``seen_of``): each axis a [smallest, largest] pair of counts."""
    from inputspec import InputError, check_value

    seen = check_value(data, dict[str, Any], source, "seen")
    axes = check_value(seen.get("axes", {}), dict[str, list[int]], source, "seen.axes")
    for axis, rng in axes.items():
        if len(rng) != 2 or not 1 <= rng[0] <= rng[1]:
            raise InputError(source, f"seen.axes.{axis}", rng,
                             "[smallest, largest], positive and in order", [1, 8])
    return seen


def _checked_host(data: Any, source: str) -> dict[str, Any]:
    """The ``host`` mapping with each number within its physical bounds (``HOST_RULES``)."""
    from inputspec import check_value

    host = check_value(data, dict[str, Any], source, "host")
    for k, v in host.items():
        if not isinstance(v, dict):
            host[k] = check_value(v, float, source, f"host.{k}",
                                  _rule(**HOST_RULES.get(k, dict(min=0, max=MAX_HOST_NUMBER))))
    return host


def _checked_hardware(data: Any, source: str) -> dict[str, Any]:
    """The ``hardware`` mapping (``hardware_of``) with its known keys type-checked."""
    from inputspec import check_value

    hw = check_value(data, dict[str, Any], source, "hardware")
    for key, (tp, kw) in HARDWARE_KEYS.items():
        if key in hw:
            hw[key] = check_value(hw[key], tp, source, f"hardware.{key}", _rule(**kw))
    return hw


def _rule(**kw: Any):
    from inputspec.core import Rule

    return Rule(**kw)


#: Physical bounds of the numbers of a calibration file: a file whose every number is 1e12
#: (issue #30) predicted a 2.2e13 s iteration. A fitted per-call cost above a minute, a rate
#: below one unit per second or a relative residual above 100x is no measurement of a training
#: step; a world of more than 2^24 ranks or a host of more than 2^20 cores is no machine.
MAX_CALL_S = 60.0
MAX_REL_RESIDUAL = 100.0
MAX_WORLD_SIZE = 2**24
MAX_CORES = 2**20
MAX_POINTS = 10**9
MAX_HOST_NUMBER = 1e6
#: Bounds of a fit in a calibration file (an infinite rate: no per-byte cost).
FIT_RULES = {"intercept_s": dict(min=0, max=MAX_CALL_S, example=1e-5),
             "rate": dict(min=1.0, allow_inf=True, example=1e11),
             "points": dict(min=0, max=MAX_POINTS, example=8),
             "rel_rms": dict(min=0, max=MAX_REL_RESIDUAL, example=0.02),
             "max_rel": dict(min=0, max=MAX_REL_RESIDUAL, example=0.05)}
#: Bounds of the ``host`` numbers (``HostCost`` fields and the host fit's residuals).
HOST_RULES = {"cpu_msg_s": dict(min=0, max=MAX_CALL_S), "cpu_iter_s": dict(min=0, max=3600.0),
              "cpu_bytes_per_s": dict(min=1.0, allow_inf=True),
              "utilization": dict(gt=0, max=1.0), "comm_weight": dict(min=0, max=1.0),
              "compute_scale": dict(gt=0, max=MAX_HOST_NUMBER),
              "points": dict(min=0, max=MAX_POINTS),
              "rel_rms": dict(min=0, max=MAX_REL_RESIDUAL),
              "max_rel": dict(min=0, max=MAX_REL_RESIDUAL)}
#: The ``hardware`` keys ``hardware_of`` writes: annotation and bounds.
HARDWARE_KEYS = {"name": (str, {}), "device": (str, {}), "hosts": (list[str], {}),
                 "backend": (str | None, {}),
                 "host_cores": (float | None, dict(gt=0, max=MAX_CORES)),
                 "available_cores": (float | None, dict(gt=0, max=MAX_CORES))}


# ---------------------------------------------------------------------------------------------
# End-to-end step of the shared-host fit

ITERATION_FIT_MIN_RUNS = 4  # three unknowns and one degree of freedom
ITERATION_FIT_TERMS = ("compute_scale", "cpu_msg_s", "cpu_iter_s", "cpu_bytes_per_s")
"""Unknowns of the iteration fit, in the order they are freed; at most ``layouts - 1`` are
(distinct layouts, ``coverage.layout_key``: repeats of one count once): an exactly determined
fit passes through its runs' noise (the four calibration layouts of
``experiments/heldout_accuracy``). A term left out keeps its per-record value."""


def _host_variant(cal: Calibration, compute_scale: float, msg_s: float, iter_s: float,
                  s_per_bus_byte: float) -> Calibration:
    """``cal`` with its compute fits ``compute_scale`` times slower and the given host cost."""
    out = Calibration(sources=cal.sources, world_size=cal.world_size, host_cores=cal.host_cores,
                      comm=cal.comm, host=dict(cal.host), hardware_info=cal.hardware_info,
                      seen=cal.seen)
    for k, f in cal.compute.items():
        out.compute[k] = Fit(f.intercept_s * compute_scale, f.rate / compute_scale, f.points,
                             f.rel_rms, f.max_rel)
    out.host.update(cpu_msg_s=msg_s, cpu_iter_s=iter_s)
    out.host.pop("cpu_bytes_per_s", None)
    if s_per_bus_byte > 0:
        out.host["cpu_bytes_per_s"] = 1.0 / s_per_bus_byte
    return out


def fit_host_on_iterations(cal: Calibration, runs: list[TraceRun],
                           holdout: bool = True) -> Calibration:
    """Refit the shared-host model on the calibration runs' measured iteration times.

    The per-record fits (``fit_calibration``) give the relative cost of the phases; their
    absolute level and the host cost outside the records rest on the deflation of
    time-sliced records, whose runnable weight of a rank inside a collective is only chosen
    from a grid (``COMM_WEIGHTS``). Here the quantity the model predicts is fitted directly: on
    a host-bound run (``T_host >= T_crit``) the model says
    ``T x C = a x compute + msgs x cpu_msg_s + ranks x cpu_iter_s + bus bytes / cpu_bytes_per_s``
    summed over the ranks (``netsim.workload.host``), linear in its unknowns, solved by
    non-negative least squares on relative errors, one row per run (``C``: the cores left to
    the run). ``a`` scales every compute fit. Needs at least ``ITERATION_FIT_MIN_RUNS``
    host-bound runs; otherwise ``cal`` comes back unchanged, with the reason in
    ``host["iteration_fit"]``. Of the unknowns (``ITERATION_FIT_TERMS``) at most ``layouts -
    1`` are fitted (repeats of a layout count once), so that the fit averages over its runs
    instead of passing through them; the others keep their per-record values (``host["iteration_fit"]["terms"]``: the fitted ones).
    ``holdout``: also the fit's out-of-sample error (``netsim.diagnose.coverage.holdout_error``:
    each layout left out in turn), the basis of every prediction's interval.
    """
    from netsim.workload.predict import predict  # predict takes a Calibration: import late

    if math.isinf(cal.host_cores):
        return cal
    cases, y, seen = [], [], set()
    for run in runs:
        job = job_from_trace(run)
        cores = min(cal.host_cores, float(run.host.get("available_cores", cal.host_cores)))
        first = predict(job, hardware=cal.hardware().replace(host_cores=cores), calibration=cal)
        if first.host_s < first.pipeline_s:
            continue  # not host-bound: the host equation does not hold for this run
        cases.append((job, cores))
        seen.add(layout_key(run.meta))
        y.append(float(np.median(run.iteration_s(skip=1))) * cores)
    if len(cases) < ITERATION_FIT_MIN_RUNS:
        return replace(cal, host={**cal.host, "iteration_fit": {
            "runs": len(cases), "skipped": f"needs {ITERATION_FIT_MIN_RUNS} host-bound runs"}})

    def work(job, cores, a, m, i, b):
        var = _host_variant(cal, a, m, i, b)  # its hardware() follows the scaled rates
        return predict(job, hardware=var.hardware().replace(host_cores=cores),
                       calibration=var).host_s * cores

    t = np.array(y)
    layouts = len(seen)  # a repeat's row holds the unknowns as its layout's does
    free = min(len(ITERATION_FIT_TERMS), layouts - 1)
    fixed = np.array([1.0, cal.host.get("cpu_msg_s", 0.0), cal.host.get("cpu_iter_s", 0.0),
                      1.0 / cal.host.get("cpu_bytes_per_s", math.inf)])
    scale_a = 1.0
    for _ in range(3):  # compute time is linear in the scale except roofline-bound fallbacks:
        a = _iteration_columns(cases, scale_a, work)  # re-linearize around the current scale
        coef = _nnls_relative(a[:, :free], t - a[:, free:] @ fixed[free:], t)
        if coef[0] <= 0:
            return cal  # no compute term left: the runs say nothing about compute
        converged = abs(coef[0] / scale_a - 1.0) < 1e-9
        scale_a = float(coef[0])
        if converged:
            break
    coef = np.concatenate([coef, fixed[free:]])
    out = _host_variant(cal, *map(float, coef))
    pred = np.array([work(job, cores, *map(float, coef)) for job, cores in cases])
    rel = (pred - t) / t
    out.host["compute_scale"] = float(coef[0])
    out.host["iteration_fit"] = {"runs": len(cases), "layouts": layouts,
                                 "terms": list(ITERATION_FIT_TERMS[:free]),
                                 "rel_rms": float(np.sqrt(np.mean(rel**2))),
                                 "max_rel": float(np.max(np.abs(rel)))}
    if holdout:
        out.host["iteration_fit"].update(holdout_error(
            cal, runs, lambda base, rs: fit_host_on_iterations(base, rs, holdout=False),
            job_from_trace))
    return out


def _iteration_columns(cases, scale_a: float, work) -> np.ndarray:
    """One row per (job, cores): the host work per unit of each ``ITERATION_FIT_TERMS``
    unknown (compute: per unit scale, at ``scale_a``)."""
    rows = []
    for job, cores in cases:
        comp = work(job, cores, scale_a, 0.0, 0.0, 0.0)
        rows.append([comp / scale_a, work(job, cores, scale_a, 1.0, 0.0, 0.0) - comp,
                     work(job, cores, scale_a, 0.0, 1.0, 0.0) - comp,
                     work(job, cores, scale_a, 0.0, 0.0, 1.0) - comp])
    return np.array(rows)


def _nnls_relative(a: np.ndarray, y: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Non-negative ``x`` minimising the relative (to ``t``) residuals of ``a x = y``."""
    from scipy.optimize import nnls

    w = 1.0 / t
    col = np.maximum(np.abs(a * w[:, None]).max(axis=0), 1e-300)
    return nnls(a * w[:, None] / col, y * w)[0] / col
