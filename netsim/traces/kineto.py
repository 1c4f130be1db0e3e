"""Read torch.profiler (Kineto) Chrome traces of any PyTorch job into a
:class:`netsim.traces.records.TraceRun`, so that ``netsim calibrate`` and ``netsim diagnose`` take them
as they take the trainer's own traces.

What is recognised (Chrome trace JSON, ``traceEvents`` with ``ph: "X"`` spans in microseconds):

- steps: ``ProfilerStep#N`` ranges (``torch.profiler``'s ``prof.step()``): an ``iteration``
  record of N;
- collectives: ``c10d::`` operators (``allreduce_``, ``send``, ``recv_``, ``_reduce_scatter_base_``
  ...), the gloo backend's ``gloo:*`` spans on its worker threads (when the operation actually
  ran) and NCCL's ``record_param_comms`` (``Collective name``, ``In msg nelems``, ``dtype``,
  ``Process Group Ranks``) with its ``nccl*Kernel*`` on the GPU (same ``External id``). A
  data-parallel call posted from inside the autograd engine (a gradient hook) is
  ``overlapped``. A
  message's size comes from the operator's recorded input shapes and type, or
  ``record_param_comms``' element counts; its group from ``Process Group Ranks``, or from the
  trainer's ``trainer/comm/{kind}/{ranks}`` range around it (gloo records no group);
- compute: ``record_function`` ranges ``trainer/{phase}/{name}/{layer}/mb{m}`` (the trainer's
  ``--profile``; the embedding's backward range is dropped: it opens when the embedding's
  output gradient arrives and no record closes it, integer ids having no gradient), with
  their thread CPU time (``cpu_s``) from the trainer's ``trainer/cpu/...`` marks where it
  wrote them (CPU runs; a profiler itself measures wall time only); other
  ``record_function`` ranges are listed as unidentified;
- the job: the ``trainer_meta`` metadata (the native trace's meta record). Without it the
  model and the layout are unknown: steps, collectives and ranges are still read, calibration
  of compute is not possible, and the run says so in ``notes``.

Anything not identified is counted in ``TraceRun.notes`` instead of guessed.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from netsim.traces.records import (
    HOST_FIELDS,
    MAX_WORLD,
    REQUIRED,
    RankTrace,
    TraceRun,
    check_meta,
    check_ranks,
    host_from_records,
    read_trace_dir,
)

C10D_OPS = {"allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce",
            "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_": "reduce_scatter",
            "reduce_scatter_tensor_coalesced_": "reduce_scatter",
            "_allgather_base_": "all_gather", "allgather_": "all_gather",
            "allgather_into_tensor_coalesced_": "all_gather", "send": "send", "recv_": "recv",
            "broadcast_": "broadcast", "alltoall_base_": "all_to_all", "alltoall_": "all_to_all",
            "reduce_": "reduce", "gather_": "gather", "scatter_": "scatter", "barrier": "barrier"}
NCCL_NAMES = {"allreduce": "all_reduce", "all_reduce": "all_reduce",
              "reduce_scatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
              "reduce_scatter_tensor_coalesced": "reduce_scatter",
              "allgather": "all_gather", "all_gather": "all_gather",
              "_allgather_base": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
              "send": "send", "recv": "recv", "broadcast": "broadcast",
              "all_to_all": "all_to_all", "all_to_allv": "all_to_all", "alltoall": "all_to_all"}
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "BFloat16": 2,
                 "Half": 2, "Float": 4, "Double": 8, "long int": 8, "int": 4, "Long": 8,
                 "Int": 4, "unsigned char": 1, "bool": 1, "signed char": 1, "c10::Float8_e4m3fn": 1}
STEP = re.compile(r"^ProfilerStep#(\d+)$")
COMPUTE = re.compile(r"^trainer/(forward|backward|optimizer)/([^/]+)/([^/]+)/mb([^/]+)$")
COMM = re.compile(r"^trainer/comm/([^/]+)/([\d,]+)$")
#: What the trainer's ``trainer_meta`` must hold: the native meta record's fields.
TRAINER_META_KEYS = tuple(k for k in REQUIRED["meta"] if k != "schema")
CPU_MARK = re.compile(r"^trainer/cpu/(\w+)/([^/]+)/([^/]+)/mb([^/]+)/s(\d+)/([\d.]+)$")


def is_kineto_dir(path: str | Path) -> bool:
    d = Path(path)
    return d.is_dir() and not any(d.glob("trace-rank*.jsonl")) and any(d.glob("*.json"))


def read_traces(path: str | Path) -> TraceRun:
    """A trace directory of either format: native ``trace-rank*.jsonl`` or Kineto ``*.json``."""
    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"trace {path}: not a directory (expected a trainer --trace-dir or "
                         "--profile directory)")
    return read_kineto_dir(d) if is_kineto_dir(d) else read_trace_dir(d)


def read_kineto_dir(path: str | Path) -> TraceRun:
    """Every Kineto Chrome trace in ``path`` (one per rank) as one run."""
    d = Path(path)
    return run_from_docs(d, load_kineto_docs(d))


def load_kineto_docs(d: Path) -> list[tuple[Path, dict]]:
    """(file, document) of every torch.profiler Chrome trace in ``d``, shapes checked."""
    files = sorted(f for f in d.glob("*.json") if f.name not in ("summary.json", "host.json"))
    docs = [(f, _load(f)) for f in files]
    docs = [(f, doc) for f, doc in docs if doc is not None]
    if not docs:
        seen = ", ".join(f.name for f in files[:3]) + (" ..." if len(files) > 3 else "")
        raise ValueError(f"trace {d}: no torch.profiler Chrome trace (*.json with traceEvents)"
                         + (f"; {seen}: a JSON object without traceEvents" if files else ""))
    return docs


def run_from_docs(d: Path, docs: list[tuple[Path, dict]]) -> TraceRun:
    """The run of the trainer's ``--profile`` documents (``load_kineto_docs``)."""
    t0 = min(_first_step_ts(doc) for _, doc in docs)
    notes: list[str] = []
    pairs = sorted(((str(f), _rank_trace(f, doc, t0, notes)) for f, doc in docs),
                   key=lambda p: p[1].meta["rank"])  # each file named beside its own rank
    ranks = [r for _, r in pairs]
    check_ranks([f for f, _ in pairs], ranks, str(d))
    # steps are numbered from the job's start (the trainer sets the profiler's step to its own)
    run = TraceRun(path=str(d), ranks=ranks,
                   summary={"start_step": int(ranks[0].meta.get("start_step", 0))},
                   host=host_from_records(ranks) or _host_of_meta(ranks))
    run.notes = _dedupe(notes)
    return run


