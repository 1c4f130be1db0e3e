"""Type-checked loading of dataclass schemas; see the package docstring."""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inputspec.errors import UNSET as _UNSET
from inputspec.errors import InputError, plain, show, show_example  # noqa: F401 - show re-exported
from inputspec.files import MAX_FILE_BYTES, read_bytes, read_text  # noqa: F401 - re-exported
from inputspec.parse import parse_text, read_data  # noqa: F401 - re-exported

#: Integers must fit a signed 64-bit word (numpy index arrays, picosecond clocks).
INT_LIMIT = 2**63 - 1
_MISSING = dataclasses.MISSING
_META_KEY = "inputspec"


@dataclass(frozen=True)
class Rule:
    """Constraints beyond the annotation: bounds, choices, an example, whether inf is allowed."""

    min: float | None = None
    max: float | None = None
    gt: float | None = None
    choices: Iterable[Any] | Callable[[], Iterable[Any]] | None = None
    example: Any = _UNSET
    allow_inf: bool = False
    doc: str | None = None

    def choice_list(self) -> list[Any] | None:
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)


def rule(default: Any = _MISSING, *, default_factory: Any = _MISSING, **constraints: Any):
    """A ``dataclasses.field`` carrying a :class:`Rule` (``x: int = rule(1, min=1)``)."""
    meta = {_META_KEY: Rule(**constraints)}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# --------------------------------------------------------------------------------------------
# Checking one value against an annotation


def _rule_of(field: dataclasses.Field, extra: Mapping[str, Any] | None) -> Rule:
    if extra and field.name in extra:
        r = extra[field.name]
        return r if isinstance(r, Rule) else Rule(**r)
    return field.metadata.get(_META_KEY, Rule())


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _bounds_text(r: Rule) -> str:
    parts = []
    if r.gt is not None:
        parts.append(f"> {_num(r.gt)}")
    if r.min is not None:
        parts.append(f">= {_num(r.min)}")
    if r.max is not None:
        parts.append(f"<= {_num(r.max)}")
    return " " + " and ".join(parts) if parts else ""


def describe(tp: Any, r: Rule = Rule()) -> str:
    """What a value of annotation ``tp`` looks like, in words."""
    choices = r.choice_list()
    if choices is not None:
        return "one of " + ", ".join(show_example(c) for c in choices)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [describe(a, r) for a in args if a is not type(None)]
        text = " or ".join(inner)
        return text + " or null" if type(None) in args else text
    if origin is typing.Literal:
        return "one of " + ", ".join(show_example(a) for a in args)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer" + _bounds_text(r)
    if tp is float:
        return ("a number" if r.allow_inf else "a finite number") + _bounds_text(r)
    if tp is str:
        return "a string"
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}"
        return f"a list of {len(args)} {_plural(args[0]) if args else 'values'}"
    if origin is list:
        return f"a list of {_plural(args[0]) if args else 'values'}"
    if origin is dict or tp is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        keys = [f.name for f in dataclasses.fields(tp)][:4]
        return f"a mapping with keys such as {', '.join(keys)}"
    return getattr(tp, "__name__", str(tp))


