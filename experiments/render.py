"""Numbers in prose rendered from a study's results: the text between HTML-comment markers.

A block (a table, a list) stands on lines of its own between ``<!-- NAME:begin -->`` and
``<!-- NAME:end -->``; an inline value sits inside a sentence between ``<!-- NAME -->`` and
``<!-- /NAME -->``. A study's ``render.py`` computes ``{NAME: text}`` from its CSVs and
:func:`render_file` writes them into a README or ``docs/experiments.md``; nothing between the
markers is typed by hand. Names carry the study as a prefix (``retransmit.flap_1ms_stall``)
so one document can hold the values of several studies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path


def block_marks(name: str, begin: str = "begin") -> tuple[str, str]:
    """``(<!-- NAME:begin -->, <!-- NAME:end -->)``; ``begin="start"`` for older markers."""
    return f"<!-- {name}:{begin} -->", f"<!-- {name}:end -->"


def inline_marks(name: str) -> tuple[str, str]:
    return f"<!-- {name} -->", f"<!-- /{name} -->"


def between(text: str, marks: tuple[str, str], body: str, inline: bool = False) -> str:
    """``text`` with what stands between ``marks`` replaced by ``body`` (on lines of its own
    unless ``inline``); a ValueError names the markers missing."""
    begin, end = marks
    if begin not in text or end not in text.split(begin, 1)[1]:
        raise ValueError(f"no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    sep = "" if inline else "\n"
    return f"{head}{begin}{sep}{body}{sep}{end}{rest.split(end, 1)[1]}"


def marker_names(text: str) -> set[str]:
    """Every block and inline marker name in ``text``."""
    blocks = re.findall(r"<!-- ([\w.-]+):(?:begin|start) -->", text)
    inline = re.findall(r"<!-- /([\w.-]+) -->", text)
    return set(blocks) | set(inline)


def render_text(text: str, values: Mapping[str, str], prefix: str = "",
                strict: bool = False) -> str:
    """Fill every marker of ``values`` in ``text``. A name of ``values`` not marked in ``text``
    is skipped (an error when ``strict``); a marker under ``prefix`` without a value is an
    error (a number left typed)."""
    names = marker_names(text)
    unmarked = sorted(set(values) - names)
    if strict and unmarked:
        raise ValueError(f"no markers for {', '.join(unmarked)}")
    missing = sorted(n for n in names if n.startswith(prefix) and prefix and n not in values)
    if missing:
        raise ValueError(f"markers without a rendered value: {', '.join(missing)}")
    for name, body in values.items():
        if name not in names:
            continue
        if inline_marks(name)[1] in text:
            text = between(text, inline_marks(name), body, inline=True)
        else:
            begin = "start" if block_marks(name, "start")[0] in text else "begin"
            text = between(text, block_marks(name, begin), body)
    return text


def render_file(path: Path, values: Mapping[str, str], prefix: str = "",
                strict: bool = False) -> bool:
    """:func:`render_text` on the file at ``path``; True when its text changed."""
    old = path.read_text()
    try:
        new = render_text(old, values, prefix, strict)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from e
    if new != old:
        path.write_text(new)
    return new != old


#: a number that reads as a result: a decimal, a percent or a factor (``1.63``, ``12%``,
#: ``2.5x``); plain integers (seeds, sizes, counts of a setup) are not flagged
MEASURED = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:%|x\b)|(?<![\w.])\d+\.\d+(?![\w.])")
_MASKED = (re.compile(r"<!-- ([\w.-]+):(?:begin|start) -->.*?<!-- \1:end -->", re.S),
           re.compile(r"<!-- ([\w.-]+) -->.*?<!-- /\1 -->", re.S),
           re.compile(r"```.*?```", re.S), re.compile(r"`[^`]+`"),
           re.compile(r"^    .*$", re.M), re.compile(r"!?\[[^\]]*\]\([^)]*\)"))


def typed_numbers(text: str) -> list[tuple[int, str]]:
    """``(offset, number)`` of every result-like number of ``text`` (:data:`MEASURED`) that no
    marker renders, outside code and links: the numbers someone typed."""
    masked = text
    for pattern in _MASKED:
        masked = pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), masked)
    return [(m.start(), m.group()) for m in MEASURED.finditer(masked)]


def markdown_table(header: list[str], rows: list[list[str]], align: str = "") -> str:
    """A markdown table; ``align`` one character per column (``l`` or ``r``, default ``l``)."""
    align = align or "l" * len(header)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = [f"| {' | '.join(header)} |", f"|{'|'.join(rule)}|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines)
