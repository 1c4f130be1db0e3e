"""What-ifs from a CPU calibration (issue #27): projecting a CPU (gloo) calibration onto more
ranks is flagged by predict and diagnose, with whether the calibrated host was shared."""

from __future__ import annotations

import json
import math

import pytest

from netsim.diagnose.calibrated import transfer_check

CPU = {"name": "cpu:h0", "device": "cpu", "hosts": ["h0"], "backend": "gloo", "host_cores": 2,
       "available_cores": 1.2}


def test_a_cpu_calibration_does_not_transfer_to_more_ranks():
    out = transfer_check(CPU, 8, 2.0, 12288)
    assert out["transfers"] is False and out["device"] == "cpu"
    assert "does not transfer" in out["warning"] and "12288 ranks" in out["warning"]
    assert out["shared_host"] == ("8 ranks time-sliced 2 cores; other processes used 0.8 of "
                                  "the host's 2 cores")
    assert "warning" not in transfer_check(CPU, 8, 2.0, 8)  # its own layout: fine


def test_gpu_and_old_calibrations():
    gpu = {"device": "cuda", "backend": "nccl", "host_cores": 128}
    assert transfer_check(gpu, 16, math.inf, 12288)["transfers"] is True
    old = transfer_check({}, 8, math.inf, 12288)  # a file from before hardware was recorded
    assert old["device"] == "unknown" and old["transfers"] is True
    # ... unless its shared-host model says the ranks ran on CPU cores
    assert transfer_check({}, 8, 2.0, 12288)["transfers"] is False


@pytest.fixture
def cpu_calibration(tmp_path):
    fit = dict(intercept_s=1e-4, rate=1e9, points=4, rel_rms=0.01, max_rel=0.02)
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({
        "schema": "netsim-calibration/1", "sources": [], "world_size": 8, "host_cores": 2,
        "host": {}, "hardware": CPU, "compute": {"forward": dict(fit, rate=1e10)},
        "comm": {"all_reduce/server": fit, "all_reduce/server/dp": fit}}))
    return path


def test_predict_flags_a_cpu_calibration_at_scale(capsys, cpu_calibration):
    from tuner.cli import main

    args = ["predict", "--calibration", str(cpu_calibration), "--model", "tiny", "--json"]
    assert main(args + ["--dp", "1024", "--global-batch", "1024"]) == 0
    captured = capsys.readouterr()
    transfer = json.loads(captured.out)["calibration_transfer"]
    assert transfer["transfers"] is False and transfer["predicted_ranks"] == 1024
    warnings = [x for x in captured.err.splitlines() if "does not transfer" in x]
    assert len(warnings) == 1
    assert main(args + ["--dp", "8", "--global-batch", "8"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["calibration_transfer"]["transfers"] is True
    assert "does not transfer" not in captured.err
    assert "note: the calibration's host was shared: 8 ranks time-sliced 2 cores" in captured.err


def test_diagnose_at_scale_flags_a_cpu_calibration(capsys, tmp_path, make_trace,
                                                   cpu_calibration):
    from tuner.cli import main

    trace = make_trace(tmp_path / "t", 2, 1, 2)
    for cal in ([], ["--calibration", str(cpu_calibration)]):
        assert main(["diagnose", str(trace), "--at-scale", "4096", "--json", *cal]) == 0
        captured = capsys.readouterr()
        transfer = json.loads(captured.out)["calibration_transfer"]
        assert transfer["transfers"] is False and transfer["predicted_ranks"] == 4096
        assert captured.err.count("does not transfer") == 1
    assert main(["diagnose", str(trace), "--json"]) == 0  # no projection, nothing to flag
    assert "calibration_transfer" not in json.loads(capsys.readouterr().out)


def test_predict_flags_a_cpu_calibration_without_host_data(capsys, cpu_calibration):
    """Issue #27 item 4: a CPU calibration from profiler traces that carry no host record (a
    foreign Kineto job calibrated without --host-cores) prices every rank as if it had a core
    of its own; predict says so, on the calibration's own layout too."""
    from tuner.cli import main

    data = json.loads(cpu_calibration.read_text())
    data.update(host_cores=None, hardware={**CPU, "host_cores": None, "available_cores": None})
    cpu_calibration.write_text(json.dumps(data))
    args = ["predict", "--calibration", str(cpu_calibration), "--model", "tiny", "--json",
            "--dp", "8", "--global-batch", "8"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["calibration_transfer"]["host_unknown"] is True
    lines = [x for x in captured.err.splitlines() if "no record of the cores" in x]
    assert len(lines) == 1 and "--host-cores" in lines[0], captured.err
    cpu_calibration.write_text(json.dumps({**data, "host_cores": 2}))
    assert main(args) == 0  # with the shared-host model: no such line
    assert "no record of the cores" not in capsys.readouterr().err