def _host_record(f: Path, doc: dict) -> dict[str, Any] | None:
    """The trainer's host record so far (``trainer_host``: cores, CPU and wall time, the host's
    busy cores since the warm-up step), its numbers checked; None when absent."""
    from inputspec import check_value
    from inputspec.core import Rule

    rec = doc.get("trainer_host")
    if rec is None:
        return None
    rec = json.loads(rec) if isinstance(rec, str) else rec
    rec = dict(check_value(rec, dict[str, Any], f"profiler trace {f}", "trainer_host"))
    for key in HOST_FIELDS:
        if key in rec:
            rec[key] = check_value(rec[key], float | None, f"profiler trace {f}",
                                   f"trainer_host.{key}", Rule(min=0))
    return rec


def _host_of_meta(ranks) -> dict[str, float]:
    """``{"host_cores": C}`` when every rank's ``trainer_meta`` says how many cores its host
    has (the trainer writes it since issue #27): the shared-host model of ``netsim calibrate``
    then applies to a profiler-only run as to the native traces; ``{}`` otherwise."""
    cores = [r.meta.get("host_cores") for r in ranks]
    if not cores or not all(isinstance(c, (int, float)) and not isinstance(c, bool) and c > 0
                            for c in cores):
        return {}
    return {"host_cores": float(max(cores))}


