"""Jobs already running on the fabric: their traffic shares it with the job being predicted.

``RUNNING.yaml`` lists the jobs on the fabric, each a job spec and its GPUs::

    jobs:
      - {name: a, job: tiny, gpus: "0-63"}     # positions; ranges allowed
      - {name: b, job: {model: gpt3-1.3b, tp: 8, pp: 2, dp: 4, global_batch: 64},
         placement: b.txt}

``job`` is an inline mapping of ``JobSpec`` keys, a job file (relative to the YAML file) or a
packaged name (``tuner.jobs``). ``gpus`` are GPU positions or names (a list, or a string of
comma-separated positions and ``a-b`` ranges), rank r on the r-th; ``placement`` is a file:
``placement.json`` as ``netsim recommend``/``place`` write it, or GPU positions separated by
whitespace. No GPU may belong to two jobs.

The model (``SharedFabricCommModel``): every network collective a background job runs (its DP
rings of all stages, one round of its pipeline sends, TP groups that span servers) is a
*persistent* commodity of the flow engine, sending for as long as the new job's collective
lasts. Each batch the new job's prediction prices runs in one flow-engine run together with
these commodities, under the same max-min sharing. That is the worst case of overlap: a
background job's collectives are in flight whenever the new job's are (a job that spends most
of its iteration computing interferes less). With no background job the prediction is the
plain one, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inputspec import is_decimal, rule
from netsim.workload.flowcomm import OPS, FlowCommModel, _call_times, _rounds


@dataclass(frozen=True)
class BackgroundJob:
    """A job already on the fabric: its spec and the GPU position of every rank."""

    name: str
    job: object
    gpu_of_rank: np.ndarray


# ------------------------------------------------------------------------------ file input

def parse_gpus(spec, fabric, where: str) -> np.ndarray:
    """GPU positions from a list of positions/names or a string ``"0-63,128-191"``."""
    names = {g: i for i, g in enumerate(fabric.gpus)}
    items = spec.replace(",", " ").split() if isinstance(spec, str) else spec
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}.gpus: expected positions, names or ranges such as \"0-63\"")
    out: list[int] = []
    for item in items:
        text = str(item).strip()
        if text in names:
            out.append(names[text])
        elif "-" in text and all(is_decimal(p) for p in text.split("-", 1)):
            a, b = (int(p) for p in text.split("-", 1))
            if b < a:
                raise ValueError(f"{where}.gpus: range {text!r} runs backwards")
            if b >= len(fabric.gpus):
                raise ValueError(f"{where}.gpus: range {text!r} ends outside "
                                 f"0..{len(fabric.gpus) - 1}")
            out += range(a, b + 1)
        elif is_decimal(text):
            out.append(int(text))
        else:
            raise ValueError(f"{where}.gpus: {text!r} is neither a GPU position nor a GPU name "
                             f"of fabric {fabric.name!r}")
    arr = np.asarray(out, dtype=np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= len(fabric.gpus)):
        raise ValueError(f"{where}.gpus: position outside 0..{len(fabric.gpus) - 1}")
    return arr


def read_placement_file(path, fabric) -> np.ndarray:
    """Rank -> GPU position from ``placement.json`` (``ranks[].gpu`` names) or integers
    (``tuner.inputs.placement_positions``: every refusal names the file and the rank)."""
    from tuner.inputs import placement_positions

    return np.asarray(placement_positions(path, fabric), dtype=np.int64)


@dataclass(frozen=True)
class RunningEntry:
    """One job of ``RUNNING.yaml`` (``inputspec`` schema; ``job`` is checked as a job file)."""

    job: str | dict[str, Any] = rule(example="tiny")
    name: str | None = rule(None, example="a")
    gpus: str | list[int | str] | None = rule(
        None, example="0-63")
    placement: str | None = rule(None, example="b.txt")


@dataclass(frozen=True)
class RunningFile:
    """``RUNNING.yaml``: the jobs already on the fabric (``inputspec`` schema)."""

    jobs: list[RunningEntry] = rule(
        default_factory=list, example=[{"name": "a", "job": "tiny", "gpus": "0-63"}])


def _job_spec(entry: RunningEntry, base: Path, where: str):
    from netsim.workload import JobSpec
    from tuner.jobs import job_source, read_job_dict

    spec = entry.job
    if isinstance(spec, dict):
        return JobSpec.from_dict(spec, source=f"{where}.job")
    from inputspec import InputError

    rel = base / spec
    name = str(rel) if rel.is_file() else spec
    try:
        data = read_job_dict(name)
    except InputError as exc:
        if exc.source.startswith("--job"):  # neither a file nor a packaged name
            raise InputError(f"{where}.job", problem=f"{spec!r}: no such file (relative to "
                             "the background file) and no packaged job of that name") from None
        raise
    return JobSpec.from_dict(data, source=job_source(name))


def load_background(path, fabric) -> list[BackgroundJob]:
    """Read ``RUNNING.yaml`` (see the module docstring); refuse overlapping GPUs. Every
    refusal names the file and the entry (``inputspec``)."""
    from inputspec import InputError, from_dict, read_data

    path = Path(path)
    source = f"background file {path}"
    doc = read_data(path, "background")
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise InputError(source, None, doc, "a mapping with a 'jobs' list",
                         {"jobs": [{"name": "a", "job": "tiny", "gpus": "0-63"}]})
    running = from_dict(RunningFile, doc, source)
    out = []
    for i, entry in enumerate(running.jobs):
        where = f"{source}: jobs[{i}]"
        name = str(entry.name) if entry.name is not None else f"job{i}"
        job = _job_spec(entry, path.parent, where)
        if (entry.gpus is None) == (entry.placement is None):
            raise ValueError(f"{where} ({name}): give exactly one of gpus or placement")
        if entry.gpus is not None:
            gpus = parse_gpus(entry.gpus, fabric, where)
        else:
            gpus = read_placement_file(path.parent / entry.placement, fabric)
        if gpus.size != job.world:
            raise ValueError(f"{where} ({name}): gpus/placement: {gpus.size} GPUs for a job "
                             f"of {job.world} ranks (tp x pp x dp)")
        out.append(BackgroundJob(name, job, gpus))
    check_disjoint(out)
    return out


def check_disjoint(jobs: list[BackgroundJob], new_gpus=None, new_name: str = "the new job"):
    """Refuse two jobs on one GPU (naming both jobs and the GPU)."""
    owner: dict[int, str] = {}
    listed = [(b.name, b.gpu_of_rank) for b in jobs]
    if new_gpus is not None:
        listed.append((new_name, np.asarray(new_gpus, dtype=np.int64)))
    for name, gpus in listed:
        if np.unique(gpus).size != gpus.size:
            raise ValueError(f"background job {name!r} lists a GPU twice")
        for g in gpus.tolist():
            if g in owner:
                raise ValueError(f"GPU {g} is used by both {owner[g]!r} and {name!r}: jobs "
                                 "on one fabric must not share GPUs")
            owner[g] = name


# ------------------------------------------------------------------------------ traffic

def network_batches(job, gpu_of_rank) -> list:
    """The collectives of ``job`` that keep its network busy, as ``CommBatch`` es: the DP
    rings of every stage, one round of pipeline sends (a rank runs one exchange at a time),
    and TP groups (those that span servers carry network traffic)."""
    from netsim.workload.comm import CommBatch
    from netsim.workload.job import rank_grid

    grid = rank_grid(job, gpu_of_rank)
    p = job.pp
    out = []
    if job.dp > 1:
        op = "reduce_scatter" if job.distributed_optimizer else "all_reduce"
        out.append(CommBatch(op, "dp", np.concatenate([grid[q].T for q in range(p)]), 1 << 30))
    if p > 1:
        pairs = np.concatenate([np.stack([grid[q].ravel(), grid[q + 1].ravel()], axis=1)
                                for q in range(p - 1)])
        out.append(CommBatch("send", "pp", pairs[_rounds(pairs)[0]], 1 << 30))
    if job.tp > 1:
        out.append(CommBatch("all_reduce", "tp",
                             np.concatenate([grid[q].reshape(job.dp, job.tp) for q in range(p)]),
                             1 << 30))
    return out


@dataclass
class _Merged:
    inc: object
    own: int          # the batch's commodities come first
    persistent: np.ndarray


@dataclass
class _Background:
    """Every background commodity in one incidence; ``member[i]``'s constraint is implied by
    ``rep[i]``'s for the background alone (``flowcomm.dominated_links``)."""

    inc: object
    member: np.ndarray
    rep: np.ndarray


