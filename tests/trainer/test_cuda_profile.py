"""torch.profiler traces of a CUDA run read back (NCCL collectives from record_param_comms
and their kernels); skipped without CUDA (two GPUs for the collectives)."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs CUDA (torch.cuda.is_available() is False): the "
                                 "CUDA profiler path is not exercised here")]


def test_cuda_profile_reads_back(python, subprocess_env, tmp_path):
    from netsim.traces.kineto import read_traces
    from netsim.traces.records import read_trace_dir

    gpus = min(torch.cuda.device_count(), 2)
    launch = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
              str(gpus), "-m", "trainer"] if gpus > 1 else [python, "-m", "trainer"]
    proc = subprocess.run([*launch, "--model", "small", "--device", "cuda", "--backend", "nccl",
                           "--tp", str(gpus), "--micro-batches", "2", "--global-batch", "2",
                           "--steps", "5", "--trace-dir", str(tmp_path / "native"),
                           "--profile", str(tmp_path / "kineto"), "--profile-schedule", "1,1,3"],
                          env=subprocess_env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kin, native = read_traces(tmp_path / "kineto"), read_trace_dir(tmp_path / "native")
    assert sorted({it["step"] for it in kin.ranks[0].iterations}) == [2, 3, 4]
    comp = Counter((c["phase"], c.get("name")) for c in kin.ranks[0].compute if c["step"] == 3)
    assert comp[("forward", "layer")] == comp[("backward", "layer")] > 0
    if gpus > 1:
        def tp_calls(rank):
            return Counter((c["op"], c["bytes"]) for c in rank.collectives
                           if c["step"] == 3 and c["kind"] == "tp")
        assert tp_calls(kin.ranks[0]) == tp_calls(native.ranks[0])
        assert all(c["end_s"] >= c["start_s"] for c in kin.ranks[0].collectives)
