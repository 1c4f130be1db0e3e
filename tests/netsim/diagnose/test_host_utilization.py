"""The calibration's host utilization is measured over the steps, and the host model counts
the messages the trainer sends (issue #27: a profiled run predicts itself within 10%).

* Ranks whose steps take ``S`` seconds of process CPU each, ``R`` ranks per step of wall time
  ``T``, on ``C`` cores left to them, used ``R S / (T C)`` of those cores, whatever the host
  window (which also holds a profiler's trace export after the last step) says.
* A tied word embedding is reduced over dp in a bucket of its own on the first and the last
  stage (``trainer/data_parallel.py``): one more all-reduce there, no more bytes.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from netsim.diagnose.calibration import STALL_FACTOR, host_utilization, step_cores
from netsim.workload import JobSpec
from netsim.workload.comm import ring_steps
from netsim.workload.host import stage_calls


def fake_run(step_cpu_s: float, walls_s: list[float], ranks: int = 8,
             window_cores: float = 2.0, available: float = 2.0, first_step: int = 0):
    """A run whose every rank spends ``step_cpu_s`` of CPU in each step; rank 0's steps take
    ``walls_s``; the host window says the ranks used ``window_cores``."""
    steps = range(first_step, first_step + len(walls_s))
    its = [{"step": k, "iteration_s": w} for k, w in zip(steps, walls_s, strict=True)]
    recs = [{"phase": "iteration", "step": k, "cpu_s": step_cpu_s} for k in steps]
    rank = SimpleNamespace(iterations=its, compute=recs)
    return SimpleNamespace(ranks=[rank] * ranks, summary={"start_step": 0},
                           host={"trainer_cores": window_cores, "available_cores": available})


def test_utilization_is_measured_over_the_steps_not_the_host_window():
    # warm-up step 0 (dropped), then 0.5 s steps of 8 ranks x 0.1125 s CPU on 2 cores: 0.9
    run = fake_run(0.1125, [3.0, 0.5, 0.5, 0.5], window_cores=2.0)
    assert step_cores(run) == pytest.approx(8 * 0.1125 / 0.5)
    assert host_utilization([run], 2.0) == {"utilization": pytest.approx(0.9)}


def test_a_stalled_step_is_left_out_like_the_median_step_leaves_it_out():
    stall = (STALL_FACTOR + 1.0) * 0.5  # a profiler's start: wall time, the ranks waiting
    run = fake_run(0.1125, [0.5, stall, 0.5, 0.5, 0.5])
    assert step_cores(run) == pytest.approx(8 * 0.1125 / 0.5)


def test_steps_without_cpu_time_fall_back_to_the_host_window():
    run = fake_run(0.1, [0.5, 0.5], window_cores=1.2, available=1.5)
    for r in run.ranks:
        for c in r.compute:
            c["cpu_s"] = None
    assert step_cores(run) is None
    assert host_utilization([run], 2.0) == {"utilization": pytest.approx(0.8)}


def test_a_profiler_trace_keeps_all_its_steps():
    """Kineto files start after the warm-up: when no step is at or after ``start_step + 1``
    every step is kept, as ``TraceRun.iteration_s`` keeps them."""
    run = fake_run(0.05, [0.4, 0.4], first_step=0)
    run.summary["start_step"] = 5
    assert step_cores(run) == pytest.approx(8 * 0.05 / 0.4)


@pytest.mark.parametrize("pp, dp", [(2, 2), (4, 2), (2, 4)])
def test_a_tied_embedding_is_reduced_in_its_own_bucket(pp, dp):
    kw = dict(model="gpt3-125m", layers=8, hidden=64, heads=4, seq=32, vocab=128, tp=2,
              pp=pp, dp=dp, global_batch=4 * dp)
    job = JobSpec(**kw)
    tied = job.model_config()
    untied = replace(tied, tied_embeddings=False)
    assert tied.tied_embeddings
    for stage in range(pp):
        (m_t, b_t), (m_u, b_u) = stage_calls(job, tied, stage), stage_calls(job, untied, stage)
        extra = ring_steps("all_reduce", dp) if stage in (0, pp - 1) else 0
        assert m_t - m_u == extra and b_t == pytest.approx(b_u)

