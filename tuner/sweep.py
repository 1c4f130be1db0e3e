"""Parameter sweeps on Dask: one way to fan work out (``netsim sweep`` and the CC search).

Two layers:

:func:`run_points`
    the engine. Calls ``fn(point)`` for every point (a dict) on a Dask cluster: a local
    ``dask.distributed`` cluster of ``workers`` processes by default, an existing one when
    ``scheduler`` is an address (``tcp://HOST:PORT``), or in this process when ``workers=0``.
    With ``out_dir`` every finished point is appended to ``out_dir/results.jsonl`` as it
    arrives, and a rerun skips the points already there (resume). Returns one
    :class:`PointResult` per point, in the order of ``points``.
:func:`run_sweep`
    a sweep spec (YAML, :func:`load_spec`): a ``netsim`` subcommand or a ``module:function``,
    fixed ``args`` and a ``grid`` / ``list`` / ``sample`` of points; keeps ``spec.yaml`` and
    ``results.csv`` beside ``results.jsonl``.

Crash safety: only the calling process writes ``results.jsonl``; each record is one whole line
written with a single ``write``, then flushed and fsynced. A kill (SIGKILL included) can leave at
most a torn last line, which :func:`read_results` ignores and the next run truncates before it
appends, so a point is never recorded twice and never half; the points in flight are lost and run
again.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib
import io
import itertools
import json
import math
import os
import sys
import threading
import time
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from inputspec import rule

RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"
SPEC_COPY = "spec.yaml"
DIST_EXTRA = "pip install 'roce-netsim[dist]'  (dask[distributed])"


@dataclasses.dataclass
class PointResult:
    """One finished point: what ran, whether it worked, what it returned, how long it took."""

    point: dict
    args: dict
    status: str  # "ok" or "error"
    error: str | None
    output: Any
    wall_s: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_record(self) -> dict:
        """The JSON record of ``results.jsonl`` (keys: point, args, status, error, output, wall_s)."""
        return {"point": _jsonable(self.point), "args": _jsonable(self.args),
                "status": self.status, "error": self.error,
                "output": _jsonable(self.output), "wall_s": round(self.wall_s, 6)}

    @classmethod
    def from_record(cls, rec: Mapping) -> PointResult:
        return cls(dict(rec["point"]), dict(rec.get("args") or {}), rec["status"],
                   rec.get("error"), rec.get("output"), float(rec.get("wall_s") or 0.0))


@dataclasses.dataclass
class SweepSummary:
    """What ``netsim sweep --json`` prints."""

    points: int
    ok: int
    errors: int
    resumed: int  # points found finished in the results file and not run again
    ran: int
    wall_s: float
    out_dir: str


# --------------------------------------------------------------------------- point identity


def point_key(point: Mapping) -> str:
    """Canonical identity of a point: its JSON with sorted keys."""
    return json.dumps(_jsonable(dict(point)), sort_keys=True, separators=(",", ":"))


def _jsonable(obj: Any) -> Any:
    """numpy scalars/arrays, dataclasses, tuples and non-finite floats as plain JSON types."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.generic, np.ndarray)):
        return _jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# --------------------------------------------------------------------------- the results file


