"""The over-time study's tables: per seed set and load, how many replays topo is worse in,
and the README rewritten between its markers only."""

from __future__ import annotations

import pytest

from experiments.placement.over_time import render, seed_table, summary_table


def _rows(seed: int, load: float, linear: float, topo: float) -> list[dict]:
    sets = "design" if 11 <= seed <= 20 else "held-out"
    return [{"seeds": sets, "seed": seed, "load": load, "policy": k, "mean_slowdown": v,
             "mean_fragmentation": 0.5, "cpu_s": 1.0} for k, v in (("linear", linear),
                                                                   ("topo", topo))]


ROWS = (_rows(1, 0.9, 1.0, 1.0) + _rows(2, 0.9, 1.01, 1.0) + _rows(3, 0.9, 1.0005, 1.0124)
        + _rows(11, 0.9, 1.0, 1.0))


def test_summary_counts_worse_level_better_per_seed_set():
    table = summary_table(ROWS).splitlines()
    held = next(line for line in table if line.startswith("| held-out 1-3 | 0.9 | 3 |"))
    worse, level, better, largest = [c.strip() for c in held.split("|")[6:10]]
    assert (worse, level, better) == ("1", "1", "1")
    assert float(largest) == pytest.approx(0.0119)
    assert any(line.startswith("| design 11-11 | 0.9 | 1 |") for line in table)
    assert "| 3 | 1.0005 / 1.0124 |" in seed_table(ROWS)


def test_render_rewrites_between_markers_only(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("head\n<!-- over-time:begin -->\nold\n<!-- over-time:end -->\ntail\n")
    render(readme, ROWS)
    text = readme.read_text()
    assert text.startswith("head\n") and text.endswith("tail\n") and "old" not in text
    assert "1.0005 / 1.0124" in text
    (tmp_path / "bare.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="markers"):
        render(tmp_path / "bare.md", ROWS)


def test_the_replay_fabric_is_the_studys_2to1_clos():
    """over_time.py replays on the study's own 2:1 fabric (``replay.yaml``): 2,048 GPUs, ToRs
    2:1. It imported a size constant that run.py had dropped, so ``make results`` failed on it."""
    from experiments.placement.over_time import fabric
    from tuner.placement import tor_oversubscription

    f = fabric()
    assert len(f.gpus) == 2048
    assert tor_oversubscription(f) == pytest.approx(2.0)
