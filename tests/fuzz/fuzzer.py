"""Fuzz the input files of the CLI: mutate valid fabric and job files, run the commands that
read them, and count tracebacks, hangs and nonsense accepted.

Each case takes a valid file, applies one mutation (a key set to a wrong type, null, NaN,
infinity, a huge or negative number, a word where a number goes; a key removed or added; the
whole file replaced by non-UTF-8 bytes, a list, a scalar or broken syntax) and runs
``netsim topo FILE --json`` (fabric) or ``netsim predict --job FILE --json`` (job) in-process.
An oracle built from the schema (the dataclass annotations) says whether the mutation must be
refused ("nonsense") or may go either way (a zero, a huge count, a removed key). Outcomes:

``clean``      exit 2 with exactly one line on stderr;
``accepted``   exit 0;
``traceback``  an exception escaped, or stderr held more than one line;
``hang``       the case ran past its time limit.

``nonsense_accepted`` counts cases the oracle says must be refused that exited 0. Run::

    python tests/fuzz/fuzzer.py --seed 2026 -n 400 --json
    python tests/fuzz/fuzzer.py --seed 2026 -n 400 --formats all --json   # every format in FORMATS

``FORMATS`` also holds the later formats: ``hf`` (Hugging Face ``config.json``, ``predict
--model``), ``sweep`` (sweep specs), ``background`` (``RUNNING.yaml``), ``trace`` (cluster
job-trace CSV) and ``kineto`` (torch.profiler traces, ``diagnose``); the default run is fabric
and job files.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import io
import json
import math
import os
import signal
import sys
import tempfile
import typing
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: Values a key is set to, with the oracle's category.
WORDS = ["abc", "h100", "megascale", "", "1e3", "true"]
CONTAINERS = [[1, 2], {"a": 1}, []]
SPECIALS = [None, True, False, math.nan, math.inf, -math.inf]
NUMBERS = [-5, 0, 0.5, 2.5, 65, 10**12, 10**30, 1e308, -1e308]


@dataclasses.dataclass
class Case:
    """One mutated file and what the oracle expects of it."""

    format: str                 # "fabric" | "job"
    mutation: str               # human-readable description
    must_refuse: bool           # True: accepting it is nonsense
    text: bytes                 # the file's bytes
    suffix: str = ".yaml"
    key: str | None = None      # the key set to a new value, if any


@dataclasses.dataclass
class Outcome:
    case: Case
    result: str                 # clean | accepted | traceback | hang
    rc: int | None
    stderr: str


# ---------------------------------------------------------------------------------------------
# Valid starting points and the schema oracle


def _fabric_bases() -> list[dict]:
    from topologies.files import PRESETS, spec_to_dict

    out = [spec_to_dict(PRESETS[n]) for n in ("fat-tree-k4", "fat-tree-k8", "leaf-spine-64")]
    out.append({**spec_to_dict(PRESETS["megascale"]), "servers": 128, "name": "small-clos"})
    return out


def _job_bases() -> list[dict]:
    from tuner.jobs import read_job_dict

    tiny = read_job_dict("tiny")
    return [tiny, read_job_dict("gpt3-175b"),
            {**tiny, "overlap": {"dp_grad_reduce": True, "tp_comm": False}, "recompute": True,
             "seq": 1024, "virtual_stages": 1}]


def _hf_bases() -> list[dict]:
    from netsim.model.hf import HF_PRESETS

    return [dict(HF_PRESETS[n][0]) for n in ("llama3-8b", "mixtral-8x7b", "deepseek-v3")]


def _sweep_bases() -> list[dict]:
    return [{"command": "topo", "args": {"json": True}, "grid": {"k": [4, 6]}},
            {"command": "topo", "list": [{"k": 4}, {"k": 8}]},
            {"command": "topo", "sample": {"n": 2, "seed": 3,
                                           "space": {"k": {"low": 2, "high": 8, "int": True}}}}]


def _sweep_argv(path: str) -> list[str]:
    out = tempfile.mkdtemp(prefix="fuzz-sweep-", dir=str(Path(path).parent))
    return ["sweep", path, "-o", out, "--workers", "0", "--no-progress"]


def _running_bases() -> list[dict]:
    """Entries of RUNNING.yaml (mutated, then wrapped as ``{jobs: [entry]}``)."""
    return [{"name": "a", "job": "tiny", "gpus": "64-127"},
            {"name": "b", "job": {"model": "tiny", "tp": 1, "pp": 1, "dp": 2}, "gpus": [64, 72]}]


def _running_argv(path: str) -> list[str]:
    return ["predict", "--job", "tiny", "--fabric", "fat-tree-k8", "--background", path,
            "--json"]


def _trace_bases() -> list[dict]:
    """Rows of a cluster job trace (mutated, then written as a one-row CSV)."""
    return [{"name": "j0", "arrival_s": 0.0, "duration_s": 60.0, "gpus": 16},
            {"name": "j1", "arrival_s": 5.0, "duration_s": 30.0, "model": "gpt3-1.3b",
             "tp": 8, "pp": 1, "dp": 2}]


def _trace_argv(path: str) -> list[str]:
    return ["cluster", "simulate", "--fabric", "fat-tree-k8", "--trace", path,
            "--policy", "linear", "--json"]


def _csv_text(value: Any) -> str:
    return "" if value is None else str(value)


def _csv_dump(data: Any) -> bytes:
    import csv

    if not isinstance(data, dict):
        return _csv_text(data).encode()
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(list(data))
    w.writerow([_csv_text(v) for v in data.values()])
    return buf.getvalue().encode()


def _trace_cell(key: str, value: Any) -> Any:
    from tuner.cluster import _cell

    return _cell(key, _csv_text(value))


@dataclasses.dataclass(frozen=True)
class KinetoEvent:
    """The event fields ``netsim.traces.kineto`` reads (the fuzz oracle's schema)."""

    ph: str
    name: str
    ts: float
    dur: float
    cat: str = "user_annotation"
    args: dict = dataclasses.field(default_factory=dict)


def _kineto_bases() -> list[dict]:
    """One event of a Chrome trace (mutated, then put after a ProfilerStep range)."""
    return [{"ph": "X", "cat": "user_annotation", "name": "forward/layer/0/0", "ts": 10.0,
             "dur": 5.0, "pid": 1, "tid": 1},
            {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "ts": 20.0, "dur": 8.0,
             "args": {"Collective name": "allreduce"}}]


def _kineto_wrap(event: dict) -> dict:
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0,
            "dur": 100.0}
    return {"traceEvents": [step, event], "distributedInfo": {"rank": 0, "world_size": 1}}


