"""One vocabulary across commands (issue #19): every inconsistency the issue lists has a test.

- predict --placement reads the placement.json that place/recommend write;
- predict --job takes packaged job names, as place and recommend do;
- `tiny` is one model in the trainer, predict and the job files;
- --micro-batches is a count and --micro-batch(-size) a size, in every command and the trainer;
- collective-bench reads 8M as nccl-tests does (8 MiB);
- link names such as tor0->agg0 work wherever a link is named, and failing links 12,13 (PCIe
  links inside a server, which no route can avoid) is refused instead of changing nothing;
- progress is drawn on a terminal, also one that reports a 0 x 0 size.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys

import pytest

from tuner.cli import main


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _json(argv):
    rc, out, err = _run(argv + ["--json"])
    assert rc == 0, err
    return json.loads(out)


# -- placement ------------------------------------------------------------------------------


def test_predict_reads_the_placement_json_place_writes(tmp_path):
    from tuner.inputs import read_placement_file

    path = tmp_path / "placement.json"
    assert _run(["place", "--fabric", "fat-tree-k8", "--job", "tiny", "--strategy", "random",
                 "--iterations", "10", "-o", str(path), "--json"])[0] == 0
    doc = read_placement_file(path)
    assert doc.schema == "netsim-placement/1" and doc.fabric == "fat-tree-k8"
    from topologies import load_fabric

    fabric = load_fabric("fat-tree-k8")
    positions = [fabric.gpu_position(r.gpu) for r in sorted(doc.ranks, key=lambda r: r.rank)]
    plain = tmp_path / "positions.txt"
    plain.write_text(" ".join(map(str, positions)))
    base = ["predict", "--job", "tiny", "--fabric", "fat-tree-k8"]
    from_json = _json(base + ["--placement", str(path)])
    from_list = _json(base + ["--placement", str(plain)])
    assert from_json["iteration_s"] == from_list["iteration_s"]
    rc, _, err = _run(["predict", "--job", "tiny", "--placement", str(path)])
    assert rc == 2 and "give the same --fabric" in err


def test_placement_schema_reads_what_recommend_writes(tmp_path):
    """recommend writes placement.json through render.write_placement with these extra keys."""
    from netsim.workload import JobSpec
    from topologies import load_fabric
    from tuner.inputs import placement_positions, read_placement_file
    from tuner.render import write_placement

    fabric = load_fabric("fat-tree-k4")
    rows = [{"rank": r, "host": fabric.servers[g], "local_rank": 0, "gpu": fabric.gpus[g]}
            for r, g in enumerate([3, 1, 2, 0])]
    path = tmp_path / "placement.json"
    write_placement(path, rows, {"strategy": "topo", "fabric": fabric.name,
                                 "job": JobSpec(tp=1, pp=1, dp=4).to_dict(),
                                 "predicted_iteration_s": 1.5})
    doc = read_placement_file(path)
    assert doc.torchrun_hosts == [fabric.servers[g] for g in (3, 1, 2, 0)]
    assert placement_positions(path, fabric) == [3, 1, 2, 0]


# -- job names ------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", [["predict"], ["place", "--fabric", "fat-tree-k8",
                                                "--iterations", "10"]])
def test_packaged_job_names_everywhere(cmd):
    assert _run(cmd + ["--job", "tiny", "--json"])[0] == 0


def test_tiny_is_one_model():
    from netsim.model.models import get_model
    from trainer.config import PRESET_NAMES, preset
    from tuner.jobs import read_job_dict

    assert read_job_dict("tiny")["model"] == "tiny"
    for name in PRESET_NAMES:  # every trainer preset exists in netsim with the same shape
        t, m = preset(name), get_model(name)
        assert (t.layers, t.hidden, t.heads, t.seq) == (m.layers, m.hidden, m.heads, m.seq)
        if name.startswith("gpt3"):  # trainer pads GPT-3's 50,257 tokens as Megatron-LM does
            assert t.vocab == math.ceil(m.vocab / 1024) * 1024  # (a multiple of 128 x 8)
        else:  # tiny, small and the config.json models keep their own vocabulary
            assert t.vocab == m.vocab


# -- micro-batches ----------------------------------------------------------------------------


def test_micro_batches_is_a_count_and_micro_batch_a_size():
    by_count = _json(["predict", "--job", "tiny", "--micro-batches", "16"])
    assert by_count["micro_batches"] == 16 and by_count["job"]["micro_batch"] == 1
    by_size = _json(["predict", "--job", "tiny", "--micro-batch-size", "2"])
    alias = _json(["predict", "--job", "tiny", "--micro-batch", "2"])
    assert by_size == alias and by_size["job"]["micro_batch"] == 2
    both = _json(["predict", "--job", "tiny", "--global-batch", "64", "--micro-batches", "4"])
    assert both["micro_batches"] == 4 and both["job"]["micro_batch"] == 2  # 64 / (dp 8 x 4)
    rc, _, err = _run(["predict", "--job", "tiny", "--global-batch", "64",
                       "--micro-batches", "3"])
    assert rc == 2 and "--micro-batches" in err


def test_trainer_accepts_micro_batch_size():
    from trainer.cli import build_parser, config_from_args

    p = build_parser()
    cfg = config_from_args(p.parse_args(["--dp", "2", "--global-batch", "16",
                                         "--micro-batch-size", "2"]), 2)
    assert cfg.parallel.micro_batches == 4  # 16 / (dp 2 x size 2)
    cfg = config_from_args(p.parse_args(["--dp", "2", "--micro-batches", "3",
                                         "--micro-batch-size", "2"]), 2)
    assert cfg.parallel.global_batch == 12


# -- sizes as nccl-tests reads them --------------------------------------------------------------


def test_collective_bench_reads_sizes_as_nccl_tests():
    from topologies.units import parse_nccl_size

    assert parse_nccl_size("8M") == parse_nccl_size("8MB") == 8 * 2**20
    assert parse_nccl_size("1G") == 2**30 and parse_nccl_size("64K") == 65536
    assert parse_nccl_size("8") == 8
    doc = _json(["collective-bench", "--fabric", "fat-tree-k4", "--ranks", "8", "-b", "8M",
                 "-e", "8M"])
    assert [r["size_bytes"] for r in doc["results"]] == [8 * 2**20]


# -- link names and failed links ----------------------------------------------------------------


def _flow(extra):
    return _json(["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--traffic",
                  "alltoall", "--size", "1MB"] + extra)


def test_link_names_accepted_and_equal_to_ids():
    from topologies import load_fabric

    f = load_fabric("fat-tree-k4")
    lid = f.link_id("tor0", "agg0")
    by_name = _flow(["--fail-links", "tor0->agg0"])
    by_id = _flow(["--fail-links", str(lid)])
    by_old = _flow(["--fail-links", "tor0~agg0"])
    assert by_name["makespan_s"] == by_id["makespan_s"] == by_old["makespan_s"]


def test_failing_network_links_changes_the_result_and_pcie_links_are_refused():
    none = _flow([])
    # tor0 keeps one of its two uplinks: its servers' traffic leaving the ToR halves in rate
    failed = _flow(["--fail-links", "tor0->agg0"])
    assert failed["makespan_s"] > none["makespan_s"]
    rc, _, err = _run(["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--traffic",
                       "alltoall", "--fail-links", "12,13"])
    assert rc == 2 and "pcie link inside a server" in err


def test_flap_takes_link_names():
    from netsim.scenario.faults import parse_flap
    from topologies import load_fabric

    f = load_fabric("fat-tree-k4")
    assert parse_flap("tor0->agg0@1ms+300us", f).link_id == f.link_id("tor0", "agg0")


# -- progress -----------------------------------------------------------------------------------


def _on_pty(argv, rows=0, cols=0) -> tuple[int, str]:
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave,
                            stdin=subprocess.DEVNULL, env=os.environ.copy())
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(), b"".join(chunks).decode(errors="replace")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_predict_draws_progress_on_a_zero_size_terminal():
    rc, text = _on_pty([sys.executable, "-m", "tuner.cli", "predict", "--job", "tiny",
                        "--json"])
    assert rc == 0
    assert "%|" in text and "\r" in text  # a tqdm bar was drawn and redrawn


def test_ticker_shows_elapsed_then_clears(monkeypatch):
    import time

    from tuner.cli import _progress

    monkeypatch.setattr(_progress, "DELAY_S", 0.05)
    monkeypatch.setattr(_progress, "TICK_S", 0.02)
    err, out = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    with _progress.ticker("simulate", enabled=True):
        deadline = time.monotonic() + 5
        while "netsim simulate: " not in err.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        print("result")
        shown = err.getvalue()
        time.sleep(0.1)  # no tick after output started
        assert err.getvalue() == shown
    assert "netsim simulate: 0 s" in shown and shown.endswith("\r")
    assert out.getvalue() == "result\n"
