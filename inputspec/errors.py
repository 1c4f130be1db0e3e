"""The one refusal of the package (:class:`InputError`) and the short renderings it uses."""

from __future__ import annotations

import dataclasses
import json
import reprlib
from collections.abc import Mapping
from typing import Any

#: A value not given (distinct from ``None``, which a file may hold as ``null``).
UNSET: Any = type("_Unset", (), {"__repr__": lambda self: "<unset>"})()
#: An error message longer than this is cut (a value or a parser message can be any size).
MAX_MESSAGE_CHARS = 300

#: Renders at most a few items of a few levels: the value may be huge (a 64 MB list).
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict = 2, 4, 4, 3
_REPR.maxset = _REPR.maxfrozenset = _REPR.maxdeque = _REPR.maxarray = 4
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = 60, 40, 60


def cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters (the end replaced by '...')."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class InputError(ValueError):
    """Bad input: one line naming the file, the field, the value, the expectation, an example."""

    def __init__(self, source: str, field: str | None = None, value: Any = UNSET,
                 expected: str | None = None, example: Any = UNSET, *,
                 problem: str | None = None) -> None:
        self.source, self.field, self.value = source, field, value
        self.expected, self.example, self.problem = expected, example, problem
        where = f"{source}: {field}" if field else source
        if problem is not None:
            msg = f"{where}: {problem}"
        else:
            msg = f"{where}: got {show(value)}; expected {expected}"
            if example is not UNSET:
                key = (field or "").rsplit(".", 1)[-1].split("[")[0]
                msg += f" (e.g. {key}: {show_example(example)})" if key else \
                    f" (e.g. {show_example(example)})"
        super().__init__(cut(msg))


def show(value: Any, width: int = 48) -> str:
    """A short, one-line rendering of a value found in a file (never the whole of a big one)."""
    if value is UNSET:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return cut(_REPR.repr(value), width)


def show_example(example: Any) -> str:
    if isinstance(example, bool):
        return "true" if example else "false"
    if isinstance(example, str):
        return example
    if isinstance(example, (list, tuple, dict)):
        return json.dumps(plain(example))
    return str(example)


def plain(value: Any) -> Any:
    """Dataclasses, tuples and mappings as plain dicts and lists (the file form)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.init}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value
