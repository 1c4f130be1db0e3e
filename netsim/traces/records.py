"""Read and validate the trainer's files: ``trainer-trace/1`` run directories and
``trainer-bench/1`` microbenchmark JSON (schemas in ``docs/architecture.md``).

This is the only module of the calibration path that touches disk. A bad file raises
``ValueError`` naming the file, the line and the missing or wrong field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inputspec import InputError, check_value, parse_text, read_data, read_text
from inputspec.core import Rule
from netsim.traces.integrity import check_complete, check_run_ids

TRACE_SCHEMA = "trainer-trace/1"
BENCH_SCHEMA = "trainer-bench/1"

REQUIRED = {
    "meta": ("schema", "rank", "world_size", "tp", "pp", "dp", "model", "micro_batches",
             "micro_batch_size", "global_batch"),
    "compute": ("step", "phase", "layer", "start_s", "end_s"),
    "collective": ("step", "op", "kind", "group", "bytes", "start_s", "end_s"),
    "iteration": ("step", "iteration_s"),
}
MODEL_KEYS = ("layers", "hidden", "heads", "seq", "vocab")


@dataclass
class RankTrace:
    """Records of one rank."""

    meta: dict[str, Any]
    compute: list[dict[str, Any]] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    iterations: list[dict[str, Any]] = field(default_factory=list)
    host_record: dict[str, Any] | None = None
    """The trainer's ``host`` record (``trainer/hostinfo.py``), when it wrote one."""
    end_record: dict[str, Any] | None = None
    """The trainer's closing ``end`` record (``run_id``, ``steps``), when it wrote one."""


@dataclass
class TraceRun:
    """One trainer run: every rank's records plus ``summary.json``."""

    path: str
    ranks: list[RankTrace]
    summary: dict[str, Any]
    host: dict[str, Any] = field(default_factory=dict)
    """Optional ``DIR/host.json``: the load on the host during the run (``host_cores``,
    ``available_cores``, ...), written by ``experiments/heldout_accuracy``; may be empty."""
    notes: list[str] = field(default_factory=list)
    """What a reader could not identify or had to assume (``netsim.traces.kineto``), for reports."""

    @property
    def meta(self) -> dict[str, Any]:
        return self.ranks[0].meta

    def iteration_s(self, skip: int = 1) -> list[float]:
        """Measured iteration times of rank 0, the first ``skip`` (warm-up) steps of the
        process dropped: steps before ``summary.start_step + skip`` (a profiler trace that
        starts recording after the warm-up keeps all its steps)."""
        its = self.ranks[0].iterations
        first = int(self.summary.get("start_step", its[0]["step"] if its else 0))
        kept = [r["iteration_s"] for r in its if r["step"] >= first + skip]
        return kept or [r["iteration_s"] for r in its]


def read_trace_dir(path: str | Path) -> TraceRun:
    """Read ``DIR/trace-rank*.jsonl`` and ``DIR/summary.json``.

    Raises
    ------
    ValueError
        If the directory has no trace files, or a record lacks a field of its type.
    """
    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"trace {path}: not a directory (expected a trainer --trace-dir)")
    files = sorted(d.glob("trace-rank*.jsonl"), key=lambda p: int(p.stem.split("rank")[-1]))
    if not files:
        raise ValueError(f"trace {path}: no trace-rank*.jsonl files")
    ranks = [_read_rank(f) for f in files]
    check_ranks([str(f) for f in files], ranks, str(d))
    summary = _read_object(d / "summary.json", "trace summary")
    notes = check_complete([str(f) for f in files], ranks, summary)
    host = _read_object(d / "host.json", "trace host") if (d / "host.json").exists() \
        else host_from_records(ranks)
    return TraceRun(path=str(d), ranks=ranks, summary=summary, host=host, notes=notes)


#: Types of the record fields the calibration reads (``inputspec`` annotations).
FIELD_TYPES: dict[str, Any] = {
    "schema": str, "rank": int, "world_size": int, "tp": int, "pp": int, "dp": int,
    "model": dict, "micro_batches": int, "micro_batch_size": int, "global_batch": int,
    "step": int, "phase": str, "layer": int | None, "start_s": float, "end_s": float,
    "op": str, "kind": str, "group": list[int], "bytes": int, "iteration_s": float,
}
#: Numbers of the trainer's ``host`` record (``host_from_records``).
HOST_FIELDS = ("host_cores", "cpu_s", "wall_s", "host_busy_cores")
#: Largest trace file read (a rank of a long CPU run is a few MB).
MAX_TRACE_BYTES = 2**30


def _read_object(path: Path, what: str) -> dict[str, Any]:
    """An optional JSON object file (``summary.json``, ``host.json``); {} when absent."""
    if not path.exists():
        return {}
    data = read_data(path, what, default_format="json")
    if not isinstance(data, dict):
        raise InputError(f"{what} file {path}", None, data, "a JSON object", {"iterations": 4})
    return data


