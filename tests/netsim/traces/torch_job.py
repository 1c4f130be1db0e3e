"""A plain PyTorch training job (not this project's trainer), traced as the torch.profiler docs
show, for the generic Kineto reader's tests: ``python torch_job.py OUT --world 2 --wrap ddp``.

Each rank of a ``torch.multiprocessing.spawn`` world on gloo (CPU) trains a small MLP under
DDP or FSDP and writes ``OUT/kineto-rank{R}.json`` through ``on_trace_ready`` with
``schedule(wait=1, warmup=1, active=ACTIVE)`` and ``record_shapes=True``; ``--slow-rank R``
gives rank R ``--extra-matmuls`` more matrix products per step (a slower rank);
``--execution-trace`` also writes PyTorch's ``ExecutionTraceObserver`` output
``OUT/et-rank{R}.json`` over the same active steps (the input of MLCommons Chakra).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule


def _model(hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 1))


def _wrap(model: torch.nn.Module, how: str) -> torch.nn.Module:
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.fsdp import fully_shard  # FSDP2: FSDP1 needs an accelerator

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    return fully_shard(model)


def _rank(rank: int, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    gen = torch.Generator().manual_seed(args.seed + rank)
    torch.manual_seed(args.seed)
    model = _wrap(_model(args.hidden), args.wrap)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.hidden, generator=gen)
    y = torch.randn(args.batch, 1, generator=gen)
    extra = args.extra_matmuls if rank == args.slow_rank else 0
    w = torch.randn(args.hidden, args.hidden, generator=gen) / args.hidden
    et = None
    if args.execution_trace:
        et = ExecutionTraceObserver().register_callback(
            os.path.join(args.out, f"et-rank{rank}.json"))
    steps = 2 + args.active
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=args.active),
                 on_trace_ready=lambda p: p.export_chrome_trace(
                     os.path.join(args.out, f"kineto-rank{rank}.json")),
                 record_shapes=True, execution_trace_observer=et) as prof:
        for _ in range(steps):
            h = x
            for _ in range(extra):  # the slowed rank's extra work
                h = torch.tanh(h @ w)
            loss = torch.nn.functional.mse_loss(model(h), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--wrap", choices=("ddp", "fsdp"), default="ddp")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--extra-matmuls", type=int, default=40)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--active", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=29571)
    p.add_argument("--execution-trace", action="store_true")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    mp.spawn(_rank, args=(args,), nprocs=args.world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