class SharedFabricCommModel(FlowCommModel):
    """``FlowCommModel`` whose every flow-engine run also carries background traffic.

    ``background`` is a list of ``CommBatch`` (``network_batches`` of the jobs already on the
    fabric); their connections are built exactly as the new job's are (same plans, QP numbers
    and ECMP paths) and join each run as persistent commodities (module docstring).
    """

    drop_dominated = False  # a link another implies for the batch alone may carry background
    exact_drop = True
    """Drop the links ``_exact_drop`` names after merging (bit-identical rates, fewer entries;
    False gives the plain merged incidence, which the tests compare against)."""

    def __init__(self, fabric, hw, background: list, cache: dict | None = None,
                 **kwargs) -> None:
        super().__init__(fabric, hw, **kwargs)
        self.background = list(background)
        if cache is not None:  # plans and builds shared by models of one fabric, hw and seed
            self._plans = cache.setdefault("plans", {})
            self._built = cache.setdefault("built", {})
            self._paths = cache.get("paths")
            self._cache = cache
            self._own_dominated = cache.setdefault("own_dominated", {})
        self._bg = None
        self._bg_all: _Background | None = None
        if cache is None:
            self._own_dominated: dict[int, tuple] = {}
        self._merged: dict[int, _Merged] = {}
        self._shared_rate: dict[int, np.ndarray] = {}

    def _fabric_paths(self):
        paths = super()._fabric_paths()
        if getattr(self, "_cache", None) is not None:
            self._cache["paths"] = paths
        return paths

    def _background_inc(self):
        """One incidence of every background commodity (built once)."""
        from netsim.workload.comm import fabric_locality, group_scopes

        if self._bg is None:
            loc = fabric_locality(self.fabric)
            parts = []
            for b in self.background:
                groups = np.atleast_2d(np.asarray(b.groups, dtype=np.int64))
                groups = groups[group_scopes(groups, loc) > 0]
                if len(groups):
                    parts.append(self._build(OPS[b.op], groups,
                                             np.full(len(groups), float(b.size_bytes))).inc)
            self._bg = parts
        return self._bg

    def _background_all(self) -> _Background:
        """Every background commodity in one incidence, and its dominated links (built
        once)."""
        from netsim.flow.maxmin import Incidence
        from netsim.workload.flowcomm import dominated_links

        cache = getattr(self, "_cache", None)
        key = tuple((b.op, np.asarray(b.groups).tobytes(), np.shape(b.groups),
                     float(b.size_bytes)) for b in self.background)
        if self._bg_all is None and cache is not None and cache.get("bg_all", (None,))[0] == key:
            self._bg_all = cache["bg_all"][1]  # the same background as the last model's
        if self._bg_all is None:
            parts = self._background_inc()
            off = np.cumsum([0] + [p.num_flows for p in parts])
            cat = [np.concatenate(x) if parts else np.empty(0, t) for x, t in (
                ([p.e_flow + o for p, o in zip(parts, off, strict=False)], np.int64),
                ([p.e_link for p in parts], np.int64), ([p.e_weight for p in parts], float),
                ([p.e_count for p in parts], float))]
            inc = Incidence._build(self.fabric.num_links, int(off[-1]), *cat)
            cap = np.asarray(self.fabric.link_capacity_bps, np.float64)
            self._bg_all = _Background(inc, *dominated_links(inc, cap))
            if cache is not None:
                cache["bg_all"] = (key, self._bg_all)
        return self._bg_all

    def _merge(self, built) -> _Merged:
        """The batch's commodities first, then the background commodities connected to them
        through shared links (max-min splits over connected components, so the others cannot
        change the batch's rates: leaving them out is exact and saves time), without the
        links whose constraint another link implies (``_exact_drop``)."""
        from netsim.flow.maxmin import Incidence

        key = id(built)
        if key not in self._merged:
            own, bg = built.inc, self._background_all()
            flow, link, weight, count = _connected(own, bg.inc)
            n = own.num_flows + (int(flow.max()) + 1 if flow.size else 0)
            e_flow = np.r_[own.e_flow, flow + own.num_flows]
            e_link = np.r_[own.e_link, link]
            keep = np.ones(e_link.size, bool)
            if self.exact_drop:
                keep = ~_exact_drop(own, built, bg, link, self._own_dominated)[e_link]
            merged = Incidence._build(own.num_links, n, e_flow[keep], e_link[keep],
                                      np.r_[own.e_weight, weight][keep],
                                      np.r_[own.e_count, count][keep])
            persistent = np.arange(n) >= own.num_flows
            self._merged[key] = _Merged(merged, own.num_flows, persistent)
        return self._merged[key]

    def _steady(self, built, sizes: np.ndarray, want=None) -> np.ndarray:
        """Latency + bytes at the max-min rate of the call's slowest commodity, with the
        background's commodities in the same allocation (none of them read by a stop rule)."""
        key = id(built)
        rate = self._shared_rate.get(key)
        if rate is None:
            m = self._merge(built)
            self.runs += 1
            rule = self._rule(built, sizes, want)
            full = None if rule is None else _unread(rule, m.inc.num_flows - m.own)
            rate = self.sharing.rates(m.inc, built.capacity_bps, slowest=full)[:m.own]
            if rule is None:
                self._shared_rate[key] = rate
        return _call_times(built, sizes, rate)

    def _run_fluid(self, built, sizes: np.ndarray) -> np.ndarray:
        from netsim.flow.fluid import FluidProblem, run_fluid
        from topologies.units import PS_PER_S

        m = self._merge(built)
        self.runs += 1
        nbg = m.inc.num_flows - m.own
        bg_phase = len(built.phase_chain)  # one phase, one chain for all background traffic
        problem = FluidProblem(
            inc=m.inc, capacity_bps=built.capacity_bps,
            size_bits=np.r_[built.bits_per_byte * sizes[built.com_call], np.zeros(nbg)],
            phase=np.r_[built.phase, np.full(nbg, bg_phase)],
            phase_chain=np.r_[built.phase_chain, built.num_calls].astype(np.int64),
            phase_latency_ps=np.r_[built.phase_latency_ps, 0].astype(np.int64),
            chain_start_ps=np.zeros(built.num_calls + 1, np.int64),
            persistent=m.persistent)
        res = run_fluid(problem, self.sharing)
        return np.asarray(res.chain_end_ps[:built.num_calls], np.float64) / PS_PER_S


