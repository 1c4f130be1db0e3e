"""The collective microbenchmark: nccl-tests' busbw definitions and a checked CPU sweep."""

from __future__ import annotations

import json
import subprocess

import pytest

from trainer.bench import busbw_factor, sizes


@pytest.mark.parametrize("n", [2, 4, 8])
def test_busbw_factors_are_nccl_tests(n):
    # nccl-tests doc/PERFORMANCE.md (shared/reference/nccl-roce.md 2.1)
    assert busbw_factor("all_reduce", n) == pytest.approx(2 * (n - 1) / n)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(op, n) == pytest.approx((n - 1) / n)
    assert busbw_factor("broadcast", n) == busbw_factor("sendrecv", n) == 1.0
    with pytest.raises(ValueError, match="unknown op"):
        busbw_factor("allreduce", n)


def test_size_sweep_is_geometric_and_inclusive():
    assert sizes(1024, 16384, 2) == [1024, 2048, 4096, 8192, 16384]


def test_cpu_sweep_rows(python, subprocess_env, tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([python, "-m", "trainer.bench", "--nproc", "3", "--json", "-b", "3KiB",
                           "-e", "48KiB", "-f", "16", "-n", "2", "-w", "0", "-o", str(out)],
                          env=subprocess_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc == json.loads(out.read_text())
    assert (doc["schema"], doc["backend"], doc["world_size"]) == ("trainer-bench/1", "gloo", 3)
    ops = {r["op"] for r in doc["results"]}
    assert ops == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv"}
    for r in doc["results"]:
        assert set(r) >= {"op", "size_bytes", "count", "dtype", "time_s", "algbw_GBps",
                          "busbw_GBps", "group"}
        assert r["wrong"] == 0, r  # every collective delivered the right values
        assert r["algbw_GBps"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * busbw_factor(r["op"], 3))
        assert r["count"] * 4 == r["size_bytes"] and r["group"] == [0, 1, 2]
        if r["op"] in ("all_gather", "reduce_scatter", "all_to_all"):
            assert r["count"] % 3 == 0  # the whole array: 3 equal per-rank parts


def test_unknown_op_is_one_line_exit_2(python, subprocess_env):
    proc = subprocess.run([python, "-m", "trainer.bench", "--ops", "allreduce"],
                          env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
