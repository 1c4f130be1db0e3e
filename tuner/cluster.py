"""Scheduler replay: jobs arrive and leave a shared fabric, each placed by a policy.

Every job is a 3D-parallel GPT job on whole servers. At its start the policy places it on the
servers free at that moment (``tuner.placement``: ``linear`` takes them in the scheduler's
order, ``random`` shuffles them, ``topo`` packs the job's groups in the fullest ToR set or pod
that holds them (best fit, ``tuner.bestfit``), steers clear of the uplinks the running jobs
keep busy, and ranks its candidates by the shared prediction below, never keeping one
predicted slower than the scheduler's order, ties going to the candidate that keeps whole ToR
sets and pods free). Its iteration time is then
predicted with the running jobs as background (``tuner.background.predict_shared``: their
traffic shares every flow-engine run), and its slowdown is that time over the same job alone on an idle fabric in
the scheduler's order (servers 0, 1, ...). A job's work is a number of iterations (its
``duration_s`` alone), so it holds its servers for ``duration_s x slowdown``.

Scheduling is first come, first served with backfill: at every arrival and departure the
queue is scanned in arrival order and every job that fits on the free servers starts.

Limits: a job's slowdown is fixed when it starts, from the jobs running then (a job that
starts later slows it too, and that is not charged to it); background traffic is persistent
(the worst case of overlap, ``tuner.background``).
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from inputspec import rule

POLICIES = ("linear", "random", "topo")

#: Job sizes (GPUs) of the generator and their weights: many small jobs, few large ones, as
#: in published multi-tenant GPU cluster traces (most jobs use few GPUs, most GPU time goes
#: to the large ones). An assumption: the weights are not fitted to a trace.
SIZES_GPUS = (16, 32, 64, 128, 256, 512, 1024)
SIZE_WEIGHTS = (8, 8, 6, 4, 3, 2, 1)
DURATION_MEDIAN_S = 3600.0
DURATION_SIGMA = 1.0
TARGET_LOAD = 0.9  # offered GPU-seconds over capacity


@dataclass(frozen=True)
class ClusterJob:
    """One job of the replay: when it arrives, how long it runs alone, what it is."""

    name: str
    arrival_s: float
    duration_s: float
    job: object  # netsim.workload.JobSpec


def job_for_size(gpus: int):
    """A GPT job of ``gpus`` GPUs: 1.3B (tp 8, dp) up to 64 GPUs, 13B (tp 8, pp 2) up to 512,
    175B (tp 8, pp 8) beyond."""
    from netsim.workload import JobSpec

    if gpus % 8:
        raise ValueError(f"a job of {gpus} GPUs does not fill whole 8-GPU servers")
    if gpus <= 64:
        return JobSpec(model="gpt3-1.3b", tp=8, pp=1, dp=gpus // 8)
    if gpus <= 512:
        return JobSpec(model="gpt3-13b", tp=8, pp=2, dp=gpus // 16)
    return JobSpec(model="gpt3-175b", tp=8, pp=8, dp=gpus // 64)


def generate_jobs(n: int, fabric_gpus: int, seed: int, load: float = TARGET_LOAD) -> list[ClusterJob]:
    """``n`` jobs from a seeded generator: sizes from ``SIZES_GPUS`` (those at most a quarter
    of the fabric), lognormal durations, Poisson arrivals at ``load`` of the fabric."""
    rng = np.random.default_rng(seed)
    sizes = np.array([s for s in SIZES_GPUS if s <= fabric_gpus // 4] or [8])
    w = np.array(SIZE_WEIGHTS[:len(sizes)], dtype=np.float64) if len(sizes) > 1 else np.ones(1)
    gpus = rng.choice(sizes, size=n, p=w / w.sum())
    dur = DURATION_MEDIAN_S * rng.lognormal(0.0, DURATION_SIGMA, size=n)
    gap = float(np.mean(gpus * dur)) / (fabric_gpus * load)
    arrival = np.cumsum(rng.exponential(gap, size=n)) - gap
    return [ClusterJob(f"j{i}", float(max(arrival[i], 0.0)), float(dur[i]), job_for_size(int(g)))
            for i, g in enumerate(gpus)]


#: Job keys the stream sets for each job: a template (``with_template``) cannot give them.
STREAM_KEYS = ("gpus", "dp", "global_batch")


def with_template(jobs: list[ClusterJob], template: dict, source: str) -> list[ClusterJob]:
    """``jobs`` with every job made of ``template`` (the job keys of ``--job`` and the job
    flags, as predict takes them): its size stays, data parallelism fills it."""
    import dataclasses

    from inputspec import InputError
    from netsim.workload import JobSpec

    fixed = [k for k in STREAM_KEYS if template.get(k) is not None]
    if fixed:
        raise InputError(source, problem=f"{fixed[0]} {template[fixed[0]]}: leave it out, the "
                         "job stream sets each job's size (data parallelism fills it) and batch")
    base = JobSpec.from_dict(template, source=source)
    per = base.tp * base.pp * base.cp
    out = []
    for cj in jobs:
        if cj.job.world % per:
            raise InputError(source, problem=f"job {cj.name} of {cj.job.world} GPUs is not a "
                             f"multiple of tp x cp x pp = {per}")
        job = JobSpec.from_dict({**template, "dp": cj.job.world // per}, source=source)
        out.append(dataclasses.replace(cj, job=job))
    return out


@dataclass(frozen=True)
class TraceRow:
    """One row of a job-trace CSV (``inputspec`` schema; columns not named here are ignored)."""

    arrival_s: float = rule(min=0, example=0.0)
    duration_s: float = rule(gt=0, example=3600.0)
    name: str | None = rule(None, example="j0")
    gpus: int | None = rule(None, min=8, max=2**24, example=64)
    model: str | None = rule(None, example="gpt3-1.3b")
    tp: int | None = rule(None, min=1, max=2**24, example=8)
    pp: int | None = rule(None, min=1, max=2**24, example=1)
    dp: int | None = rule(None, min=1, max=2**24, example=8)


_NUMERIC = {"arrival_s": float, "duration_s": float, "gpus": int, "tp": int, "pp": int,
            "dp": int}


def _cell(key: str, text: str | None):
    """A CSV cell as the value its column holds: empty is absent, numbers parsed, anything
    else left as text for the schema to refuse naming the column."""
    text = (text or "").strip()
    if not text:
        return None
    kind = _NUMERIC.get(key)
    for conv in ((int, float) if kind is int else (float,) if kind else ()):
        try:
            return conv(text)
        except ValueError:
            continue
    return text


def _trace_row(row: dict, i: int, source: str) -> ClusterJob:
    from inputspec import InputError, from_dict
    from netsim.workload import JobSpec

    where = f"row {i + 2}"
    known = {f for f in TraceRow.__dataclass_fields__}
    cells = {k: _cell(k, v) for k, v in row.items() if k in known}
    r = from_dict(TraceRow, {k: v for k, v in cells.items() if v is not None}, source,
                  prefix=where)
    if r.model is not None:
        missing = [k for k in ("tp", "pp", "dp") if getattr(r, k) is None]
        if missing:
            raise InputError(source, problem=f"{where}: model {r.model} needs "
                             f"{', '.join(missing)} too (e.g. tp: 8, pp: 1, dp: 8)")
        job = JobSpec.from_dict({"model": r.model, "tp": r.tp, "pp": r.pp, "dp": r.dp},
                                source=f"{source}: {where}")
    elif r.gpus is not None:
        try:
            job = job_for_size(r.gpus)
        except ValueError as exc:
            raise InputError(source, f"{where}.gpus", r.gpus, f"a multiple of 8 ({exc})",
                             64) from None
    else:
        raise InputError(source, problem=f"{where}: give gpus, or model, tp, pp and dp")
    return ClusterJob(r.name or f"j{i}", r.arrival_s, r.duration_s, job)


def _check_columns(header: list[str], rows: list[dict], source: str) -> None:
    """Refuse columns the trace does not have (a typo would be ignored), a column given twice
    and a row with more cells than the header, naming them."""
    from inputspec import InputError

    known = list(TraceRow.__dataclass_fields__)
    unknown = [c for c in header if c not in known]
    if unknown:
        raise InputError(source, problem=f"unknown column{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(map(repr, unknown))}; the columns are {', '.join(known)}")
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise InputError(source, problem=f"column {', '.join(map(repr, twice))} given twice")
    long_row = next((i for i, row in enumerate(rows) if None in row), None)
    if long_row is not None:
        raise InputError(source, problem=f"row {long_row + 2} has more cells than the header "
                         f"has columns ({len(header)})")


def read_trace(path) -> list[ClusterJob]:
    """Jobs from a CSV with columns ``name,arrival_s,duration_s,gpus`` and optionally
    ``model,tp,pp,dp`` (``gpus`` alone picks the job of ``job_for_size``); every refusal
    names the file, the row and the column (``inputspec``)."""
    import io

    from inputspec import InputError, read_text

    source = f"trace file {path}"
    reader = csv.DictReader(io.StringIO(read_text(path, "trace"), newline=""))
    rows = list(reader)
    if not rows or not {"arrival_s", "duration_s"} <= set(rows[0]):
        raise InputError(source, problem="expected a CSV header with at least arrival_s, "
                         "duration_s and gpus (or model, tp, pp, dp), and one row per job")
    _check_columns(list(reader.fieldnames or ()), rows, source)
    out = [_trace_row(row, i, source) for i, row in enumerate(rows)]
    return sorted(out, key=lambda j: (j.arrival_s, j.name))


# ------------------------------------------------------------------------------ the replay

@dataclass
class JobRecord:
    """What happened to one job under one policy."""

    name: str
    gpus: int
    arrival_s: float
    start_s: float
    end_s: float
    iteration_s_alone: float
    iteration_s_shared: float
    cross_tor_bytes: float
    cross_pod_bytes: float

    @property
    def slowdown(self) -> float:
        return self.iteration_s_shared / self.iteration_s_alone


@dataclass
class PolicyResult:
    """Per-policy metrics of a replay (``to_json`` gives the CLI's keys)."""

    policy: str
    jobs: list[JobRecord] = field(default_factory=list)
    fragmentation: list[tuple[float, float]] = field(default_factory=list)

    def to_json(self) -> dict:
        slow = np.array([j.slowdown for j in self.jobs]) if self.jobs else np.ones(1)
        jct = np.array([j.end_s - j.arrival_s for j in self.jobs]) if self.jobs else np.zeros(1)
        frag = np.array([f for _, f in self.fragmentation]) if self.fragmentation else np.zeros(1)
        return {"jobs": len(self.jobs), "mean_slowdown": float(slow.mean()),
                "p95_slowdown": float(np.percentile(slow, 95)),
                "max_slowdown": float(slow.max()),
                "mean_jct_s": float(jct.mean()),
                "makespan_s": float(max((j.end_s for j in self.jobs), default=0.0)),
                "cross_tor_bytes": float(sum(j.cross_tor_bytes for j in self.jobs)),
                "cross_pod_bytes": float(sum(j.cross_pod_bytes for j in self.jobs)),
                "mean_fragmentation": float(frag.mean()),
                "fragmentation": [[t, f] for t, f in self.fragmentation]}


class _Replay:
    """State of one policy's replay: free servers, running jobs, event queue."""

    def __init__(self, fabric, policy: str, seed: int, search_iterations: int) -> None:
        from tuner.placement import GpuLocality

        self.fabric, self.policy, self.seed = fabric, policy, seed
        self.iterations = search_iterations
        self.loc = GpuLocality.from_fabric(fabric)
        self.gps = int(fabric.gpus_per_server)
        self.free = np.ones(len(fabric.servers), bool)
        self.running: dict[str, object] = {}  # name -> BackgroundJob
        self.rng = np.random.default_rng(seed)
        self.result = PolicyResult(policy)
        self.cache: dict = {}  # connection builds shared by every prediction of this replay
        self.scored: dict = {}  # (job, placement) -> shared iteration time, for one start

    def fragmentation(self) -> float:
        """Share of the free servers that sit in ToR sets with some server taken (0: every
        free server is in a wholly free ToR set)."""
        per_set = int(getattr(self.fabric.spec, "servers_per_tor_group", 0) or len(self.free))
        sets = np.arange(len(self.free)) // per_set
        busy_set = np.bincount(sets, weights=~self.free, minlength=sets.max() + 1) > 0
        nfree = int(self.free.sum())
        return float((self.free & busy_set[sets]).sum() / nfree) if nfree else 0.0

    def place(self, cj: ClusterJob):
        """The policy's placement of ``cj`` on the free servers and its traffic measures.
        ``topo`` ranks its candidates by ``shared_s`` (the figure the replay judges them by)
        and keeps none predicted slower than the scheduler's order (``linear``'s choice)."""
        from tuner.placement import background_locality, job_traffic, measure, place

        free = np.flatnonzero(self.free).tolist()
        loc, score = self.loc, None
        if self.policy == "topo":
            loc = background_locality(self.fabric, list(self.running.values()), self.seed,
                                      self.loc, self.cache)
            score = partial(self.shared_s, cj)
        rng = np.random.default_rng([self.seed, len(self.result.jobs)])
        p = place(self.fabric, cj.job, self.policy, free, rng=rng,
                  search_iterations=self.iterations, loc=loc, score=score)
        return p.gpu_of_rank, measure(p.gpu_of_rank, job_traffic(cj.job), self.loc)

    def shared_s(self, cj: ClusterJob, gpus: np.ndarray) -> float:
        """Iteration time of ``cj`` at ``gpus`` with the running jobs as background (kept per
        placement until the job starts: the figure the candidate was ranked by is the one
        recorded)."""
        from netsim.model.hardware import get_hardware
        from tuner.background import predict_shared

        key = (cj.name, np.asarray(gpus, np.int64).tobytes())
        if key not in self.scored:
            self.scored[key] = predict_shared(
                cj.job, self.fabric, get_hardware(cj.job.gpu), list(self.running.values()),
                placement=gpus, seed=self.seed, background_effect=False,
                cache=self.cache).prediction.iteration_s
        return self.scored[key]


def simulate(fabric, jobs: list[ClusterJob], policies=POLICIES, seed: int = 0,
             search_iterations: int = 300,
             progress: Callable[[str, int, int], None] | None = None) -> dict[str, PolicyResult]:
    """Replay ``jobs`` on ``fabric`` under every policy; ``progress(policy, done, total)``."""
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        raise ValueError(f"--policy {','.join(bad)}: choose from {', '.join(POLICIES)}")
    too_big = [j.name for j in jobs if j.job.world > len(fabric.gpus)]
    if too_big:
        raise ValueError(f"job(s) {', '.join(too_big[:3])} need more GPUs than the fabric has")
    alone = _AloneCache(fabric)
    return {p: _replay(fabric, jobs, p, seed, search_iterations, alone, progress)
            for p in policies}


class _AloneCache:
    """Iteration time of a job alone on the idle fabric in the scheduler's order, per spec."""

    def __init__(self, fabric) -> None:
        self.fabric, self.cache = fabric, {}

    def __call__(self, job, seed: int) -> float:
        from netsim.model.hardware import get_hardware
        from netsim.workload import predict
        from netsim.workload.flowcomm import FlowCommModel

        key = (repr(job), seed)
        if key not in self.cache:
            hw = get_hardware(job.gpu)
            self.cache[key] = predict(job, self.fabric, hw,
                                      comm_model=FlowCommModel(self.fabric, hw, seed=seed)
                                      ).iteration_s
        return self.cache[key]


def _replay(fabric, jobs, policy, seed, iterations, alone, progress) -> PolicyResult:
    st = _Replay(fabric, policy, seed, iterations)
    events: list = [(j.arrival_s, 1, i, "arrive") for i, j in enumerate(jobs)]
    heapq.heapify(events)
    queue: list[int] = []
    while events:
        t, _, i, kind = heapq.heappop(events)
        if kind == "arrive":
            queue.append(i)
        else:
            _finish(st, jobs[i])
        queue = _start_fitting(st, jobs, queue, t, events, alone)
        st.result.fragmentation.append((t, st.fragmentation()))
        if progress is not None and kind == "leave":
            progress(policy, len(st.result.jobs) - len(st.running), len(jobs))
    return st.result


def _finish(st: _Replay, cj: ClusterJob) -> None:
    bj = st.running.pop(cj.name)
    st.free[np.unique(bj.gpu_of_rank // st.gps)] = True


def _start_fitting(st: _Replay, jobs, queue: list[int], t: float, events, alone) -> list[int]:
    """Start every queued job that fits (arrival order, backfill); return the rest."""
    left = []
    for i in queue:
        cj = jobs[i]
        if cj.job.world > int(st.free.sum()) * st.gps:
            left.append(i)
            continue
        rec = _start(st, cj, t, alone)
        heapq.heappush(events, (rec.end_s, 0, i, "leave"))
    return left


def _start(st: _Replay, cj: ClusterJob, t: float, alone) -> JobRecord:
    from tuner.background import BackgroundJob

    gpus, traffic = st.place(cj)
    shared = st.shared_s(cj, gpus)
    st.scored.clear()
    t_alone = alone(cj.job, st.seed)
    st.running[cj.name] = BackgroundJob(cj.name, cj.job, gpus)
    st.free[np.unique(gpus // st.gps)] = False
    iters = cj.duration_s / t_alone
    rec = JobRecord(cj.name, cj.job.world, cj.arrival_s, t, t + cj.duration_s * shared / t_alone,
                    t_alone, shared, traffic["cross_tor_bytes"] * iters,
                    traffic["cross_pod_bytes"] * iters)
    st.result.jobs.append(rec)
    return rec


def write_trace(path, jobs: list[ClusterJob]) -> Path:
    """The jobs as a CSV ``--trace`` reads (name, arrival_s, duration_s, gpus, model, tp, pp, dp)."""
    path = Path(path)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "arrival_s", "duration_s", "gpus", "model", "tp", "pp", "dp"])
        for j in jobs:
            w.writerow([j.name, f"{j.arrival_s:.3f}", f"{j.duration_s:.3f}", j.job.world,
                        j.job.model, j.job.tp, j.job.pp, j.job.dp])
    return path
