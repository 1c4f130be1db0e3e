"""Megatron sequence parallelism with tensor parallelism (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", section 4.2.2).

Outside the tensor-parallel regions (LayerNorms, residual adds, embedding output) every tp rank
holds 1/tp of the sequence, ``[b, s/tp, h]``. Megatron's *f* and *g* become *g* and *g-bar*:
before a column-parallel linear the sequence is all-gathered (its backward reduce-scatters the
gradient), and a row-parallel linear's partial sums are reduce-scattered over the sequence
instead of all-reduced (its backward all-gathers). Parameters used on a sequence chunk (the
LayerNorms, the row-parallel biases, the position table) see only their chunk's gradient, so
their gradients are summed over tp (``sp_param``: identity forward, all-reduce backward).
"""

from __future__ import annotations

import torch
from torch import nn

from trainer.comm import Comm, copy_to_tp
from trainer.mesh import Group


def _gather(x: torch.Tensor, comm: Comm, group: Group) -> torch.Tensor:
    """[b, s/tp, h] on every rank -> [b, s, h] (chunks in group order)."""
    local = x.transpose(0, 1).contiguous()
    out = torch.empty((local.shape[0] * group.size, *local.shape[1:]), dtype=x.dtype,
                      device=x.device)
    comm.all_gather(out, local, group, "tp")
    return out.transpose(0, 1)


def _scatter(x: torch.Tensor, comm: Comm, group: Group) -> torch.Tensor:
    """[b, s, h] partial sums on every rank -> this rank's [b, s/tp, h] of their sum."""
    full = x.transpose(0, 1).contiguous()
    out = torch.empty((full.shape[0] // group.size, *full.shape[1:]), dtype=x.dtype,
                      device=x.device)
    comm.reduce_scatter(out, full, group, "tp")
    return out.transpose(0, 1)


class _SeqComm(torch.autograd.Function):
    """``fwd`` in the forward pass, its transpose ``bwd`` on the gradient."""

    @staticmethod
    def forward(ctx, x, fwd, bwd, comm: Comm, group: Group):
        ctx.bwd, ctx.comm, ctx.group = bwd, comm, group
        return fwd(x, comm, group)

    @staticmethod
    def backward(ctx, grad):
        return ctx.bwd(grad, ctx.comm, ctx.group), None, None, None, None


def gather_seq(x: torch.Tensor, comm: Comm, group: Group) -> torch.Tensor:
    """*g*: all-gather the sequence forward, reduce-scatter the gradient backward."""
    return x if group.size == 1 else _SeqComm.apply(x, _gather, _scatter, comm, group)


def scatter_seq(x: torch.Tensor, comm: Comm, group: Group) -> torch.Tensor:
    """*g-bar*: reduce-scatter partial sums over the sequence forward, all-gather backward."""
    return x if group.size == 1 else _SeqComm.apply(x, _scatter, _gather, comm, group)


def sp_param(p: torch.Tensor, ctx) -> torch.Tensor:
    """A parameter used on this rank's sequence chunk: its gradient summed over tp with SP."""
    return copy_to_tp(p, ctx.comm, ctx.group) if getattr(ctx, "sp", False) else p


def enter_tp(x: torch.Tensor, ctx) -> torch.Tensor:
    """The input of a column-parallel linear: *f* (copy) without SP, *g* (all-gather) with."""
    if getattr(ctx, "sp", False):
        return gather_seq(x, ctx.comm, ctx.group)
    return copy_to_tp(x, ctx.comm, ctx.group)


class SPLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` (same parameter names) whose gain and bias gradients are summed over
    tp under sequence parallelism."""

    def __init__(self, ctx, hidden: int, eps: float, **kw) -> None:
        super().__init__(hidden, eps=eps, **kw)
        self.ctx = ctx

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.layer_norm(x, self.normalized_shape, sp_param(self.weight, self.ctx),
                                        sp_param(self.bias, self.ctx), self.eps)
