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
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    # progress on stderr, one line per step when stderr is not a terminal
    steps = [ln.split()[1] for ln in captured.err.splitlines() if ln.startswith("recommend: ")]
    assert steps[0] == "placement" and steps[-1] == "done" and "congestion" in steps
    assert len(doc["files"]) >= 6 and all((out / n).is_file() for n in (
        "nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf", "switch_qos.yaml", "placement.json",
        "report.md", "nic_setup.sh", "switch_nvue_tor.txt", "sonic_config_db_tor.json"))
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

    from tuner.ccsearch import HotSpot, search_job_cc

    real = builtins.__import__

    def no_dask(name, *a, **k):
        if name.startswith("dask"):
            raise ImportError("no dask")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    hot = HotSpot("collision", 2, 400.0, 400.0, 100_000, 3_000_000, "test")
    with pytest.raises(ValueError, match="dist"):  # the CC grid fans out through sweeps
        search_job_cc([hot], scheduler="tcp://127.0.0.1:8786")


@pytest.mark.slow
@pytest.mark.parametrize("dp", [16, 192])
def test_recommend_gpt3_on_megascale(tmp_path, capsys, dp) -> None:
    # the README's main command (1,024 GPUs) and the same job on all 12,288 GPUs
    from tuner import render

    out = tmp_path / "reco"
    assert main(["recommend", "--fabric", "megascale", "--job", "gpt3-175b", "--dp", str(dp),
                 "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    world = 8 * 8 * dp
    ranks = json.loads((out / "placement.json").read_text())["ranks"]
    assert len(ranks) == world and len({r["gpu"] for r in ranks}) == world
    assert render.parse_env_file((out / "nccl.env").read_text()) == doc["env"]
    assert all(r.n_ranks == dp for r in render.parse_tuner_csv((out / "nccl_tuner.csv").read_text()))
    assert doc["iteration_recommended_s"] <= doc["iteration_default_s"] * 1.001
    report = (out / "report.md").read_text()
    placement_row = next(s for s in doc["settings"] if s["name"] == "rank placement")
    assert placement_row["effect"] in report
    if dp == 16:   # an empty fabric: the scheduler's order is already ToR-aligned
        assert placement_row["effect"].startswith("topo gives no gain over linear")


def _doc_excerpts(doc: str) -> dict[str, list[str]]:
    """The code block after each "`FILE`: ..." paragraph of docs/recommend.md's "Output
    files" section, as lines."""
    import re

    section = doc[doc.index("## Output files"):doc.index("## Deployable files")]
    out = {}
    for m in re.finditer(r"^`([\w.]+)`[: ].*?\n```[a-z]*\n(.*?)\n```", section, re.M | re.S):
        out[m.group(1)] = m.group(2).splitlines()
    return out


@pytest.mark.slow
def test_doc_excerpts_are_from_a_run(tmp_path, capsys) -> None:
    # every excerpt line of docs/recommend.md's "Output files" is a line of the file the README's
    # `make run` command writes ("..." marks a cut)
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "recommend.md").read_text()
    excerpts = _doc_excerpts(doc)
    assert set(excerpts) == {"nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf", "switch_qos.yaml",
                             "placement.json", "report.md"}
    out = tmp_path / "recommend"
    assert main(["recommend", "--fabric", "megascale", "--job", "gpt3-175b", "-o", str(out)]) == 0
    capsys.readouterr()
    for name, lines in excerpts.items():
        written = set((out / name).read_text().splitlines())
        missing = [ln for ln in lines if ln != "..." and ln not in written]
        assert not missing, f"docs/recommend.md excerpt of {name}: not in a fresh run: {missing}"
