"""Read torch.profiler (Kineto) traces of any PyTorch job (DDP, FSDP, Megatron-LM, ...): the
documents carry no ``trainer_meta``, so the job's layout and its compute come from the
profiler's own records.

What is read from where (the events themselves as ``netsim.traces.kineto`` reads them: steps
from ``ProfilerStep#N``, collectives from ``c10d::`` operators with their ``gloo:*`` worker
spans, NCCL's ``record_param_comms`` and ``nccl*Kernel*`` kernels, sizes from ``Input Dims``
x ``Input type``):

- rank and world: ``distributedInfo.rank`` / ``world_size``;
- process groups: ``distributedInfo.pg_config`` (each group's ``ranks``); a collective with no
  recorded group (gloo records none) is given the one group of its rank that is not the
  world, or the world when that is the only one; ambiguous calls are counted in the notes;
- layout: the user's degrees (``Layout``: ``--tp --pp --dp --cp --ep``, Megatron-LM's rank
  order tp, cp, dp (ep inside dp), pp, innermost first), else inferred from the groups
  (``infer_layout``): a group of consecutive ranks is tensor-parallel, a group whose stride
  times size is the world is the pipeline, the rest data-parallel; a collective's kind is
  the one axis along which its group's ranks differ (``other`` for none or several);
- compute (when the trace has no ``trainer/...`` ranges): GPU kernels outside NCCL where the
  trace has kernels, else the top-level CPU operators of the thread that stepped the
  profiler, communication operators left out, and an operator that holds one (the call's
  wrapper: ``_AllReduce`` of ``torch.distributed.nn``) replaced by its other children, so
  that the time spent in a collective's call outside its recorded span (its Python, the
  wait, the thread's wake-up) is not counted as compute; phase ``backward`` inside the autograd
  engine (``autograd::engine::evaluate_function``), ``optimizer`` inside ``Optimizer.step#``,
  ``forward`` otherwise; each record named by its operator or kernel.

The model is unknown, so compute is not calibrated (FLOPs unknown); collectives are.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsim.traces import chakra
from netsim.traces.kineto import COMM, STEP, _dedupe, _first_step_ts, _rank_trace
from netsim.traces.records import RankTrace, TraceRun, check_ranks, host_from_records

AXES = ("tp", "cp", "dp", "pp")
"""Megatron-LM's rank order, innermost first (``initialize_model_parallel``: tp-cp-ep-dp-pp,
expert parallelism split off the data-parallel ranks)."""
COMM_PREFIXES = ("c10d::", "record_param_comms", "gloo:", "nccl:", "ProfilerStep#", "trainer/comm/")
BACKWARD = "autograd::engine::evaluate_function"
OPTIMIZER = "Optimizer.step#"


@dataclass(frozen=True)
class Layout:
    """Parallel degrees of a job (``--tp --pp --dp --cp --ep``); ``ep`` divides ``dp``."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for axis in ("tp", "pp", "dp", "cp", "ep"):
            if getattr(self, axis) < 1:
                raise ValueError(f"--{axis} must be a positive degree, got {getattr(self, axis)}")
        if self.dp % self.ep:
            raise ValueError(f"--ep {self.ep} must divide --dp {self.dp}")

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def coords(self, rank: int) -> dict[str, int]:
        """``{tp, cp, dp, pp, ep}`` of ``rank`` (ep: the dp index modulo ep)."""
        out, rest = {}, rank
        for axis in AXES:
            n = getattr(self, axis)
            out[axis], rest = rest % n, rest // n
        out["ep"] = out["dp"] % self.ep
        return out

    def kind(self, group: list[int]) -> str:
        """The axis along which the group's ranks differ: tp, cp, ep, dp or pp; ``other``."""
        cs = [self.coords(r) for r in group]
        varies = {a for a in AXES if len({c[a] for c in cs}) > 1}
        if len(varies) != 1:
            return "other"
        [axis] = varies
        if axis == "dp" and self.ep > 1 and len({c["dp"] // self.ep for c in cs}) == 1:
            return "ep"
        return axis


def layout_of(args: Any) -> Layout | None:
    """The ``--tp --pp --dp --cp --ep`` flags of a CLI namespace, or None when none is given."""
    given = {a: getattr(args, a, None) for a in ("tp", "pp", "dp", "cp", "ep")}
    if all(v is None for v in given.values()):
        return None
    return Layout(**{a: 1 if v is None else int(v) for a, v in given.items()})


def process_groups(doc: dict, where: str = "profiler trace") -> list[list[int]]:
    """Sorted rank lists of ``distributedInfo.pg_config`` (groups of one left out).

    Raises ValueError naming ``where`` and the entry when a group's ranks are not a list of
    ranks of the world."""
    dist = doc.get("distributedInfo") or {}
    world = int(dist.get("world_size", 1))
    pgs = dist.get("pg_config") or []
    if not isinstance(pgs, list):
        raise ValueError(f"{where}: distributedInfo.pg_config must be a list of groups, got "
                         f"{type(pgs).__name__}")
    out = []
    for i, pg in enumerate(pgs):
        ranks = pg.get("ranks") if isinstance(pg, dict) else None
        if not isinstance(ranks, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < world for r in ranks):
            raise ValueError(f"{where}: distributedInfo.pg_config[{i}].ranks must be a list of "
                             f"ranks below the world size {world}, got {ranks!r:.60}")
        if not ranks and pg.get("pg_size") == world:
            ranks = list(range(world))  # the default group may list no ranks
        ranks = sorted(ranks)
        if len(ranks) >= 2 and ranks not in out:
            out.append(ranks)
    return out


def _stride(group: list[int]) -> int | None:
    steps = {b - a for a, b in zip(group, group[1:], strict=False)}
    return steps.pop() if len(steps) == 1 else None


def infer_layout(groups: list[list[int]], world: int) -> Layout:
    """Degrees from the process groups: consecutive ranks are tp; a group whose stride x size
    spans the world (stride > 1) is pp; dp the rest of the world."""
    proper = [g for g in groups if len(g) < world and _stride(g)]
    tp = max((len(g) for g in proper if _stride(g) == 1), default=1)
    pp = max((len(g) for g in proper if _stride(g) > 1 and _stride(g) * len(g) == world
              and _stride(g) >= tp), default=1)
    if world % (tp * pp):
        tp, pp = 1, 1
    return Layout(tp=tp, pp=pp, dp=world // (tp * pp))


def read_generic_docs(d: Path, docs: list[tuple[Path, dict]], layout: Layout | None = None,
                      ets: dict[int, dict] | None = None) -> TraceRun:
    """The run of profiler documents without ``trainer_meta`` (module doc); ``ets``: the
    execution traces beside them by process id (``netsim.traces.chakra``)."""
    t0 = min(_first_step_ts(doc) for _, doc in docs)
    notes: list[str] = []
    ets = ets or {}
    world = int((docs[0][1].get("distributedInfo") or {}).get("world_size", 1))
    groups = _groups(docs[0], ets, world)
    if layout is None:
        layout = infer_layout(groups, world)
        notes.append(f"layout inferred from the process groups: tp {layout.tp}, pp {layout.pp}, "
                     f"dp {layout.dp} (give --tp --pp --dp --cp --ep to set it)")
    elif layout.world_size != world:
        raise ValueError(f"trace {d}: --tp x --cp x --dp x --pp = {layout.world_size}, but the "
                         f"traces' world size is {world}")
    ranks = []
    for f, doc in docs:
        rank = _rank_trace(f, doc, t0, [])
        _set_layout(rank, layout)
        labelled = any(COMM.match(str(e.get("name", ""))) for e in doc["traceEvents"])
        _sizes_from_et(rank, ets.get(_pid(doc)), notes)
        _assign_groups(rank, _groups((f, doc), ets, world), layout, notes,
                       rekind=not labelled)
        if not any(c["phase"] in ("forward", "backward", "optimizer") for c in rank.compute):
            rank.compute += compute_records(doc, t0)
        ranks.append(rank)
    ranks.sort(key=lambda r: r.meta["rank"])
    check_ranks([str(f) for f, _ in docs], ranks, str(d))
    notes.append("no model in a profiler trace of a foreign job: collectives are calibrated, "
                 "compute is not (FLOPs unknown) and no what-if is priced")
    run = TraceRun(path=str(d), ranks=ranks, summary={"start_step": 0},
                   host=host_from_records(ranks))  # the trainer's trainer_host, if any
    run.notes = _dedupe(notes)
    return run


def _pid(doc: dict) -> int | None:
    """The process id of a Kineto document's CPU operators (an execution trace's ``pid``)."""
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and isinstance(e.get("pid"), int):
            return e["pid"]
    return None


def _groups(item: tuple[Path, dict], ets: dict[int, dict], world: int) -> list[list[int]]:
    """The document's ``pg_config`` groups, else those of its execution trace."""
    f, doc = item
    et = ets.get(_pid(doc))
    return process_groups(doc, f"profiler trace {f}") or (
        chakra.process_groups(et, world) if et else [])


def _sizes_from_et(rank: RankTrace, et: dict | None, notes: list[str]) -> None:
    """Message sizes Kineto lacks (``record_shapes=False``) from the execution trace's node
    of the same ``rf_id``."""
    unsized = [c for c in rank.collectives if not c["bytes"]]
    if not unsized:
        return
    sizes = chakra.comm_sizes(et) if et else {}
    for c in unsized:
        c["bytes"] = sizes.get(c.get("rf_id"), 0)
    left = sum(1 for c in unsized if not c["bytes"])
    if left:
        notes.append(f"{left} collective calls on rank {rank.meta['rank']} without a size "
                     "(profile with record_shapes=True or an ExecutionTraceObserver)")


def _set_layout(rank: RankTrace, layout: Layout) -> None:
    me = rank.meta["rank"]
    if me >= layout.world_size:
        raise ValueError(f"{rank.meta['source']}: rank {me} outside the layout's world of "
                         f"{layout.world_size}")
    c = layout.coords(me)
    rank.meta.update(tp=layout.tp, pp=layout.pp, dp=layout.dp, cp=layout.cp, ep=layout.ep,
                     tp_rank=c["tp"], pp_rank=c["pp"], dp_rank=c["dp"],
                     global_batch=layout.dp, layout_known=False)


def _assign_groups(rank: RankTrace, groups: list[list[int]], layout: Layout,
                   notes: list[str], rekind: bool = True) -> None:
    """Give group-less collectives their rank's one candidate group; kinds from the layout
    (``rekind``: unless the trainer's ``trainer/comm/{kind}`` ranges named them: its
    embedding all-reduce of the first and last stage is no pipeline transfer); a
    data-parallel call posted from the autograd engine is overlapped."""
    me = rank.meta["rank"]
    mine = [g for g in groups if me in g]
    proper = [g for g in mine if len(g) < layout.world_size] or mine
    ambiguous = 0
    for c in rank.collectives:
        if not c["group"]:
            if len(proper) == 1:
                c["group"] = list(proper[0])
            else:
                ambiguous += 1
                continue
        if c["kind"] == "other" and rekind:
            c["kind"] = layout.kind(sorted(c["group"]))
            c["overlapped"] = c["kind"] == "dp" and c.get("posted_in_backward", False)
    if ambiguous:
        notes.append(f"{ambiguous} collective calls on rank {me} could be in any of "
                     f"{len(proper)} process groups (gloo records none): left out of the fits")


def compute_records(doc: dict, t0: float) -> list[dict]:
    """Compute records of a foreign job (module doc): GPU kernels outside NCCL, else the
    CPU operators of the thread that stepped the profiler (``cpu_operators``)."""
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e
              and isinstance(e.get("ts"), (int, float))]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(STEP.match(e["name"]).group(1)),
                    e.get("tid")) for e in events if STEP.match(str(e.get("name", ""))))
    if not steps:
        return []
    tid = steps[0][3]
    ops = [e for e in events if e.get("tid") == tid and e.get("cat") != "kernel"
           and not STEP.match(str(e.get("name", "")))]
    kernels = [e for e in events if e.get("cat") == "kernel"
               and "nccl" not in str(e.get("name", "")).lower()]
    roots = ([(e, _phase(str(e.get("name", "")))) for e in _top_level(ops)] if kernels
             else cpu_operators(ops))
    out = []
    for e, phase in roots:
        step = _step_of(steps, e["ts"])
        name = str(e.get("name", ""))
        if step is None or name.startswith(COMM_PREFIXES):
            continue
        out.append(_record(step, phase, name, e["ts"], e["dur"], t0))
    if kernels:
        return _kernel_records(kernels, out, events, t0)
    return out


