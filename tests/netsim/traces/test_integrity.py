"""Trace integrity and record-level robustness of the trace readers (issue #30 item 3):
`netsim calibrate` and `netsim diagnose` refuse a cut, foreign or nonsensical trace with one
line naming the rank and the file, and agree on it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from netsim.traces.integrity import OLD_TRACE_NOTE
from netsim.traces.records import read_trace_dir
from tuner.cli import main

MODEL = {"layers": 2, "hidden": 64, "heads": 4, "ffn_hidden": 256, "seq": 32, "vocab": 128}


def rank_lines(rank: int, run_id: str | None, steps: int = 4, world: int = 2) -> list[dict]:
    """One rank's records as the trainer writes them: meta, per step a compute and an
    iteration record, the host record, the end record (``run_id`` None: an old trace)."""
    meta = {"type": "meta", "schema": "trainer-trace/1", "rank": rank, "world_size": world,
            "tp": 1, "pp": 1, "dp": world, "model": MODEL, "micro_batches": 1,
            "micro_batch_size": 1, "global_batch": world, "tp_rank": 0, "pp_rank": 0,
            "dp_rank": rank, "host": "h0", "order": "tp-dp-pp", "seed": 1}
    out = [meta if run_id is None else {**meta, "run_id": run_id}]
    for s in range(steps):
        out.append({"type": "compute", "step": s, "phase": "forward", "layer": 0,
                    "name": "layer", "microbatch": 0, "start_s": 0.1 * s,
                    "end_s": 0.1 * s + 0.05, "flops": 1e8, "cpu_s": 0.05})
        out.append({"type": "iteration", "step": s, "iteration_s": 0.1})
    out.append({"type": "host", "host_cores": 2, "ranks_per_host": world, "wall_s": 0.3,
                "cpu_s": 0.3, "host_busy_cores": 1.0, "loadavg_1m": 1.0})
    if run_id is not None:
        out.append({"type": "end", "run_id": run_id, "steps": steps})
    return out


def write_run(d: Path, run_id: str | None = "a" * 32, steps: int = 4, world: int = 2) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for r in range(world):
        write_rank(d, r, rank_lines(r, run_id, steps, world))
    summary = {"world_size": world, "steps": steps, "start_step": 0}
    (d / "summary.json").write_text(json.dumps(summary if run_id is None
                                               else {**summary, "run_id": run_id}))
    return d


def write_rank(d: Path, rank: int, lines: list[dict]) -> None:
    (d / f"trace-rank{rank}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def cut_lines(path: Path, keep: int) -> None:
    """Keep the first ``keep`` lines: a cut at a line boundary (valid JSON on every line)."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:keep]))