def _kineto_argv(path: str) -> list[str]:
    return ["diagnose", str(Path(path).parent), "--json"]


@dataclasses.dataclass(frozen=True)
class Format:
    """A fuzzed input format: its valid starting points, its schema, the command reading it."""

    bases: typing.Callable[[], list[dict]]
    schema: typing.Callable[[dict], type]
    argv: typing.Callable[[str], list[str]]
    suffixes: tuple[str, ...] = (".yaml", ".json")
    required: tuple[str, ...] = ("kind",)   # removing one of these must be refused
    wrap: typing.Callable[[Any], Any] = lambda d: d       # mutated dict -> file content
    dump: typing.Callable[[Any], bytes] | None = None     # file bytes (default YAML/JSON)
    as_read: typing.Callable[[str, Any], Any] = lambda k, v: v  # a value as the reader sees it
    extra_keys_ok: bool = False                           # unknown keys ignored by the reader


def _fabric_schema(data: dict) -> type:
    from topologies.files import KINDS

    return KINDS[data["kind"]]


def _schema(module: str, name: str) -> typing.Callable[[dict], type]:
    """The schema ``module.name`` of a format, imported when first fuzzed (as its reader is)."""
    return lambda data: getattr(importlib.import_module(module), name)


def _kineto_schema(data: dict) -> type:
    return KinetoEvent


#: Every fuzzed format (``--formats``); the default run keeps fabric and job, as issue #16's.
FORMATS: dict[str, Format] = {
    "fabric": Format(_fabric_bases, _fabric_schema, lambda p: ["topo", p, "--json"]),
    "job": Format(_job_bases, _schema("netsim.workload", "JobSpec"),
                  lambda p: ["predict", "--job", p, "--json"]),
    "hf": Format(_hf_bases, _schema("netsim.model.hf", "HFConfigKeys"),
                 lambda p: ["predict", "--model", p, "--json"],
                 suffixes=(".json",), required=("num_hidden_layers", "hidden_size",
                                                "num_attention_heads", "intermediate_size",
                                                "vocab_size", "hidden_act"),
                 extra_keys_ok=True),
    "sweep": Format(_sweep_bases, _schema("sweeps", "SpecKeys"), _sweep_argv,
                    required=("command", "grid", "list", "sample")),
    "background": Format(_running_bases, _schema("tuner.background", "RunningEntry"),
                         _running_argv,
                         required=("job", "gpus"), wrap=lambda d: {"jobs": [d]}),
    "trace": Format(_trace_bases, _schema("tuner.cluster", "TraceRow"), _trace_argv,
                    suffixes=(".csv",),
                    required=("arrival_s", "duration_s", "gpus"), dump=_csv_dump,
                    as_read=_trace_cell, extra_keys_ok=True),
    "kineto": Format(_kineto_bases, _kineto_schema, _kineto_argv, suffixes=(".json",),
                     required=(), wrap=_kineto_wrap, extra_keys_ok=True),
}
DEFAULT_FORMATS = ("fabric", "job")