def _load(f: Path) -> dict | None:
    """A Chrome trace document, its shape checked (``inputspec``: file, field, value named);
    ``None`` for a JSON file that is not a profiler trace."""
    from inputspec import InputError, read_text
    from inputspec.core import parse_text
    from netsim.traces.records import MAX_TRACE_BYTES

    source = f"profiler trace {f}"
    text = read_text(f, "profiler trace", max_bytes=MAX_TRACE_BYTES)
    try:
        doc = parse_text(text, "json", source, nonfinite=False)
    except InputError as exc:
        why = str(exc)[len(source) + 2:].removeprefix("not valid JSON: ")
        if "is not a number a file may hold" in why:  # NaN / Infinity
            raise InputError(source, problem=why) from None
        raise InputError(source, problem=f"not a complete JSON document ({why}); a truncated "
                         "profiler trace?") from None
    if not isinstance(doc, dict) or "traceEvents" not in doc:
        return None
    _check_doc(doc, source)
    return doc


#: Types of the event fields read (Chrome trace event format: ``ts``/``dur`` in microseconds).
EVENT_FIELDS = {"ph": str, "name": str, "cat": str, "ts": float, "dur": float,
                "args": dict}


def _check_doc(doc: dict, source: str) -> None:
    """``traceEvents`` a list of objects whose fields read have their types; the rank metadata
    (``trainer_meta``, ``distributedInfo``) sane."""
    import json

    from inputspec import InputError, check_value
    from inputspec.core import Rule, parse_text

    events = doc["traceEvents"]
    if not isinstance(events, list):
        raise InputError(source, "traceEvents", events, "a list of trace events",
                         [{"ph": "X", "name": "ProfilerStep#3", "ts": 0, "dur": 10}])
    nonneg = Rule(min=0)
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise InputError(source, f"traceEvents[{i}]", e, "an event object",
                             {"ph": "X", "name": "ProfilerStep#3", "ts": 0, "dur": 10})
        for key, tp in EVENT_FIELDS.items():
            if key in e and not (key == "name" and e.get("ph") != "X"):
                e[key] = check_value(e[key], tp, source, f"traceEvents[{i}].{key}",
                                     nonneg if key in ("ts", "dur") else Rule())
    meta = doc.get("trainer_meta")
    if isinstance(meta, str):
        meta = doc["trainer_meta"] = parse_text(meta, "json", f"{source}: trainer_meta")
    if meta is not None and not (isinstance(meta, dict) and set(TRAINER_META_KEYS) <= set(meta)):
        raise InputError(source, "trainer_meta", meta, "an object written by the trainer's "
                         f"--profile, with {', '.join(TRAINER_META_KEYS)}", json.loads(
                             '{"rank": 0, "world_size": 2, "tp": 1, "pp": 1, "dp": 2}'))
    if meta is not None:
        check_meta(meta, source, "trainer_meta")
    d = doc.get("distributedInfo")
    if d is not None and not isinstance(d, dict):
        raise InputError(source, "distributedInfo", d, "an object", {"rank": 0, "world_size": 2})
    for key, lo in (("rank", 0), ("world_size", 1)) if d is not None else ():
        if key in d:
            d[key] = check_value(d[key], int, source, f"distributedInfo.{key}",
                                 Rule(min=lo, max=MAX_WORLD))


def _first_step_ts(doc: dict) -> float:
    ts = [e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e
          and STEP.match(str(e.get("name", "")))]
    return min(ts) if ts else min((e["ts"] for e in doc["traceEvents"] if "ts" in e
                                   and isinstance(e["ts"], (int, float))), default=0.0)


