"""The calibration loop for MoE and CP (issue #27): ``op/scope/ep`` and ``op/scope/cp`` fits
are accepted by predict and price the EP all-to-all and the CP ring as their closed forms."""

from __future__ import annotations

import json

import pytest

from netsim.diagnose.calibration import Calibration, load_calibration
from netsim.model.models import get_model
from netsim.workload import JobSpec, predict
from netsim.workload.volumes import cp_kv_width, ep_bytes

A2A = dict(intercept_s=3e-4, rate=2e8, points=4, rel_rms=0.01, max_rel=0.02)
SEND = dict(intercept_s=5e-5, rate=4e8, points=4, rel_rms=0.01, max_rel=0.02)
FWD = dict(intercept_s=0.0, rate=1e11, points=4, rel_rms=0.01, max_rel=0.02)


@pytest.fixture
def moe_cp_calibration(tmp_path):
    """What ``netsim calibrate`` writes for an EP x CP trace of 8 ranks on one host."""
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({
        "schema": "netsim-calibration/1", "sources": [], "world_size": 8, "host_cores": None,
        "host": {}, "compute": {"forward": FWD},
        "comm": {"all_to_all/server": A2A, "all_to_all/server/ep": A2A,
                 "send/server": SEND, "send/server/cp": SEND}}))
    return path


JOB = dict(model="mixtral-8x7b", tp=1, pp=1, cp=2, dp=4, ep=4, seq=1024, global_batch=8)


def test_ep_and_cp_fits_price_the_all_to_all_and_the_kv_ring(moe_cp_calibration):
    cal = load_calibration(moe_cp_calibration)  # refused before: "kind tp, pp or dp"
    job = JobSpec(**JOB)
    model = get_model("mixtral-8x7b").replace(seq=1024)
    pred = predict(job, hardware=cal.hardware(), calibration=cal)
    n = job.ep  # dispatch all-to-all: t = alpha + S (n - 1) / n / busbw
    assert pred.comm_s["ep"] == pytest.approx(
        A2A["intercept_s"] + ep_bytes(job, model) * (n - 1) / n / A2A["rate"], rel=1e-12)
    # the KV ring: cp - 1 sends of one rank's K,V block, each a fitted send
    block = job.micro_batch * 1024 // job.cp * cp_kv_width(model, job.tp) * job.act_bytes
    assert pred.comm_s["cp"] == pytest.approx(
        (job.cp - 1) * (SEND["intercept_s"] + block / SEND["rate"]), rel=1e-12)


def test_predict_cli_accepts_an_ep_cp_calibration(capsys, moe_cp_calibration):
    from tuner.cli import main

    rc = main(["predict", "--calibration", str(moe_cp_calibration), "--model", "mixtral-8x7b",
               "--cp", "2", "--dp", "4", "--ep", "4", "--seq", "1024", "--global-batch", "8",
               "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comm_s"]["ep"] > A2A["intercept_s"] and out["comm_s"]["cp"] > 0


def test_an_unknown_kind_is_still_refused(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"schema": "netsim-calibration/1", "compute": {},
                                "comm": {"all_reduce/server/zz": SEND}}))
    with pytest.raises(ValueError, match="kind one of tp, pp, dp, ep, cp"):
        load_calibration(path)


ALL_REDUCE = dict(intercept_s=1e-4, rate=1e9, points=4, rel_rms=0.01, max_rel=0.02)


@pytest.fixture
def dp_pp_calibration(tmp_path):
    """What ``netsim calibrate`` writes for a tp1 pp2 dp4 trace: no TP all-reduce."""
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({
        "schema": "netsim-calibration/1", "sources": [], "world_size": 8, "host_cores": None,
        "host": {}, "compute": {"forward": FWD},
        "comm": {"all_reduce/server": ALL_REDUCE, "all_reduce/server/dp": ALL_REDUCE,
                 "send/server": SEND, "send/server/pp": SEND}}))
    return path


def test_a_layout_the_calibration_never_saw_is_named(dp_pp_calibration):
    cal = load_calibration(dp_pp_calibration)
    seen = JobSpec(model="tiny", tp=1, pp=2, dp=4, global_batch=8)
    assert predict(seen, hardware=cal.hardware(), calibration=cal).calibration_gaps == []
    tp2 = JobSpec(model="tiny", tp=2, pp=1, dp=4, global_batch=8)
    gaps = predict(tp2, hardware=cal.hardware(), calibration=cal).calibration_gaps
    assert gaps == [{"kind": "tp", "op": "all_reduce", "scope": "server",
                     "fallback": "all_reduce/server"}]
    compute_only = Calibration(compute=cal.compute, world_size=8)
    bare = predict(tp2.replace(dp=1, global_batch=2), hardware=cal.hardware(),
                   calibration=compute_only)
    assert bare.calibration_gaps == [{"kind": "tp", "op": "all_reduce", "scope": "server",
                                      "fallback": "uncalibrated"}]
    assert predict(tp2).calibration_gaps == []  # no calibration, nothing to extrapolate


def test_predict_cli_warns_about_calibration_gaps(capsys, dp_pp_calibration):
    from tuner.cli import main

    args = ["predict", "--calibration", str(dp_pp_calibration), "--model", "tiny",
            "--dp", "4", "--global-batch", "8", "--json"]
    assert main(args + ["--tp", "1", "--pp", "2"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["calibration_gaps"] == [] and captured.err == ""
    assert main(args + ["--tp", "2"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["calibration_gaps"][0]["kind"] == "tp"
    lines = [x for x in captured.err.splitlines() if x.startswith("warning:")]
    assert len(lines) == 1 and "tp all_reduce (server)" in lines[0]
