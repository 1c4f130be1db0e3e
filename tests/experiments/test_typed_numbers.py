"""No result typed by hand in a study README or ``docs/experiments.md`` (issue 29, item 1).

Every decimal, percent or factor there (:data:`experiments.render.MEASURED`) stands between
markers that its study's renderer fills from the committed CSVs, or inside one of the snippets
below, each of which says why it is not a result of this tree. A number typed anywhere else
fails until it is rendered (or, if it is no result, listed here with its reason).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from experiments import studies
from experiments.render import typed_numbers

SRC = Path(__file__).resolve().parents[2]

PAPER_SECTIONS = ("section 3.6", "section 6.3", "section 6.1", "MegaScale 3.6",
                  "nccl-roce.md` 1.2", "nccl-roce.md` 1.3", "nccl-roce.md` 1.4",
                  "arXiv:2402.15627")
"""References to a paper's or a reference file's sections."""

NOT_RESULTS: dict[str, tuple[str, ...]] = {
    "experiments/cc/README.md": (
        "150 KB / 1500 KB / 0.2",  # the switch's ECN defaults: an input
        "fires every 0.1-1 us",  # the byte counter's period at line rate, from its setting
    ),
    "experiments/cc_heldout/README.md": (
        "with 95% confidence", "1% tolerance", "with 90% intervals",  # the search's settings
    ),
    "experiments/heldout_accuracy/README.md": ("median 10%, worst 15%",),  # the issue's
    "experiments/placement/README.md": (
        "up to 60% of the GPUs", "at 90% offered load",  # the generator's setup
        "loads 0.5, 0.9 and 1.3", "(seed 9 at load 0.9:",  # over_time.py's loads
    ),
    "experiments/published/README.md": (
        "every row within 15%, the median within 8%", "the 15% band",  # the target
    ),
    "experiments/retransmit/README.md": ("T = 4.096 us",),  # the IB spec's timeout unit
    "experiments/scale_mfu/README.md": (
        "defaults to **1.0**", "no fraction below 1.0", "runs 3x the",  # model settings
        "row is within 10%", "row by row within 10%",  # the bar; the misses are rendered
    ),
    "docs/experiments.md": ("predicted within 10%",),
}


def _documents() -> list[Path]:
    docs = {p for s in studies.STUDIES for p in s.doc_paths(SRC)
            if p.name == "README.md" or p.name == "experiments.md"}
    return sorted(p for p in docs if p.exists())


def _allowed_spans(text: str, snippets) -> list[tuple[int, int]]:
    """Where each snippet stands in ``text`` (any run of white space matching any other)."""
    spans = []
    for snippet in snippets:
        found = [m.span() for m in re.finditer(r"\s+".join(map(re.escape, snippet.split())),
                                                text)]
        assert found, f"listed snippet no longer in the text: {snippet!r}"
        spans += found
    return spans


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_typed_result(path) -> None:
    rel = str(path.relative_to(SRC))
    text = path.read_text()
    spans = _allowed_spans(text, NOT_RESULTS.get(rel, ()))
    spans += _allowed_spans(text, [p for p in PAPER_SECTIONS
                                   if re.search(r"\s+".join(map(re.escape, p.split())), text)])
    typed = [(pos, n) for pos, n in typed_numbers(text)
             if not any(a <= pos < b for a, b in spans)]
    lines = [f"line {text.count(chr(10), 0, pos) + 1}: {n}" for pos, n in typed]
    assert not lines, (f"{rel}: numbers typed outside markers; render them from the study's "
                       "CSV (experiments/render.py) or list why they are not results here:\n"
                       + "\n".join(lines))


def test_a_typed_number_is_found_and_a_rendered_one_is_not() -> None:
    text = ("Topo is 1.2% faster, <!-- x.a -->2.5x<!-- /x.a --> in `run --loads 0.9`,\n"
            "<!-- x.t:begin -->\n| 1.0 |\n<!-- x.t:end -->\n    python run.py 0.5\n")
    assert [n for _, n in typed_numbers(text)] == ["1.2%"]