def _meta(f: Path, doc: dict, notes: list[str]) -> dict[str, Any]:
    meta = doc.get("trainer_meta")
    if isinstance(meta, str):
        meta = json.loads(meta)
    dist = doc.get("distributedInfo") or {}
    if isinstance(meta, dict):
        meta = dict(meta)
        meta.setdefault("host", doc.get("host_name"))
        return meta
    if "rank" not in dist:
        raise ValueError(f"{f}: neither trainer_meta nor distributedInfo.rank: cannot tell "
                         "which rank wrote it")
    world = int(dist.get("world_size", 1))
    notes.append("no trainer_meta (not the trainer's --profile): model and layout unknown; "
                 "steps and collectives are read, compute is not calibrated")
    return {"schema": "kineto", "rank": int(dist["rank"]), "world_size": world, "tp": 1,
            "pp": 1, "dp": world, "model": {}, "micro_batches": 1, "micro_batch_size": 1,
            "global_batch": world, "host": doc.get("host_name", "?"),
            "backend": dist.get("backend"), "pp_rank": 0, "layout_known": False,
            "device": _device(doc)}


#: Kineto event categories of work on a GPU (kernels, copies) and of the CUDA runtime calls
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
                            "cuda_driver", "gpu_user_annotation"})


def _device(doc: dict) -> str:
    """``cuda`` when the document describes a GPU (``deviceProperties``) or holds GPU work,
    ``cpu`` otherwise: a profiler trace of a CPU-only job records neither."""
    if doc.get("deviceProperties") or any(e.get("cat") in GPU_CATEGORIES
                                          for e in doc["traceEvents"]):
        return "cuda"
    return "cpu"


def _rank_trace(f: Path, doc: dict, t0: float, notes: list[str]) -> RankTrace:
    meta = _meta(f, doc, notes)
    meta["source"] = str(f)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(
        e.get("ts"), (int, float))]
    steps = sorted((e["ts"], e["ts"] + e.get("dur", 0), int(STEP.match(e["name"]).group(1)))
                    for e in events if STEP.match(str(e.get("name", ""))))
    if not steps:
        notes.append(f"{f}: no ProfilerStep# ranges (prof.step() not called): one step assumed")
        lo = min(e["ts"] for e in events) if events else 0.0
        hi = max(e["ts"] + e.get("dur", 0) for e in events) if events else 0.0
        steps = [(lo, hi, 0)]
    rank = RankTrace(meta=meta, host_record=_host_record(f, doc))

    def sec(ts: float) -> float:
        return (ts - t0) * 1e-6

    def step_of(ts: float) -> int | None:
        for lo, hi, n in steps:
            if lo <= ts <= hi:
                return n
        return None

    for lo, hi, n in steps:
        rank.iterations.append({"type": "iteration", "step": n, "iteration_s": (hi - lo) * 1e-6})
        rank.compute.append({"type": "compute", "step": n, "phase": "iteration", "layer": None,
                             "name": "iteration", "microbatch": None, "start_s": sec(lo),
                             "end_s": sec(hi), "flops": None})
    unknown: Counter = Counter()
    for e in events:
        m = COMPUTE.match(str(e.get("name", "")))
        if m and m.group(1, 2) == ("backward", "embedding"):
            continue  # opened when the embedding's gradient arrives; ids have none: no record
        if m and step_of(e["ts"]) is not None:
            phase, name, layer, mb = m.groups()
            rank.compute.append({"type": "compute", "step": step_of(e["ts"]), "phase": phase,
                                 "name": name, "layer": None if layer == "-" else int(layer),
                                 "microbatch": None if mb == "-" else int(mb),
                                 "start_s": sec(e["ts"]), "end_s": sec(e["ts"] + e["dur"]),
                                 "flops": None})
        elif e.get("cat") == "user_annotation" and not _known_range(e["name"]):
            unknown[e["name"]] += 1
    _attach_cpu(rank, events, sec)
    rank.collectives = _collectives(f, events, meta, step_of, sec, notes)
    if unknown:
        top = ", ".join(f"{n} ({k})" for n, k in unknown.most_common(5))
        notes.append(f"unidentified record_function ranges (not used): {top}")
    return rank