def _unread(rule, n: int):
    """The stop rule with ``n`` more flows that no segment reads (the background's)."""
    from netsim.flow.maxmin import Slowest

    return Slowest(segment=np.r_[rule.segment, np.full(n, -1, np.int64)],
                   latency_s=np.r_[rule.latency_s, np.zeros(n)],
                   size_bytes=np.r_[rule.size_bytes, np.ones(n)],
                   bits_per_byte=np.r_[rule.bits_per_byte, np.ones(n)], floor_s=rule.floor_s)


def _connected(own, bg):
    """Entries (flow renumbered from 0, link, weight, count) of the background commodities
    of the incidence ``bg`` that reach ``own``'s links through a chain of shared links."""
    flow, link = bg.e_flow, bg.e_link
    on_link = np.zeros(own.num_links, bool)
    on_link[own.e_link] = True
    reached = np.zeros(bg.num_flows, bool)
    while True:
        hit = np.zeros_like(reached)
        hit[flow[on_link[link]]] = True
        if not (hit & ~reached).any():
            break
        reached |= hit
        on_link[link[reached[flow]]] = True
    keep = reached[flow]
    renumber = np.cumsum(reached) - 1
    return renumber[flow[keep]], link[keep], bg.e_weight[keep], bg.e_count[keep]


