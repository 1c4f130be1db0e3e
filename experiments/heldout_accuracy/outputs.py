"""What the held-out study writes with ``--results DIR``: ``heldout.csv`` (one row per
configuration), ``calibration.json`` and ``heldout.png`` (predicted against measured)."""

from __future__ import annotations

import json
from pathlib import Path

from experiments._output import finish_figure, write_csv

COLUMNS = ("config", "role", "repeats", "measured_s", "measured_spread_s", "predicted_s", "error",
           "predicted_low_s", "predicted_high_s", "inside", "predicted_nominal_s",
           "error_nominal", "available_cores", "other_cores")


def write_outputs(rows: list[dict], calibration: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "heldout.csv", [{k: r[k] for k in COLUMNS} for r in rows])
    (out / "calibration.json").write_text(json.dumps(calibration, indent=1) + "\n")
    plot(rows, out / "heldout.png")


def plot(rows: list[dict], path: Path | None = None):
    """Predicted against measured iteration time, calibration and held-out runs apart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for role, marker in (("calibrate", "s"), ("held-out", "o")):
        rs = [r for r in rows if r["role"] == role]
        ax.scatter([float(r["measured_s"]) for r in rs], [float(r["predicted_s"]) for r in rs],
                   marker=marker, label=role)
        for r in rs:
            ax.annotate(r["config"], (float(r["measured_s"]), float(r["predicted_s"])),
                        fontsize=6, xytext=(3, 3), textcoords="offset points")
    hi = max(max(float(r["measured_s"]), float(r["predicted_s"])) for r in rows) * 1.1
    ax.plot([0, hi], [0, hi], color="gray", lw=0.8, ls="--")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured iteration time (s)")
    ax.set_ylabel("predicted (s)")
    ax.set_title("CPU trainer: calibrated on 4 configurations")
    ax.legend()
    fig = finish_figure(fig, path)
    plt.close(fig)
    return path
