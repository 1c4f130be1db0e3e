"""``netsim recommend`` / ``netsim place`` at the CLI: the packaged job, --probe fallback, errors."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main
from tuner.jobs import load_job, packaged_jobs


def test_packaged_gpt3_job_resolves() -> None:
    assert "gpt3-175b" in packaged_jobs()
    job = load_job("gpt3-175b")
    assert (job.model, job.tp, job.pp) == ("gpt3-175b", 8, 8)
    assert load_job("gpt3-175b", dp=2).dp == 2


def test_recommend_cli_small(tmp_path, capsys) -> None:
    out = tmp_path / "reco"
    rc = main(["recommend", "--fabric", "fat-tree-k8", "--model", "gpt3-1.3b", "--tp", "1",
               "--pp", "2", "--dp", "8", "--global-batch", "32", "--budget", "2",
               "--flaps", "lognormal:median=1s,p99=6s,count=4", "--probe", "-o", str(out),
               "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["files"]) == 6 and all((out / n).is_file() for n in (
        "nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf", "switch_qos.yaml", "placement.json",
        "report.md"))
    rt = doc["details"]["retransmit"]["recommended"]
    assert rt["survivable_flap_s"] > doc["details"]["retransmit"]["design_flap_s"]
    # no RDMA device here: --probe falls back to the fabric file
    assert "NCCL_IB_HCA" in doc["env"]


@pytest.mark.parametrize("argv, needle", [
    (["recommend", "--job", "no-such-job", "-o", "x"], "packaged"),
    (["recommend", "--job", "gpt3-175b", "--flaps", "soon", "-o", "x"], "flaps"),
    (["place", "--job", "gpt3-175b", "--dp", "200", "--global-batch", "6400"], "GPUs"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_dask_executor_needs_the_extra(monkeypatch) -> None:
    import builtins

    from tuner.ccsearch import make_executor

    real = builtins.__import__

    def no_dask(name, *a, **k):
        if name.startswith("dask"):
            raise ImportError("no dask")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ValueError, match="dist"):
        make_executor("tcp://127.0.0.1:8786")
