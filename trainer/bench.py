"""Collective microbenchmark in the style of nccl-tests: ``python -m trainer.bench``.

Run it under torchrun (``torchrun --nproc-per-node 8 -m trainer.bench``), or on CPU with
``--nproc N`` to spawn a gloo world itself. For each op and size it prints one row: size,
count, type, time, algbw and busbw, and a correctness count (#wrong, nccl-tests' ``-c``).

Conventions of nccl-tests ``doc/PERFORMANCE.md`` (shared/reference/nccl-roce.md section 2.1):
``algbw = S / t``, ``busbw = algbw x factor`` with factor 2(n-1)/n for all-reduce, (n-1)/n for
reduce-scatter, all-gather and all-to-all, 1 for broadcast and send/recv. S is the buffer for
all-reduce, broadcast and send/recv, and the *whole* array (n x the per-rank part) for
all-gather, reduce-scatter and all-to-all. ``time_s`` is the slowest rank's mean over
``--iters`` after ``--warmup`` untimed calls. Where the backend lacks an op (reduce-scatter on
some gloo builds) a correct fallback runs and ``impl`` names it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv")
SCHEMA = "trainer-bench/1"


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``op`` on ``n`` ranks."""
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("broadcast", "sendrecv", "reduce"):
        return 1.0
    raise ValueError(f"unknown op {op!r}: choose from {', '.join(OPS)}")


def sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """Geometric sweep from ``min_bytes`` to ``max_bytes`` (inclusive), like nccl-tests -b/-e/-f."""
    if min_bytes < 1 or max_bytes < min_bytes or factor <= 1:
        raise ValueError("need 1 <= --min-bytes <= --max-bytes and --factor > 1")
    out, s = [], float(min_bytes)
    while s <= max_bytes:
        out.append(int(s))
        s *= factor
    return out


def _make(op: str, size: int, n: int, rank: int, dtype, device) -> tuple[Callable, Callable, str]:
    """(run, wrong_count, impl) for one op on a buffer of nccl-tests size ``size`` bytes."""
    import torch
    import torch.distributed as dist

    from trainer.comm import _all_gather_fn, _reduce_scatter_fn

    esize = torch.tensor([], dtype=dtype).element_size()
    count = size // esize
    part = count // n
    fill = float(rank + 1)
    kw = dict(dtype=dtype, device=device)
    total = n * (n + 1) / 2

    def bad(t: torch.Tensor, expect) -> int:
        return int((t != expect).sum().item())

    if op == "all_reduce":
        buf = torch.full((count,), fill, **kw)
        def run():
            buf.fill_(fill)
            dist.all_reduce(buf)
        return run, lambda: bad(buf, total), "all_reduce"
    if op == "broadcast":
        buf = torch.full((count,), fill, **kw)
        return (lambda: dist.broadcast(buf, src=0)), (lambda: bad(buf, 1.0)), "broadcast"
    if op == "all_gather":
        out, inp = torch.empty(n * part, **kw), torch.full((part,), fill, **kw)
        fn, impl = _all_gather_fn(), "all_gather"
        expect = torch.arange(1, n + 1, **kw).repeat_interleave(part)
        if fn is None:
            chunks = list(out.chunk(n))
            return (lambda: dist.all_gather(chunks, inp)), (lambda: bad(out, expect)), "all_gather(list)"
        return (lambda: fn(out, inp)), (lambda: bad(out, expect)), impl
    if op == "reduce_scatter":
        inp, out = torch.full((n * part,), fill, **kw), torch.empty(part, **kw)
        fn = _reduce_scatter_fn()
        try:
            fn(out, inp)
            return (lambda: fn(out, inp)), (lambda: bad(out, total)), "reduce_scatter"
        except (RuntimeError, NotImplementedError, TypeError):
            buf = inp.clone()
            def run():
                buf.copy_(inp)
                dist.all_reduce(buf)
                out.copy_(buf.chunk(n)[rank])
            return run, (lambda: bad(out, total)), "all_reduce+slice"
    if op == "all_to_all":
        inp = torch.arange(n, **kw).repeat_interleave(part) + 100 * rank  # chunk j goes to rank j
        out = torch.empty(n * part, **kw)
        expect = (torch.arange(n, **kw) * 100 + rank).repeat_interleave(part)
        return (lambda: dist.all_to_all_single(out, inp)), (lambda: bad(out, expect)), "all_to_all_single"
    if op == "sendrecv":
        send, recv = torch.full((count,), fill, **kw), torch.empty(count, **kw)
        def run():
            reqs = [dist.isend(send, (rank + 1) % n), dist.irecv(recv, (rank - 1) % n)]
            for r in reqs:
                r.wait()
        return run, (lambda: bad(recv, float((rank - 1) % n + 1))), "isend/irecv ring"
    raise ValueError(f"unknown op {op!r}: choose from {', '.join(OPS)}")