def read_results(path: str | os.PathLike) -> list[PointResult]:
    """Records of a ``results.jsonl``; a torn last line (a killed writer) is ignored.

    A malformed line anywhere else is corruption and raises ``ValueError``.
    """
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    # the bytes after the last newline are a torn line (a writer killed mid-write): ignored
    complete = data.split(b"\n")[:-1]
    out = []
    for i, raw in enumerate(complete, 1):
        if not raw.strip():
            continue
        try:
            out.append(PointResult.from_record(json.loads(raw)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: line {i} is not a result record ({exc}); "
                             f"move the file away to start over") from exc
    return out


class _ResultWriter:
    """Appends whole records to ``results.jsonl``: one write, flush, fsync per line."""

    def __init__(self, path: Path):
        self.path = path
        self._truncate_torn_tail()
        self._fh = open(path, "ab")  # noqa: SIM115 - closed in close()

    def _truncate_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(keep)
                fh.flush()
                os.fsync(fh.fileno())

    def append(self, result: PointResult) -> None:
        line = json.dumps(result.to_record(), separators=(",", ":")) + "\n"
        self._fh.write(line.encode())
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


# --------------------------------------------------------------------------- execution


def _call(fn: Callable[[dict], Any], point: dict, args: dict) -> PointResult:
    """Run one point and catch everything: a failing point is a record, not a crash."""
    t0 = time.perf_counter()
    try:
        out = fn(point)
        status, error = "ok", None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a failing point is recorded
        out, status, error = None, "error", _one_line(exc)
    return PointResult(point, {**args, **point}, status, error, _jsonable(out),
                       time.perf_counter() - t0)


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or repr(exc)
    return f"{type(exc).__name__}: {msg}"[:500]


def _import_dask():
    try:
        from dask import distributed
    except ImportError as exc:
        raise ValueError(f"sweeps run on Dask, which is not installed: {DIST_EXTRA}") from exc
    return distributed


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None):
    """A Dask client: on ``scheduler`` (``tcp://HOST:PORT``) or on a new local cluster.

    The local cluster has ``workers`` single-threaded worker processes (default: the
    machine's cores). Reuse one client across many :func:`run_points` calls to pay the
    cluster's start-up once.
    """
    distributed = _import_dask()
    if scheduler:
        client = distributed.Client(scheduler, timeout="20s")
        try:
            yield client
        finally:
            client.close()
        return
    import logging

    import dask

    n = workers or os.cpu_count() or 1
    # no fixed dashboard port (":8787" by default, taken when another cluster runs; None
    # does not turn it off); generous timeouts: worker processes start slowly on a loaded machine (shared CI cores)
    with dask.config.set({"distributed.comm.timeouts.connect": "120s",
                          "distributed.comm.timeouts.tcp": "120s"}), \
            distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def _completed_in_process(fn, todo: list[dict], args: dict) -> Iterable[PointResult]:
    for p in todo:
        yield _call(fn, p, args)


def _completed_on_dask(client, fn, todo: list[dict], args: dict) -> Iterable[PointResult]:
    distributed = _import_dask()
    shared = client.scatter(fn, broadcast=True, hash=False)  # sent to each worker once
    futures = client.map(_call, [shared] * len(todo), todo, [args] * len(todo), pure=False)
    point_of = {f.key: p for f, p in zip(futures, todo, strict=True)}
    for fut in distributed.as_completed(futures):
        try:
            yield fut.result()
        except Exception as exc:  # noqa: BLE001 - the worker died (KilledWorker) or unpickling
            p = point_of[fut.key]
            yield PointResult(p, {**args, **p}, "error", _one_line(exc), None, 0.0)
        fut.release()


