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


def _mark_lines(n: int) -> bytes:
    return b"".join(b'{"type": "iteration", "step": %d}\n' % k for k in range(n))


def test_an_earlier_runs_trace_file_is_not_counted(tmp_path):
    """A rerun into the same directory: rank 0's file of the earlier run is there when the
    sampler starts (it had counted its four steps at once, found no window and reported
    nothing: every layout of the 2026-12-06 rerun got the nominal cores); its steps count only
    once the new run rewrites the file."""
    trace = tmp_path / "trace-rank0.jsonl"
    trace.write_bytes(_mark_lines(4))
    s = LoadSampler(trace, steady_steps=3)
    s._stale = s._signature()  # what start() records, without a sampler thread
    assert s._steps_done() == 0
    trace.write_bytes(_mark_lines(1))  # the new run truncates it and writes its first step
    assert s._steps_done() == 1
    with open(trace, "ab") as fh:
        fh.write(_mark_lines(2))
    assert s._steps_done() == 3