def cpu_operators(ops: list[dict], phase: str | None = None) -> list[tuple[dict, str]]:
    """The top-level operators of one thread's ``ops``, with their phase; one that holds a
    communication operator (``torch.distributed.nn``'s ``_AllReduce``, a hook that posts a
    call) is replaced by its own children, recursively, in its phase: the time between them
    is spent in the collective's call (its Python, its wait, the thread's wake-up), not in
    compute."""
    ops = sorted(ops, key=lambda e: (e["ts"], -e["dur"]))
    starts = [e["ts"] for e in ops]
    out = []
    for e in _top_level(ops):
        i = bisect.bisect_left(starts, e["ts"])
        j = bisect.bisect_left(starts, e["ts"] + e["dur"] + 1e-9, lo=i)
        inner = [o for o in ops[i:j] if o is not e]
        name = str(e.get("name", ""))
        mine = phase or _phase(name)
        if not name.startswith(COMM_PREFIXES) and any(
                str(o.get("name", "")).startswith(COMM_PREFIXES) for o in inner):
            out += cpu_operators(inner, mine)
        else:
            out.append((e, mine))
    return out


def _top_level(events: list[dict]) -> list[dict]:
    """Events not inside another event of the list (one thread's call tree roots)."""
    out, end = [], -1.0
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        if e["ts"] >= end:
            out.append(e)
            end = e["ts"] + e["dur"]
    return out


