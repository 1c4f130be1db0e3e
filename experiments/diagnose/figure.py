"""The study's figure, ``diagnosis.png``, from a run's ``results.csv``: per layout and fault,
how many runs were diagnosed exactly as injected, and the slowdown each named straggler got."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiments._output import finish_figure

FAULTS = ("clean", "straggler", "link")


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def figure(results_csv: Path, path: Path | None = None):
    """Right / runs per layout and fault (left) and the named stragglers' slowdowns against
    the injected factor (right), saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _read(results_csv)
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for k, fault in enumerate(FAULTS):
        runs = [[r for r in rows if r["layout"] == lay and r["fault"] == fault] for lay in layouts]
        right = [sum(r["correct"] == "True" for r in rs) / len(rs) if rs else 0 for rs in runs]
        a.bar([i + 0.27 * (k - 1) for i in range(len(layouts))], right, 0.27, label=fault)
    a.set_xticks(range(len(layouts)))
    a.set_xticklabels(layouts, fontsize=7)
    a.set(ylabel="diagnosed exactly as injected", ylim=(0, 1.05))
    a.legend(fontsize=8, loc="lower left")
    named = [(float(r["factor"]), s) for r in rows if r["fault"] == "straggler"
             for s in json.loads(r["slowdowns"])]
    b.scatter([f for f, _ in named], [s for _, s in named], s=12)
    b.set(xlabel="injected compute factor", ylabel="slowdown the diagnosis measured")
    return finish_figure(fig, path)
