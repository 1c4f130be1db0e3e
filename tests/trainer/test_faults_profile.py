"""Fault injection and --profile on the real trainer (8 gloo ranks): the injected straggler and
slow link are named alone by ``netsim diagnose``, a clean run names nobody, the torch.profiler
traces the trainer writes read back as the native ones and calibrate end to end."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter

import pytest

from trainer.cli import main
from trainer.faults import FaultConfig, parse_link
from trainer.profiling import parse_schedule

STEPS = 8


def torchrun(python, env, out, *args, timeout=900):
    cmd = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8",
           "-m", "trainer", "--model", "tiny", "--micro-batches", "4", "--steps", str(STEPS),
           "--device", "cpu", "--trace-dir", str(out), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def straggler_run(python, subprocess_env, tmp_path_factory):
    """tp2 pp2 dp2, rank 5 twice as slow, profiled over steps 2-7."""
    d = tmp_path_factory.mktemp("straggler")
    torchrun(python, subprocess_env, d / "native", "--tp", "2", "--pp", "2", "--dp", "2",
             "--global-batch", "8", "--inject-slow-rank", "5", "--slow-factor", "2",
             "--profile", str(d / "kineto"), "--profile-schedule", "1,1,6")
    return d


@pytest.fixture(scope="module")
def link_run(python, subprocess_env, tmp_path_factory):
    """tp2 dp4, rank 2's sends to rank 3 are 10 ms slower (5 ms is at the noise of a busy
    2-core host: the sweep in experiments/diagnose measures that)."""
    d = tmp_path_factory.mktemp("link") / "native"
    return torchrun(python, subprocess_env, d, "--tp", "2", "--dp", "4", "--global-batch", "16",
                    "--inject-slow-link", "2:3", "--link-delay-us", "10000")


@pytest.fixture(scope="module")
def clean_run(python, subprocess_env, tmp_path_factory):
    d = tmp_path_factory.mktemp("clean") / "native"
    return torchrun(python, subprocess_env, d, "--tp", "2", "--pp", "2", "--dp", "2",
                    "--global-batch", "8", "--seed", "7")


def test_straggler_is_named_alone(straggler_run):
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.records import read_trace_dir

    run = read_trace_dir(straggler_run / "native")
    d = diagnose(run)
    assert [s.rank for s in d.stragglers] == [5] and d.slow_links == []
    assert d.stragglers[0].slowdown > 1.5
    assert run.meta["faults"]["slow_rank"] == 5
    lines = (straggler_run / "native" / "trace-rank5.jsonl").read_text().splitlines()
    host, end = json.loads(lines[-2]), json.loads(lines[-1])  # the end record closes the file
    assert host["type"] == "host" and host["host_cores"] >= 1 and host["ranks_per_host"] == 8
    assert end["type"] == "end" and end["run_id"] == run.meta["run_id"] == run.summary["run_id"]
    assert end["steps"] == len(run.ranks[5].iterations) > 0


def test_slow_link_is_named_alone(link_run):
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.records import read_trace_dir

    d = diagnose(read_trace_dir(link_run))
    assert [sl.ranks for sl in d.slow_links] == [[2, 3]] and d.stragglers == []


def test_clean_run_names_nobody(clean_run):
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.records import read_trace_dir

    d = diagnose(read_trace_dir(clean_run))
    assert d.stragglers == [] and d.slow_links == []


def test_kineto_traces_hold_what_the_native_ones_hold(straggler_run):
    """Per profiled step, every rank's collectives (op, kind, bytes) and compute records
    (phase, name, layer, micro-batch) read from the torch.profiler files equal the native."""
    from netsim.traces.kineto import read_traces
    from netsim.traces.records import read_trace_dir

    native = read_trace_dir(straggler_run / "native")
    kin = read_traces(straggler_run / "kineto")
    assert [r.meta["rank"] for r in kin.ranks] == list(range(8))
    steps = sorted({it["step"] for it in kin.ranks[0].iterations})
    assert steps == list(range(2, STEPS))

    def calls(rank, step):
        return Counter((c["op"], c["kind"], c["bytes"], tuple(c["group"]))
                       for c in rank.collectives if c["step"] == step
                       and len(c["group"]) < 8)  # the float64 loss: gloo records no dtype

    def comp(rank, step):
        return Counter((c["phase"], c.get("name"), c["layer"], c.get("microbatch"))
                       for c in rank.compute if c["step"] == step and c["phase"] != "iteration")

    def key(c):
        return c["step"], c["phase"], c.get("name"), c["layer"], c.get("microbatch")

    for nr, kr in zip(native.ranks, kin.ranks, strict=True):
        for step in steps:
            assert calls(kr, step) == calls(nr, step)
            assert comp(kr, step) == comp(nr, step)
        want = {key(c): c["cpu_s"] for c in nr.compute if "cpu_s" in c}
        got = {key(c): c.get("cpu_s") for c in kr.compute}
        assert got == pytest.approx({k: want[k] for k in got}, abs=1e-6)  # trainer/cpu marks
        dp_native = sum(c["overlapped"] for c in nr.collectives if c["step"] in steps)
        assert sum(c["overlapped"] for c in kr.collectives) == dp_native


def test_calibrate_and_diagnose_from_kineto(straggler_run, tmp_path):
    from tuner.cli import main as netsim

    out = tmp_path / "cal.json"
    assert netsim(["calibrate", str(straggler_run / "kineto"), "-o", str(out), "--json"]) == 0
    cal = json.loads(out.read_text())
    assert cal["host_cores"] == os.cpu_count() and cal["host"]["cpu_msg_s"] >= 0  # issue #27
    assert {"forward", "backward"} <= set(cal["compute"])
    assert "all_reduce/server/tp" in cal["comm"] and "send/server/pp" in cal["comm"]
    assert netsim(["diagnose", str(straggler_run / "kineto"), "--json", "--plot",
                   str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "heatmap.png").stat().st_size > 0


def test_diagnose_cli_json_contract(straggler_run, capsys, tmp_path):
    from tuner.cli import main as netsim

    assert netsim(["diagnose", str(straggler_run / "native"), "--json", "--at-scale", "64",
                   "--plot", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [set(s) >= {"rank", "host", "slowdown", "confidence"} for s in out["stragglers"]]
    assert out["stragglers"][0]["rank"] == 5 and out["slow_links"] == []
    assert len(out["whatif"]) == 2 and all(w["mfu_after"] > w["mfu_before"]
                                           for w in out["whatif"])
    assert {"action", "mfu_before", "mfu_after"} <= set(out["whatif"][0])
    assert isinstance(out["stragglers"][0]["host_shared"], bool)
    [host] = out["host_sharing"]  # the trainer's host records: one host
    assert host["ranks"] == 8 and host["run_cores"] > 0 and isinstance(host["shared"], bool)
    assert (tmp_path / "heatmap.png").exists()


@pytest.mark.parametrize("argv, field", [
    (["--inject-slow-rank", "3"], "outside the world"),
    (["--inject-slow-link", "3"], "R:PEER"),
    (["--inject-slow-rank", "0", "--slow-factor", "0.5"], "slow_factor"),
    (["--profile", "x", "--profile-schedule", "1,2"], "WAIT,WARMUP,ACTIVE")])
def test_bad_fault_and_profile_flags(capsys, argv, field):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


def test_fault_config_units():
    assert parse_link("3:2") == (3, 2)
    assert parse_schedule("0,1,3") == (0, 1, 3)
    assert not FaultConfig().active
    assert FaultConfig(slow_rank=1, slow_factor=1.2).active
    with pytest.raises(ValueError, match="itself"):
        FaultConfig(slow_link=(2, 2), link_delay_us=5)


def test_newcomer_loop_predicts_its_own_run_within_10_percent(clean_run):
    """docs/trainer.md's run -> netsim calibrate (defaults) -> netsim predict --like with that
    calibration: within 10% of the measured median step, on the calibrated host's name. On a
    quiet host the ranks keep ~92% of the 2 cores busy; without the calibration's measured
    host utilization the loop ran 7-13% low there (docs/diagnose.md)."""
    import numpy as np

    from netsim.diagnose.calibrated import default_host_cores, hardware_for
    from netsim.diagnose.calibration import fit_calibration, fit_host_on_iterations, job_from_trace
    from netsim.traces.records import read_trace_dir
    from netsim.workload import predict

    run = read_trace_dir(clean_run)
    cores = default_host_cores([run])
    assert cores is not None and run.host["available_cores"] > 0
    cal = fit_host_on_iterations(fit_calibration([run], host_cores=cores), [run])
    hw = hardware_for(cal, None)
    assert hw.name.startswith("cpu:")
    hw = hw.replace(host_cores=min(hw.host_cores, run.host["available_cores"]))
    pred = predict(job_from_trace(run), hardware=hw, calibration=cal)
    measured = float(np.median(run.iteration_s(skip=1)))
    assert pred.iteration_s == pytest.approx(measured, rel=0.10)


@pytest.fixture(scope="module")
def profiled_run(python, subprocess_env, tmp_path_factory):
    """The newcomer's job run with ``--profile`` (schedule 1,1,6: steps 2-7 recorded)."""
    d = tmp_path_factory.mktemp("profiled")
    torchrun(python, subprocess_env, d / "native", "--tp", "2", "--pp", "2", "--dp", "2",
             "--global-batch", "8", "--seed", "7", "--profile", str(d / "kineto"),
             "--profile-schedule", "1,1,6")
    return d / "kineto"