def _exact_drop(own, built, bg: _Background, bg_links: np.ndarray, own_cache: dict):
    """Links that can leave the merged incidence without changing its max-min allocation:
    a link dominated for the background alone whose dominating link the batch touches as
    little (neither of them), and a link dominated for the batch alone that no background
    commodity touches, nor its dominating link. Dropping them is exact, bit for bit: such a
    link never holds a share below its dominating link's (the same commodities with the
    same weights, and no more capacity), so it freezes no commodity that link does not."""
    from netsim.workload.flowcomm import dominated_links

    nl = own.num_links
    on_own = np.zeros(nl, bool)
    on_own[own.e_link] = True
    on_bg = np.zeros(nl, bool)
    on_bg[bg_links] = True
    drop = np.zeros(nl, bool)
    drop[bg.member[~on_own[bg.member] & ~on_own[bg.rep]]] = True
    key = id(built)
    if key not in own_cache:
        own_cache[key] = dominated_links(own, built.capacity_bps)
    member, rep = own_cache[key]
    drop[member[~on_bg[member] & ~on_bg[rep]]] = True
    return drop


# ------------------------------------------------------------------------------ prediction

@dataclass
class SharedPrediction:
    """The new job's prediction on a shared fabric and what it does to the background."""

    prediction: object
    background: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        out = self.prediction.to_json()
        out["background"] = self.background
        return out