def bench_rank(rank: int, n: int, ops: list[str], size_list: list[int], iters: int, warmup: int,
               dtype_name: str, device_name: str) -> dict:
    """Run the sweep on this rank; every rank returns the same document."""
    import torch
    import torch.distributed as dist

    dtype = getattr(torch, dtype_name)
    device = torch.device(device_name)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    esize = torch.tensor([], dtype=dtype).element_size()
    results = []
    for op in ops:
        unit = esize * (n if op in ("all_gather", "reduce_scatter", "all_to_all") else 1)
        for size in size_list:
            size = (size // unit) * unit
            if size == 0 or (op == "sendrecv" and n == 1):
                continue
            run, wrong, impl = _make(op, size, n, rank, dtype, device)
            run()
            sync()
            errors = wrong()  # check the first call, as nccl-tests -c 1 does
            for _ in range(warmup):
                run()
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                run()
            sync()
            t = torch.tensor([(time.perf_counter() - t0) / iters, errors], dtype=torch.float64,
                             device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            time_s, errors = float(t[0]), int(t[1])
            algbw = size / time_s / 1e9
            results.append({"op": op, "size_bytes": size, "count": size // esize,
                            "dtype": dtype_name, "time_s": time_s, "algbw_GBps": algbw,
                            "busbw_GBps": algbw * busbw_factor(op, n), "group": list(range(n)),
                            "wrong": errors, "impl": impl})
    return {"schema": SCHEMA, "backend": dist.get_backend(), "world_size": n,
            "device": str(device), "iters": iters, "warmup": warmup, "results": results}


def format_rows(doc: dict) -> str:
    head = (f"{'size(B)':>12} {'count':>11} {'type':>8} {'op':>15} {'time(us)':>10} "
            f"{'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'#wrong':>7}  impl")
    lines = [f"# trainer.bench: {doc['backend']} on {doc['device']}, {doc['world_size']} ranks", head]
    for r in doc["results"]:
        lines.append(f"{r['size_bytes']:>12} {r['count']:>11} {r['dtype']:>8} {r['op']:>15} "
                     f"{r['time_s'] * 1e6:>10.1f} {r['algbw_GBps']:>12.3f} {r['busbw_GBps']:>12.3f} "
                     f"{r['wrong']:>7}  {r['impl']}")
    return "\n".join(lines)


def _spawned(rank: int, n: int, args: argparse.Namespace, out_path: str) -> None:
    doc = bench_rank(rank, n, args.ops, sizes(args.min_bytes, args.max_bytes, args.factor),
                     args.iters, args.warmup, args.dtype, _device(args.device, rank))
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(doc, f)


def _device(name: str, local_rank: int) -> str:
    import torch

    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        return f"cuda:{local_rank % torch.cuda.device_count()}"
    return "cpu"


_SUFFIX = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
           "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_bytes(text: str) -> int:
    """``4096``, ``64KiB``, ``2MB``... (trainer stands alone, so this mirrors topologies.units)."""
    t = text.strip().lower()
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    try:
        return int(float(num) * _SUFFIX[t[len(num):].strip()])
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"cannot parse byte count {text!r}: use e.g. 4096, 64KiB, 2MB") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m trainer.bench", description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS),
                   type=lambda s: [o.strip() for o in s.split(",") if o.strip()],
                   help=f"comma-separated subset of {','.join(OPS)}")
    p.add_argument("-b", "--min-bytes", type=parse_bytes, default=parse_bytes("1KiB"))
    p.add_argument("-e", "--max-bytes", type=parse_bytes, default=parse_bytes("16MiB"))
    p.add_argument("-f", "--factor", type=float, default=4.0, help="size step factor")
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=5)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16", "float64"))
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--nproc", type=int, default=0, help="spawn this many local processes (no torchrun)")
    p.add_argument("--json", action="store_true", help="print the JSON document instead of rows")
    p.add_argument("-o", "--output", help="also write the JSON document to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        for op in args.ops:
            busbw_factor(op, 2)
        sizes(args.min_bytes, args.max_bytes, args.factor)
        doc = _run(args)
    except ValueError as exc:
        print(f"trainer.bench: error: {exc}", file=sys.stderr)
        return 2
    if doc is None:  # not rank 0
        return 0
    if args.output:
        with open(args.output, "w") as f:
            json.dump(doc, f, indent=1)
    print(json.dumps(doc) if args.json else format_rows(doc), flush=True)
    return 0


def _run(args: argparse.Namespace) -> dict | None:
    import tempfile

    import torch
    import torch.distributed as dist

    from trainer.launch import default_backend, init_from_env, spawn

    backend = default_backend(args.device)
    if args.nproc:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.json")
            spawn(_spawned, args.nproc, args=(args, path), backend=backend)
            with open(path) as f:
                return json.load(f)
    torch.set_num_threads(1)
    rank, n = init_from_env(backend)
    try:
        doc = bench_rank(rank, n, args.ops, sizes(args.min_bytes, args.max_bytes, args.factor),
                         args.iters, args.warmup, args.dtype,
                         _device(args.device, int(os.environ.get("LOCAL_RANK", 0))))
    finally:
        dist.destroy_process_group()
    return doc if rank == 0 else None


if __name__ == "__main__":
    sys.exit(main())
