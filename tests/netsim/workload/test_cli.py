"""``netsim predict`` and ``netsim calibrate``: JSON contract keys, refusals, files."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main

KEYS = ("iteration_s", "mfu", "tokens_per_s", "bubble_fraction", "exposed_comm_s")


def test_predict_json_keys(capsys):
    rc = main(["predict", "--model", "gpt3-175b", "--gpu", "a100", "--gpus", "12288", "--tp", "8",
               "--pp", "8", "--dp", "192", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in KEYS:
        assert key in out
    assert out["job"]["global_batch"] == 0 and out["micro_batches"] == 32


def test_predict_megascale_fabric(capsys):
    rc = main(["predict", "--model", "gpt3-13b", "--gpus", "64", "--tp", "8", "--pp", "2",
               "--dp", "4", "--fabric", "megascale", "--overlap", "megascale", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fabric"] == "megascale" and out["comm_model"] == "flow"  # default with a fabric


def test_predict_comm_models_agree_without_contention(capsys):
    """64 GPUs under one MegaScale ToR set share no uplink: flow = alpha-beta."""
    argv = ["predict", "--model", "gpt3-13b", "--gpus", "64", "--tp", "8", "--pp", "2",
            "--dp", "4", "--fabric", "megascale", "--json"]
    outs = {}
    for comm in ("flow", "analytic"):
        assert main([*argv, "--comm", comm]) == 0
        outs[comm] = json.loads(capsys.readouterr().out)
        assert outs[comm]["comm_model"] == comm
    assert outs["flow"]["iteration_s"] == pytest.approx(outs["analytic"]["iteration_s"], rel=1e-6)


def test_predict_without_fabric_is_analytic(capsys):
    assert main(["predict", "--model", "gpt3-1.3b", "--tp", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["comm_model"] == "analytic"


@pytest.mark.parametrize("argv,msg", [
    (["--gpus", "100", "--tp", "8", "--pp", "8", "--dp", "192"], "!= gpus"),
    (["--model", "gpt3-13b", "--pp", "9"], "--first-stage-layers"),  # 40 and 42 % 9 != 0
    (["--dp", "4", "--global-batch", "10"], "not divisible by dp"),
    (["--model", "nope"], "unknown model"),
    (["--overlap", "everything"], "--overlap"),
    (["--comm", "flow"], "needs --fabric"),
])
def test_predict_refuses_impossible(argv, msg, capsys):
    assert main(["predict", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


def test_predict_job_file(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("model: gpt3-6.7b\ntp: 8\npp: 2\ndp: 2\nglobal_batch: 64\n")
    assert main(["predict", "--job", str(job), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus"] == 32


def test_calibrate_then_predict(trace_dirs, tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert main(["calibrate", *map(str, trace_dirs), "-o", str(out), "--json"]) == 0
    fits = json.loads(capsys.readouterr().out)
    assert "forward" in fits["compute"] and "all_reduce/server" in fits["comm"]
    assert out.exists()
    assert main(["predict", "--model", "gpt3-1.3b", "--tp", "2", "--calibration", str(out),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["iteration_s"] > 0


def test_calibrate_missing_path(capsys):
    assert main(["calibrate", "/nonexistent/trace"]) == 2
    assert "error" in capsys.readouterr().err
