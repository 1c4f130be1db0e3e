"""The tables and error figures of the published study's README, from ``results/published.csv``
and ``results/modern.csv`` (``python -m experiments.results --render --study published``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.compare import read_csv
from experiments.render import markdown_table


def _value(x: str) -> str:
    v = float(x)
    return f"{v:,.0f}" if v >= 1000 else f"{v:.4g}"


def table(rows: list[dict]) -> str:
    body = [[r["source"], r["model"], f"{int(r['gpus']):,}", r["tp"], r["pp"], r["v"],
             r["metric"], _value(r["published"]), _value(r["predicted"]),
             f"{100 * float(r['error']):+.1f}%"] for r in rows]
    return markdown_table(["source", "model", "GPUs", "t", "p", "v", "metric", "published",
                           "predicted", "error"], body, "llrrrrlrrr")


def _errors(rows: list[dict]) -> str:
    err = np.abs([float(r["error"]) for r in rows])
    return (f"{len(err)} rows, median absolute error {100 * np.median(err):.1f}%, worst "
            f"{100 * err.max():.1f}%")


def values(results: Path) -> dict[str, str]:
    old = read_csv(results / "published.csv")
    new = read_csv(results / "modern.csv")
    return {"published.table": table(old), "published.modern_table": table(new),
            # row 1 of each table is the one the efficiency is fitted on
            "published.held_out": _errors(old[1:]),
            "published.modern_held_out": _errors(new[1:])}
