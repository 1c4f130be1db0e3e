"""The table of docs/recommend.md ("Check a recommendation on your own traffic") from
``results/compare.csv`` (``python -m experiments.results --render --study settings_check``)."""

from __future__ import annotations

from pathlib import Path

from experiments.settings_check.run import read_csv, render_table


def values(results: Path) -> dict[str, str]:
    return {"settings-check": render_table(read_csv(results / "compare.csv")).rstrip("\n")}