def _attach_cpu(rank: RankTrace, events: list[dict], sec) -> None:
    """The trainer's ``trainer/cpu/...`` marks (``trainer.profiling``) as the ``cpu_s`` of
    the compute record they follow: the latest record of the same phase, name, layer and
    micro-batch ending at or before the mark; the step's mark goes to its iteration record."""
    ends: dict[tuple, list[dict]] = defaultdict(list)
    for c in rank.compute:
        ends[(c["phase"], c.get("name"), c["layer"], c.get("microbatch"))].append(c)
    for recs in ends.values():
        recs.sort(key=lambda c: c["end_s"])
    iters = {c["step"]: c for c in rank.compute if c["phase"] == "iteration"}
    for e in events:
        m = CPU_MARK.match(str(e.get("name", "")))
        if not m:
            continue
        phase, name, layer, mb, step, us = m.groups()
        if phase == "iteration":
            target = iters.get(int(step))
        else:
            key = (phase, name, None if layer == "-" else int(layer),
                   None if mb == "-" else int(mb))
            t = sec(e["ts"]) + 1e-6
            before = [c for c in ends.get(key, ()) if c["end_s"] <= t and c["step"] == int(step)]
            target = before[-1] if before else None
        if target is not None:
            target["cpu_s"] = float(us) * 1e-6


def _known_range(name: str) -> bool:
    return bool(STEP.match(name) or COMM.match(name) or name.startswith(("gloo:", "nccl:"))
                or name.startswith("trainer/"))


def _tensor_bytes(args: dict, largest: bool) -> int | None:
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    sizes = []
    for dim, typ in zip(dims, types, strict=False):
        shapes = dim if (dim and isinstance(dim[0], list)) else [dim]
        for shape in shapes:
            if not isinstance(shape, list) or not shape:
                continue
            n = 1
            for x in shape:
                n *= int(x)
            el = ELEMENT_BYTES.get(typ)
            if el is None and typ == "TensorList":
                el = ELEMENT_BYTES.get(args.get("dtype", "float"), 4)
            if el is None:
                continue
            sizes.append(n * el)
    if not sizes:
        return None
    return max(sizes) if largest else sizes[0]


def _collectives(f: Path, events: list[dict], meta: dict, step_of, sec,
                 notes: list[str]) -> list[dict]:
    """Collective records from c10d operators (+ gloo spans) and record_param_comms."""
    ranges = sorted((e for e in events if COMM.match(str(e.get("name", "")))),
                    key=lambda e: e["ts"])
    backward = sorted((e["ts"], e["ts"] + e["dur"]) for e in events  # autograd's own spans
                      if str(e.get("name", "")).startswith("autograd::engine::evaluate_function"))
    gloo = defaultdict(list)
    for e in sorted(events, key=lambda e: e["ts"]):
        name = str(e.get("name", ""))
        if name.startswith("gloo:"):
            gloo[name[5:]].append(e)
    kernels = {e.get("args", {}).get("External id"): e for e in events
               if e.get("cat") == "kernel" and "nccl" in str(e.get("name", "")).lower()}
    ops = sorted((e for e in events if str(e.get("name", "")).startswith("c10d::")
                  or e.get("name") == "record_param_comms"), key=lambda e: e["ts"])
    rpc = sorted(e["ts"] for e in ops if e["name"] == "record_param_comms")
    out, unmatched, no_group = [], Counter(), 0
    ri = 0
    for e in ops:
        if e["name"] != "record_param_comms" and _holds(rpc, e):
            continue  # the c10d operator around a record_param_comms: that one describes it
        rec = _op_record(e, kernels)
        if rec is None:
            unmatched[e["name"]] += 1
            continue
        op, size, group, end = rec
        while ri < len(ranges) and ranges[ri]["ts"] + ranges[ri]["dur"] < e["ts"]:
            ri += 1
        rng = ranges[ri] if ri < len(ranges) and ranges[ri]["ts"] <= e["ts"] else None
        kind, start = "other", e["ts"]
        if rng is not None:
            kind_s, ranks_s = COMM.match(rng["name"]).groups()
            kind, start = kind_s if kind_s != "-" else "other", rng["ts"]
            group = group or [int(r) for r in ranks_s.split(",")]
        if end is None:
            end = _gloo_end(gloo, op, e, size)
        step = step_of(e["ts"])
        if step is None:
            continue
        if not group:
            no_group += 1
        in_backward = any(lo <= start <= hi for lo, hi in backward)
        out.append({"type": "collective", "step": step, "op": op, "kind": kind,
                    "group": group or [], "bytes": size or 0, "dtype": None,
                    "start_s": sec(start), "end_s": sec(max(end, e["ts"] + e["dur"])),
                    "overlapped": kind == "dp" and in_backward,
                    "posted_in_backward": in_backward, "impl": e["name"],
                    "rf_id": (e.get("args") or {}).get("Record function id")})
    if unmatched:
        notes.append(f"unidentified communication operators (not used): "
                     f"{', '.join(f'{n} ({k})' for n, k in unmatched.most_common(5))}")
    if no_group:
        notes.append(f"{no_group} collective calls on rank {meta['rank']} without a recorded "
                     "process group (gloo records none): left out of the per-scope fits")
    return out


