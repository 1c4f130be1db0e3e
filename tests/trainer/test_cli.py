"""The ``torchrun -m trainer`` entry: JSON summary last, placement files, resume, errors."""

from __future__ import annotations

import json
import subprocess

import pytest

from trainer.cli import main

TINY = ["--micro-batches", "4", "--global-batch", "16", "--dtype", "float64", "--device", "cpu"]


def run_cli(python, env, args, timeout=300):
    proc = subprocess.run([python, *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc


@pytest.mark.parametrize("argv, field", [(["--tp", "2"], "world size"), (["--heads", "5"], "heads"),
                                         (["--global-batch", "3", "--micro-batches", "2"], "global_batch")])
def test_bad_input_is_one_line_exit_2(capsys, argv, field):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and err.startswith("trainer: error:")


def test_torchrun_with_placement_matches_selfcheck(selfcheck, read_trace, python, subprocess_env, tmp_path):
    # the placement swaps the two processes: local_rank 0 becomes trainer rank 1
    placement = tmp_path / "placement.json"
    placement.write_text(json.dumps({"ranks": [{"rank": 0, "host": "h0", "local_rank": 1},
                                               {"rank": 1, "host": "h0", "local_rank": 0}]}))
    trace = tmp_path / "trace"
    summary, _ = run_cli(python, subprocess_env, [
        "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", "trainer", "--tp", "2", "--steps", "3", "--json", "--trace-dir", str(trace),
        "--placement", str(placement), *TINY])
    assert (summary["world_size"], summary["tp"], summary["pp"], summary["dp"]) == (2, 2, 1, 1)
    assert summary["losses"] == pytest.approx(selfcheck[0]["tp2"]["losses"], rel=1e-12)
    assert len(summary["iteration_s"]) == 3
    metas = [read_trace(trace, r)[0] for r in (0, 1)]
    assert [(m["rank"], m["host"], m["local_rank"]) for m in metas] == [(0, "h0", 1), (1, "h0", 0)]
    assert json.loads((trace / "summary.json").read_text())["losses"] == summary["losses"]


def test_cli_resume_continues_the_reference(selfcheck, python, subprocess_env, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    first, _ = run_cli(python, subprocess_env, ["-m", "trainer", "--steps", "2", "--json",
                                                "--save", ckpt, *TINY])
    second, _ = run_cli(python, subprocess_env, ["-m", "trainer", "--steps", "3", "--json",
                                                 "--load", ckpt, *TINY])
    assert second["start_step"] == 2
    assert first["losses"] + second["losses"] == pytest.approx(selfcheck[0]["single"]["losses"],
                                                               rel=1e-12)
