"""The shared-host model against its closed forms (processor sharing, work-conserving).

* R identical independent ranks on C <= R cores take R / C times one rank's time.
* On at least as many cores as ranks, nothing changes: a pipeline with bubbles keeps its
  dedicated-core critical path, and a GPU profile (``host_cores`` infinite) is never bound.
* Calibration deflates the wall time of a record shared by n runnable ranks on C cores by C / n.
"""

from __future__ import annotations

import json
import math

import pytest

from netsim.diagnose.calibration import fit_calibration
from netsim.model.hardware import A100
from netsim.traces.records import read_trace_dir
from netsim.workload import JobSpec, predict
from netsim.workload.host import HostCost, stage_calls

TASK_S = {"forward": 2e-3, "backward": 4e-3, "logits_forward": 1e-3, "logits_backward": 2e-3,
          "optimizer": 5e-3}


class ConstantCompute:
    """Every task of a phase costs the same dedicated-core time."""

    def task_s(self, task):
        return TASK_S[task.phase] * max(task.layers, 1)


def tiny(**kw) -> JobSpec:
    return JobSpec(model="gpt3-125m", layers=8, hidden=64, heads=4, seq=32, vocab=128, **kw)


def on_host(ranks: int, cores: float):
    """A free network and one server of ``ranks`` slots sharing ``cores`` cores."""
    return A100.infinite_network().replace(gpus_per_server=ranks, nics_per_server=ranks,
                                           host_cores=cores)


def one_rank_s(job: JobSpec) -> float:
    """One rank's iteration on a dedicated core: m L (t_f + t_b) + logits + optimizer."""
    m, layers = job.micro_batches, job.model_config().layers
    return (m * layers * (TASK_S["forward"] + TASK_S["backward"])
            + m * (TASK_S["logits_forward"] + TASK_S["logits_backward"]) + TASK_S["optimizer"])


@pytest.mark.parametrize("cores", [1, 2, 3, 8])
def test_identical_ranks_share_the_cores(cores):
    job = tiny(dp=8, global_batch=16)
    pred = predict(job, hardware=on_host(8, cores), compute_model=ConstantCompute())
    assert pred.iteration_s == pytest.approx(8 / cores * one_rank_s(job), rel=1e-12)


def test_more_cores_than_ranks_is_the_dedicated_critical_path():
    job = tiny(dp=4, global_batch=8)
    pred = predict(job, hardware=on_host(4, 16), compute_model=ConstantCompute())
    assert pred.iteration_s == pytest.approx(one_rank_s(job), rel=1e-12)
    assert pred.host_s == pytest.approx(4 / 16 * one_rank_s(job), rel=1e-12)


def test_pipeline_with_bubbles_on_enough_cores_is_unaffected():
    job = tiny(pp=4, dp=2, global_batch=8)  # m = 4 on p = 4: bubble 3/7 of the pipeline
    free = predict(job, hardware=on_host(8, math.inf), compute_model=ConstantCompute())
    shared = predict(job, hardware=on_host(8, 8), compute_model=ConstantCompute())
    assert free.bubble_s > 0 and free.host_s == 0.0
    assert shared.iteration_s == free.iteration_s
    assert shared.host_s < shared.iteration_s  # mean stage work < busiest stage + bubble
    starved = predict(job, hardware=on_host(8, 1), compute_model=ConstantCompute())
    assert starved.iteration_s == pytest.approx(starved.host_s)  # 8 ranks' work on 1 core
    assert starved.iteration_s > free.iteration_s


def test_gpu_profile_is_never_host_bound():
    job = JobSpec(model="gpt3-1.3b", tp=2, pp=2, dp=4, global_batch=64)
    pred = predict(job, hardware=A100)
    assert pred.host_s == 0.0


def test_host_cost_and_call_counts():
    cost = HostCost(cpu_msg_s=1e-3, cpu_bytes_per_s=1e9, cpu_iter_s=0.1)
    assert cost.work_s(10, 2e9) == pytest.approx(0.1 + 0.01 + 2.0)
    job = tiny(tp=2, pp=2, dp=4, global_batch=16)  # m = 4, 4 layers per stage
    model = job.model_config()
    msgs0, _ = stage_calls(job, model, 0)
    msgs1, _ = stage_calls(job, model, 1)
    # ring steps: loss all-reduce over 16 ranks 2 x 15; tp all-reduces m (4 L + 1) x 2;
    # p2p 2 m; embedding all-reduce over 2 ranks 2; one dp bucket over 4 ranks 2 x 3 and the
    # tied embedding's own bucket 2 x 3 (trainer/data_parallel.py)
    assert msgs0 == 30 + 4 * (4 * 4 + 1) * 2 + 2 * 4 + 2 + 6 + 6
    # last stage adds 3 m cross-entropy all-reduces over tp
    assert msgs1 == msgs0 + 3 * 4 * 2