def run_points(fn: Callable[[dict], Any], points: Sequence[Mapping],
               out_dir: str | os.PathLike | None = None, workers: int | None = None,
               scheduler: str | None = None, progress: bool = True, *,
               client=None, args: Mapping | None = None, desc: str = "sweep",
               on_result: Callable[[PointResult], None] | None = None,
               retry_errors: bool = False) -> list[PointResult]:
    """Run ``fn(point)`` for every point and return one :class:`PointResult` per point.

    Parameters
    ----------
    fn
        Called with one dict (the point); returns what the point produced (JSON-able when
        ``out_dir`` is given). An exception makes that point's status ``"error"`` with the
        error in one line; the other points go on. Must be importable or picklable by
        cloudpickle (module-level functions, ``functools.partial`` of them).
    points
        Dicts, each distinct (:func:`point_key`); duplicates are refused.
    out_dir
        Append every result to ``out_dir/results.jsonl`` as it finishes and skip the points
        already recorded there (resume). None keeps results in memory only.
    workers
        Processes of the local Dask cluster (default: the machine's cores); 0 runs every
        point in this process, without Dask.
    scheduler
        Address of an existing Dask scheduler (``tcp://HOST:PORT``) instead of a local cluster.
    progress
        A progress bar with ETA on stderr.
    client
        An open Dask client (:func:`dask_client`) to use instead of starting one.
    args
        Fixed arguments recorded with each point (``PointResult.args = {**args, **point}``).
    on_result
        Called in this process with each result as it finishes (after it is recorded).
    retry_errors
        Run again the points recorded with status ``error`` in ``out_dir`` (their old
        records are removed first, atomically) instead of keeping them.

    Returns
    -------
    list[PointResult]
        In the order of ``points``; points resumed from ``out_dir`` carry their recorded
        output (as JSON), the others what ``fn`` returned (made JSON-able).
    """
    points = [dict(p) for p in points]
    keys = _distinct_keys(points)
    args = dict(args or {})
    if retry_errors and out_dir is not None:
        drop_errors(Path(out_dir) / RESULTS_JSONL, set(keys))
    done = _resume(out_dir, keys)
    todo = [p for p, k in zip(points, keys, strict=True) if k not in done]
    writer = _ResultWriter(Path(out_dir) / RESULTS_JSONL) if out_dir is not None else None
    try:
        with _results_stream(fn, todo, args, workers, scheduler, client) as stream, \
                _progress_bar(len(points), len(points) - len(todo), desc, progress) as bar:
            for res in stream:
                if writer:
                    writer.append(res)
                done[point_key(res.point)] = res
                bar.update(1)
                if on_result:
                    on_result(res)
    finally:
        if writer:
            writer.close()
    return [done[k] for k in keys]


def drop_errors(path: Path, keys: set[str]) -> int:
    """Remove the error records of ``keys`` from a results file (write aside, fsync, rename)."""
    if not path.exists():
        return 0
    records = read_results(path)
    keep = [r for r in records if r.ok or point_key(r.point) not in keys]
    if len(keep) == len(records):
        return 0
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "wb") as fh:
        for r in keep:
            fh.write((json.dumps(r.to_record(), separators=(",", ":")) + "\n").encode())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return len(records) - len(keep)


def _distinct_keys(points: list[dict]) -> list[str]:
    keys = [point_key(p) for p in points]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"point {dup} appears more than once; every point must be distinct")
    return keys


def _resume(out_dir, keys: list[str]) -> dict[str, PointResult]:
    if out_dir is None:
        return {}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    wanted = set(keys)
    done: dict[str, PointResult] = {}
    for r in read_results(Path(out_dir) / RESULTS_JSONL):
        k = point_key(r.point)
        if k in wanted:
            done.setdefault(k, r)
    return done


@contextlib.contextmanager
def _results_stream(fn, todo, args, workers, scheduler, client):
    if not todo:
        yield iter(())
    elif client is not None:
        yield _completed_on_dask(client, fn, todo, args)
    elif workers == 0 and not scheduler:
        yield _completed_in_process(fn, todo, args)
    else:
        with dask_client(workers, scheduler) as c:
            yield _completed_on_dask(c, fn, todo, args)


@contextlib.contextmanager
def _progress_bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, desc=desc, unit="pt", file=sys.stderr,
               disable=not enabled, dynamic_ncols=True, mininterval=0.5)
    try:
        yield bar
    finally:
        bar.close()


# --------------------------------------------------------------------------- sweep specs


@dataclasses.dataclass
class SweepSpec:
    """A validated sweep spec: what to run (``command`` or ``function``), ``args``, ``points``."""

    command: str | None  # a netsim subcommand ...
    function: str | None  # ... or "module:function"
    args: dict
    points: list[dict]
    raw: dict  # the spec as loaded, compared on resume


@dataclasses.dataclass(frozen=True)
class SampleKeys:
    """``sample:`` of a spec file (``inputspec`` schema)."""

    n: int = rule(min=1, max=10**6, example=20)
    seed: int = rule(min=0, max=2**63 - 1, example=7)
    space: dict[str, Any] = rule(example={"load": {"low": 0.1, "high": 0.9}})


