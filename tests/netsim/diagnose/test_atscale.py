"""At-scale what-ifs (issue #27 item 5): priced on a GPU profile that the rows state, by the
same path as ``netsim predict --straggler``; a CPU calibration is never projected onto GPUs."""

from __future__ import annotations

import json

import pytest

from netsim.diagnose.atscale import scaled_job
from netsim.diagnose.calibration import fit_calibration, job_from_trace
from netsim.diagnose.diagnosis import diagnose, whatifs
from netsim.model.hardware import get_hardware
from netsim.traces.records import read_trace_dir
from netsim.workload.predict import predict
from tests.netsim.diagnose.test_diagnose import write_run


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    run = read_trace_dir(write_run(tmp_path_factory.mktemp("run"), slow={3: 1.3}))
    return run, diagnose(run).stragglers


def _at_scale_rows(rows):
    return [r for r in rows if "at scale" in r["action"]]


def test_default_projection_is_priced_on_the_gpu_profile_not_the_cpu_fit(slow_run):
    run, stragglers = slow_run
    row = _at_scale_rows(whatifs(run, stragglers, at_scale=4096))[0]
    assert row["hardware"] == "a100" and "a100 profile" in row["action"]
    traced = job_from_trace(run)
    job = scaled_job(traced.replace(act_bytes=2), 4096)
    want = predict(job, hardware=get_hardware("a100"),
                   stragglers={row["rank"]: row["slowdown"]}).mfu
    assert row["mfu_before"] == pytest.approx(want, rel=1e-9)
    cpu = predict(job, hardware=fit_calibration([run]).hardware(),
                  calibration=fit_calibration([run]), stragglers={row["rank"]: row["slowdown"]})
    assert cpu.mfu != pytest.approx(want, rel=0.5)  # what the CPU fit projected (the old answer)


def test_a_straggler_at_12288_gpus_costs_what_predict_says(slow_run, capsys):
    from tuner.cli import main
    from tuner.jobs import load_job

    run, stragglers = slow_run
    rows = _at_scale_rows(whatifs(run, stragglers, 12288, scale_job=load_job("gpt3-175b")))
    row = rows[0]
    assert row["gpus"] == 12288 and row["hardware"] == "a100"
    args = ["predict", "--job", "gpt3-175b", "--gpus", "12288", "--dp", "192",
            "--global-batch", str(1536 // 16 * 192), "--json"]
    assert main(args + ["--straggler", f"{row['rank']}:{row['slowdown']!r}"]) == 0
    slowed = json.loads(capsys.readouterr().out)["mfu"]
    assert main(args) == 0
    healthy = json.loads(capsys.readouterr().out)["mfu"]
    assert row["mfu_before"] == pytest.approx(slowed, rel=1e-9)
    assert row["mfu_after"] == pytest.approx(healthy, rel=1e-9)
    assert healthy - slowed > 0.1 * healthy * (1 - 1 / row["slowdown"])  # a real cost


def test_cli_states_the_profile_and_refuses_to_project_a_cpu_calibration(tmp_path, capsys):
    from tuner.cli import main

    trace = write_run(tmp_path / "t", slow={3: 1.3})
    assert main(["calibrate", str(trace), "-o", str(tmp_path / "cal.json")]) == 0
    capsys.readouterr()
    assert main(["diagnose", str(trace), "--calibration", str(tmp_path / "cal.json"),
                 "--at-scale", "4096", "--gpu", "h100"]) == 0
    out = capsys.readouterr()
    assert "not projected" in out.err and "h100 profile" in out.err
    scaled = [x for x in out.out.splitlines() if "at scale" in x]
    assert scaled and all("h100 profile" in x for x in scaled)