def test_calibration_deflates_time_sliced_records(trace_dirs, truth):
    """Synthetic traces: 8 ranks compute at the same instants; on 2 cores each record's
    dedicated-core work is 2/8 of its wall time, so the fitted rate is 4x the wall rate."""
    runs = [read_trace_dir(d) for d in trace_dirs]
    wall = fit_calibration(runs)
    shared = fit_calibration(runs, host_cores=2)
    assert wall.compute["forward"].rate == pytest.approx(truth["rate_flops"], rel=1e-6)
    assert shared.compute["forward"].rate == pytest.approx(4 * truth["rate_flops"], rel=1e-6)
    assert shared.host_cores == 2 and wall.host_cores == math.inf
    assert shared.hardware().host_cores == 2


def test_calibrate_cli_host_cores(trace_dirs, tmp_path, capsys):
    """``netsim calibrate --host-cores`` writes the host fit; the predict side reads it back."""
    from netsim.diagnose.calibration import load_calibration
    from tuner.cli import main

    out = tmp_path / "cal.json"
    assert main(["calibrate", *map(str, trace_dirs), "-o", str(out), "--host-cores", "2",
                 "--comm-weight", "0.5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["host_cores"] == 2 and data["host"]["comm_weight"] == 0.5
    cal = load_calibration(out)
    assert cal.host_cores == 2 and cal.host_cost().cpu_msg_s == data["host"]["cpu_msg_s"]
    assert main(["calibrate", str(trace_dirs[0]), "--host-cores", "0"]) == 2
    assert main(["calibrate", str(trace_dirs[0]), "--host-cores", "2", "--comm-weight", "x"]) == 2


class _Idle:
    """A calibration that only says the ranks kept ``utilization`` of the cores busy."""

    def __init__(self, utilization: float) -> None:
        self.utilization = utilization

    def host_cost(self) -> HostCost:
        return HostCost(utilization=self.utilization)

    def comm_model(self, hw):
        from netsim.workload.comm import AnalyticCommModel

        return AnalyticCommModel(hw)


@pytest.mark.parametrize("utilization", [1.0, 0.8, 0.5])
def test_idle_share_of_the_cores_stretches_the_host_bound(utilization):
    """Ranks that leave (1 - u) of the cores idle finish the host's work in 1/u the time."""
    job = tiny(dp=8, global_batch=16)
    pred = predict(job, hardware=on_host(8, 2), compute_model=ConstantCompute(),
                   calibration=_Idle(utilization))
    assert pred.iteration_s == pytest.approx(8 / 2 * one_rank_s(job) / utilization, rel=1e-12)


def test_calibration_measures_utilization_from_host_records():
    from types import SimpleNamespace

    from netsim.diagnose.calibration import host_utilization

    runs = [SimpleNamespace(host={"trainer_cores": 1.8, "available_cores": 2.0}),
            SimpleNamespace(host={"trainer_cores": 1.2, "available_cores": 1.25}),
            SimpleNamespace(host={"trainer_cores": 0.9, "available_cores": 1.0})]
    assert host_utilization(runs, 2.0) == {"utilization": pytest.approx(0.9)}
    assert host_utilization([SimpleNamespace(host={})], 2.0) == {}


def test_calibrate_cli_says_the_host_was_shared(make_trace, tmp_path, capsys):
    """Issue #27 item 4: calibrate, like predict, names the host's sharing: 8 ranks on 2 cores
    and the 0.7 core other processes took (the host records: 8 x 0.15 CPU s over 1 s of wall
    is 1.2 cores of the ranks', 1.9 busy)."""
    from tuner.cli import main

    d = make_trace(tmp_path / "t", 2, 1, 4)
    host = {"type": "host", "host_cores": 2, "ranks_per_host": 8, "wall_s": 1.0,
            "cpu_s": 0.15, "host_busy_cores": 1.9}
    for f in d.glob("trace-rank*.jsonl"):
        f.write_text(f.read_text() + "\n" + json.dumps(host))
    assert main(["calibrate", str(d), "-o", str(tmp_path / "cal.json")]) == 0
    notes = [x for x in capsys.readouterr().err.splitlines() if "host was shared" in x]
    assert notes == ["netsim calibrate: note: the traced host was shared: 8 ranks time-sliced "
                     "2 cores; other processes used 0.7 of the host's 2.0 cores (the fits hold "
                     "for that load; netsim predict says so too)"]