@dataclasses.dataclass(frozen=True)
class RangeKeys:
    """A ``sample.space`` range ``{low, high, log, int}`` (``inputspec`` schema)."""

    low: float = rule(example=0.1)
    high: float = rule(example=0.9)
    log: bool = False
    int: bool = False


_List = typing.List  # noqa: UP006 - SpecKeys has a field named list, which shadows the builtin


@dataclasses.dataclass(frozen=True)
class SpecKeys:
    """The keys of a sweep spec file and their types (``inputspec`` schema); the checks
    across keys stay in :func:`parse_spec`."""

    command: str | None = rule(None, example="simulate")
    function: str | None = rule(None, example="tests.tuner.sweep_fns:square")
    args: dict[str, Any] | None = rule(None, example={"fabric": "fat-tree-k4"})
    grid: dict[str, _List[Any]] | None = rule(None, example={"load": [0.5, 0.9]})
    list: _List[dict[str, Any]] | None = rule(None, example=[{"load": 0.5}])
    sample: SampleKeys | None = None


def check_spec_keys(raw: Any, source: str) -> None:
    """Types of the spec keys, ``sample`` and its ranges (one ``InputError`` naming
    ``source``, the key, the value and an example)."""
    from inputspec import InputError, from_dict

    if not isinstance(raw, Mapping):
        raise InputError(source, None, raw, "a mapping with command, args and one of "
                         "grid/list/sample", {"command": "simulate", "grid": {"load": [0.5]}})
    spec = from_dict(SpecKeys, raw, source)
    space = spec.sample.space if spec.sample else {}
    for name, dom in space.items():
        where = f"sample.space.{name}"
        if isinstance(dom, Mapping):
            from_dict(RangeKeys, dom, source, prefix=where)
        elif not isinstance(dom, list) or not dom:
            raise InputError(source, where, dom, "a non-empty list of choices or "
                             "{low, high, log, int}", {"low": 1, "high": 64, "log": True})


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and validate a sweep spec (YAML or JSON, ``inputspec``); errors name the file,
    the field and the fix."""
    from inputspec import InputError, read_data

    path = Path(path)
    source = f"sweep spec file {path}"
    raw = read_data(path, "sweep spec")
    check_spec_keys(raw, source)
    try:
        return parse_spec(raw, where=source)
    except InputError:
        raise
    except ValueError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if msg.startswith(source):
            raise InputError(source, problem=msg[len(source) + 2:]) from None
        raise InputError(source, problem=msg) from None


def parse_spec(raw: Any, where: str = "spec") -> SweepSpec:
    """Validate a spec given as a mapping (see :func:`load_spec`)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: a sweep spec is a mapping with command, args and "
                         f"one of grid/list/sample")
    unknown = set(raw) - {"command", "function", "args", "grid", "list", "sample"}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: command "
                         f"(or function), args, grid, list, sample")
    command, function = _target(raw, where)
    args = raw.get("args") or {}
    if not isinstance(args, dict):
        raise ValueError(f"{where}: 'args' must be a mapping of flag: value")
    points = _points(raw, where)
    clash = sorted({k for p in points for k in p} & set(args))
    if clash:
        raise ValueError(f"{where}: {clash} are both fixed in 'args' and swept; keep them in one")
    return SweepSpec(command, function, dict(args), points, raw)


def _target(raw: dict, where: str) -> tuple[str | None, str | None]:
    cmd, fn = raw.get("command"), raw.get("function")
    if bool(cmd) == bool(fn):
        raise ValueError(f"{where}: give exactly one of 'command' (a netsim subcommand, or "
                         f"module:function) and 'function'")
    target = str(cmd or fn)
    if ":" in target:
        _resolve_function(target)  # fail now, in this process, with a clear error
        return None, target
    if fn:
        raise ValueError(f"{where}: 'function' must be written module:function, got {target!r}")
    from tuner.cli import SUBCOMMANDS

    if target not in SUBCOMMANDS:
        raise ValueError(f"{where}: 'command' {target!r} is not a netsim subcommand; "
                         f"choose one of {', '.join(SUBCOMMANDS)} or write module:function")
    return target, None