def comm_model(fabric, hw, background_batches: list, seed: int = 0, overrides=None,
               progress=None, cache: dict | None = None) -> FlowCommModel:
    """The flow comm model of a job sharing the fabric with ``background_batches`` (the
    plain ``FlowCommModel`` when there are none: the prediction is then exactly the plain
    one)."""
    if not background_batches:
        return FlowCommModel(fabric, hw, seed=seed, overrides=overrides, progress=progress)
    return SharedFabricCommModel(fabric, hw, background_batches, cache=cache, seed=seed,
                                 overrides=overrides, progress=progress)


def predict_shared(job, fabric, hw, background: list[BackgroundJob], placement=None,
                   calibration=None, seed: int = 0, progress=None,
                   background_effect: bool = True, cache: dict | None = None,
                   comm_model=None, compute_model=None,
                   stragglers=None) -> SharedPrediction:
    """Predict ``job`` at ``placement`` with ``background`` on the fabric; with
    ``background_effect``, also each background job's iteration alone and shared (with the
    new job and the other background jobs as its background). ``cache``: a dict kept across
    calls on one fabric, hardware and seed (a replay) to reuse the jobs' connection builds.

    ``comm_model``: the new job's comm model when the caller wraps it (MegaScale's PTB:
    ``netsim.workload.megascale_opts.apply`` on ``shared_comm_model``); ``compute_model`` and
    ``stragglers`` go to ``predict`` as in a plain prediction, so that with no background
    job every combination gives the plain prediction exactly. They describe the new job
    only: the background jobs' rows are priced without them."""
    from netsim.workload import predict

    gpus = np.arange(job.world) if placement is None else np.asarray(placement, np.int64)
    check_disjoint(background, gpus)
    if comm_model is None:
        comm_model = shared_comm_model(fabric, hw, background, seed, calibration, progress,
                                       cache)
    pred = predict(job, fabric, hw, calibration=calibration, placement=placement,
                   comm_model=comm_model, compute_model=compute_model,
                   stragglers=stragglers or None)
    out = SharedPrediction(pred)
    if background_effect:
        out.background = background_rows(job, gpus, fabric, background, seed)
    return out