@pytest.mark.slow  # its own profiled trainer run: ~30 s and more on a loaded 2-core host
def test_profiled_run_predicts_itself_within_10_percent(profiled_run):
    """Issue #27: a run traced with --profile, calibrated from its Kineto files alone, predicts
    its own measured median step within 10%. The host utilization is measured over the
    recorded steps: over the host window (which holds the trace export after the last step)
    the loop ran 11-15% low on three runs (docs/diagnose.md, "Utilization over the steps")."""
    import numpy as np

    from netsim.diagnose.calibrated import default_host_cores, hardware_for
    from netsim.diagnose.calibration import fit_calibration, fit_host_on_iterations, job_from_trace
    from netsim.traces.kineto import read_traces
    from netsim.workload import predict

    run = read_traces(profiled_run)
    assert run.host["available_cores"] > 0
    cal = fit_host_on_iterations(fit_calibration([run], host_cores=default_host_cores([run])),
                                 [run])
    hw = hardware_for(cal, None)
    hw = hw.replace(host_cores=min(hw.host_cores, run.host["available_cores"]))
    pred = predict(job_from_trace(run), hardware=hw, calibration=cal)
    measured = float(np.median(run.iteration_s(skip=1)))
    assert pred.iteration_s == pytest.approx(measured, rel=0.10)


