"""Calibration recovers the costs a synthetic trace was built with; readers reject bad files."""

from __future__ import annotations

import json

import pytest

from netsim.diagnose.calibration import (
    fit_calibration,
    job_from_trace,
    load_calibration,
    save_calibration,
)
from netsim.traces.records import read_bench, read_trace_dir
from netsim.workload import JobSpec, predict


def test_fit_recovers_compute_rate_and_alpha_beta(trace_dirs, truth):
    cal = fit_calibration([read_trace_dir(d) for d in trace_dirs])
    fwd, bwd = cal.compute["forward"], cal.compute["backward"]
    assert fwd.rate == pytest.approx(truth["rate_flops"], rel=1e-6)
    assert bwd.rate == pytest.approx(truth["rate_flops"], rel=1e-6)
    assert fwd.intercept_s == pytest.approx(0.0, abs=1e-12)
    ar = cal.comm["all_reduce/server"]
    assert ar.intercept_s == pytest.approx(truth["alpha_s"], rel=1e-6)
    assert ar.rate == pytest.approx(truth["busbw"], rel=1e-6)
    assert ar.rel_rms < 1e-9 and ar.max_rel < 1e-9


def test_calibrated_prediction_uses_the_fits(trace_dirs, truth):
    """A TP all-reduce priced by the calibrated model equals alpha + S f / busbw."""
    cal = fit_calibration([read_trace_dir(d) for d in trace_dirs])
    run = read_trace_dir(trace_dirs[1])  # tp = 2
    job = job_from_trace(run)
    pred = predict(job, hardware=cal.hardware(), calibration=cal)
    size = job.micro_batch * 32 * 64 * 4
    assert pred.comm_s["tp"] == pytest.approx(truth["alpha_s"] + size * 1.0 / truth["busbw"])


def test_save_load_round_trip(trace_dirs, tmp_path):
    cal = fit_calibration([read_trace_dir(d) for d in trace_dirs])
    save_calibration(cal, tmp_path / "c.json")
    back = load_calibration(tmp_path / "c.json")
    assert back.compute == cal.compute and back.comm == cal.comm


def test_job_from_trace(trace_dirs):
    job = job_from_trace(read_trace_dir(trace_dirs[2]))
    assert isinstance(job, JobSpec) and (job.tp, job.pp, job.dp) == (4, 1, 2)
    assert job.act_bytes == 4  # float32 run


def test_bad_trace_files_are_rejected(tmp_path, make_trace):
    with pytest.raises(ValueError, match="no trace-rank"):
        read_trace_dir(tmp_path)
    d = make_trace(tmp_path / "bad", 1, 1, 1)
    lines = (d / "trace-rank0.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["end_s"]
    (d / "trace-rank0.jsonl").write_text("\n".join([lines[0], json.dumps(broken)]))
    with pytest.raises(ValueError, match=r"trace-rank0.jsonl:2: .*end_s"):
        read_trace_dir(d)
    meta = json.loads(lines[0])
    meta["schema"] = "other/9"
    (d / "trace-rank0.jsonl").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="schema"):
        read_trace_dir(d)


def test_bench_file(tmp_path, truth):
    sizes = [1 << k for k in range(10, 24, 2)]
    results = [{"op": "all_reduce", "size_bytes": s, "count": s // 4, "dtype": "float32",
                "time_s": truth["alpha_s"] + s * 2 * 3 / 4 / truth["busbw"],
                "group": [0, 1, 2, 3]} for s in sizes]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"schema": "trainer-bench/1", "backend": "gloo",
                                "world_size": 4, "device": "cpu", "results": results}))
    cal = fit_calibration([], [read_bench(path)])
    assert cal.comm["all_reduce/server"].rate == pytest.approx(truth["busbw"], rel=1e-6)
    path.write_text(json.dumps({"schema": "nope"}))
    with pytest.raises(ValueError, match="schema"):
        read_bench(path)
