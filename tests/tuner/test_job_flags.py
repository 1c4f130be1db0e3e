"""One set of job flags for predict, place and recommend; --megascale keeps the batch unless
LAMB's is asked for; --overlap takes ep_comm and cp_comm (issue #27 item 6)."""

from __future__ import annotations

import argparse
import json

import pytest

from tuner.cli import build_parser, main
from tuner.jobs import job_from_args

_JOB = ["--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8", "--dp", "16",
        "--global-batch", "1536", "--json"]


def _subparser(name: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _job_options(name: str) -> set[str]:
    """Option strings of ``name``'s job flags (everything predict has that place has too)."""
    return {o for a in _subparser(name)._actions for o in a.option_strings}


def test_predict_place_and_recommend_share_every_job_flag():
    probe = argparse.ArgumentParser()
    from tuner.jobs import add_job_arguments

    add_job_arguments(probe)
    flags = {o for a in probe._actions for o in a.option_strings} - {"-h", "--help"}
    for name in ("predict", "place", "recommend"):
        assert flags <= _job_options(name), (name, sorted(flags - _job_options(name)))
    assert {"--distributed-optimizer", "--recompute", "--overlap", "--sp", "--fsdp",
            "--micro-batch-size"} <= flags


def test_recommend_takes_distributed_optimizer_and_overlap():
    args = _subparser("recommend").parse_args(["-o", "out", "--job", "gpt3-175b",
                                               "--distributed-optimizer",
                                               "--overlap", "dp_grad_reduce,tp_comm"])
    job = job_from_args(args)
    assert job.distributed_optimizer and job.overlap.dp_grad_reduce and job.overlap.tp_comm
    assert not job.overlap.pp_send_recv


def _batch(out: dict) -> int:
    return round(out["tokens_per_s"] * out["iteration_s"] / out["sequence"]["seq"])


@pytest.mark.parametrize("extra,batch", [([], 1536), (["--lamb"], 4608),
                                         (["--lamb-batch-scale", "2"], 3072)])
def test_megascale_changes_the_batch_only_when_asked(capsys, extra, batch):
    assert main(["predict", *_JOB, "--megascale", *extra]) == 0
    out = json.loads(capsys.readouterr().out)
    assert _batch(out) == batch
    assert out["megascale_opts"]["lamb"] is bool(extra)
    assert ("kept" in out["megascale_opts"]["global_batch_note"]) is not bool(extra)


def test_batch_note_says_kept_only_under_megascale(capsys):
    assert main(["predict", *_JOB]) == 0
    out = capsys.readouterr().out
    assert "global batch" in out and "kept" not in out


def test_overlap_takes_expert_and_context_parallel_comm(capsys):
    moe = ["--model", "mixtral-8x7b", "--gpus", "64", "--tp", "2", "--sp", "--ep", "8",
           "--dp", "32", "--global-batch", "64", "--json"]
    assert main(["predict", *moe]) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(["predict", *moe, "--overlap", "ep_comm,cp_comm"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["job"]["overlap"]["ep_comm"] and out["job"]["overlap"]["cp_comm"]
    assert out["exposed_comm_s"]["ep"] < base["exposed_comm_s"]["ep"]
    assert main(["predict", *moe, "--overlap", "ep_com"]) == 2
    assert "ep_comm" in capsys.readouterr().err


def test_cluster_takes_the_same_job_flags_as_a_template(capsys):
    from tuner.cluster import generate_jobs, with_template

    jobs = generate_jobs(6, 12288, seed=0)
    made = with_template(jobs, {"model": "gpt3-13b", "tp": 8, "pp": 2,
                                "distributed_optimizer": True}, "job flags")
    assert [j.job.world for j in made] == [j.job.world for j in jobs]
    assert all(j.job.model == "gpt3-13b" and j.job.pp == 2 and j.job.distributed_optimizer
               for j in made)
    assert _subparser("cluster") is not None
    argv = ["cluster", "simulate", "--fabric", "megascale", "--jobs", "3", "--policy", "linear",
            "--iterations", "5", "--model", "gpt3-13b", "--tp", "8", "--pp", "2", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 3
    assert main(argv[:-1] + ["--dp", "4"]) == 2
    assert "leave it out" in capsys.readouterr().err


def test_gpus_without_dp_fills_the_world_with_data_parallelism(capsys):
    """`--gpus 12288 --tp 8 --pp 8`, as papers state a layout, is dp 192 (Megatron-LM's rule)
    on predict and the shared job flags, also with a micro-batch count; a world the other
    degrees do not divide is still refused with the fix."""
    args = ["--model", "gpt3-175b", "--gpus", "12288", "--tp", "8", "--pp", "8"]
    assert main(["predict", *args, "--global-batch", "1536", "--micro-batches", "8",
                 "--json"]) == 0
    job = json.loads(capsys.readouterr().out)["job"]
    assert (job["dp"], job["micro_batch"], job["gpus"]) == (192, 1, 12288)
    parsed = _subparser("recommend").parse_args(["-o", "out", *args])
    assert job_from_args(parsed).dp == 192
    assert main(["predict", "--model", "gpt3-175b", "--gpus", "100", "--tp", "8"]) == 2
    assert "change --gpus or the degrees" in capsys.readouterr().err
