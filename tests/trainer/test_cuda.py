"""CUDA paths (NCCL backend, CUDA-event timing, MFU with a datasheet peak); skipped without CUDA."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_one_gpu_nccl_run_reports_mfu(python, subprocess_env, tmp_path):
    proc = subprocess.run([python, "-m", "trainer", "--model", "small", "--device", "cuda",
                           "--backend", "nccl", "--dtype", "bfloat16", "--micro-batches", "2",
                           "--global-batch", "8", "--steps", "4", "--json", "--peak-flops", "1e14",
                           "--trace-dir", str(tmp_path)],
                          env=subprocess_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    assert s["backend"] == "nccl" and s["device"].startswith("cuda")
    assert all(0 < m < 1 for m in s["mfu"])
    assert s["losses"][-1] < s["losses"][0]


def test_one_gpu_bench(python, subprocess_env):
    proc = subprocess.run([python, "-m", "trainer.bench", "--nproc", "1", "--device", "cuda",
                           "--ops", "all_reduce,broadcast", "--json", "-n", "3"],
                          env=subprocess_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["backend"] == "nccl" and all(r["wrong"] == 0 for r in doc["results"])