def _points(raw: dict, where: str) -> list[dict]:
    kinds = [k for k in ("grid", "list", "sample") if k in raw]
    if len(kinds) != 1:
        raise ValueError(f"{where}: give exactly one of 'grid', 'list' and 'sample' "
                         f"(got {kinds or 'none'})")
    kind = kinds[0]
    points = {"grid": _grid, "list": _list, "sample": _sample}[kind](raw[kind], where)
    if not points:
        raise ValueError(f"{where}: '{kind}' gives no point")
    _distinct_keys(points)
    return points


def _grid(grid: Any, where: str) -> list[dict]:
    if not isinstance(grid, dict) or not grid:
        raise ValueError(f"{where}: 'grid' must map each flag to a list of values")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"{where}: grid.{k} must be a non-empty list of values")
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


def _list(points: Any, where: str) -> list[dict]:
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise ValueError(f"{where}: 'list' must be a list of mappings flag: value")
    return [dict(p) for p in points]


def _sample(sample: Any, where: str) -> list[dict]:
    """``sample: {n, seed, space: {flag: [choices] | {low, high, log?, int?}}}``, distinct points."""
    if not isinstance(sample, dict) or not {"n", "seed", "space"} <= set(sample):
        raise ValueError(f"{where}: 'sample' needs n, seed and space (flag: [choices] or "
                         f"{{low, high, log, int}})")
    n, space = int(sample["n"]), sample["space"]
    if n < 1 or not isinstance(space, dict) or not space:
        raise ValueError(f"{where}: sample.n must be >= 1 and sample.space a non-empty mapping")
    rng = np.random.default_rng(int(sample["seed"]))
    drawers = {k: _drawer(k, v, where) for k, v in space.items()}
    out: dict[str, dict] = {}
    for _ in range(100 * n):
        p = {k: d(rng) for k, d in drawers.items()}
        out.setdefault(point_key(p), p)
        if len(out) == n:
            return list(out.values())
    raise ValueError(f"{where}: sample.space has fewer than {n} distinct points; lower sample.n")


def _drawer(name: str, dom: Any, where: str) -> Callable[[np.random.Generator], Any]:
    if isinstance(dom, list) and dom:
        return lambda rng: dom[int(rng.integers(len(dom)))]
    if isinstance(dom, dict) and {"low", "high"} <= set(dom):
        lo, hi = float(dom["low"]), float(dom["high"])
        log, as_int = bool(dom.get("log")), bool(dom.get("int"))
        if not lo < hi or (log and lo <= 0):
            raise ValueError(f"{where}: sample.space.{name} needs low < high (and low > 0 "
                             f"with log: true)")

        def draw(rng: np.random.Generator) -> Any:
            u = rng.random()
            x = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if log \
                else lo + u * (hi - lo)
            return int(round(x)) if as_int else float(x)
        return draw
    raise ValueError(f"{where}: sample.space.{name} must be a list of choices or "
                     f"{{low, high, log, int}}")


# --------------------------------------------------------------------------- running a target


def _resolve_function(target: str) -> Callable:
    mod_name, _, fn_name = target.partition(":")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"function {target!r} cannot be imported ({exc}); check the module "
                         f"is on PYTHONPATH and the name is right") from exc
    if not callable(fn):
        raise ValueError(f"{target!r} is not callable")
    return fn


@dataclasses.dataclass(frozen=True)
class FunctionPoint:
    """Calls ``module:function(**args, **point)``; picklable by reference."""

    target: str
    args: dict

    def __call__(self, point: dict) -> Any:
        out = _resolve_function(self.target)(**{**self.args, **point})
        if not isinstance(out, Mapping):
            raise TypeError(f"{self.target} returned {type(out).__name__}, not a dict")
        return out


_CLI_LOCK = threading.Lock()  # stdout is per process: one captured CLI call at a time


