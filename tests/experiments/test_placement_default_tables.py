"""experiments/placement: the default run's tables in its README are the rendered CSVs."""

from __future__ import annotations

from pathlib import Path

from experiments.placement import render

ROOT = Path(__file__).resolve().parents[2] / "experiments" / "placement"   # not installed


def test_readme_tables_are_the_rendered_csvs(tmp_path) -> None:
    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    readme.write_text(text)
    render.render(readme, ROOT / "results")
    assert readme.read_text() == text