def _plural(tp: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(tp, "values")


def example_for(tp: Any, r: Rule = Rule(), default: Any = _MISSING) -> Any:
    """A good value: the rule's example, else a valid default, else one built from the type."""
    if r.example is not _UNSET:
        return r.example
    choices = r.choice_list()
    if choices:
        return choices[0]
    if default is not _MISSING and default is not _UNSET and default not in (None, "") \
            and _fits(default, r):
        return default
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return example_for(next(a for a in args if a is not type(None)), r)
    if origin is typing.Literal:
        return args[0]
    if tp is bool:
        return True
    if tp in (int, float):
        lo = r.min if r.min is not None else (r.gt + 1 if r.gt is not None else 1)
        return tp(max(lo, 1) if r.max is None or r.max >= 1 else lo)
    if tp is str:
        return "name"
    if origin is tuple and args and args[-1] is not Ellipsis:
        return [_or_one(example_for(a)) for a in args]
    if origin in (list, tuple):
        return [_or_one(example_for(args[0])) if args else 1]
    return _UNSET


def _or_one(example: Any) -> Any:
    return 1 if example is _UNSET else example


def _fits(value: Any, r: Rule) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return True
    return ((r.min is None or value >= r.min) and (r.max is None or value <= r.max)
            and (r.gt is None or value > r.gt))


def is_decimal(text: str) -> bool:
    """``text`` is a plain non-negative integer that ``int()`` reads: ASCII digits only (unlike
    ``str.isdigit``, which takes '²' and other digits ``int()`` refuses), at most 18 of them."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def check_value(value: Any, tp: Any, source: str, field: str, r: Rule = Rule(),
                default: Any = _MISSING) -> Any:
    """``value`` converted to annotation ``tp`` or an :class:`InputError` naming ``field``."""

    def fail(expected: str | None = None) -> InputError:
        return InputError(source, field, value, expected or describe(tp, r),
                          example_for(tp, r, default))

    out = _convert(value, tp, source, field, r, fail)
    _check_rule(out, r, fail)
    return out


def _convert(value, tp, source, field, r, fail):  # noqa: C901 - one branch per type
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or tp is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            if type(None) in args:
                return None
            raise fail()
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:  # Optional[X]: X's own error (a nested key named) stands
            return _convert(value, options[0], source, field, r, fail)
        for a in options:
            try:
                return _convert(value, a, source, field, r, fail)
            except InputError:
                continue
        raise fail()
    if origin is typing.Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        raise fail()
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise fail()
    if tp is int:
        return _as_int(value, fail)
    if tp is float:
        return _as_float(value, r, fail)
    if tp is str:
        if isinstance(value, str):
            return value
        raise fail()
    if origin is tuple or tp is tuple:
        return _as_tuple(value, args, source, field, r, fail)
    if origin is list or tp is list:
        if not isinstance(value, (list, tuple)):
            raise fail()
        inner = args[0] if args else Any
        return [check_value(v, inner, source, f"{field}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise fail()
        kt, vt = args if args else (Any, Any)
        return {check_value(k, kt, source, f"{field} key"):
                check_value(v, vt, source, f"{field}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise fail()
        return from_dict(tp, value, source, prefix=field)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise fail()
    return value


def _as_int(value, fail):
    if isinstance(value, bool):
        raise fail()
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    if not isinstance(value, int) or abs(value) > INT_LIMIT:
        raise fail()
    return value


def _as_float(value, r: Rule, fail):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail()
    if isinstance(value, int) and abs(value) > INT_LIMIT:
        raise fail()
    out = float(value)
    if math.isnan(out) or (math.isinf(out) and not r.allow_inf):
        raise fail()
    return out


def _as_tuple(value, args, source, field, r, fail):
    if not isinstance(value, (list, tuple)):
        raise fail()
    if args and args[-1] is Ellipsis:
        return tuple(check_value(v, args[0], source, f"{field}[{i}]") for i, v in enumerate(value))
    if args and len(value) != len(args):
        raise fail()
    if not args:
        return tuple(value)
    inner = Rule(min=r.min, max=r.max, gt=r.gt)
    return tuple(check_value(v, a, source, f"{field}[{i}]", inner)
                 for i, (v, a) in enumerate(zip(value, args, strict=True)))


def _check_rule(out: Any, r: Rule, fail) -> None:
    if out is None:
        return
    choices = r.choice_list()
    if choices is not None and out not in choices:
        raise fail()
    if isinstance(out, (int, float)) and not isinstance(out, bool) and not _fits(out, r):
        raise fail()


# --------------------------------------------------------------------------------------------
# Mappings <-> dataclasses


def from_dict(cls: type, data: Any, source: str = "input", *, prefix: str = "",
              rules: Mapping[str, Any] | None = None) -> Any:
    """Check ``data`` against dataclass ``cls`` and build it.

    Unknown keys, missing required keys, wrong types, NaN/infinity, out-of-bounds numbers
    and errors raised by the class itself (``__post_init__``) all become one
    :class:`InputError` naming ``source`` and the field (``prefix.key``).
    """
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    if not isinstance(data, Mapping):
        raise InputError(source, prefix or None, data, describe(cls))
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            near = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise InputError(source, problem=f"unknown key {path!r}{hint}; known keys: "
                             f"{', '.join(fields)}")
        f = fields[key]
        default = f.default if f.default is not _MISSING else _MISSING
        kwargs[key] = check_value(value, hints[key], source, path, _rule_of(f, rules), default)
    for name, f in fields.items():
        if name not in kwargs and f.default is _MISSING and f.default_factory is _MISSING:
            path = f"{prefix}.{name}" if prefix else name
            example = show_example(example_for(hints[name], _rule_of(f, rules)))
            raise InputError(source, problem=f"missing key {path!r} (e.g. {name}: {example})")
    return construct(cls, kwargs, source, prefix)


def construct(cls: type, kwargs: Mapping[str, Any], source: str, prefix: str = "") -> Any:
    """``cls(**kwargs)`` with the class's own refusals prefixed by the file name."""
    try:
        return cls(**kwargs)
    except InputError:
        raise
    except (ValueError, TypeError, KeyError, ArithmeticError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        where = f"{source}: {prefix}" if prefix else source
        raise InputError(where, problem=str(msg).splitlines()[0] if str(msg) else
                         type(exc).__name__) from None


def to_dict(obj: Any) -> dict[str, Any]:
    """The file form of a dataclass: plain dicts, lists, numbers, strings, booleans, null."""
    return plain(obj)


def nonempty_list(data: Any, key: str, source: str, wrapper: str, expected: str,
                  example: Any) -> list:
    """``data`` as a non-empty list: a list itself, or a mapping whose one key is ``key``
    holding the list. ``wrapper`` says that mapping for the message ("one key 'flows' (a
    list)"); ``expected`` and ``example`` say the list, as in :class:`InputError`."""
    if isinstance(data, dict):
        if set(data) != {key}:
            raise InputError(source, problem=f"expected {wrapper}, got keys "
                             f"{sorted(map(str, data))}")
        data = data[key]
    if not isinstance(data, list) or not data:
        raise InputError(source, key, data, expected, example)
    return data
