"""The traced all-to-all of expert parallelism, native and through its isend/irecv fallback,
with uneven and empty splits (a rank that routes no token to a peer, or receives none)."""

from __future__ import annotations

import json
from pathlib import Path


def _exchange(rank: int, world: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    from trainer.comm import Comm
    from trainer.mesh import Group
    from trainer.moe import all_to_all
    from trainer.trace import Clock, Tracer

    group = Group("ep", (0, 1, 2), dist.new_group([0, 1, 2]))
    # rank r sends splits[r][j] rows of width 3 to rank j; rank 2 sends nothing at all
    splits = [[1, 0, 2], [3, 1, 0], [0, 0, 0]]
    results = {}
    for mode in ("native", "fallback"):
        tracer = Tracer(Clock(False), None)
        comm = Comm(tracer, (0, 1, 2), rank, cuda=False)
        if mode == "fallback":
            comm.fallbacks.add("all_to_all")
        rows = sum(splits[rank])
        inp = (torch.arange(rows * 3, dtype=torch.float64).view(rows, 3) + 100 * rank)
        recv = [splits[j][rank] for j in range(3)]
        got = all_to_all(comm, inp, splits[rank], recv, group, "ep", "dispatch")
        rec = [r for r in tracer.flush() if r["type"] == "collective"][0]
        results[mode] = {"got": got.tolist(), "bytes": rec["bytes"],
                         "send_bytes": rec["send_bytes"], "impl": rec["impl"]}
    Path(out, f"r{rank}.json").write_text(json.dumps(results))


def test_all_to_all_uneven_and_empty(tmp_path):
    from trainer.launch import spawn

    spawn(_exchange, 3, args=(str(tmp_path),))
    splits = [[1, 0, 2], [3, 1, 0], [0, 0, 0]]
    for rank in range(3):
        res = json.loads((tmp_path / f"r{rank}.json").read_text())
        expected = []
        for src in range(3):  # rows from src, in src's order, after the rows src sends earlier
            start = sum(splits[src][:rank])
            for i in range(start, start + splits[src][rank]):
                expected.append([100.0 * src + 3 * i + k for k in range(3)])
        for mode, impl in (("native", "all_to_all_single"), ("fallback", "isend/irecv")):
            r = res[mode]
            assert r["got"] == expected, (rank, mode)
            assert r["send_bytes"] == [n * 3 * 8 for n in splits[rank]]
            assert r["bytes"] == sum(r["send_bytes"]) and r["impl"] == impl