def shared_comm_model(fabric, hw, background: list[BackgroundJob], seed: int = 0,
                      calibration=None, progress=None, cache: dict | None = None):
    """The flow comm model of a job sharing the fabric with the ``background`` jobs."""
    overrides = calibration.comm_model(hw).overrides if calibration else None
    batches = [x for b in background for x in network_batches(b.job, b.gpu_of_rank)]
    return comm_model(fabric, hw, batches, seed, overrides, progress, cache)


def background_rows(job, gpus, fabric, background: list[BackgroundJob], seed: int = 0):
    """Each background job's iteration alone and shared with the new job (``job`` at
    ``gpus``) and the other background jobs: ``[{name, iteration_s_alone,
    iteration_s_shared, slowdown}]``."""
    from netsim.model.hardware import get_hardware
    from netsim.workload import predict

    traffic = {b.name: network_batches(b.job, b.gpu_of_rank) for b in background}
    mine = network_batches(job, gpus)
    rows = []
    for b in background:
        bhw = get_hardware(b.job.gpu)
        alone = predict(b.job, fabric, bhw, placement=b.gpu_of_rank,
                        comm_model=FlowCommModel(fabric, bhw, seed=seed)).iteration_s
        others = mine + [x for k, v in traffic.items() if k != b.name for x in v]
        shared = predict(b.job, fabric, bhw, placement=b.gpu_of_rank,
                         comm_model=comm_model(fabric, bhw, others, seed)).iteration_s
        rows.append({"name": b.name, "iteration_s_alone": alone,
                     "iteration_s_shared": shared, "slowdown": shared / alone})
    return rows


# ------------------------------------------------------------------------------ busy uplinks

def busy_uplinks(fabric, batches: list, hw=None, seed: int = 0,
                 cache: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """How busy the background keeps each ToR's uplinks and each pod's core links.

    All background commodities share the fabric in one max-min allocation (persistent, as in
    ``SharedFabricCommModel``); a link's utilisation is the load on it over its capacity. A
    ToR's figure is the mean utilisation of its up- and downlinks to the aggs (the larger of
    the two directions), a pod's that of its aggs' links to the cores. Returns
    ``(tor_busy, pod_busy)``, indexed by ToR and pod ordinal, in [0, 1].
    """
    from netsim.flow import link_load
    from netsim.model.hardware import get_hardware

    w = fabric.wiring
    tors, pods = len(w.tor_pod), w.pods
    if not batches:
        return np.zeros(tors), np.zeros(pods)
    model = SharedFabricCommModel(fabric, hw or get_hardware("a100"), batches, cache=cache,
                                  seed=seed)
    parts = model._background_inc()
    if not parts:
        return np.zeros(tors), np.zeros(pods)
    from netsim.flow.maxmin import Incidence

    off = np.cumsum([0] + [p.num_flows for p in parts])
    inc = Incidence._build(fabric.num_links, int(off[-1]),
                           *(np.concatenate(x) for x in (
                               [p.e_flow + o for p, o in zip(parts, off, strict=False)],
                               [p.e_link for p in parts], [p.e_weight for p in parts],
                               [p.e_count for p in parts])))
    cap = np.asarray(fabric.link_capacity_bps, np.float64)
    util = link_load(inc, model.sharing.rates(inc, cap)) / cap
    up = util[w.tor_up].mean(axis=1)
    down = np.zeros(tors)
    for t in range(tors):
        links = w.agg_down[:, w.tor_pos[t]]
        links = links[(links >= 0) & (w.agg_pod == w.tor_pod[t])]
        down[t] = util[links].mean() if links.size else 0.0
    tor_busy = np.minimum(np.maximum(up, down), 1.0)
    pod_busy = np.zeros(pods)
    if w.agg_up.size and w.agg_up.shape[1]:
        per_agg = util[w.agg_up].mean(axis=1)
        pod_busy = np.minimum(np.bincount(w.agg_pod, weights=per_agg, minlength=pods)
                              / np.maximum(np.bincount(w.agg_pod, minlength=pods), 1), 1.0)
    return tor_busy, pod_busy
