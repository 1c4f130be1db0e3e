"""Shared rendering for every subcommand: ``--json`` for scripts, aligned tables for people."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any


class UsageError(Exception):
    """Bad input detected at the CLI boundary; printed as one line, exit status 2."""


def add_command(sub, name: str, help: str, description: str) -> argparse.ArgumentParser:
    """Register subcommand ``name`` (one line in ``netsim --help``, a paragraph in its own)."""
    return sub.add_parser(name, help=help, description=description)


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add the standard ``--json`` flag."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document on stdout instead of tables"
    )


def _jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses and non-finite floats to JSON types."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy scalar or array
        return _jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any) -> str:
    """Serialise ``obj`` as stable, indented JSON (sorted keys are not forced: order is meaning)."""
    return json.dumps(_jsonable(obj), indent=2)


def print_json(obj: Any, file=None) -> None:
    print(dumps(obj), file=file or sys.stdout)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], floatfmt: str = ".3f") -> str:
    """Render rows as a right-aligned text table (first column left-aligned)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return format(v, floatfmt)
        return str(v)

    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    def line(cells: Sequence[str]) -> str:
        parts = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False))]
        return "  ".join(parts).rstrip()
    out = [line(list(headers)), line(["-" * w for w in widths])]
    out += [line(r) for r in body]
    return "\n".join(out)


def progress(iterable=None, total=None, desc: str = "", enabled: bool = True):
    """A tqdm progress bar on stderr (silent when not a TTY unless forced), or the bare iterable."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return iterable
    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, disable=not enabled, leave=False,
                **_size_fallback())


def _size_fallback() -> dict:
    """A terminal that reports a 0 x 0 size (a fresh pty, some container shells) makes tqdm
    draw nothing; give it 100 x 24 there."""
    import os

    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    if size.columns <= 0:
        out["ncols"] = 100
    if size.lines <= 0:
        out["nrows"] = 24
    return out
