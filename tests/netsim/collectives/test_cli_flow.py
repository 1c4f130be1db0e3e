"""CLI contract: ``netsim simulate --level flow`` and ``netsim collective-bench``."""

from __future__ import annotations

import json

import pytest

from tuner.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_flow_collective_json_keys(capsys):
    doc = _json(capsys, ["simulate", "--level", "flow", "--collective", "allreduce", "--size",
                         "64MiB", "--ranks", "16", "--fabric", "fat-tree-k4", "--json"])
    for key in ("time_s", "algbw_GBps", "busbw_GBps", "hottest_links", "ecmp"):
        assert key in doc
    assert doc["busbw_GBps"] == pytest.approx(doc["algbw_GBps"] * 2 * 15 / 16)


def test_simulate_flow_traffic_and_qps(capsys):
    doc = _json(capsys, ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--qps", "2",
                         "--size", "1MB", "--json"])
    assert doc["flows"] == 16 and doc["qps"] == 32


def test_collective_bench_sweep(capsys):
    doc = _json(capsys, ["collective-bench", "--fabric", "fat-tree-k4", "--ranks", "16", "-b",
                         "1MB", "-e", "16MB", "-f", "4", "--json"])
    sizes = [r["size_bytes"] for r in doc["results"]]
    assert sizes == [2**20, 4 * 2**20, 16 * 2**20]  # nccl-tests: M = MiB (issue #19)
    bus = [r["busbw_GBps"] for r in doc["results"]]
    assert bus == sorted(bus)  # latency amortises as messages grow
    assert main(["collective-bench", "--fabric", "fat-tree-k4", "--ranks", "16", "-b", "1MB",
                 "-e", "2MB"]) == 0
    assert "busbw (GB/s)" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--cc", "swift"],
    ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--collective", "allsum"],
    ["collective-bench", "--fabric", "fat-tree-k4", "-b", "2MB", "-e", "1MB"],
])
def test_bad_input_is_one_line_exit_2(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error" in err


def test_alltoall_load_mode_matches_the_exact_engine(capsys):
    base = ["simulate", "--level", "flow", "--collective", "alltoall", "--size", "16MiB",
            "--ranks", "16", "--fabric", "fat-tree-k4", "--json", "--alltoall-mode"]
    exact, load = _json(capsys, base + ["exact"]), _json(capsys, base + ["load"])
    assert (exact["engine"], load["engine"]) == ("exact", "load")
    assert load["time_s"] == pytest.approx(exact["time_s"], rel=1e-6)
    assert _json(capsys, base + ["auto"])["engine"] == "exact"  # 16 ranks: below the threshold


def test_pfc_model_is_refused_for_collectives(capsys):
    assert main(["simulate", "--level", "flow", "--collective", "allreduce", "--flow-model",
                 "pfc", "--fabric", "fat-tree-k4"]) == 2
    assert "per-QP paths" in capsys.readouterr().err


def test_pfc_model_runs_on_traffic(capsys):
    doc = _json(capsys, ["simulate", "--level", "flow", "--fabric", "fat-tree-k4", "--size",
                         "1MB", "--flow-model", "pfc", "--json"])
    assert doc["flows"] == 16 and doc["model"] == "pfc"
