"""Fit the workload model to measurements: compute throughput per operation shape and
alpha-beta per collective and scope, from trainer traces and microbenchmarks.

Compute: for each phase (a transformer layer's forward / backward, the logit head's forward /
backward, the optimizer step) ``t = overhead_s + x / rate`` with ``x`` the task's FLOPs from
``netsim.models`` (bytes for the optimizer), one point per run and phase (the median over its
records, warm-up step dropped). A layer record's time excludes the TP collectives that ran
inside it, which the comm model prices separately.

Communication: for each (op, scope) ``t = alpha_s + S f(op, n) / busbw`` (nccl-tests bus
bandwidth, ``shared/reference/nccl-roce.md`` 2.1), one point per (op, scope, size, group size).
Scope comes from the hosts of the group's ranks (one host: ``server``).

Residuals: relative RMS and worst relative error of each fit over its own points.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from netsim.hardware import HardwareProfile
from netsim.models import ModelConfig
from netsim.traces import TraceRun
from netsim.workload.comm import AlphaBeta, AnalyticCommModel, bus_factor
from netsim.workload.compute import OPTIMIZER_BYTES_PER_PARAM, RooflineCompute, TaskShape
from netsim.workload.job import JobSpec, Overlap

SCHEMA = "netsim-calibration/1"
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
    """Keyed ``"op/scope"`` (all calls) and ``"op/scope/kind"`` (tp, pp or dp calls only)."""
    sources: list[str] = field(default_factory=list)
    world_size: int = 1
    """Largest world of the traces (ranks per host when all ran on one host)."""

    def comm_model(self, hw: HardwareProfile) -> AnalyticCommModel:
        """Analytic model whose (op, scope) entries are replaced by the fits."""
        over = {}
        for key, f in self.comm.items():
            over[tuple(key.split("/"))] = AlphaBeta(alpha_s=f.intercept_s, busbw_Bps=f.rate)
        for scope in {k.split("/")[1] for k in self.comm}:  # other ops: the all-reduce fit
            if ("all_reduce", scope) in over:
                over[("*", scope)] = over[("all_reduce", scope)]
        return AnalyticCommModel(hw, over)

    def compute_model(self, hw: HardwareProfile) -> FittedCompute:
        return FittedCompute(self.compute, RooflineCompute(hw))

    def hardware(self, base: HardwareProfile | None = None) -> HardwareProfile:
        """A profile for the calibrated machine: all ranks of a trace in one 'server'.

        ``peak_flops_per_s`` is the fitted layer-forward rate (MFU is then relative to it).
        """
        rate = self.compute["forward"].rate if "forward" in self.compute else 1e12
        hw = base or HardwareProfile(name="calibrated", peak_flops_per_s=rate, hbm_bytes=1,
                                     hbm_bytes_per_s=1e11, nvlink_bps=1e11)
        n = max(self.world_size, 1)
        return hw.replace(gpus_per_server=n, nics_per_server=n)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "sources": self.sources, "world_size": self.world_size,
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
    m = meta["model"]
    return ModelConfig(name="trace", layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                       ffn_hidden=m.get("ffn_hidden") or 0, seq=m["seq"], vocab=m["vocab"])


def job_from_trace(run: TraceRun) -> JobSpec:
    """The ``JobSpec`` a trainer run executed (for predicting it)."""
    meta = run.meta
    m = meta["model"]
    fp32 = meta.get("dtype", "float32") == "float32"
    overlapped = any(c.get("overlapped") and c["kind"] == "dp"
                     for r in run.ranks for c in r.collectives)
    return JobSpec(model="tiny", layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                   ffn_hidden=m.get("ffn_hidden"), seq=m["seq"], vocab=m["vocab"],
                   tp=meta["tp"], pp=meta["pp"], dp=meta["dp"],
                   global_batch=meta["global_batch"], micro_batch=meta["micro_batch_size"],
                   act_bytes=4 if fp32 else 2, grad_bytes=4, scatter_gather=False,
                   distributed_optimizer=meta.get("dp_reduce") == "reduce_scatter",
                   overlap=Overlap(dp_grad_reduce=overlapped))


def _compute_points(run: TraceRun, skip: int) -> dict[str, list[tuple[float, float]]]:
    meta, model = run.meta, model_of(run.meta)
    tp, b = meta["tp"], meta["micro_batch_size"]
    tokens = b * model.seq
    x_of = {"forward": model.layer_flops_fwd(tokens) / tp,
            "backward": 2 * model.layer_flops_fwd(tokens) / tp,
            "logits_forward": model.logit_flops_fwd(tokens) / tp,
            "logits_backward": 2 * model.logit_flops_fwd(tokens) / tp}
    samples: dict[str, list[float]] = defaultdict(list)
    for rank in run.ranks:
        tps = sorted((c["start_s"], c["end_s"]) for c in rank.collectives if c["kind"] == "tp")
        starts = np.array([s for s, _ in tps]) if tps else np.zeros(0)
        ends = np.array([e for _, e in tps]) if tps else np.zeros(0)
        for c in rank.compute:
            phase = PHASES.get((c["phase"], c.get("name", "layer")))
            if phase is None or c["step"] < skip:
                continue
            inside = (starts >= c["start_s"]) & (ends <= c["end_s"])
            samples[phase].append(c["end_s"] - c["start_s"] - float(np.sum(ends[inside]
                                                                          - starts[inside])))
        opt = [c["end_s"] - c["start_s"] for c in rank.compute
               if c["phase"] == "optimizer" and c["step"] >= skip]
        if opt:
            stage = rank.meta.get("pp_rank", 0)
            samples[f"optimizer@{stage}"] += opt
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key, ts in samples.items():
        if key.startswith("optimizer@"):
            params = _stage_params(run, model, int(key.split("@")[1]))
            out["optimizer"].append((OPTIMIZER_BYTES_PER_PARAM * params, float(np.median(ts))))
        else:
            out[key].append((x_of[key], float(np.median(ts))))
    return out


def _stage_params(run: TraceRun, model: ModelConfig, stage: int) -> float:
    meta = run.meta
    n = model.layers // meta["pp"] * model.layer_params()
    if stage in (0, meta["pp"] - 1):
        n += model.vocab * model.hidden
    shard = meta["dp"] if meta.get("dp_reduce") == "reduce_scatter" else 1
    return n / meta["tp"] / shard


def _comm_points(run: TraceRun, skip: int) -> dict[tuple, list[float]]:
    host = {r.meta.get("world_rank", r.meta["rank"]): r.meta.get("host", "") for r in run.ranks}
    out: dict[tuple, list[float]] = defaultdict(list)
    for rank in run.ranks:
        for c in rank.collectives:
            if c["step"] < skip or c["op"] == "recv" or len(c["group"]) < 2:
                continue
            scope = "server" if len({host.get(g, "?") for g in c["group"]}) == 1 else "tor"
            out[(c["op"], scope, int(c["bytes"]), len(c["group"]), c["kind"])].append(
                c["end_s"] - c["start_s"])
    return out


def fit_calibration(runs: list[TraceRun], benches: list[list[dict]] = ()) -> Calibration:
    """Fit every phase and every (op, scope) the measurements cover."""
    cpts: dict[str, list[tuple[float, float]]] = defaultdict(list)
    mpts: dict[tuple, list[float]] = defaultdict(list)
    for run in runs:
        skip = 1 if len(run.ranks[0].iterations) > 1 else 0
        for k, v in _compute_points(run, skip).items():
            cpts[k] += v
        for k, v in _comm_points(run, skip).items():
            mpts[k] += v
    for bench in benches:
        for r in bench:
            n = len(r.get("group") or []) or 2
            key = (r["op"], r.get("scope", "server"), int(r["size_bytes"]), n, "bench")
            mpts[key].append(r["time_s"])
    cal = Calibration(sources=[r.path for r in runs],
                      world_size=max((r.meta["world_size"] for r in runs), default=1))
    for phase, pts in cpts.items():
        x, t = np.array(pts).T
        cal.compute[phase] = fit_linear(x, t)
    grouped: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (op, scope, size, n, kind), ts in mpts.items():
        point = (size * bus_factor(op, n), float(np.median(ts)))
        grouped[f"{op}/{scope}"].append(point)
        if kind in ("tp", "pp", "dp"):  # the same op behaves differently per kind (waits)
            grouped[f"{op}/{scope}/{kind}"].append(point)
    for key, pts in grouped.items():
        x, t = np.array(pts).T
        cal.comm[key] = fit_linear(x, t)
    return cal


def save_calibration(cal: Calibration, path: str | Path) -> None:
    Path(path).write_text(json.dumps(cal.to_json(), indent=2))


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration JSON; ``ValueError`` on a wrong schema or field."""
    data = json.loads(Path(path).read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"calibration {path}: schema {data.get('schema')!r}, expected {SCHEMA!r}")
    try:
        return Calibration(compute={k: Fit(**v) for k, v in data["compute"].items()},
                           comm={k: Fit(**v) for k, v in data["comm"].items()},
                           sources=list(data.get("sources", [])),
                           world_size=int(data.get("world_size", 1)))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"calibration {path}: bad field ({exc})") from None
