"""torch.profiler traces of a plain PyTorch job (``torch_job.py``: DDP and FSDP2 on gloo, not
this project's trainer) read into ``netsim diagnose`` and ``netsim calibrate``
(``netsim.traces.generic_kineto``)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytest.importorskip("torch")

@pytest.fixture(scope="session")
def ddp_slow(run_job, tmp_path_factory):
    """4-rank DDP, rank 1 with 40 more matrix products per step, 8 profiled steps: after the
    first, rank 1 must be the slowest of 4 in 6 of 7 steps for confidence 0.99
    (``max_confidence``), so one step another process stalls is survived; with 5 it had to
    be in all 4 (fresh-clone CI runs at load 13 and on 2026-12-06 named nobody)."""
    return run_job("torch_job.py", tmp_path_factory.mktemp("ddp") / "kineto", "--world", "4",
                   "--slow-rank", "1", "--active", "8", "--port", "29611")


@pytest.fixture(scope="session")
def ddp_pair(run_job, tmp_path_factory):
    """Issue #31's scenario: 2-rank DDP on gloo traced as the torch.profiler docs show
    (schedule(wait=1, warmup=1, active=5)), rank 1 with 40 more matrix products per step."""
    return run_job("torch_job.py", tmp_path_factory.mktemp("pair") / "kineto", "--world", "2",
                   "--slow-rank", "1", "--port", "29631")


@pytest.fixture(scope="session")
def fsdp_run(run_job, tmp_path_factory):
    """2-rank FSDP2 (fully_shard; FSDP1 refuses a CPU-only host), with its execution trace."""
    return run_job("torch_job.py", tmp_path_factory.mktemp("fsdp") / "kineto", "--wrap", "fsdp",
                   "--port", "29621", "--execution-trace")


def test_ddp_slowed_rank_is_named_alone(ddp_slow, capsys):
    from tuner.cli import main as netsim

    doc = json.loads((ddp_slow / "kineto-rank0.json").read_text())
    assert "trainer_meta" not in doc and doc["distributedInfo"]["backend"] == "gloo"
    assert netsim(["diagnose", str(ddp_slow), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["rank"] for s in out["stragglers"]] == [1]
    assert all(min(r["compute_s"]) > 0 for r in out["per_rank"])  # was 0.0 before this reader


def test_two_rank_ddp_over_five_steps_names_the_slowed_rank_and_calibrates(ddp_pair, tmp_path,
                                                                           capsys):
    """Five profiled steps of two ranks: no median of peers, no other pair; the two ranks'
    steps are compared by the exact rank-sum test (``lone_pair_outliers``): rank 1 alone,
    and ``netsim calibrate`` fits the run's all-reduce."""
    from tuner.cli import main as netsim

    assert netsim(["diagnose", str(ddp_pair), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["steps"]) == 5
    assert [s["rank"] for s in out["stragglers"]] == [1] and out["stragglers"][0][
        "role"].startswith("stage of two ranks")
    assert out["stragglers"][0]["confidence"] >= 0.99
    assert any("slow links are not judged" in n for n in out["notes"])  # one group: the world
    cal = tmp_path / "cal.json"
    assert netsim(["calibrate", str(ddp_pair), "-o", str(cal)]) == 0
    assert "all_reduce/server/dp" in json.loads(cal.read_text())["comm"]


def test_ddp_collectives_read_with_group_size_and_kind(ddp_slow):
    from netsim.traces.detect import read_traces

    run = read_traces(ddp_slow)
    assert [r.meta["rank"] for r in run.ranks] == [0, 1, 2, 3]
    params = 256 * 256 * 2 + 256 * 2 + 256 + 1  # the MLP of torch_job.py: one DDP bucket
    for rank in run.ranks:
        calls = Counter((c["op"], c["kind"], c["bytes"], tuple(c["group"]), c["overlapped"])
                        for c in rank.collectives)
        assert calls == {("all_reduce", "dp", 4 * params, (0, 1, 2, 3), True): 8}
        assert {c["phase"] for c in rank.compute} >= {"forward", "backward", "optimizer"}


def test_calibrate_fits_ddp_and_fsdp(ddp_slow, fsdp_run, tmp_path, capsys):
    from tuner.cli import main as netsim

    out = tmp_path / "cal.json"
    assert netsim(["calibrate", str(ddp_slow), str(fsdp_run), "-o", str(out)]) == 0
    cal = json.loads(out.read_text())
    assert {"all_reduce/server/dp", "all_gather/server/dp",
            "reduce_scatter/server/dp"} <= set(cal["comm"])
    assert "layout inferred" in capsys.readouterr().err


def test_fsdp_calls_and_layout_flags(fsdp_run, capsys):
    from netsim.traces.detect import read_traces
    from netsim.traces.generic_kineto import Layout
    from tuner.cli import main as netsim

    run = read_traces(fsdp_run, Layout(dp=2))
    ops = Counter(c["op"] for c in run.ranks[0].collectives)
    assert set(ops) == {"all_gather", "reduce_scatter"} and ops["all_gather"] > ops[
        "reduce_scatter"]  # forward and backward gathers, one reduce-scatter per unit
    assert not any("layout inferred" in n for n in run.notes)
    assert netsim(["diagnose", str(fsdp_run), "--tp", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "world size is 2" in err


def test_layout_kinds_and_inference():
    from netsim.traces.generic_kineto import Layout, infer_layout

    lay = Layout(tp=2, pp=2, dp=4, ep=2)
    assert lay.kind([0, 1]) == "tp" and lay.kind([0, 8]) == "pp"
    assert lay.kind([0, 2, 4, 6]) == "dp" and lay.kind([0, 2]) == "ep"
    assert lay.kind(list(range(16))) == "other"
    groups = [list(range(16)), *[[r, r + 1] for r in range(0, 16, 2)],
              *[[r, r + 8] for r in range(8)],
              *[[h * 8 + t + 2 * d for d in range(4)] for h in range(2) for t in range(2)]]
    assert infer_layout(groups, 16) == Layout(tp=2, pp=2, dp=4)
    assert infer_layout([[0, 1, 2, 3]], 4) == Layout(dp=4)
    with pytest.raises(ValueError, match="--ep 3 must divide --dp 4"):
        Layout(dp=4, ep=3)


def test_time_in_a_collectives_call_is_not_compute():
    """``torch.distributed.nn``'s ``_AllReduce`` holds the call: its time outside the
    operators it records (the call's Python, the wait, the wake-up; milliseconds on a loaded
    host) is not compute. Only its other children are, in the phase of the outermost."""
    from netsim.traces.generic_kineto import compute_records

    def op(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                "dur": dur}

    ev = [{**op("ProfilerStep#1", 0.0, 20000.0), "cat": "user_annotation"},
          op("_AllReduce", 100.0, 6000.0), op("aten::clone", 110.0, 50.0),
          op("c10d::allreduce_", 3000.0, 60.0), op("aten::mm", 7000.0, 500.0),
          op("autograd::engine::evaluate_function: _AllReduceBackward", 8000.0, 9000.0),
          op("_AllReduceBackward", 8010.0, 8980.0), op("_AllReduce", 8020.0, 8960.0),
          op("aten::clone", 8030.0, 40.0), op("c10d::allreduce_", 8100.0, 60.0),
          {**op("gloo:all_reduce", 8200.0, 300.0), "tid": 2, "cat": "user_annotation"},
          op("trainer/comm/tp/0,1", 17500.0, 900.0), op("aten::copy_", 17510.0, 100.0),
          op("c10d::allreduce_", 17700.0, 60.0)]  # a labelled call: none of it is compute
    recs = compute_records({"traceEvents": ev}, 0.0)
    assert [(r["phase"], r["name"], round((r["end_s"] - r["start_s"]) * 1e6)) for r in recs] \
        == [("forward", "aten::clone", 50), ("forward", "aten::mm", 500),
            ("backward", "aten::clone", 40)]


def test_gpu_kernels_are_the_compute(tmp_path):
    """A GPU job's trace (NCCL): compute from its non-NCCL kernels, each in the phase of the
    CPU operator that launched it; the NCCL kernel is the collective's transfer."""
    from netsim.traces.detect import read_traces

    for rank in range(2):
        slow = 2.0 if rank == 1 else 1.0
        ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 0.0, "dur": 5000.0},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
               "ts": 10.0, "dur": 20.0},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
               "ts": 15.0, "dur": 5.0, "args": {"correlation": 11}},
              {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7,
               "ts": 40.0, "dur": 1000.0 * slow, "args": {"correlation": 11}},
              {"ph": "X", "cat": "cpu_op", "name": BACKWARD_OP, "pid": 1, "tid": 1,
               "ts": 100.0, "dur": 50.0},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
               "ts": 110.0, "dur": 5.0, "args": {"correlation": 12}},
              {"ph": "X", "cat": "kernel", "name": "sm90_gemm_bwd", "pid": 0, "tid": 7,
               "ts": 1100.0 * slow, "dur": 2000.0 * slow, "args": {"correlation": 12}},
              {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
               "ts": 200.0, "dur": 10.0,
               "args": {"Collective name": "allreduce", "In msg nelems": 1024,
                        "Out msg nelems": 1024, "dtype": "BFloat16",
                        "Process Group Ranks": "[0, 1]", "External id": 7}},
              {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
               "pid": 0, "tid": 8, "ts": 3200.0 * slow, "dur": 300.0,
               "args": {"External id": 7}}]
        doc = {"traceEvents": ev, "distributedInfo": {
            "backend": "nccl", "rank": rank, "world_size": 2,
            "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1]}]}}
        (tmp_path / f"kineto-rank{rank}.json").write_text(json.dumps(doc))
    run = read_traces(tmp_path)
    comp = {(c["phase"], c["name"]): c["end_s"] - c["start_s"] for c in run.ranks[1].compute
            if c["phase"] != "iteration"}
    assert comp == pytest.approx({("forward", "sm90_gemm"): 2e-3,
                                  ("backward", "sm90_gemm_bwd"): 4e-3})
    [c] = run.ranks[0].collectives
    assert (c["op"], c["kind"], c["bytes"], c["group"]) == ("all_reduce", "dp", 2048, [0, 1])


BACKWARD_OP = "autograd::engine::evaluate_function: MmBackward0"


def test_execution_traces_supply_what_kineto_lacks(fsdp_run, tmp_path):
    """Kineto traces without shapes (record_shapes=False) or process groups: the
    ExecutionTraceObserver files beside them (Chakra's input, linked by rf_id and pid) give
    the same sizes and groups; without them the calls are unsized and ungrouped."""
    from netsim.traces.detect import read_traces

    def calls(run):
        return [[(c["op"], c["bytes"], c["group"], c["kind"]) for c in r.collectives]
                for r in run.ranks]

    full = read_traces(fsdp_run)
    assert sorted(f.name for f in fsdp_run.glob("et-*.json")) == ["et-rank0.json",
                                                                  "et-rank1.json"]
    for f in fsdp_run.glob("*.json"):
        doc = json.loads(f.read_text())
        if "traceEvents" in doc:
            doc["distributedInfo"].pop("pg_config")
            for e in doc["traceEvents"]:
                (e.get("args") or {}).pop("Input Dims", None)
        (tmp_path / f.name).write_text(json.dumps(doc))
    assert calls(read_traces(tmp_path)) == calls(full)
    for f in tmp_path.glob("et-*.json"):
        f.unlink()
    bare = read_traces(tmp_path)
    assert all(c["bytes"] == 0 and c["group"] == [] for c in bare.ranks[0].collectives)
    assert any("without a size" in n for n in bare.notes)


@pytest.mark.parametrize("pg_config, what", [
    ({"ranks": [0, 1]}, "must be a list of groups"),
    ([{"ranks": "0,1"}], "pg_config[0].ranks"),
    ([{"ranks": [0, 5]}], "below the world size 2"),
    ([7], "pg_config[0].ranks")])
def test_bad_process_groups_are_one_line(tmp_path, capsys, pg_config, what):
    from tuner.cli import main as netsim

    for rank in range(2):
        doc = {"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1",
                                "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0}],
               "distributedInfo": {"rank": rank, "world_size": 2, "pg_config": pg_config}}
        (tmp_path / f"kineto-rank{rank}.json").write_text(json.dumps(doc))
    assert netsim(["calibrate", str(tmp_path), "-o", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and what in err and "kineto-rank0.json" in err