def _holds(sorted_ts: list[float], e: dict) -> bool:
    """Whether one of ``sorted_ts`` falls inside the span of ``e``."""
    import bisect

    i = bisect.bisect_left(sorted_ts, e["ts"])
    return i < len(sorted_ts) and sorted_ts[i] <= e["ts"] + e.get("dur", 0)


def _op_record(e: dict, kernels: dict) -> tuple[str, int | None, list[int], float | None] | None:
    """(op, bytes, group, end ts or None) of a c10d operator or a record_param_comms event."""
    args = e.get("args") or {}
    if e["name"] == "record_param_comms":
        op = NCCL_NAMES.get(str(args.get("Collective name", "")))
        if op is None:
            return None
        el = ELEMENT_BYTES.get(str(args.get("dtype", "")), 0)
        n_in, n_out = int(args.get("In msg nelems", 0)), int(args.get("Out msg nelems", 0))
        size = el * (n_out if op == "all_gather" else n_in) or None
        group = args.get("Process Group Ranks")
        if isinstance(group, str):
            group = json.loads(group)
        k = kernels.get(args.get("External id"))
        return op, size, list(group or []), (k["ts"] + k["dur"]) if k else None
    op = C10D_OPS.get(e["name"].removeprefix("c10d::"))
    if op is None:
        return None
    return op, _tensor_bytes(args, largest=op in ("reduce_scatter", "all_gather")), [], None


def _gloo_end(gloo: dict, op: str, e: dict, size: int | None) -> float | None:
    """End of the gloo span that executed the operator ``e`` (first unmatched one after it)."""
    names = {"all_reduce": ("all_reduce",), "reduce_scatter": ("reduce_scatter", "all_reduce"),
             "all_gather": ("all_gather", "allgather"), "send": ("send",), "recv": ("recv",),
             "broadcast": ("broadcast",), "all_to_all": ("all_to_all", "alltoall")}.get(op, ())
    for name in names:
        spans = gloo.get(name, [])
        for i, g in enumerate(spans):
            if g["ts"] + g.get("dur", 0) >= e["ts"]:
                spans.pop(i)
                return g["ts"] + g.get("dur", 0)
    return None


def _dedupe(notes: list[str]) -> list[str]:
    seen, out = set(), []
    for n in notes:
        key = re.sub(r"rank \d+", "rank R", n)
        if key not in seen:
            seen.add(key)
            out.append(n)
    return out
