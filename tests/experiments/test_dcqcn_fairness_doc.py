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


def test_each_seed_is_a_sweep_point_that_resumes(tmp_path, monkeypatch) -> None:
    from experiments.dcqcn_fairness import run

    calls = []

    def fake(seed):
        calls.append(seed)
        return {"row": {"seed": seed}, "pair": [{"start_ms": 0.0}] if seed == 0 else []}

    monkeypatch.setattr(run, "seed_point", fake)
    rows, pair = run.run_seeds(tmp_path, 3, workers=0)
    assert [r["seed"] for r in rows] == [0, 1, 2] and pair == [{"start_ms": 0.0}]
    assert run.run_seeds(tmp_path, 3, workers=0) == (rows, pair) and calls == [0, 1, 2]
