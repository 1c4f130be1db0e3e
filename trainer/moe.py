"""Mixture-of-experts MLP with expert parallelism (GShard, Lepikhin et al. 2021; Switch,
Fedus et al. 2022; Megatron-Core's ``MoELayer`` with the all-to-all token dispatcher).

A replicated router (a [experts, hidden] matrix) scores every token; softmax over the experts,
the ``top_k`` largest probabilities are kept and renormalised to sum to one (Mixtral's gating).
Routing is dropless (no capacity factor, Megatron-Core's default), so every layout computes
exactly the single-process function. With ``ep`` > 1 the experts are spread over the
expert-parallel group (rank i holds experts [i E/ep, (i+1) E/ep)); per MoE layer and
micro-batch the forward pass runs three all-to-alls of kind ``ep`` (token counts, dispatch of
the token copies, combine of the expert outputs) and the backward pass two (the gradients of
combine and dispatch, splits swapped). With tp > 1 every expert is itself a tensor-parallel MLP
(Megatron's expert-tensor-parallel = tp): the tp ranks route identical tokens.

A ``shared_experts`` MLP (DeepSeek) runs on every token beside the routed experts. No
load-balancing loss: it would make the loss depend on how tokens are split over ranks.

Gradients: dense parameters are averaged over the data x context parallel group, expert
parameters over the expert-data-parallel x context group with the same 1/(dp x cp) scale
(Megatron-Core's ``expert_gradient_scaling_factor``), both through :class:`Reducers`.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import nn

from trainer.comm import Comm, Handle, dtype_name, nbytes
from trainer.config import ModelConfig
from trainer.layers import INIT_STD, TPContext, full_init
from trainer.mesh import Group


# -- all-to-all ---------------------------------------------------------------------------------
def all_to_all(comm: Comm, inp: torch.Tensor, in_splits: list[int], out_splits: list[int],
               group: Group, kind: str = "ep", name: str = "") -> torch.Tensor:
    """Send rows ``in_splits[i]`` of ``inp`` to member i of ``group``; returns the rows received
    (``out_splits[i]`` from member i), in member order. One ``all_to_all`` trace record:
    ``bytes`` = the whole input (nccl-tests), ``send_bytes`` = bytes to each member.

    Runs ``all_to_all_single`` (uneven splits); where the backend refuses it, every pair
    exchanges its rows with isend/irecv (``impl`` = ``isend/irecv``), the same traffic.
    """
    inp = inp.contiguous()
    row = math.prod(inp.shape[1:]) * inp.element_size()  # bytes of one row (inp may be empty)
    out = inp.new_empty((sum(out_splits),) + tuple(inp.shape[1:]))
    extra = {"send_bytes": [n * row for n in in_splits], "name": name}
    if "all_to_all" not in comm.fallbacks:
        try:
            work = dist.all_to_all_single(out, inp, out_splits, in_splits, group=group.pg,
                                          async_op=True)
            _traced(comm, kind, group, inp, "all_to_all_single", [work], extra).wait()
            return out
        except (RuntimeError, NotImplementedError):
            comm.fallbacks.add("all_to_all")
    works = _pairwise(comm, out, inp, in_splits, out_splits, group)
    _traced(comm, kind, group, inp, "isend/irecv", works, extra).wait()
    return out


def _traced(comm: Comm, kind: str, group: Group, inp: torch.Tensor, impl: str, works: list,
            extra: dict) -> Handle:
    return comm._record("all_to_all", kind, group.ranks, nbytes(inp), dtype_name(inp), False,
                        impl, works, extra=extra)


def _pairwise(comm: Comm, out: torch.Tensor, inp: torch.Tensor, in_splits: list[int],
              out_splits: list[int], group: Group) -> list:
    """The fallback: a local copy for this rank's own rows, isend/irecv with every other member."""
    me = group.index(comm.rank)
    ins, outs = inp.split(in_splits), out.split(out_splits)
    outs[me].copy_(ins[me])
    works = []
    for i, peer in enumerate(group.ranks):
        if i != me and out_splits[i]:
            works.append(dist.irecv(outs[i], src=comm.world_ranks[peer], group=group.pg))
    for i, peer in enumerate(group.ranks):
        if i != me and in_splits[i]:
            works.append(dist.isend(ins[i].contiguous(), dst=comm.world_ranks[peer], group=group.pg))
    return works


