"""experiments/scale_mfu: the Table 3 step CSV is what the code produces, its split adds up and the
README's per-step conclusions hold on it (that the README holds the numbers rendered from the
committed CSVs: tests/experiments/test_results_ci.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from experiments.scale_mfu.table3_steps import PARTS, step_rows, summary

HERE = Path(__file__).resolve().parents[2] / "experiments" / "scale_mfu"  # the checkout's


@pytest.fixture(scope="module")
def steps() -> dict[str, dict]:
    return {r["step"]: r for r in step_rows()}


def test_committed_step_csv_is_what_the_code_produces(steps) -> None:
    with open(HERE / "results" / "megascale_table3_steps.csv") as fh:
        committed = list(csv.DictReader(fh))
    assert [r["step"] for r in committed] == list(steps)
    for r in committed:
        assert float(r["predicted_gain_pts"]) == pytest.approx(
            steps[r["step"]]["predicted_gain_pts"], abs=1e-9), r["step"]


def test_split_of_each_gain_adds_up(steps) -> None:
    for name, r in steps.items():
        assert sum(r[f"from_{p}_pts"] for p in PARTS) == pytest.approx(
            r["predicted_gain_pts"], abs=1e-9), name


def test_the_readme_conclusions_on_the_steps_hold(steps) -> None:
    """What matches and what does not, as the README's conclusion says it."""
    def gap(step: str) -> float:
        return steps[step]["predicted_gain_pts"] - steps[step]["published_gain_pts"]

    ptb, swa, tp, pp, dp, ops, misc, lamb = steps
    assert abs(gap(swa)) < 0.5 and abs(gap(tp)) < 0.5  # close to the paper
    assert gap(ptb) < -1 and gap(pp) < -1 and gap(lamb) < -1  # well under it
    assert gap(dp) > 0.5 and gap(ops) > 0.5  # over it
    assert steps[ptb]["from_tp_pts"] == pytest.approx(steps[ptb]["predicted_gain_pts"],
                                                      abs=0.1)  # PTB: TP time only
    assert steps[dp]["from_dp_pts"] > 0.9 * steps[dp]["predicted_gain_pts"]
    assert steps[ops]["from_compute_pts"] > 0.9 * steps[ops]["predicted_gain_pts"]
    assert not steps[misc]["modelled"] and steps[misc]["predicted_gain_pts"] == 0
    s = summary(list(steps.values()))
    assert s["steps"] == 7 and abs(s["spearman_rho"]) < 0.5  # not in the paper's rank
    assert s["predicted_total_pts"] < s["published_total_pts"] - 2