@dataclasses.dataclass(frozen=True)
class CommandPoint:
    """Runs ``netsim COMMAND --flag value ... --json`` in the worker and returns its JSON."""

    command: str
    args: dict

    def __call__(self, point: dict) -> Any:
        from tuner.cli import main

        argv = [self.command, *cli_flags({**self.args, **point}), "--json"]
        out, err = io.StringIO(), io.StringIO()
        with _CLI_LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse rejected a flag: its message is on stderr
                rc = exc.code if isinstance(exc.code, int) else 2
        if rc:
            lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
            raise RuntimeError(lines[-1] if lines else f"netsim {self.command} exited {rc}")
        return json.loads(out.getvalue())


def cli_flags(args: Mapping) -> list[str]:
    """``{fail_links: [1, 2], no_pxn: true, size: 4MB}`` -> ``--fail-links 1,2 --no-pxn --size 4MB``."""
    flags: list[str] = []
    for k, v in args.items():
        flag = "--" + str(k).replace("_", "-")
        if v is None or v is False:
            continue
        if v is True:
            flags.append(flag)
        elif isinstance(v, list):
            flags += [flag, ",".join(str(x) for x in v)]
        else:
            flags += [flag, str(v)]
    return flags


def point_function(spec: SweepSpec) -> Callable[[dict], Any]:
    """The callable that runs one point of ``spec``."""
    if spec.function:
        return FunctionPoint(spec.function, spec.args)
    return CommandPoint(spec.command, spec.args)


# --------------------------------------------------------------------------- a whole sweep


def run_sweep(spec: SweepSpec, out_dir: str | os.PathLike, workers: int | None = None,
              scheduler: str | None = None, progress: bool = True,
              spec_text: str | None = None, retry_errors: bool = False) -> SweepSummary:
    """Run ``spec`` into ``out_dir`` (resuming), write ``results.csv``, return the summary."""
    out = Path(out_dir)
    claim_dir(out, spec, spec_text)
    t0 = time.perf_counter()
    keys = [point_key(p) for p in spec.points]
    if retry_errors:
        drop_errors(out / RESULTS_JSONL, set(keys))
    n_before = len(_resume(out, keys))
    results = run_points(point_function(spec), spec.points, out_dir=out, workers=workers,
                         scheduler=scheduler, progress=progress, args=spec.args)
    write_csv(out / RESULTS_CSV, results)
    ok = sum(r.ok for r in results)
    return SweepSummary(len(results), ok, len(results) - ok, n_before,
                        len(results) - n_before, round(time.perf_counter() - t0, 3), str(out))


def claim_dir(out: Path, spec: SweepSpec, spec_text: str | None = None) -> None:
    """Keep a copy of the spec in ``out``; refuse a directory that holds a different one."""
    out.mkdir(parents=True, exist_ok=True)
    copy = out / SPEC_COPY
    if copy.exists():
        kept = yaml.safe_load(copy.read_text())
        if kept != spec.raw:
            raise ValueError(f"{out} holds the results of a different sweep ({copy}); "
                             f"use another -o DIR, or delete {out} to start over")
        return
    tmp = copy.with_suffix(".yaml.tmp")
    tmp.write_text(spec_text if spec_text is not None else yaml.safe_dump(spec.raw,
                                                                          sort_keys=False))
    os.replace(tmp, copy)


def flatten(record: Mapping, prefix: str = "") -> dict:
    """Nested dicts as dotted columns; lists as JSON text."""
    flat: dict = {}
    for k, v in record.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            flat.update(flatten(v, name + "."))
        elif isinstance(v, list):
            flat[name] = json.dumps(v)
        else:
            flat[name] = v
    return flat


def write_csv(path: Path, results: Sequence[PointResult]) -> None:
    """``results.csv``: one row per point in spec order, nested output as dotted columns."""
    rows = [flatten(r.to_record()) for r in results]
    cols: dict[str, None] = {}
    for row in rows:
        cols.update(dict.fromkeys(row))
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(cols))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