def refusals(d: Path, tmp_path: Path, capsys) -> list[str]:
    """The stderr of `netsim calibrate` and `netsim diagnose` on ``d``, each exiting 2."""
    out = []
    for argv in (["calibrate", str(d), "-o", str(tmp_path / "cal.json")], ["diagnose", str(d)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        out.append(err)
    return out


def test_a_whole_run_reads_without_a_note(tmp_path):
    run = read_trace_dir(write_run(tmp_path))
    assert len(run.ranks[1].iterations) == 4 and run.notes == []


@pytest.mark.parametrize("keep", [1, 4, 9, 10])  # meta; mid-run; before host; before end
def test_a_rank_file_cut_at_a_line_boundary_is_refused(tmp_path, capsys, keep):
    d = write_run(tmp_path / "run")
    cut_lines(d / "trace-rank1.jsonl", keep)
    for err in refusals(d, tmp_path, capsys):
        assert "trace-rank1.jsonl (rank 1)" in err and "cut" in err, err


def test_an_end_record_counting_more_steps_than_the_file_holds(tmp_path, capsys):
    d = write_run(tmp_path / "run")
    lines = rank_lines(0, "a" * 32)
    write_rank(d, 0, [x for x in lines if x.get("step") != 3])  # step 3 dropped, end says 4
    for err in refusals(d, tmp_path, capsys):
        assert "trace-rank0.jsonl (rank 0)" in err and "cut" in err, err


def test_two_runs_in_one_directory_are_refused(tmp_path, capsys):
    d = write_run(tmp_path / "run")
    write_rank(d, 1, rank_lines(1, "b" * 32))  # the same command again, its rank 1 only
    for err in refusals(d, tmp_path, capsys):
        assert "trace-rank1.jsonl (rank 1)" in err and "two runs" in err, err


def test_a_summary_of_another_run_is_refused(tmp_path, capsys):
    d = write_run(tmp_path / "run")
    (d / "summary.json").write_text(json.dumps({"world_size": 2, "run_id": "c" * 32}))
    for err in refusals(d, tmp_path, capsys):
        assert "summary.json" in err and "two runs" in err, err


def test_a_missing_rank_file_is_named(tmp_path, capsys):
    d = write_run(tmp_path / "run", world=4)
    (d / "trace-rank2.jsonl").unlink()
    for err in refusals(d, tmp_path, capsys):
        assert "missing rank(s) [2]" in err, err


def test_old_traces_read_with_a_note(tmp_path):
    """Backward compatibility: a trace without run ids reads, and says so."""
    run = read_trace_dir(write_run(tmp_path / "run", run_id=None))
    assert run.notes == [OLD_TRACE_NOTE]


@pytest.mark.parametrize("keep", [3, 8, 9])  # mid-run; cut inside a step; before host
def test_old_traces_cut_at_a_line_boundary_are_still_caught(tmp_path, capsys, keep):
    d = write_run(tmp_path / "run", run_id=None)
    cut_lines(d / "trace-rank0.jsonl", keep)
    for err in refusals(d, tmp_path, capsys):
        assert "trace-rank0.jsonl (rank 0)" in err and "cut" in err, err


def test_old_traces_all_cut_alike_are_caught_by_the_summary(tmp_path, capsys):
    d = write_run(tmp_path / "run", run_id=None)
    for r in range(2):
        write_rank(d, r, rank_lines(r, None, steps=2))  # summary.json counts 4
    for err in refusals(d, tmp_path, capsys):
        assert "summary.json counts 4" in err, err


@pytest.mark.parametrize("key, value", [("world_size", 10**12), ("world_size", 0),
                                        ("rank", -1), ("tp", "x"), ("pp", 0), ("model", None),
                                        ("dp", 1)])
def test_a_nonsensical_meta_is_one_line_naming_the_field(tmp_path, capsys, key, value):
    d = write_run(tmp_path / "run")
    lines = rank_lines(1, "a" * 32)
    lines[0][key] = value
    write_rank(d, 1, lines)
    field = "world_size" if key == "dp" else key  # dp 1: tp x pp x dp is not the world
    for err in refusals(d, tmp_path, capsys):
        assert "trace-rank1.jsonl" in err and f"{field}: got" in err, err


def write_world(d: Path, world: int) -> Path:
    """Two rank files whose metas claim (consistently) a world of ``world`` ranks."""
    d.mkdir()
    for r in range(2):
        lines = rank_lines(r, "a" * 32)
        lines[0].update(world_size=world, dp=world)
        write_rank(d, r, lines)
    return d


def test_a_world_of_a_trillion_is_not_enumerated(tmp_path, capsys):
    """Refused by the bound: no set of 10^12 ranks is built."""
    for err in refusals(write_world(tmp_path / "run", 10**12), tmp_path, capsys):
        assert "meta.world_size" in err and "16777216" in err.replace(",", ""), err


def test_a_large_plausible_world_names_the_first_missing_ranks(tmp_path, capsys):
    for err in refusals(write_world(tmp_path / "run", 2**24), tmp_path, capsys):
        assert "missing rank(s) [2, 3, 4, 5, 6, 7, 8, 9, 10, 11] and 16,777,204 more" in err


def test_a_host_record_without_cpu_time_is_read(tmp_path):
    """The schema allows ``cpu_s: null`` in the host record."""
    d = write_run(tmp_path / "run")
    for r in range(2):
        lines = rank_lines(r, "a" * 32)
        lines[-2]["cpu_s"] = None
        write_rank(d, r, lines)
    run = read_trace_dir(d)
    assert run.host["host_cores"] == 2 and run.host["trainer_cores"] == 0.0
    assert main(["diagnose", str(d)]) == 0
    assert main(["calibrate", str(d), "-o", str(tmp_path / "cal.json")]) == 0


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/full"])
def test_a_rank_file_linked_to_a_device_is_refused(tmp_path, capsys, device):
    d = write_run(tmp_path / "run")
    (d / "trace-rank1.jsonl").unlink()
    os.symlink(device, d / "trace-rank1.jsonl")
    for err in refusals(d, tmp_path, capsys):
        assert "trace-rank1.jsonl" in err and "not a regular file" in err, err


def write_kineto(d: Path, rank1: dict) -> Path:
    """Two ranks' profiler documents with the trainer's ``trainer_meta``; rank 1's meta
    updated with ``rank1``."""
    d.mkdir()
    for r in range(2):
        meta = {k: v for k, v in rank_lines(r, "a" * 32)[0].items() if k != "type"}
        meta.update(rank1 if r == 1 else {})
        ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1,
               "tid": 1, "ts": 1000.0, "dur": 5000.0}]
        doc = {"traceEvents": ev, "trainer_meta": json.dumps(meta)}
        (d / f"kineto-rank{r}.json").write_text(json.dumps(doc))
    return d


@pytest.mark.parametrize("key, value", [("tp", "x"), ("pp", 0), ("model", None),
                                        ("world_size", 10**12)])
def test_a_nonsensical_kineto_trainer_meta_is_one_line(tmp_path, capsys, key, value):
    d = write_kineto(tmp_path / "kineto", {key: value})
    for err in refusals(d, tmp_path, capsys):
        assert "kineto-rank1.json" in err and f"trainer_meta.{key}" in err, err


def test_kineto_documents_of_two_runs_are_refused(tmp_path, capsys):
    d = write_kineto(tmp_path / "kineto", {"run_id": "b" * 32})
    for err in refusals(d, tmp_path, capsys):
        assert "kineto-rank1.json (rank 1)" in err and "two runs" in err, err
