"""Issue #27 item 4: a profiler-only (Kineto) run of the CPU trainer records its host's cores
(``trainer_meta.host_cores``), so ``netsim calibrate`` fits the shared-host model on it as on
the native traces instead of pricing 8 ranks as if each had a core."""

from __future__ import annotations

import json

import pytest

from netsim.diagnose.calibrated import default_host_cores
from netsim.traces.detect import read_traces

from .test_integrity import write_kineto


def test_kineto_meta_with_host_cores_gives_the_host_model(tmp_path):
    d = write_kineto(tmp_path / "kineto", {})
    for f in d.glob("*.json"):  # both ranks: the trainer's meta since issue #27
        f.write_text(f.read_text().replace('\\"seed\\": 1', '\\"seed\\": 1, \\"host_cores\\": 2'
                                           ', \\"device\\": \\"cpu\\"'))
    run = read_traces(d)
    assert run.host == {"host_cores": 2.0}
    assert default_host_cores([run]) == 2.0


def test_kineto_meta_without_host_cores_has_no_host(tmp_path):
    run = read_traces(write_kineto(tmp_path / "kineto", {}))
    assert run.host == {}
    assert default_host_cores([run]) is None



def test_kineto_trainer_host_gives_the_load(tmp_path):
    """With the trainer's ``trainer_host`` record (the host's busy cores during the run) the
    profiler-only run knows the cores other processes took, as the native trace does."""
    d = write_kineto(tmp_path / "kineto", {})
    host = {"type": "host", "host_cores": 2, "ranks_per_host": 2, "wall_s": 1.0, "cpu_s": 0.4,
            "host_busy_cores": 1.8}
    for f in d.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["trainer_host"] = json.dumps(host)
        f.write_text(json.dumps(doc))
    run = read_traces(d)
    assert run.host["host_cores"] == 2.0 and run.host["trainer_cores"] == pytest.approx(0.8)
    assert run.host["available_cores"] == pytest.approx(1.0)  # 2 - (1.8 - 0.8)


def test_a_bad_trainer_host_is_one_line(tmp_path, capsys):
    d = write_kineto(tmp_path / "kineto", {})
    f = d / "kineto-rank1.json"
    doc = json.loads(f.read_text())
    doc["trainer_host"] = json.dumps({"cpu_s": -1, "wall_s": 1.0})
    f.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="trainer_host.cpu_s"):
        read_traces(d)


def _without_meta(d, extra=None):
    for f in d.glob("*.json"):
        doc = json.loads(f.read_text())
        meta = json.loads(doc.pop("trainer_meta"))
        doc["distributedInfo"] = {"backend": "gloo", "rank": meta["rank"],
                                  "world_size": meta["world_size"]}
        doc["traceEvents"] += extra or []
        f.write_text(json.dumps(doc))
    return d


def test_a_foreign_cpu_trace_with_trainer_host_gives_the_host_model(tmp_path):
    """A profiler trace of a CPU job without ``trainer_meta`` is read as a CPU run (no GPU
    work, no ``deviceProperties``): its host record's cores give the shared-host model."""
    d = write_kineto(tmp_path / "kineto", {})
    host = {"type": "host", "host_cores": 2, "ranks_per_host": 2, "wall_s": 1.0, "cpu_s": 0.4}
    for f in d.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["trainer_host"] = json.dumps(host)
        f.write_text(json.dumps(doc))
    run = read_traces(_without_meta(d))
    assert {r.meta["device"] for r in run.ranks} == {"cpu"}
    assert default_host_cores([run]) == 2.0


def test_a_foreign_trace_with_gpu_kernels_is_a_gpu_run(tmp_path):
    kernel = {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "ts": 10.0,
              "dur": 5.0, "pid": 0, "tid": 7}
    run = read_traces(_without_meta(write_kineto(tmp_path / "kineto", {}), [kernel]))
    assert {r.meta["device"] for r in run.ranks} == {"cuda"}
    assert default_host_cores([run]) is None