def _hints(fmt: str, data: dict) -> dict[str, Any]:
    return typing.get_type_hints(FORMATS[fmt].schema(data))


def _is_nonsense(value: Any, tp: Any, key: str) -> bool:
    """True when ``value`` can never be right for a key of annotation ``tp``."""
    args = typing.get_args(tp)
    optional = type(None) in args
    members = [a for a in args if a is not type(None)]
    if len(members) > 1 and value is not None:  # str | int: nonsense for every member
        return all(_is_nonsense(value, m, key) for m in members)
    base = next((a for a in args if a is not type(None)), tp) if args and optional else tp
    if value is None:
        return not optional
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if key == "overlap":
        return not isinstance(value, dict) and value not in ("megascale", "none")
    if base is bool:
        return not isinstance(value, bool)
    if base in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        if base is int and value != int(value):
            return True
        return value < 0
    if base is str:
        return not isinstance(value, str)
    if typing.get_origin(base) is tuple:
        return not isinstance(value, list)
    return False


# ---------------------------------------------------------------------------------------------
# Mutations


def _dump(data: Any, suffix: str, fmt: str | None = None) -> bytes:
    f = FORMATS.get(fmt) if fmt else None
    if f is not None:
        data = f.wrap(data) if isinstance(data, dict) else data
        if f.dump is not None:
            return f.dump(data)
    if suffix == ".json":
        return json.dumps(data, allow_nan=True).encode()
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def _value_case(fmt: str, base: dict, rng: np.random.Generator, suffix: str) -> Case:
    hints = _hints(fmt, base)
    keys = [k for k in base if k != "kind"] + [k for k in hints if k not in base]
    key = keys[int(rng.integers(len(keys)))]
    pool = WORDS + CONTAINERS + SPECIALS + NUMBERS
    value = pool[int(rng.integers(len(pool)))]
    data = {**base, key: value}
    seen = FORMATS[fmt].as_read(key, value)
    ignored = key not in hints and FORMATS[fmt].extra_keys_ok  # a key the reader skips
    return Case(fmt, f"{key}: {value!r}", not ignored and _is_nonsense(seen, hints.get(key, Any),
                                                                       key),
                _dump(data, suffix, fmt), suffix, key)


def _structure_case(fmt: str, base: dict, rng: np.random.Generator, suffix: str) -> Case:
    choice = int(rng.integers(6))
    if choice == 0:
        data = {**base, "colour": "red"}
        # config.json files carry many keys the suite does not read: an extra one is fine
        return Case(fmt, "unknown key colour", not FORMATS[fmt].extra_keys_ok,
                    _dump(data, suffix, fmt), suffix)
    if choice == 1:
        key = list(base)[int(rng.integers(len(base)))]
        data = {k: v for k, v in base.items() if k != key}
        return Case(fmt, f"key {key} removed", fmt != "job" and key in FORMATS[fmt].required,
                    _dump(data, suffix, fmt), suffix)
    if choice == 2:
        raw = _dump(base, suffix, fmt)
        cut = int(rng.integers(1, len(raw)))
        return Case(fmt, "non-UTF-8 byte inserted", True, raw[:cut] + b"\xff\xfe" + raw[cut:],
                    suffix)
    if choice == 3:
        return Case(fmt, "top level is a list", True, _dump([base], suffix, fmt), suffix)
    if choice == 4:
        return Case(fmt, "top level is a number", True, _dump(42, suffix, fmt), suffix)
    raw = _dump(base, suffix, fmt)
    return Case(fmt, "file truncated", False, raw[: int(rng.integers(1, len(raw)))], suffix)


