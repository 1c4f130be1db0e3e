"""A plain PyTorch tensor-parallel job on gloo with one delayed link, traced as the
torch.profiler docs show: ``python tp_job.py OUT --world 6 --tp 2 --delay-group 1``.

Ranks ``tp*i .. tp*i+tp-1`` form tensor-parallel group i, each group on its own data. Each
layer is row-parallel (Megatron-LM's pattern): every rank multiplies by its own weight and the
partial outputs are summed over the group with the differentiable all-reduce (one call
forward, one backward). The groups do not synchronise gradients: gloo records no process
group per call, so a rank's calls are told apart only when it is in one group besides the
world (``netsim.traces.generic_kineto``; a tp x dp job on gloo leaves them ambiguous).
Tensor-parallel group ``--delay-group`` runs on ``delayed_link``'s backend: every message
between its ranks arrives ``--link-delay-ms`` late. Each rank writes
``OUT/kineto-rank{R}.json`` (``schedule(wait=1, warmup=1, active=ACTIVE)``, record_shapes).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import delayed_link
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch_job import add_job_args, profiler, spawn, train_step


class RowParallel(torch.nn.Module):
    """``layers`` linear maps whose partial products are summed over ``group``."""

    def __init__(self, hidden: int, layers: int, group) -> None:
        super().__init__()
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(hidden, hidden) / hidden) for _ in range(layers))
        self.head = torch.nn.Linear(hidden, 1)
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for w in self.weights:
            x = torch.relu(dist_fn.all_reduce(x @ w, group=self.group))
        return self.head(x)


def _tp_group(rank: int, args: argparse.Namespace):
    """This rank's tensor-parallel group (every rank makes every group, in the same order)."""
    mine = None
    for i in range(args.world // args.tp):
        ranks = list(range(i * args.tp, (i + 1) * args.tp))
        backend = delayed_link.BACKEND if i == args.delay_group else "gloo"
        g = dist.new_group(ranks, backend=backend)
        mine = g if rank in ranks else mine
    return mine


def _rank(rank: int, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port),
                      GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "torch.distributed.nn.functional", FutureWarning)
    delayed_link.register(args.link_delay_ms * 1e-3)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.manual_seed(args.seed + rank)
    model = RowParallel(args.hidden, args.layers, _tp_group(rank, args))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(args.seed + rank // args.tp)  # one batch per tp group
    x = torch.randn(args.batch, args.hidden, generator=gen)
    y = torch.randn(args.batch, 1, generator=gen)
    with profiler(rank, args) as prof:
        for _ in range(2 + args.active):
            train_step(model, opt, x, y)
            prof.step()
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_job_args(p, world=6, hidden=512, batch=128, active=8, port=29651)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--delay-group", type=int, default=-1,
                   help="tensor-parallel group on delayed links (-1: none)")
    p.add_argument("--link-delay-ms", type=float, default=20.0)
    p.add_argument("--layers", type=int, default=2)
    return spawn(_rank, p.parse_args(argv))

if __name__ == "__main__":
    sys.exit(main())
