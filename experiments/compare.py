"""A rerun's CSVs against the committed ones: every cell equal, timing columns aside.

Cells compare as text, so a deterministic study must reproduce its committed CSV exactly; a
column with a relative tolerance (a documented nondeterminism) compares as numbers. A study
timed on this host cannot repeat its rows; :func:`compare_score` says whether its score (the
rows judged right) moved beyond chance.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from pathlib import Path

MAX_LISTED = 20


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _cell_differs(committed: str, got: str, rtol: float | None) -> bool:
    if committed == got:
        return False
    if rtol is None:
        return True
    try:
        a, b = float(committed), float(got)
    except ValueError:
        return True
    return not math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)


def compare_csv(committed: Path, got: Path, ignore=(), rtol: Mapping[str, float] | None = None
                ) -> list[str]:
    """One line per difference of ``got`` from ``committed`` (empty: the same result)."""
    rtol = rtol or {}
    name = committed.name
    if not got.exists():
        return [f"{name}: the rerun wrote no {got.name}"]
    old, new = read_csv(committed), read_csv(got)
    cols_old = [c for c in (old[0] if old else {}) if c not in ignore]
    cols_new = [c for c in (new[0] if new else {}) if c not in ignore]
    if cols_old != cols_new:
        return [f"{name}: columns {cols_new} instead of {cols_old}"]
    if len(old) != len(new):
        return [f"{name}: {len(new)} rows instead of {len(old)}"]
    diffs = []
    for i, (a, b) in enumerate(zip(old, new, strict=True), start=2):
        for c in cols_old:
            if _cell_differs(a[c], b[c], rtol.get(c)):
                diffs.append(f"{name} line {i} column {c}: committed {a[c]}, rerun {b[c]}")
    return diffs


def _true(rows: list[dict[str, str]], column: str) -> int:
    return sum(r[column] == "True" for r in rows)


def compare_score(committed: Path, got: Path, column: str) -> tuple[bool, str]:
    """Whether the share of rows with ``column`` True in ``got`` is that of ``committed`` within
    chance (Fisher's exact test, two-sided, 5%), and a line that says so with both counts."""
    from scipy.stats import fisher_exact

    old, new = read_csv(committed), read_csv(got)
    a, b = _true(old, column), _true(new, column)
    p = float(fisher_exact([[a, len(old) - a], [b, len(new) - b]])[1])
    same = p >= 0.05
    return same, (f"{committed.name} {column}: committed {a} of {len(old)}, rerun {b} of "
                  f"{len(new)} (Fisher's exact p = {p:.2f}: "
                  f"{'within chance' if same else 'moved beyond chance'})")


def compare_dirs(committed: Path, got: Path, csvs, ignore=(), rtol=None) -> list[str]:
    """:func:`compare_csv` of every file of ``csvs``, the list cut at ``MAX_LISTED`` lines."""
    diffs = []
    for name in csvs:
        diffs += compare_csv(committed / name, got / name, ignore, rtol)
    if len(diffs) > MAX_LISTED:
        diffs = diffs[:MAX_LISTED] + [f"... and {len(diffs) - MAX_LISTED} more"]
    return diffs
