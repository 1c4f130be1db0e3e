"""The study's figure, ``results/fairness.png``, from its CSVs: per seed, the flow model's worst
per-flow error on the window where every flow runs against the floor any equal-share model
has there and the per-group error; and seed 0's worst pair over time."""

from __future__ import annotations

import csv
from pathlib import Path

from experiments._output import finish_figure


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def figure(results: Path, path: Path | None = None):
    """The figure of ``results/seeds.csv`` and ``results/pair.csv`` (saved to ``path``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds, pair = _read(results / "seeds.csv"), _read(results / "pair.csv")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    xs = [int(r["seed"]) for r in seeds]
    for col, label in (("window_max_abs_err", "worst flow"),
                       ("symmetric_floor", "floor of an equal-share model"),
                       ("window_group_err", "worst group")):
        a.plot(xs, [100 * float(r[col]) for r in seeds], "o-", label=label)
    a.set(xlabel="packet seed", ylabel="flow model error in the window (%)")
    a.legend(fontsize=8)
    t = [float(r["start_ms"]) for r in pair]
    for col in (c for c in pair[0] if c.endswith("_gbps")):
        b.step(t, [float(r[col]) for r in pair], where="post", label=col[:-5].replace("_", " "))
    b.set(xlabel="ms (2 ms windows)", ylabel="delivered Gb/s", title="seed 0, worst group")
    b.legend(fontsize=8)
    return finish_figure(fig, path)
