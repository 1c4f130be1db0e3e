"""Sweep specs: what to run (a command or ``module:function``), fixed ``args`` and the points
(``grid`` / ``list`` / ``sample``), validated with errors that name the file and the field."""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import typing
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inputspec import rule
from sweeps.runner import SweepSpec, _distinct_keys, _resolve_function, point_key

# --------------------------------------------------------------------------- sweep specs

#: The most points one sweep spec may give (grid, list or sample): each point is one run and
#: one line of results.jsonl; a 40^8 grid (issue #30) was materialised until MemoryError.
MAX_POINTS = 100_000


@dataclasses.dataclass(frozen=True)
class SampleKeys:
    """``sample:`` of a spec file (``inputspec`` schema)."""

    n: int = rule(min=1, max=MAX_POINTS, example=20)
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


def load_spec(path: str | os.PathLike, commands: Collection[str] = ()) -> SweepSpec:
    """Read and validate a sweep spec (YAML or JSON, ``inputspec``); errors name the file,
    the field and the fix."""
    from inputspec import InputError, read_data

    path = Path(path)
    source = f"sweep spec file {path}"
    raw = read_data(path, "sweep spec")
    check_spec_keys(raw, source)
    try:
        return parse_spec(raw, where=source, commands=commands)
    except InputError:
        raise
    except ValueError as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if msg.startswith(source):
            raise InputError(source, problem=msg[len(source) + 2:]) from None
        raise InputError(source, problem=msg) from None


def parse_spec(raw: Any, where: str = "spec", commands: Collection[str] = ()) -> SweepSpec:
    """Validate a spec given as a mapping (see :func:`load_spec`); ``commands`` are the names
    a ``command:`` may take (the ``netsim`` CLI passes its subcommands)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: a sweep spec is a mapping with command, args and "
                         f"one of grid/list/sample")
    unknown = set(raw) - {"command", "function", "args", "grid", "list", "sample"}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: command "
                         f"(or function), args, grid, list, sample")
    command, function = _target(raw, where, commands)
    args = raw.get("args") or {}
    if not isinstance(args, dict):
        raise ValueError(f"{where}: 'args' must be a mapping of flag: value")
    points = _points(raw, where)
    clash = sorted({k for p in points for k in p} & set(args))
    if clash:
        raise ValueError(f"{where}: {clash} are both fixed in 'args' and swept; keep them in one")
    return SweepSpec(command, function, dict(args), points, raw)


def _target(raw: dict, where: str, commands: Collection[str]) -> tuple[str | None, str | None]:
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
    if target not in commands:
        raise ValueError(f"{where}: 'command' {target!r} is not a netsim subcommand; "
                         f"choose one of {', '.join(commands)} or write module:function")
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
    sizes = [len(v) for v in grid.values()]
    if math.prod(sizes) > MAX_POINTS:
        raise ValueError(f"{where}: grid gives {' x '.join(map(str, sizes))} = "
                         f"{math.prod(sizes):,} points, more than the {MAX_POINTS:,} a sweep may "
                         "run; split it into several specs or use sample")
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*grid.values())]


def _list(points: Any, where: str) -> list[dict]:
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise ValueError(f"{where}: 'list' must be a list of mappings flag: value")
    if len(points) > MAX_POINTS:
        raise ValueError(f"{where}: 'list' gives {len(points):,} points, more than the "
                         f"{MAX_POINTS:,} a sweep may run; split it into several specs")
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
    size = math.prod(_domain_size(v) for v in space.values())
    if n > size:
        raise ValueError(f"{where}: sample.space has {size:,} distinct points, fewer than "
                         f"{n:,} distinct points (sample.n); lower sample.n to at most {size:,}")
    out: dict[str, dict] = {}
    for _ in range(100 * n):
        p = {k: d(rng) for k, d in drawers.items()}
        out.setdefault(point_key(p), p)
        if len(out) == n:
            return list(out.values())
    raise ValueError(f"{where}: sample.space has fewer than {n} distinct points; lower sample.n")


def _domain_size(dom: Any) -> float:
    """Distinct values a ``sample.space`` domain can draw (infinite for a float range)."""
    if isinstance(dom, list):
        return len({point_key({"v": v}) for v in dom})
    if dom.get("int"):  # draws are round(x) for x in [low, high): at most this many
        return max(1, round(float(dom["high"])) - round(float(dom["low"])) + 1)
    return math.inf


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
