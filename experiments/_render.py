"""Study READMEs whose numbers are outputs: each rendered block sits between
``<!-- BLOCK:begin -->`` and ``<!-- BLOCK:end -->`` and is replaced by what a function of the
study's CSVs returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path


def between(text: str, marks: tuple[str, str], body: str) -> str:
    """``text`` with what lies between the two markers replaced by ``body``."""
    begin, end = marks
    if begin not in text or end not in text:
        raise ValueError(f"no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"


def render_blocks(readme: Path, blocks: Mapping[str, Callable[[], str]]) -> None:
    """Render every ``<!-- NAME:begin/end -->`` block of ``readme`` with ``blocks[NAME]()``."""
    text = readme.read_text()
    for name, body in blocks.items():
        text = between(text, (f"<!-- {name}:begin -->", f"<!-- {name}:end -->"), body())
    readme.write_text(text)
