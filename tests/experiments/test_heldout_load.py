"""The held-out study's load sampler (``experiments/heldout_accuracy/load.py``): the steady
window is found even when its steps all appeared between two samples."""

from __future__ import annotations

import pytest

from experiments.heldout_accuracy.load import LoadSampler


def _stopped(tmp_path, samples, steady_steps=3):
    s = LoadSampler(tmp_path / "trace-rank0.jsonl", steady_steps=steady_steps)
    s.samples = samples
    return s.stop()


def test_window_spans_the_steady_steps(tmp_path):
    # (time s, host busy core-s, trainer CPU s, steps written)
    out = _stopped(tmp_path, [(0, 0, 0, 0), (1, 2, 1, 1), (2, 4, 2.5, 2), (4, 8, 5, 4)])
    assert out["window_s"] == 3 and out["trainer_cores"] == pytest.approx(4 / 3)
    assert out["other_cores"] == pytest.approx(2 - 4 / 3)


def test_steps_written_between_two_samples_use_the_sample_before(tmp_path):
    """All four steps appear in one sample (a stalled sampler, a fast run): the window starts
    at the sample before instead of dividing by a zero-length window."""
    out = _stopped(tmp_path, [(0, 0, 0, 0), (1, 1.5, 1, 0), (5, 9.5, 7, 4)])
    assert out["window_s"] == 4 and out["trainer_cores"] == pytest.approx(1.5)
    assert out["other_cores"] == pytest.approx(0.5)


def test_no_sample_before_the_steps_is_no_window(tmp_path):
    assert _stopped(tmp_path, [(0, 0, 0, 4), (1, 2, 1, 4)]) == {}