def test_predict_like_cli_names_the_host_and_refuses_other_hardware(clean_run, tmp_path,
                                                                    capsys):
    from tuner.cli import main as netsim

    cal = tmp_path / "cal.json"
    assert netsim(["calibrate", str(clean_run), "-o", str(cal)]) == 0
    err = capsys.readouterr().err
    assert "host records" in err and "warning: compute forward: fitted on one shape" in err
    assert netsim(["predict", "--like", str(clean_run), "--calibration", str(cal)]) == 0
    out = capsys.readouterr().out
    assert " x cpu:" in out.splitlines()[0] and "a100" not in out
    assert netsim(["predict", "--like", str(clean_run), "--calibration", str(cal),
                   "--gpu", "a100"]) == 2
    assert "fitted on cpu:" in capsys.readouterr().err


def _strip_trainer_meta(src, dst):
    """The trainer's torch.profiler files as any PyTorch job's: trainer_meta removed."""
    dst.mkdir()
    for f in sorted(src.glob("*.json")):
        doc = json.loads(f.read_text())
        doc.pop("trainer_meta", None)
        (dst / f.name).write_text(json.dumps(doc))
    return dst


def _comm_gap(a, b) -> float:
    """Largest relative difference of two calibrations' shared comm fits, each evaluated at
    the bus bytes of 1 KiB to 16 MiB."""
    gaps = []
    for key in set(a.comm) & set(b.comm):
        for x in (2.0**10, 2.0**17, 2.0**24):
            ta, tb = a.comm[key].time_s(x), b.comm[key].time_s(x)
            gaps.append(abs(ta - tb) / tb)
    return max(gaps)


