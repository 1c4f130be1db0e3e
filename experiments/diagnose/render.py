"""The numbers of the diagnose README and its ``docs/experiments.md`` entry: the scores and
loads of every ``results*.csv`` and the Kineto-vs-native errors of ``kineto_heldout.json``
(``python -m experiments.results --render --study diagnose``)."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.compare import read_csv

#: the runs on seeds the statistics were not set on (README), judged once
HELD_OUT = ("results-seeds-3-4", "results-seeds-5-6", "results-rerun-seeds-3-4",
            "results-rerun-seeds-5-6", "results-seeds-7-8")


def _right(rows: list[dict]) -> str:
    return f"{sum(r['correct'] == 'True' for r in rows)} of {len(rows)}"


def _loads(rows: list[dict]) -> str:
    loads = [float(r["load_1m"]) for r in rows if r["load_1m"] not in ("", "None")]
    return f"{min(loads):.3g} to {max(loads):.3g}"


def _faults(rows: list[dict]) -> dict[str, list[dict]]:
    return {"clean": [r for r in rows if r["fault"] == "clean"],
            "x1.2 straggler": [r for r in rows if r["fault"] == "straggler"
                               and float(r["factor"]) == 1.2],
            "straggler": [r for r in rows if r["fault"] == "straggler"],
            "link": [r for r in rows if r["fault"] == "link"]}


def scores(folder: Path) -> dict[str, str]:
    """``diagnose.score.STEM`` / ``diagnose.load.STEM`` per CSV; the fault classes of the
    held-out runs and of the last idle seeds."""
    runs = {p.stem: read_csv(p) for p in sorted(folder.glob("results*.csv"))}
    out = {f"diagnose.score.{k}": _right(v) for k, v in runs.items()}
    out |= {f"diagnose.load.{k}": _loads(v) for k, v in runs.items()}
    held = _faults([r for k in HELD_OUT for r in runs[k]])
    out["diagnose.held_out_classes"] = (
        f"every injected x1.2 straggler named alone: {_right(held['x1.2 straggler'])} held out, "
        f"stages of two ranks included; 5 ms links {_right(held['link'])}; clean runs named "
        f"nobody in {_right(held['clean'])}")
    shared = [r for k in ("results", *HELD_OUT) for r in runs[k]
              if r["other_cores"] not in ("", "None")]
    out["diagnose.shared_cores"] = (f"{min(float(r['other_cores']) for r in shared):.1f} to "
                                    f"{max(float(r['other_cores']) for r in shared):.1f}")
    idle = _faults(runs["results-idle-seeds-16-21"])
    out["diagnose.idle_classes"] = (f"clean {_right(idle['clean'])}, stragglers "
                                    f"{_right(idle['straggler'])}, links {_right(idle['link'])}")
    return out


def _errors(summary: dict, fmt: str) -> str:
    return f"{100 * summary[fmt]['median_abs_error']:.1f}%"


def values(results: Path) -> dict[str, str]:
    return {**scores(results), **kineto(results)}


def kineto(results: Path) -> dict[str, str]:
    data = json.loads((results / "kineto_heldout.json").read_text())
    s, rows = data["summary"], data["rows"]
    kineto, native = s["kineto"], s["native"]
    diff = 100 * (kineto["median_abs_error"] - native["median_abs_error"])
    return {
        "diagnose.kineto_vs_native": (
            f"{_errors(s, 'kineto')} from the profiler traces against {_errors(s, 'native')} "
            f"from the native ones"),
        "diagnose.kineto_detail": (
            f"median absolute error {_errors(s, 'native')} native, {_errors(s, 'kineto')} from "
            f"the profiler traces ({diff:+.1f} points), worst "
            f"{100 * native['max_abs_error']:.1f}% and {100 * kineto['max_abs_error']:.1f}%; "
            f"{_errors(s, 'native-no-cpu')} native without the CPU times"),
        "diagnose.kineto_runs": _kineto_runs(rows),
    }


def _kineto_runs(rows: list[dict]) -> str:
    """How many configurations were held out, their worst, and the load they ran under."""
    held = [r for r in rows if r["role"] == "held-out" and r["format"] == "kineto"]
    worst = max(held, key=lambda r: abs(r["error"]))
    cores = [r["other_cores"] for r in rows if "other_cores" in r]
    load = (f"; other processes took {min(cores):.2f} to {max(cores):.2f} cores"
            if cores else "")
    return (f"{len(held)} held-out configurations, the worst {worst['config']} "
            f"({100 * worst['error']:+.0f}% from the profiler traces){load}")
