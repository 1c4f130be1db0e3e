"""The table and error figures of the held-out README, from ``results/heldout.csv``
(``python -m experiments.results --render --study heldout_accuracy``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.compare import read_csv
from experiments.render import markdown_table


def table(rows: list[dict]) -> str:
    body = [[r["config"], r["role"], f"{float(r['measured_s']):.2f}",
             f"{float(r['predicted_s']):.2f}",
             f"{float(r['predicted_low_s']):.2f}-{float(r['predicted_high_s']):.2f}",
             f"{float(r['measured_spread_s']):.2f}", f"{100 * float(r['error']):+.1f}%",
             f"{100 * float(r['error_nominal']):+.1f}%", f"{float(r['available_cores']):.2f}"]
            for r in rows]
    return markdown_table(["config", "role", "measured s", "predicted s", "interval s",
                           "spread of repeats s", "error", "error, idle-host prediction",
                           "cores left"], body, "llrrrrrrr")


def _is_shape(config: str) -> bool:
    """A configuration of another shape than the calibration's (``-L`` layers, ``-s`` seq)."""
    return "-L" in config or "-s" in config


def _errors(rows: list[dict], column: str = "error") -> np.ndarray:
    """Absolute relative errors of ``rows`` in ``column``."""
    return np.abs([float(r[column]) for r in rows])


def _median_worst(err: np.ndarray, between: str = ", worst ") -> str:
    return f"{100 * np.median(err):.1f}%{between}{100 * err.max():.1f}%"


def _inside(held: list[dict]) -> str:
    return f"{sum(r['inside'] in ('True', 'true', '1') for r in held)} of {len(held)}"


def _held_out(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["role"] == "held-out"]


def by_kind(held: list[dict]) -> str:
    """Median and worst absolute error of the held-out layouts and of the other shapes."""
    parts = []
    for label, rows in (("other layouts", [r for r in held if not _is_shape(r["config"])]),
                        ("other shapes", [r for r in held if _is_shape(r["config"])])):
        if rows:
            parts.append(f"{len(rows)} {label}: median {_median_worst(_errors(rows))}")
    return "; ".join(parts)


def summary(rows: list[dict]) -> str:
    """Median and worst absolute error of the held-out rows, and how many lie inside their
    interval."""
    held = _held_out(rows)
    return (f"{len(held)} held-out configurations: median absolute error "
            f"{_median_worst(_errors(held))}; {_inside(held)} inside their interval")


def modern_values(results: Path) -> dict[str, str]:
    """The ``--modern`` configurations' table and summary (``results/modern.csv``)."""
    if not (results / "modern.csv").exists():
        return {}
    rows = read_csv(results / "modern.csv")
    out = {"heldout_accuracy.modern_table": table(rows),
           "heldout_accuracy.modern_held_out": summary(rows)}
    if (results / "modern_fast_host.csv").exists():
        out["heldout_accuracy.modern_fast_host"] = summary(read_csv(results /
                                                                    "modern_fast_host.csv"))
    return out


#: Other whole runs of the study kept beside the committed one (``Study.records``), each
#: with what sets it apart: the spread between runs, which no single run shows.
OTHER_RUNS = (("heldout_replicate.csv", "a second run of the same command on the same quiet host"),
              ("heldout_shared_host.csv",
               "the run committed before (a6b3b9c), on a host shared with other sessions"),
              ("heldout_fast_host.csv",
               "the committed command on a fresh clone after the host restarted, quiet and faster"))


def _worst(held: list[dict]) -> str:
    """The held-out configuration furthest off, with its error."""
    r = max(held, key=lambda r: abs(float(r["error"])))
    return f"{r['config']} {100 * float(r['error']):+.1f}%"


def other_runs(results: Path) -> str:
    """One line per kept other run: its cores left and its held-out errors."""
    parts = []
    committed = {r["config"]: float(r["measured_s"]) for r in read_csv(results / "heldout.csv")}
    for name, label in OTHER_RUNS:
        if (results / name).exists():
            rows = read_csv(results / name)
            held = _held_out(rows)
            cores = [float(r["available_cores"]) for r in rows]
            speed = np.median([committed[r["config"]] / float(r["measured_s"]) for r in rows])
            parts.append(f"{label} (cores left {min(cores):.2f}-{max(cores):.2f}, iterations "
                         f"{speed:.2f}x as fast as the committed run's): median "
                         f"{100 * np.median(_errors(held)):.1f}%, worst {_worst(held)}, "
                         f"{_inside(held)} inside their interval")
    return "; ".join(parts)


def values(results: Path) -> dict[str, str]:
    rows = read_csv(results / "heldout.csv")
    held = _held_out(rows)
    cores = [float(r["available_cores"]) for r in rows]
    return {
        "heldout_accuracy.table": table(rows),
        "heldout_accuracy.held_out": (
            f"{len(held)} held-out configurations: median absolute error "
            f"{_median_worst(_errors(held))} (predicting for an idle host instead: "
            f"{_median_worst(_errors(held, 'error_nominal'), ' and ')})"),
        "heldout_accuracy.by_kind": by_kind(held),
        "heldout_accuracy.cores": f"{min(cores):.2f}-{max(cores):.2f}",
        "heldout_accuracy.interval": _inside(held),
        "heldout_accuracy.spread": (
            f"{100 * max(float(r['measured_spread_s']) / float(r['measured_s']) for r in rows):.0f}%"),
        "heldout_accuracy.other_runs": other_runs(results),
        **modern_values(results),
    }
