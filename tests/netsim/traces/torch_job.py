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


def profiler(rank: int, args: argparse.Namespace, et=None) -> profile:
    """torch.profiler as its docs show: ``OUT/kineto-rank{R}.json`` over ``args.active`` steps
    after one waited and one warm-up step, with shapes (and the execution trace ``et``)."""
    return profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=1, warmup=1, active=args.active),
                   on_trace_ready=lambda p: p.export_chrome_trace(
                       os.path.join(args.out, f"kineto-rank{rank}.json")),
                   record_shapes=True, execution_trace_observer=et)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor) -> None:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def add_job_args(p: argparse.ArgumentParser, world: int, hidden: int, batch: int,
                 active: int, port: int) -> None:
    """The arguments every test job takes, with its defaults."""
    p.add_argument("out")
    p.add_argument("--world", type=int, default=world)
    p.add_argument("--hidden", type=int, default=hidden)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--active", type=int, default=active)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=port)


def spawn(rank_fn, args: argparse.Namespace) -> int:
    os.makedirs(args.out, exist_ok=True)
    mp.spawn(rank_fn, args=(args,), nprocs=args.world, join=True)
    return 0


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
    with profiler(rank, args, et) as prof:
        for _ in range(2 + args.active):
            h = x
            for _ in range(extra):  # the slowed rank's extra work
                h = torch.tanh(h @ w)
            train_step(model, opt, h, y)
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_job_args(p, world=2, hidden=256, batch=64, active=5, port=29571)
    p.add_argument("--wrap", choices=("ddp", "fsdp"), default="ddp")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--extra-matmuls", type=int, default=40)
    p.add_argument("--execution-trace", action="store_true")
    return spawn(_rank, p.parse_args(argv))

if __name__ == "__main__":
    sys.exit(main())