def _step_of(steps: list[tuple], ts: float) -> int | None:
    i = bisect.bisect_right([s[0] for s in steps], ts) - 1
    return steps[i][2] if i >= 0 and ts <= steps[i][1] else None


def _phase(name: str) -> str:
    if name.startswith(BACKWARD):
        return "backward"
    return "optimizer" if name.startswith(OPTIMIZER) else "forward"


def _record(step: int, phase: str, name: str, ts: float, dur: float, t0: float) -> dict:
    return {"type": "compute", "step": step, "phase": phase, "name": name, "layer": None,
            "microbatch": None, "start_s": (ts - t0) * 1e-6, "end_s": (ts + dur - t0) * 1e-6,
            "flops": None}


def _kernel_records(kernels: list[dict], cpu: list[dict], events: list[dict],
                    t0: float) -> list[dict]:
    """GPU kernels, each with the step and phase of the CPU operator that launched it (the
    runtime launch of the same ``correlation``)."""
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") == "cuda_runtime" and "correlation" in (e.get("args") or {})}
    spans = sorted((c["start_s"], c["end_s"], c["step"], c["phase"]) for c in cpu)
    starts = [s[0] for s in spans]
    out = []
    for k in kernels:
        ts = launch.get((k.get("args") or {}).get("correlation"))
        if ts is None:
            continue
        t = (ts - t0) * 1e-6
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= spans[i][1]:
            out.append(_record(spans[i][2], spans[i][3], str(k["name"]), k["ts"], k["dur"], t0))
    return out