def make_cases(n: int, seed: int, formats: tuple[str, ...] = DEFAULT_FORMATS) -> list[Case]:
    """``n`` mutated files, the formats taking turns, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    bases = {f: FORMATS[f].bases() for f in formats}
    cases = []
    for i in range(n):
        fmt = formats[i % len(formats)]
        base = bases[fmt][int(rng.integers(len(bases[fmt])))]
        sfx = FORMATS[fmt].suffixes
        suffix = (".json" if rng.random() < 0.3 else ".yaml") if len(sfx) > 1 else sfx[0]
        make = _value_case if rng.random() < 0.75 else _structure_case
        cases.append(make(fmt, base, rng, suffix))
    return cases


# ---------------------------------------------------------------------------------------------
# Running


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):  # pragma: no cover - only on a hang
    raise _Timeout()


def run_case(case: Case, workdir: Path, timeout_s: int = 60) -> Outcome:
    """Run the command that reads the case's file, in-process, and classify the outcome."""
    from tuner.cli import main

    path = workdir / f"input{case.suffix}"
    path.write_bytes(case.text)
    argv = FORMATS[case.format].argv(str(path))
    err, out = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout_s)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 2
    except _Timeout:
        return Outcome(case, "hang", None, "")
    except BaseException as exc:  # noqa: BLE001 - a traceback is what we count
        return Outcome(case, "traceback", None, f"{type(exc).__name__}: {exc}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    text = err.getvalue().strip()
    if rc == 0:
        return Outcome(case, "accepted", rc, text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # a sweep whose points failed exits 1 with one summary line (issue #29): clean too
    ok = (rc == 2 or (rc == 1 and case.format == "sweep")) and len(lines) == 1
    return Outcome(case, "clean" if ok else "traceback", rc, text)


def fuzz(n: int = 400, seed: int = 2026, timeout_s: int = 60,
         memory_limit_bytes: int = 2**30,
         formats: tuple[str, ...] = DEFAULT_FORMATS) -> dict[str, Any]:
    """Run ``n`` cases; returns the counts and the offending cases.

    The memory limit (``NETSIM_MEMORY_LIMIT_BYTES``) is lowered to ``memory_limit_bytes`` so
    that huge-but-valid files are refused by the resource bound instead of taking minutes.
    """
    old_limit = os.environ.get("NETSIM_MEMORY_LIMIT_BYTES")
    os.environ["NETSIM_MEMORY_LIMIT_BYTES"] = str(memory_limit_bytes)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            outcomes = [run_case(c, Path(tmp), timeout_s)
                        for c in make_cases(n, seed, formats)]
    finally:
        if old_limit is None:
            os.environ.pop("NETSIM_MEMORY_LIMIT_BYTES", None)
        else:
            os.environ["NETSIM_MEMORY_LIMIT_BYTES"] = old_limit
    return summarize(outcomes, n, seed)


def summarize(outcomes: list[Outcome], n: int, seed: int) -> dict[str, Any]:
    counts = Counter(o.result for o in outcomes)
    nonsense = [o for o in outcomes if o.case.must_refuse and o.result == "accepted"]
    bad = [o for o in outcomes if o.result in ("traceback", "hang")]
    unnamed = [o for o in outcomes if o.result == "clean" and "input." not in o.stderr]
    keyed = [o for o in outcomes if o.result == "clean" and o.case.key]
    field_named = [o for o in keyed if o.case.key in o.stderr]
    return {
        "cases": n, "seed": seed,
        "by_format": dict(Counter(o.case.format for o in outcomes)),
        "clean_errors": counts["clean"], "accepted": counts["accepted"],
        "tracebacks": counts["traceback"], "hangs": counts["hang"],
        "must_refuse": sum(o.case.must_refuse for o in outcomes),
        "nonsense_accepted": len(nonsense),
        "errors_without_file": len(unnamed),
        "key_errors": len(keyed), "key_errors_naming_the_key": len(field_named),
        "examples": {
            "tracebacks": [f"{o.case.format} {o.case.mutation}: {o.stderr[:200]}" for o in bad],
            "nonsense_accepted": [f"{o.case.format} {o.case.mutation}" for o in nonsense],
            "errors_without_file": [o.stderr[:200] for o in unnamed],
            "key_errors_not_naming_the_key": [f"{o.case.mutation}: {o.stderr[:200]}"
                                              for o in keyed if o not in field_named],
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tests/fuzz/fuzzer.py", description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=400, help="number of mutated files (default 400)")
    p.add_argument("--seed", type=int, default=2026, help="seed of the mutations")
    p.add_argument("--timeout-s", type=int, default=60, help="per-case limit counted as a hang")
    p.add_argument("--formats", default=",".join(DEFAULT_FORMATS),
                   help=f"comma-separated formats, or 'all' ({', '.join(FORMATS)}; default "
                   f"{','.join(DEFAULT_FORMATS)})")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args(argv)
    formats = tuple(FORMATS) if args.formats == "all" else tuple(args.formats.split(","))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        p.error(f"--formats: unknown {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    res = fuzz(args.n, args.seed, args.timeout_s, formats=formats)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in res.items():
            if k != "examples":
                print(f"{k:>20}: {v}")
        for k, v in res["examples"].items():
            for line in v:
                print(f"{k}: {line}")
    return 0 if res["tracebacks"] == res["hangs"] == res["nonsense_accepted"] == 0 else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
