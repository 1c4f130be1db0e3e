"""experiments/dcqcn_fairness: docs/validation.md's long-permutation tables are the rendered CSVs."""

from __future__ import annotations

from pathlib import Path

from experiments.dcqcn_fairness.run import _read, render, write_doc

ROOT = Path(__file__).resolve().parents[2]


def test_validation_tables_are_the_rendered_csvs(tmp_path) -> None:
    results = ROOT / "experiments" / "dcqcn_fairness" / "results"
    text = (ROOT / "docs" / "validation.md").read_text()
    doc = tmp_path / "validation.md"
    doc.write_text(text)
    write_doc(doc, render(_read(results / "seeds.csv"), _read(results / "pair.csv")))
    assert doc.read_text() == text