def test_stripped_trainer_profiles_read_as_a_foreign_job(straggler_run, tmp_path):
    """Without trainer_meta the trainer's profiler traces are a foreign job's
    (``netsim.traces.generic_kineto``): its layout is inferred from the process groups, the
    same straggler is named, and the collectives calibrate within 2% of the trainer's own
    reading of the same files (compute: no model, not calibrated)."""
    from netsim.diagnose.calibration import fit_calibration
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.detect import read_traces
    from netsim.traces.records import read_trace_dir

    foreign = read_traces(_strip_trainer_meta(straggler_run / "kineto", tmp_path / "foreign"))
    own = read_traces(straggler_run / "kineto")
    assert own.meta.get("layout_known", True) and not foreign.meta["layout_known"]
    assert [(r.meta["tp"], r.meta["pp"], r.meta["dp"]) for r in foreign.ranks] == [(2, 2, 2)] * 8
    assert [r.meta["pp_rank"] for r in foreign.ranks] == [r.meta["pp_rank"] for r in own.ranks]
    native = read_trace_dir(straggler_run / "native")
    assert [s.rank for s in diagnose(foreign).stragglers] == [
        s.rank for s in diagnose(native).stragglers] == [5]
    cal_f, cal_o = fit_calibration([foreign]), fit_calibration([own])
    print("comm gap to the trainer's reading:", _comm_gap(cal_f, cal_o), "to the native "
          "trace-rank*.jsonl calibration:", _comm_gap(cal_f, fit_calibration([native])))
    assert set(cal_f.comm) == set(cal_o.comm) and not cal_f.compute
    assert _comm_gap(cal_f, cal_o) < 0.02


def _strip_trainer_records(src, dst):
    """The trainer's torch.profiler files with nothing of the trainer's but the group of each
    gloo call: ``trainer_meta``, the compute ranges and the CPU-time marks removed; the
    ``trainer/comm/{kind}/{ranks}`` ranges kept, standing in for what NCCL's
    ``record_param_comms`` records (``Process Group Ranks``) and gloo does not."""
    dst.mkdir()
    for f in sorted(src.glob("*.json")):
        doc = json.loads(f.read_text())
        doc.pop("trainer_meta", None)
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if not str(e.get("name", "")).startswith("trainer/")
                              or str(e.get("name", "")).startswith("trainer/comm/")]
        (dst / f.name).write_text(json.dumps(doc))
    return dst


def _calls(run):
    return [Counter((c["op"], c["kind"], c["bytes"], tuple(c["group"]), c["overlapped"])
                    for c in r.collectives) for r in run.ranks]


def test_trainer_profiles_without_trainer_records_calibrate_alike(straggler_run, tmp_path):
    """Issue #31 item 3 against the native reading of the same profiler files (the
    trainer-aware Kineto path): with the layout given as flags, every collective reads back
    the same and the comm calibration is within 2% (here: equal). Compute is not calibrated
    from a foreign job (no model, no layer ranges: FLOPs unknown); both readings take the
    host's cores from the trainer_host records the profiler documents keep, so both fit the
    same host model."""
    from netsim.diagnose.calibrated import default_host_cores
    from netsim.diagnose.calibration import fit_calibration
    from netsim.traces.detect import read_traces
    from netsim.traces.generic_kineto import Layout

    own = read_traces(straggler_run / "kineto")
    foreign = read_traces(_strip_trainer_records(straggler_run / "kineto", tmp_path / "f"),
                          Layout(tp=2, pp=2, dp=2))
    assert not any("trainer/" in c["name"] for r in foreign.ranks for c in r.compute)
    assert _calls(foreign) == _calls(own)
    cores = default_host_cores([own])
    assert cores is not None and cores == default_host_cores([foreign])
    assert cores == own.host["host_cores"] >= 1
    cal_f, cal_o = fit_calibration([foreign]), fit_calibration([own])
    assert set(cal_f.comm) == set(cal_o.comm) and _comm_gap(cal_f, cal_o) < 0.02
    assert not cal_f.compute and {"forward", "backward"} <= set(cal_o.compute)


@pytest.mark.xfail(strict=True, reason="the trainer's --inject-slow-rank stretches a compute "
                   "record with a Python spin between operators, which no profiler operator "
                   "records: without the trainer's compute ranges the slowed rank's operators "
                   "are as fast as the others' (a job whose operators are slower is found: "
                   "tests/netsim/traces/test_generic_kineto.py)")
def test_trainer_profiles_without_trainer_records_name_the_straggler(straggler_run, tmp_path):
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.detect import read_traces
    from netsim.traces.generic_kineto import Layout

    foreign = read_traces(_strip_trainer_records(straggler_run / "kineto", tmp_path / "f"),
                          Layout(tp=2, pp=2, dp=2))
    assert [s.rank for s in diagnose(foreign).stragglers] == [5]
