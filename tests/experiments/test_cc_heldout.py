"""experiments/cc_heldout: the held-out table in the docs is the rendering of its CSV."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cc_heldout import render
from experiments.cc_heldout.run import table

ROOT = Path(__file__).resolve().parents[2]          # the checkout (docs are not installed)
CSV = ROOT / "experiments" / "cc_heldout" / "results" / "cc_heldout.csv"
DOCS = (ROOT / "experiments" / "cc_heldout" / "README.md", ROOT / "docs" / "recommend.md")


@pytest.mark.parametrize("doc", DOCS, ids=[p.name for p in DOCS])
def test_doc_table_is_the_rendered_csv(doc) -> None:
    assert render.block(doc.read_text()) == table(render.read_rows(CSV))


def test_the_issues_setting_is_shown_refused_with_its_held_out_loss() -> None:
    rows = [r for r in render.read_rows(CSV) if r["fabric"].startswith("2:1 CLOS")]
    refused = [r for r in rows if r["decision"].startswith("refused held out")]
    assert refused and all("rpg_time_reset_us" in r["setting"] for r in refused)
    held = [r for r in refused if r["sample"] == "held out"]
    # a held-out loss shown with confidence: an interval wholly below the goodput margin or
    # wholly above the pause margin
    assert any(float(r["goodput_ratio_hi"]) < 0.98 or float(r["pause_ratio_lo"]) > 1.10
               for r in held)


def test_each_fabric_is_a_sweep_point_that_resumes(tmp_path, monkeypatch) -> None:
    from experiments.cc_heldout import run

    calls = []

    def fake(fabric, job, out, extra):
        calls.append(fabric)
        return {"scenarios": [], "status": "no congestion point"}

    monkeypatch.setattr(run, "recommend_cc", fake)
    rows = run.run(tmp_path, cases=run.CASES[:2])
    assert [r["decision"] for r in rows] == ["no congestion point"] * 2 and len(calls) == 2
    assert (tmp_path / "sweep" / "results.jsonl").exists()
    assert run.run(tmp_path, cases=run.CASES[:2]) == rows and len(calls) == 2  # resumed
