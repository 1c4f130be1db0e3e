"""The study's figure, ``results/compare.png``, from ``compare.csv``: max FCT and mean goodput
of every run, defaults against the recommendation (and the recommendation at one QP)."""

from __future__ import annotations

from pathlib import Path

from experiments._output import finish_figure
from experiments.settings_check.run import read_csv


def figure(results: Path, path: Path | None = None):
    """Bars per scenario and seed, one per settings (saved to ``path``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_csv(results / "compare.csv")
    runs = list(dict.fromkeys((r["scenario"], r["seed"]) for r in rows))
    kinds = list(dict.fromkeys(r["settings"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, col, label in zip(axes, ("max_fct_us", "mean_gbps"), ("max FCT (us)", "mean Gb/s"),
                              strict=True):
        for k, kind in enumerate(kinds):
            vals = [float(next(r[col] for r in rows if (r["scenario"], r["seed"]) == run
                               and r["settings"] == kind)) for run in runs]
            ax.bar([i + 0.27 * (k - 1) for i in range(len(runs))], vals, 0.27, label=kind)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels([f"{s.split(' of ')[0]}\nseed {n}" for s, n in runs], fontsize=7)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    return finish_figure(fig, path)
