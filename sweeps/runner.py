"""Running sweeps on Dask: the points, the crash-safe results file, resume, a whole spec."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

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


@dataclasses.dataclass
class SweepSpec:
    """A validated sweep spec: what to run (``command`` or ``function``), ``args``, ``points``."""

    command: str | None  # a netsim subcommand ...
    function: str | None  # ... or "module:function"
    args: dict
    points: list[dict]
    raw: dict  # the spec as loaded, compared on resume


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


#: How a point whose process died is recorded: "worker died (exit code 3)".
DIED = "worker died"


def _death(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{DIED} (killed by {name})"
    return f"{DIED} (exit code {code})"


class _PointProcess:
    """A child process forked from a Dask worker that runs points one after another, so a
    point that ends its process fails alone while per-process caches (``lru_cache``) live on
    from point to point. Requests and results travel as length-prefixed pickles."""

    def __init__(self) -> None:
        self.pid = -1
        self.req_w = self.res_r = -1

    def alive(self) -> bool:
        return self.pid > 0

    def start(self) -> None:
        req_r, self.req_w = os.pipe()
        self.res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: serve until the worker closes the pipe
            os.close(self.req_w)
            os.close(self.res_r)
            code = 0
            try:
                _serve(req_r, res_w)
            except BaseException:  # noqa: BLE001 - a broken pipe: the worker is gone
                code = 70
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        os.close(req_r)
        os.close(res_w)
        self.pid = pid

    def run(self, fn, point: dict, args: dict) -> PointResult:
        import cloudpickle

        if not self.alive():
            self.start()
        t0 = time.perf_counter()
        try:
            _send(self.req_w, cloudpickle.dumps((fn, point, args)))
            data = _recv(self.res_r)
        except OSError:
            data = None
        if data is not None:
            import pickle

            return pickle.loads(data)
        status = self.reap()
        return PointResult(point, {**args, **point}, "error", _death(status), None,
                           time.perf_counter() - t0)

    def reap(self) -> int:
        for fd in (self.req_w, self.res_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        _, status = os.waitpid(self.pid, 0)
        self.pid = -1
        return status


def _send(fd: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _recv(fd: int) -> bytes | None:
    """One message, or None at end of file (the other side is gone)."""
    head = _read_exact(fd, 8)
    return None if head is None else _read_exact(fd, int.from_bytes(head, "little"))


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _serve(req_r: int, res_w: int) -> None:
    import pickle

    while (msg := _recv(req_r)) is not None:
        fn, point, args = pickle.loads(msg)
        res = _call(fn, point, args)
        try:
            data = pickle.dumps(res)
        except Exception as exc:  # noqa: BLE001 - an output pickle cannot carry
            data = pickle.dumps(PointResult(point, res.args, "error", _one_line(exc), None,
                                            res.wall_s))
        _send(res_w, data)


_PROCESSES: dict[int, _PointProcess] = {}  # worker thread -> its point process


def _call_isolated(fn: Callable[[dict], Any], point: dict, args: dict) -> PointResult:
    """:func:`_call` in this worker thread's point process (:class:`_PointProcess`): a point
    that ends its process (``os._exit``, a signal, the kernel's OOM killer) fails alone with
    the cause named, and the Dask worker and its other points live on. Without ``fork``
    (Windows), :func:`_call` itself."""
    if not hasattr(os, "fork"):
        return _call(fn, point, args)
    import threading

    proc = _PROCESSES.setdefault(threading.get_ident(), _PointProcess())
    return proc.run(fn, point, args)


def _call_on_worker(fn: Callable[[dict], Any], point: dict, args: dict
                    ) -> tuple[PointResult, str | None]:
    """The Dask task of a point: its result (isolated) and the worker that ran it."""
    from dask.distributed import get_worker

    try:
        where = get_worker().address
    except ValueError:  # not on a worker
        where = None
    return _call_isolated(fn, point, args), where


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
    """Each point's result as it finishes. A point whose process died runs once more on
    another worker; dying again, it is recorded with both causes."""
    distributed = _import_dask()
    shared = client.scatter(fn, broadcast=True, hash=False)  # sent to each worker once
    futures = client.map(_call_on_worker, [shared] * len(todo), todo, [args] * len(todo),
                         pure=False)
    point_of = {f.key: p for f, p in zip(futures, todo, strict=True)}
    retried: dict[str, str] = {}  # key of a retry -> the first attempt's cause
    pending = distributed.as_completed(futures)
    for fut in pending:
        p = point_of[fut.key]
        try:
            res, where = fut.result()
        except Exception as exc:  # noqa: BLE001 - the worker itself died, or unpickling
            lost = type(exc).__name__ in ("KilledWorker", "FutureCancelledError",
                                          "CancelledError")
            why = f"{DIED} while running it: {_one_line(exc)}" if lost else _one_line(exc)
            res, where = PointResult(p, {**args, **p}, "error", why, None, 0.0), None
        fut.release()
        first = retried.pop(fut.key, None)
        if first is not None and not res.ok and (res.error or "").startswith(DIED):
            res.error = f"{first}, and again when retried on another worker: {res.error}"
        elif first is None and not res.ok and (res.error or "").startswith(DIED):
            again = _resubmit(client, shared, p, args, avoid=where)
            point_of[again.key] = p
            retried[again.key] = res.error
            pending.add(again)
            continue
        yield res


def _resubmit(client, shared, point: dict, args: dict, avoid: str | None):
    """Submit a point again, on a worker other than ``avoid`` when there is one."""
    others = [w for w in client.scheduler_info()["workers"] if w != avoid]
    return client.submit(_call_on_worker, shared, point, args, pure=False,
                         workers=others or None, allow_other_workers=not others)


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


def point_function(spec: SweepSpec, command_point=None) -> Callable[[dict], Any]:
    """The callable that runs one point of ``spec``."""
    if spec.function:
        return FunctionPoint(spec.function, spec.args)
    if command_point is None:
        raise ValueError(f"spec command {spec.command!r} needs a command runner (netsim sweep)")
    return command_point(spec.command, spec.args)


# --------------------------------------------------------------------------- a whole sweep


def run_sweep(spec: SweepSpec, out_dir: str | os.PathLike, workers: int | None = None,
              scheduler: str | None = None, progress: bool = True,
              spec_text: str | None = None, retry_errors: bool = False,
              command_point: Callable[[str, dict], Callable[[dict], Any]] | None = None,
              ) -> SweepSummary:
    """Run ``spec`` into ``out_dir`` (resuming), write ``results.csv``, return the summary.
    ``command_point(command, args)`` makes the callable of a ``command:`` spec (the ``netsim``
    CLI passes its own)."""
    out = Path(out_dir)
    claim_dir(out, spec, spec_text)
    t0 = time.perf_counter()
    keys = [point_key(p) for p in spec.points]
    if retry_errors:
        drop_errors(out / RESULTS_JSONL, set(keys))
    n_before = len(_resume(out, keys))
    results = run_points(point_function(spec, command_point), spec.points, out_dir=out, workers=workers,
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