def _check_record(rec: Any, where: str) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise InputError(where, None, rec, "a JSON object with a 'type' key",
                         {"type": "iteration", "step": 1, "iteration_s": 0.5})
    if not isinstance(rec.get("type"), (str, type(None))):
        raise InputError(where, "type", rec["type"], "a record type such as meta, compute, "
                         "collective, iteration", "iteration")
    lo = Rule(min=0)
    for key, tp in FIELD_TYPES.items():
        if key in rec and key in REQUIRED.get(rec.get("type"), ()):
            rec[key] = check_value(rec[key], tp, where, key, lo if tp in (int, float) else Rule())
    return rec


def host_from_records(ranks: list[RankTrace]) -> dict[str, Any]:
    """``host.json``'s fields from the trainer's own ``host`` records (one per rank).

    ``other_cores`` is the host's busy cores minus the cores the run's ranks used (their CPU
    time over the window, summed), ``available_cores`` the host's cores minus that; ranks on
    several hosts: the busiest host's figures (``hosts_from_records`` gives every host's).
    Empty when the ranks wrote no host records.
    """
    rows = hosts_from_records(ranks)
    return max(rows, key=lambda row: row["ranks"]) if rows else {}


def hosts_from_records(ranks: list[RankTrace]) -> list[dict[str, Any]]:
    """Per host (in order of first appearance), the ``host_from_records`` fields."""
    by_host: dict[str, list[dict]] = {}
    for r in ranks:
        if r.host_record is not None:
            by_host.setdefault(str(r.meta.get("host", "?")), []).append(r.host_record)
    out = []
    for name, recs in by_host.items():
        cores = float(recs[0].get("host_cores") or 0) or None
        used = sum(x["cpu_s"] / x["wall_s"] for x in recs
                   if x.get("wall_s") and x.get("cpu_s") is not None)
        busy = [x["host_busy_cores"] for x in recs if x.get("host_busy_cores") is not None]
        other = max(0.0, float(sorted(busy)[len(busy) // 2]) - used) if busy else 0.0
        row = {"host": name, "host_cores": cores, "ranks": len(recs),
               "ranks_per_host": recs[0].get("ranks_per_host") or len(recs),
               "trainer_cores": used, "other_cores": other, "source": "trace host records"}
        if cores is not None:
            row["available_cores"] = max(cores - other, 0.1)
        out.append(row)
    return out


RUN_KEYS = ("world_size", "tp", "pp", "dp", "model", "global_batch", "micro_batches", "seed")


def check_ranks(files: list[str], ranks: list[RankTrace], where: str) -> None:
    """Raise ValueError unless the files are one run's ranks 0..world-1, each once.

    Mixed runs (a file whose world size, layout, model, batch or seed differs from the first
    file's), duplicated and missing ranks are named with their files.
    """
    ref = ranks[0].meta
    check_run_ids(files, ranks)
    for f, r in zip(files, ranks, strict=True):
        diff = [k for k in RUN_KEYS if k in ref and r.meta.get(k) != ref[k]]
        if diff:
            raise ValueError(f"{f}: from another run than {files[0]} (differs in "
                             f"{', '.join(diff)}): keep one run per directory")
    seen: dict[int, str] = {}
    for f, r in zip(files, ranks, strict=True):
        if r.meta["rank"] in seen:
            raise ValueError(f"{f}: rank {r.meta['rank']} again (also in {seen[r.meta['rank']]})")
        seen[r.meta["rank"]] = f
    world = int(ref["world_size"])
    beyond = [(f, r) for r, f in seen.items() if r >= world]
    if beyond:
        raise ValueError(f"{beyond[0][0]}: rank {beyond[0][1]} of a world of {world}")
    if len(seen) < world:  # bounded by the files present, not by the world claimed
        missing = [r for r in range(min(world, len(seen) + 10)) if r not in seen][:10]
        rest = world - len(seen) - len(missing)
        more = f" and {rest:,} more" if rest else ""
        raise ValueError(f"trace {where}: missing rank(s) {missing}{more} of a world of "
                         f"{world:,} (have {len(seen)} files)")


def _read_rank(path: Path) -> RankTrace:
    trace: RankTrace | None = None
    text = read_text(path, "trace", max_bytes=MAX_TRACE_BYTES)
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rec = _parse_line(line, f"{path}:{lineno}", cut=lineno == len(lines)
                          and not text.endswith("\n"))
        rec = _check_record(rec, f"{path}:{lineno}")
        kind = rec.get("type")
        missing = [k for k in REQUIRED.get(kind, ()) if k not in rec]
        if kind == "host" and trace is not None:
            for key in HOST_FIELDS:  # read by host_from_records
                if key in rec:
                    rec[key] = check_value(rec[key], float | None, f"{path}:{lineno}", key,
                                           Rule(min=0))
            trace.host_record = rec
            continue
        if kind == "end" and trace is not None:
            trace.end_record = rec
            continue
        if kind not in REQUIRED and kind is not None:
            continue  # record types added later are ignored
        if kind is None or missing:
            raise ValueError(f"{path}:{lineno}: record type {kind!r} lacks {missing or ['type']}")
        if trace is None:
            if kind != "meta":
                raise ValueError(f"{path}:{lineno}: first record must be 'meta'")
            _check_meta(rec, path)
            trace = RankTrace(meta=rec)
            continue
        {"compute": trace.compute, "collective": trace.collectives,
         "iteration": trace.iterations}.get(kind, []).append(rec)
    if trace is None:
        raise ValueError(f"{path}: empty trace file")
    return trace


def _parse_line(line: str, where: str, cut: bool) -> dict:
    """One JSON record (duplicate keys refused); a last line without its newline that
    does not parse is named as cut, the mark of a run stopped while writing."""
    try:
        return parse_text(line, "json", where)
    except InputError as exc:
        if not cut:
            raise
        raise InputError(where, problem=f"the file ends inside this record (cut mid-line; "
                         f"{exc.problem or 'not a JSON record'}): the run stopped while "
                         "writing this rank's trace; rerun it, or drop the last line to "
                         "read what was written") from None


def _check_meta(meta: dict, path: Path) -> None:
    if meta["schema"] != TRACE_SCHEMA:
        raise ValueError(f"{path}: schema {meta['schema']!r}, expected {TRACE_SCHEMA!r}")
    check_meta(meta, str(path), "meta")


#: The largest world a trace may describe (2^24 ranks): two orders of magnitude above the
#: largest training clusters built, ~10^5 GPUs (xAI Colossus, Meta's 24k-GPU RoCE clusters);
#: a bigger claim is a corrupt file, and it would otherwise size the missing-rank check.
MAX_WORLD = 2**24
#: Bounds of the ``meta`` (and Kineto ``trainer_meta``) fields that size what a reader builds.
META_RULES: dict[str, tuple[Any, Rule]] = {
    "rank": (int, Rule(min=0, max=MAX_WORLD - 1)),
    "world_size": (int, Rule(min=1, max=MAX_WORLD)),
    **{k: (int, Rule(min=1, max=MAX_WORLD)) for k in ("tp", "pp", "dp", "cp", "ep")},
    **{k: (int, Rule(min=1, max=2**40)) for k in ("micro_batches", "micro_batch_size",
                                                   "global_batch")},
    "model": (dict, Rule()),
    "host": (str, Rule()),
}


def check_meta(meta: dict, source: str, where: str) -> None:
    """The layout and model fields of a trace's meta record (``where``: its name in the file)
    typed and bounded in place; rank within the world, the degrees' product the world. Raises
    ``InputError`` naming ``source`` and the field."""
    for key, (tp, r) in META_RULES.items():
        if key in meta:
            meta[key] = check_value(meta[key], tp, source, f"{where}.{key}", r)
    missing = [k for k in MODEL_KEYS if k not in meta.get("model", {})]
    if "model" in meta and missing:
        raise InputError(source, f"{where}.model", meta["model"], f"an object with {missing}",
                         {k: 8 for k in MODEL_KEYS})
    for k in MODEL_KEYS if "model" in meta else ():
        meta["model"][k] = check_value(meta["model"][k], int, source, f"{where}.model.{k}",
                                       Rule(min=1, max=2**40))
    world = meta.get("world_size")
    if world is not None and meta.get("rank", 0) >= world:
        raise InputError(source, f"{where}.rank", meta["rank"], f"a rank below world_size {world}")
    degrees = [meta.get(k, 1) for k in ("tp", "cp", "pp", "dp")]
    if world is not None and {"tp", "pp", "dp"} <= set(meta) and math.prod(degrees) != world:
        raise InputError(source, f"{where}.world_size", world, f"tp x cp x pp x dp = "
                         f"{math.prod(degrees)}", math.prod(degrees))


def read_bench(path: str | Path) -> list[dict[str, Any]]:
    """Results of ``python -m trainer.bench`` (``trainer-bench/1``), one dict per size/op."""
    data = read_data(path, "bench", default_format="json")
    if not isinstance(data, dict):
        raise InputError(f"bench file {path}", None, data, "a JSON object",
                         {"schema": BENCH_SCHEMA})
    if data.get("schema") != BENCH_SCHEMA:
        raise ValueError(f"bench {path}: schema {data.get('schema')!r}, expected {BENCH_SCHEMA!r}")
    results = data.get("results")
    if not isinstance(results, list):
        raise ValueError(f"bench {path}: 'results' must be a list")
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            raise InputError(f"bench file {path}", f"results[{i}]", r, "an object with op, "
                             "size_bytes, time_s", {"op": "all_reduce", "size_bytes": 1048576,
                                                    "time_s": 0.001})
        missing = [k for k in ("op", "size_bytes", "time_s") if k not in r]
        if missing:
            raise ValueError(f"bench {path}: results[{i}] lacks {missing}")
        where = f"bench file {path}"
        check_value(r["op"], str, where, f"results[{i}].op")
        check_value(r["size_bytes"], int, where, f"results[{i}].size_bytes", Rule(min=0))
        check_value(r["time_s"], float, where, f"results[{i}].time_s", Rule(min=0))
    return results


def read_any(path: str | Path) -> TraceRun | list[dict[str, Any]]:
    """A trace directory or a bench JSON file."""
    return read_trace_dir(path) if Path(path).is_dir() else read_bench(path)
