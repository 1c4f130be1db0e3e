"""A sweep spec's flags checked against its command's parser before any point runs.

``netsim sweep`` turns each point into ``netsim COMMAND --flag value ...`` (``cli_flags``). A
flag the command does not have, ``false`` given to a flag that takes a value (``fabric:
false`` was dropped and the default fabric used) or a value the flag's type or choices refuse
would fail, or silently change, every point: they are refused when the spec is loaded, naming
the spec file and the key (``args.fabric``, ``grid.k[1]``, ``list[3].load``,
``sample.space.seed``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from typing import Any

from inputspec import InputError


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``netsim COMMAND``."""
    from tuner.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {opt: a for a in parser._actions for opt in a.option_strings if opt.startswith("--")}


def _values(raw: Mapping) -> Iterator[tuple[str, str, Any]]:
    """(field path, flag key, value) of every fixed or swept value of a spec."""
    for k, v in (raw.get("args") or {}).items():
        yield f"args.{k}", k, v
    for k, vs in (raw.get("grid") or {}).items():
        for i, v in enumerate(vs):
            yield f"grid.{k}[{i}]", k, v
    for i, point in enumerate(raw.get("list") or []):
        for k, v in point.items():
            yield f"list[{i}].{k}", k, v
    for k, dom in ((raw.get("sample") or {}).get("space") or {}).items():
        for i, v in enumerate(dom if isinstance(dom, list) else [dom.get("low")]):
            yield f"sample.space.{k}" + (f"[{i}]" if isinstance(dom, list) else ""), k, v


def _problem(action: argparse.Action | None, flag: str, value: Any) -> str | None:
    """Why ``--flag value`` would not do what the spec says, or None."""
    if action is None:
        return f"the command has no flag {flag}"
    takes_value = action.nargs != 0
    if not takes_value:
        return None if isinstance(value, bool) else f"{flag} is a switch: give true or false"
    if isinstance(value, bool):
        return (f"{flag} takes a value; false would drop it and run the default (remove the "
                "key for the default)") if value is False else f"{flag} takes a value, not true"
    if value is None:
        return None
    text = ",".join(str(x) for x in value) if isinstance(value, list) else str(value)
    if callable(action.type):
        try:
            text = action.type(text)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            return f"{flag} does not take {text!r} ({str(exc).splitlines()[0][:80]})"
    if action.choices is not None and text not in action.choices:
        return f"{flag} takes one of {', '.join(map(str, action.choices))}"
    return None


def check_flags(raw: Mapping, command: str, source: str) -> None:
    """Refuse the first value of spec ``raw`` that ``netsim COMMAND`` would not take."""
    flags = _flags(command_parser(command))
    checked: set[tuple[str, str]] = set()
    for field, key, value in _values(raw):
        flag = "--" + str(key).replace("_", "-")
        seen = (flag, repr(value))
        if seen in checked:
            continue
        checked.add(seen)
        problem = _problem(flags.get(flag), flag, value)
        if problem:
            raise InputError(source, problem=f"{field}: got {value!r}; {problem} "
                             f"(netsim {command} --help)")
