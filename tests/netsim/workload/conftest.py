"""Synthetic trainer traces with known costs (fixtures for calibration and CLI tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netsim.model.models import ModelConfig
from netsim.workload.comm import bus_factor

MODEL = {"layers": 4, "hidden": 64, "heads": 4, "ffn_hidden": 256, "seq": 32, "vocab": 128}
RATE_FLOPS = 2.0e9        # true compute rate of the synthetic machine, FLOP/s
ALPHA_S, BUSBW = 1e-4, 5e8  # true all-reduce latency (s) and bus bandwidth (B/s)


def write_trace(d: Path, tp: int, pp: int, dp: int, mb: int = 1, steps: int = 3) -> Path:
    """A trace whose layer times are exactly flops / RATE_FLOPS and whose all-reduces are
    exactly ALPHA_S + S f / BUSBW (group = the TP group); every rank on one host."""
    d.mkdir(parents=True, exist_ok=True)
    model = ModelConfig(**MODEL)
    world = tp * pp * dp
    flops_f = model.layer_flops_fwd(mb * model.seq) / tp
    nbytes = mb * model.seq * model.hidden * 4
    for rank in range(world):
        meta = {"type": "meta", "schema": "trainer-trace/1", "rank": rank, "world_size": world,
                "tp": tp, "pp": pp, "dp": dp, "order": "tp-dp-pp", "backend": "gloo",
                "device": "cpu", "dtype": "float32", "model": MODEL, "micro_batches": 2,
                "micro_batch_size": mb, "global_batch": 2 * mb * dp, "tp_rank": rank % tp,
                "pp_rank": rank // (tp * dp), "dp_rank": (rank // tp) % dp, "host": "h0"}
        lines, t = [meta], 0.0
        group = [rank - rank % tp + i for i in range(tp)]
        ar = ALPHA_S + nbytes * bus_factor("all_reduce", tp) / BUSBW if tp > 1 else 0.0
        for step in range(steps):
            t0 = t
            for phase, flops in (("forward", flops_f), ("backward", 2 * flops_f)):
                dur = flops / RATE_FLOPS
                rec = {"type": "compute", "step": step, "phase": phase, "layer": 0,
                       "name": "layer", "microbatch": 0, "start_s": t, "flops": flops}
                if tp > 1:  # a TP all-reduce inside the layer record
                    lines.append({"type": "collective", "step": step, "op": "all_reduce",
                                  "kind": "tp", "group": group, "bytes": nbytes,
                                  "dtype": "float32", "start_s": t + dur, "end_s": t + dur + ar,
                                  "overlapped": False})
                rec["end_s"] = t + dur + ar
                lines.append(rec)
                t = rec["end_s"]
            lines.append({"type": "iteration", "step": step, "iteration_s": t - t0})
        (d / f"trace-rank{rank}.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    (d / "summary.json").write_text(json.dumps({"world_size": world}))
    return d


@pytest.fixture
def trace_dirs(tmp_path):
    return [write_trace(tmp_path / f"t{tp}", tp, 1, 8 // tp) for tp in (1, 2, 4)]


@pytest.fixture
def truth():
    """The costs the synthetic traces were generated with."""
    return {"rate_flops": RATE_FLOPS, "alpha_s": ALPHA_S, "busbw": BUSBW}


@pytest.fixture
def make_trace():
    return write_trace
