"""The published study's table and summary, from ``results/published.csv``
(``python -m experiments.results --render --study published``)."""

from __future__ import annotations

from pathlib import Path

from experiments.compare import read_csv
from experiments.published.run import render, summary


def held_out(rows: list[dict]) -> str:
    """``38 rows, median absolute error 4.0%, worst 55.2%`` over the rows not fitted on."""
    s = summary([{**r, "fitted": str(r["fitted"]) == "True", "error": float(r["error"])}
                 for r in rows])
    return (f"{s['held_out_rows']} rows, median absolute error {s['median_abs_error']:.1%}, "
            f"worst {s['max_abs_error']:.1%}")


def values(results: Path) -> dict[str, str]:
    rows = read_csv(results / "published.csv")
    return {"published-table": render(rows), "published.held_out": held_out(rows)}