class _AllToAll(torch.autograd.Function):
    """Differentiable all-to-all: the backward sends the gradients back (splits swapped)."""

    @staticmethod
    def forward(ctx, x, in_splits, out_splits, comm, group, name):
        ctx.args = (in_splits, out_splits, comm, group, name)
        return all_to_all(comm, x, in_splits, out_splits, group, "ep", name)

    @staticmethod
    def backward(ctx, grad):
        in_splits, out_splits, comm, group, name = ctx.args
        g = all_to_all(comm, grad, out_splits, in_splits, group, "ep", f"{name}_backward")
        return g, None, None, None, None, None


# -- the layer ---------------------------------------------------------------------------------
class MoE(nn.Module):
    """Router, this rank's routed experts and the shared experts of one block."""

    def __init__(self, cfg: ModelConfig, ctx: TPContext, prefix: str, std_out: float,
                 mlp_cls) -> None:
        super().__init__()
        self.ctx, self.top_k, self.experts_total = ctx, cfg.top_k, cfg.experts
        self.ep = ctx.ep if ctx.ep is not None else Group("ep", (ctx.rank,))
        per = cfg.experts // self.ep.size
        self.first = self.ep.index(ctx.rank) * per
        self.per = per
        w = full_init(ctx.seed, f"{prefix}.router.weight", (cfg.experts, cfg.hidden), INIT_STD)
        self.router = nn.Parameter(w.to(device=ctx.device, dtype=ctx.dtype))
        self.experts = nn.ModuleList(
            mlp_cls(cfg, ctx, f"{prefix}.experts.{e}", std_out, width=cfg.moe_ffn_hidden)
            for e in range(self.first, self.first + per))
        self.shared = (mlp_cls(cfg, ctx, f"{prefix}.shared", std_out,
                               width=cfg.shared_experts * cfg.moe_ffn_hidden)
                       if cfg.shared_experts else None)

    def route(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(gates [N, k] summing to one, expert ids [N, k]) of every token."""
        probs = torch.softmax(nn.functional.linear(flat, self.router), dim=-1)
        top, ids = probs.topk(self.top_k, dim=-1)
        return top / top.sum(dim=-1, keepdim=True), ids

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        flat = x.reshape(-1, h)
        gates, ids = self.route(flat)
        expert_of = ids.reshape(-1)
        order = torch.argsort(expert_of, stable=True)  # token copies grouped by expert
        token_of = torch.arange(flat.shape[0], device=x.device).repeat_interleave(self.top_k)
        counts = torch.bincount(expert_of, minlength=self.experts_total)
        out_sorted = self._experts(flat[token_of[order]], counts)
        y = torch.zeros_like(out_sorted).index_copy(0, order, out_sorted)
        y = (y.view(-1, self.top_k, h) * gates.unsqueeze(-1)).sum(dim=1).view(b, s, h)
        return y if self.shared is None else y + self.shared(x)

    def _experts(self, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """Expert outputs of token copies sorted by expert (``counts`` per expert)."""
        if self.ep.size == 1:
            return self._local(rows, counts.tolist())
        ep, per, comm = self.ep.size, self.per, self.ctx.comm
        send_counts = counts.view(ep, per)
        recv_counts = all_to_all(comm, send_counts, [1] * ep, [1] * ep, self.ep, "ep", "counts")
        in_splits = send_counts.sum(dim=1).tolist()
        out_splits = recv_counts.sum(dim=1).tolist()
        got = _AllToAll.apply(rows, in_splits, out_splits, comm, self.ep, "dispatch")
        # received: by source rank, then by local expert; regroup by local expert
        idx = _by_expert(recv_counts)
        out = self._local(got[idx], recv_counts.sum(dim=0).tolist())
        back = torch.zeros_like(out).index_copy(0, idx, out)
        return _AllToAll.apply(back, out_splits, in_splits, comm, self.ep, "combine")

    def _local(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """Run the local experts on their consecutive runs of ``rows``."""
        parts = []
        for expert, chunk in zip(self.experts, rows.split(counts), strict=True):
            # an expert with no tokens is skipped (the same on every tp rank: same routing)
            parts.append(expert(chunk) if chunk.shape[0] else chunk)
        return torch.cat(parts) if parts else rows


def _by_expert(recv_counts: torch.Tensor) -> torch.Tensor:
    """Permutation that regroups rows received [source][local expert] as [local expert][source]."""
    sources, per = recv_counts.shape
    starts = torch.cumsum(recv_counts.reshape(-1), 0) - recv_counts.reshape(-1)
    starts = starts.view(sources, per)
    pieces = [torch.arange(int(starts[s_, e]), int(starts[s_, e] + recv_counts[s_, e]))
              for e in range(per) for s_ in range(sources)]
    return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)


def is_expert_param(name: str) -> bool:
    """Parameters of routed experts (reduced over the expert-data-parallel group)."""
    return ".experts." in name


# -- gradient reduction of dense and expert parameters -------------------------------------------
class Reducers:
    """A dense and an expert :class:`~trainer.data_parallel.DataParallel`, driven as one.

    The expert reducer is never armed: its buckets are reduced in ``finish`` in a fixed order,
    since which experts receive gradients in the last micro-batch differs between its ranks
    (hook-driven launches could pair different buckets in one collective).
    """

    def __init__(self, dense, expert) -> None:
        self.dense, self.expert = dense, expert

    def arm(self) -> None:
        self.dense.arm()

    def finish(self) -> None:
        self.dense.finish()
        self.expert.finish()

    def step(self) -> None:
        self.dense.step()
        self.expert.step()

    @property
    def step_count(self) -> int:
        return self.dense.step_count

    def state_dict(self) -> dict:
        return {"dense": self.dense.state_dict(), "expert": self.expert.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.dense.load_state_dict(state["dense"])
        self.expert.load_state_dict(state["expert"])


def make_reducers(stage: nn.Module, mesh, comm: Comm, mode: str, bucket_bytes: int, opt,
                  tied: nn.Parameter | None, fsdp: bool = False):
    """The data-parallel reducer(s) of ``stage``: one DataParallel over dp (x cp) for a dense
    stage, :class:`Reducers` when the stage holds experts."""
    from trainer.data_parallel import DataParallel

    named = list(stage.named_parameters())
    dense_group = mesh.dpcp if mesh.dpcp is not None else mesh.dp
    scale = mesh.layout.dp * mesh.layout.cp
    dense = [p for n, p in named if not is_expert_param(n)]
    experts = [p for n, p in named if is_expert_param(n)]
    if fsdp:  # trainer.fsdp: one sharded bucket per block (no experts: config refuses them)
        from trainer.fsdp import FSDP, units

        dp = DataParallel(dense, dense_group, comm, "reduce_scatter", bucket_bytes, opt,
                          tied=tied, embedding_group=mesh.embedding, grad_divisor=scale,
                          units=units(stage, dense))
        return FSDP(dp, stage)
    dp = DataParallel(dense, dense_group, comm, mode, bucket_bytes, opt, tied=tied,
                      embedding_group=mesh.embedding, grad_divisor=scale)
    if not experts:
        return dp
    ex = DataParallel(experts, mesh.edp, comm, mode, bucket_bytes, opt, grad_divisor=scale)
    return Reducers(dp, ex)
