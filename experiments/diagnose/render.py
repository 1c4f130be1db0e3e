"""The Kineto-vs-native numbers of the diagnose README and its ``docs/experiments.md`` entry,
from ``kineto_heldout.json`` (``python -m experiments.results --render --study diagnose``)."""

from __future__ import annotations

import json
from pathlib import Path


def _errors(summary: dict, fmt: str) -> str:
    return f"{100 * summary[fmt]['median_abs_error']:.1f}%"


def values(results: Path) -> dict[str, str]:
    s = json.loads((results / "kineto_heldout.json").read_text())["summary"]
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
    }
