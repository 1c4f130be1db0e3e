"""Parsing YAML and JSON text, bounded: no YAML aliases, no duplicate keys, no deep nesting.

A YAML alias (``*name``) repeats a node without repeating its text, so nine lines can expand
to 9^9 values (the "billion laughs"): aliases are refused once the document is composed,
before anything is built (a node reached twice in the graph). A key given twice in one mapping is refused naming the key (YAML and
JSON), instead of the last value silently winning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inputspec.errors import InputError, show
from inputspec.files import MAX_FILE_BYTES, read_text

#: YAML text longer than this is refused before parsing: PyYAML with libyaml builds about
#: 0.4 MB/s of CPU (1.1 MB of `key: [1, 2.5, abc]` lines in 2.5 s on this project's shared
#: 2-core machine, against 46 MB/s for the same data as JSON), so a 64 MiB YAML file would run
#: for minutes; 16 MiB is under a minute, and large data belongs in JSON.
MAX_YAML_CHARS = 16 * 2**20


class _Refused(Exception):
    """A parse-time refusal; the message is the problem, the caller adds the file."""


def _refuse_aliases(root) -> None:
    """Walk the composed node graph; a node reached twice was repeated by an alias."""
    import yaml

    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise _Refused("YAML aliases (*name) are not accepted; write out the value "
                           f"anchored on line {node.start_mark.line + 1}")
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _yaml_loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster when present

    class BoundedLoader(base):
        """PyYAML's safe loader without aliases and without duplicate keys."""

        def get_single_data(self):
            node = self.get_single_node()
            if node is None:
                return None
            _refuse_aliases(node)
            return self.construct_document(node)

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base class refuses it
                    break
                if duplicate:
                    raise _Refused(f"line {key_node.start_mark.line + 1}: duplicate key "
                                   f"{show(key)} (a key may appear once in a mapping)")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return BoundedLoader


_LOADER: type | None = None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {show(key)} (a key may appear once in an object)")
        out[key] = value
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a file may hold")


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` without aliases and duplicate keys (``_Refused`` otherwise)."""
    global _LOADER
    if _LOADER is None:
        _LOADER = _yaml_loader()
    loader = _LOADER(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_text(text: str, fmt: str, source: str, *, nonfinite: bool = True) -> Any:
    """Parse YAML or JSON text; syntax errors, aliases, duplicate keys and deep nesting are
    refused. NaN/Infinity in JSON are read as floats (``nonfinite``, the default) so that the
    schema refuses them naming the field (``Rule(allow_inf=True)`` lets a field hold
    infinity); ``nonfinite=False`` refuses them at parse time."""
    try:
        if fmt == "json":
            return json.loads(text, object_pairs_hook=_no_duplicates,
                              parse_constant=None if nonfinite else _no_constant)
        if len(text) > MAX_YAML_CHARS:
            raise _Refused(f"is {len(text):,} characters of YAML, more than the "
                           f"{MAX_YAML_CHARS:,} a YAML input may have; write large data as JSON")
        return load_yaml(text)
    except _Refused as exc:
        raise InputError(source, problem=str(exc)) from None
    except RecursionError:
        raise InputError(source, problem="nested too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError and _no_constant
        raise InputError(source, problem=f"not valid JSON: {str(exc).splitlines()[0]}") from None
    except Exception as exc:  # yaml.YAMLError and its constructor errors
        if type(exc).__module__.startswith("yaml"):
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(source, problem=f"not valid YAML: {first}") from None
        raise


def read_data(path: str | Path, what: str = "input", *, max_bytes: int = MAX_FILE_BYTES,
              default_format: str = "yaml", nonfinite: bool = True) -> Any:
    """Parse a ``.json`` (JSON) or any other (YAML, a superset of JSON) file."""
    p = Path(path)
    text = read_text(p, what, max_bytes=max_bytes)
    fmt = "json" if p.suffix.lower() == ".json" else default_format
    return parse_text(text, fmt, f"{what} file {p}", nonfinite=nonfinite)
