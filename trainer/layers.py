"""Megatron-style tensor-parallel layers (Shoeybi et al. 2019, "Megatron-LM", section 3).

Weights are generated full-size from a generator seeded by (seed, parameter name) and then
sliced, so every layout starts from the same model as the single-process run:

- :class:`ColumnParallelLinear` splits the output features (no communication; the caller applies
  *f* to its input once per block, as Megatron's attention QKV and MLP fc1 do);
- :class:`RowParallelLinear` splits the input features and applies *g* (all-reduce) to its
  output before adding the replicated bias;
- :class:`VocabParallelEmbedding` splits the vocabulary rows, zeroes tokens outside its range
  and applies *g*;
- :func:`vocab_parallel_cross_entropy` computes the loss over vocabulary-split logits with three
  all-reduces (max, target logit, sum of exponentials), Megatron's ``_VocabParallelCrossEntropy``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import torch
from torch import nn

from trainer.comm import Comm, reduce_from_tp
from trainer.mesh import Group
from trainer.sequence_parallel import scatter_seq, sp_param

INIT_STD = 0.02  # GPT-2 / Megatron init_method_std


def full_init(seed: int, name: str, shape: tuple[int, ...], std: float) -> torch.Tensor:
    """A full-size N(0, std) tensor that depends only on ``seed`` and ``name`` (float32, CPU)."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{seed}:{name}".encode()) + seed * 7919)
    return torch.randn(shape, generator=g, dtype=torch.float32) * std


class TPContext:
    """What a tensor-parallel layer needs: the tp group, this rank's index and the comm."""

    def __init__(self, group: Group, rank: int, comm: Comm | None, seed: int,
                 dtype: torch.dtype, device: torch.device, cp: Group | None = None,
                 ep: Group | None = None) -> None:
        self.group, self.size, self.index = group, group.size, group.index(rank)
        self.comm, self.seed, self.dtype, self.device = comm, seed, dtype, device
        self.rank = rank
        self.sp = False
        """Sequence parallelism (``trainer.sequence_parallel``): activations outside the
        tensor-parallel regions hold 1/tp of the sequence."""
        self.cp = cp
        """Context-parallel group (ring attention), None or size 1 without cp."""
        self.ep = ep
        """Expert-parallel group (MoE all-to-all), None or size 1 without ep."""

    def param(self, name: str, full_shape, std: float, shard: Callable[[torch.Tensor], torch.Tensor]
              ) -> nn.Parameter:
        local = shard(full_init(self.seed, name, tuple(full_shape), std))
        return nn.Parameter(local.to(device=self.device, dtype=self.dtype).contiguous())

    def zeros(self, n: int) -> nn.Parameter:
        return nn.Parameter(torch.zeros(n, device=self.device, dtype=self.dtype))


class ColumnParallelLinear(nn.Module):
    """y_local = x W_local^T + b_local, W split by output rows (``shard`` selects the rows)."""

    def __init__(self, ctx: TPContext, name: str, in_f: int, out_full: int,
                 shard_rows: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__()
        shard_rows = shard_rows or (lambda t: t.chunk(ctx.size, dim=0)[ctx.index])
        self.weight = ctx.param(f"{name}.weight", (out_full, in_f), INIT_STD, shard_rows)
        bias_full = torch.zeros(out_full, 1)
        self.bias = nn.Parameter(shard_rows(bias_full)[:, 0].to(ctx.device, ctx.dtype).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """y = g(x_local W_local^T) + b, W split by input columns."""

    def __init__(self, ctx: TPContext, name: str, in_full: int, out_f: int, std: float) -> None:
        super().__init__()
        self.ctx = ctx
        self.weight = ctx.param(f"{name}.weight", (out_f, in_full), std,
                                lambda t: t.chunk(ctx.size, dim=1)[ctx.index])
        self.bias = ctx.zeros(out_f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.linear(x, self.weight)
        return _leave_tp(y, self.ctx) + _sp_bias(self.bias, self.ctx)


class VocabParallelEmbedding(nn.Module):
    """Embedding whose rows [start, end) live on this tp rank."""

    def __init__(self, ctx: TPContext, name: str, vocab: int, hidden: int) -> None:
        super().__init__()
        self.ctx = ctx
        self.per_rank = vocab // ctx.size
        self.start = ctx.index * self.per_rank
        self.weight = ctx.param(f"{name}.weight", (vocab, hidden), INIT_STD,
                                lambda t: t.chunk(ctx.size, dim=0)[ctx.index])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.ctx.size == 1:
            return nn.functional.embedding(ids, self.weight)
        local = ids - self.start
        outside = (local < 0) | (local >= self.per_rank)
        out = nn.functional.embedding(local.masked_fill(outside, 0), self.weight)
        out = out.masked_fill(outside.unsqueeze(-1), 0.0)
        return _leave_tp(out, self.ctx)


def _leave_tp(partial: torch.Tensor, ctx: TPContext) -> torch.Tensor:
    """Partial sums of the tp ranks: *g* (all-reduce), or with sequence parallelism *g-bar*
    (reduce-scatter over the sequence, ``trainer.sequence_parallel``)."""
    if ctx.sp and ctx.size > 1:
        return scatter_seq(partial, ctx.comm, ctx.group)
    return reduce_from_tp(partial, ctx.comm, ctx.group)


def _sp_bias(bias: torch.Tensor, ctx: TPContext) -> torch.Tensor:
    return sp_param(bias, ctx)


class _VocabParallelCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, vocab_start, comm: Comm, group: Group):
        def reduce(t: torch.Tensor, op: str) -> None:
            if group.size > 1:
                comm.all_reduce(t, group, "tp", op=op)

        logits_max = logits.max(dim=-1).values
        reduce(logits_max, "max")
        shifted = logits - logits_max.unsqueeze(-1)
        local = target - vocab_start
        outside = (local < 0) | (local >= logits.shape[-1])
        local = local.masked_fill(outside, 0)
        rows = torch.arange(logits.shape[0], device=logits.device)
        predicted = shifted[rows, local].masked_fill(outside, 0.0)
        reduce(predicted, "sum")
        exp = shifted.exp()
        sum_exp = exp.sum(dim=-1)
        reduce(sum_exp, "sum")
        loss = sum_exp.log() - predicted
        softmax = exp.div_(sum_exp.unsqueeze(-1))
        ctx.save_for_backward(softmax, local, outside)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        softmax, local, outside = ctx.saved_tensors
        grad = softmax.clone()
        rows = torch.arange(grad.shape[0], device=grad.device)
        grad[rows, local] -= (~outside).to(grad.dtype)
        grad.mul_(grad_loss.unsqueeze(-1))
        return grad, None, None, None, None


def vocab_parallel_cross_entropy(logits: torch.Tensor, target: torch.Tensor, vocab_start: int,
                                 comm: Comm | None, group: Group) -> torch.Tensor:
    """Per-token loss of ``logits`` [N, V/tp] (this rank's vocabulary slice) against ``target`` [N]."""
    return _VocabParallelCE.apply(logits, target, vocab_start, comm, group)
