"""Decoder-only GPT (GPT-2/3 architecture: learned positions, pre-LN blocks, GELU MLP).

One pipeline *stage* of the model: the first stage owns the embeddings, the last the final
layer norm and the head; each stage owns ``layers / pp`` consecutive blocks. With tp = pp = 1
this is the whole model and no communication happens. Parameter names are those of the whole
model (``blocks.7.mlp.fc1.weight``), so every layout initializes identically.

Each block, embedding and head records its forward time, and (through identity autograd
markers on its input and output) its backward time, as ``compute`` trace records.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from trainer.comm import copy_to_tp
from trainer.config import ModelConfig
from trainer.flops import head_forward_flops, layer_forward_flops
from trainer.layers import (
    INIT_STD,
    ColumnParallelLinear,
    RowParallelLinear,
    TPContext,
    VocabParallelEmbedding,
    full_init,
    vocab_parallel_cross_entropy,
)
from trainer.moe import MoE
from trainer.ring_attention import ring_attention
from trainer.sequence_parallel import SPLayerNorm, enter_tp, gather_seq, sp_param
from trainer.trace import Tracer


class _Mark(torch.autograd.Function):
    """Identity whose backward calls ``cb`` (a timestamp when the gradient passes)."""

    @staticmethod
    def forward(ctx, x, cb):
        ctx.cb = cb
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.cb()
        return grad, None


class PhaseTimer:
    """Opens and closes compute records for forward and (via markers) backward."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self._open: dict[tuple, object] = {}

    def forward(self, name: str, layer: int | None, flops: float, fn, x):
        start = self.tracer.stamp(open_range=("forward", name, layer))
        out = fn(x)
        self.tracer.compute("forward", layer, start, self.tracer.stamp(), flops, name)
        return out

    def mark_out(self, y: torch.Tensor, name: str, layer: int | None) -> torch.Tensor:
        """Mark ``y``: when its gradient arrives the backward of (name, layer) starts."""
        if not (self.tracer.enabled and y.requires_grad):
            return y
        return _Mark.apply(y, lambda: self._open.__setitem__(
            (name, layer), self.tracer.stamp(open_range=("backward", name, layer))))

    def mark_in(self, x: torch.Tensor, name: str, layer: int | None, flops: float) -> torch.Tensor:
        """Mark ``x``: when its gradient is computed the backward of (name, layer) ends."""
        if not (self.tracer.enabled and x.requires_grad):
            return x

        def close() -> None:
            start = self._open.pop((name, layer), None)
            if start is not None:
                self.tracer.compute("backward", layer, start, self.tracer.stamp(), flops, name)

        return _Mark.apply(x, close)


class Attention(nn.Module):
    """Causal self-attention over this tp rank's heads; grouped-query attention when
    ``kv_heads`` < ``heads`` (Ainslie et al. 2023: each key/value head serves heads/kv_heads
    query heads); ring attention over the context-parallel group when cp > 1."""

    def __init__(self, cfg: ModelConfig, ctx: TPContext, prefix: str, std_out: float) -> None:
        super().__init__()
        self.ctx, self.hd = ctx, cfg.head_dim
        self.heads, self.kv = cfg.heads // ctx.size, cfg.kv_heads // ctx.size
        nh, kvh, hd, h = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.hidden
        sizes = [nh * hd, kvh * hd, kvh * hd]

        def shard_heads(t: torch.Tensor) -> torch.Tensor:
            # rows of the fused [q; k; v] weight grouped by head: keep this rank's heads of each
            # (with kv_heads = heads this is the [3, heads, d] split of the plain model)
            parts = []
            for rows, n in zip(t.split(sizes), (nh, kvh, kvh), strict=True):
                per = n // ctx.size
                parts.append(rows.reshape(n, hd, -1)[ctx.index * per:(ctx.index + 1) * per]
                             .reshape(per * hd, -1))
            return torch.cat(parts)

        self.qkv = ColumnParallelLinear(ctx, f"{prefix}.qkv", h, sum(sizes), shard_heads)
        self.proj = RowParallelLinear(ctx, f"{prefix}.proj", h, h, std_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = enter_tp(x, self.ctx)
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(
            [self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], dim=-1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        k, v = (t.view(b, s, self.kv, self.hd).transpose(1, 2) for t in (k, v))
        cp = self.ctx.cp
        if cp is not None and cp.size > 1:
            y = ring_attention(q, k, v, self.ctx.comm, cp)
        else:
            groups = self.heads // self.kv
            if groups > 1:
                k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, self.heads * self.hd))


_ACTIVATIONS = {"gelu": lambda t: nn.functional.gelu(t, approximate="tanh"),
                "silu": nn.functional.silu}


class MLP(nn.Module):
    """fc1, activation, fc2; ``gated`` (SwiGLU, Shazeer 2020): fc1 holds the gate and up
    projections [2, width, hidden], each column-split over tp, and act(gate) x up feeds fc2."""

    def __init__(self, cfg: ModelConfig, ctx: TPContext, prefix: str, std_out: float,
                 width: int | None = None) -> None:
        super().__init__()
        self.ctx = ctx
        f = width or cfg.ffn_hidden
        self.gated, self.act = cfg.ffn == "gated", _ACTIVATIONS[cfg.activation]
        if self.gated:
            per = f // ctx.size

            def shard(t: torch.Tensor) -> torch.Tensor:
                part = t.reshape(2, f, -1)[:, ctx.index * per:(ctx.index + 1) * per]
                return part.reshape(2 * per, -1)

            self.fc1 = ColumnParallelLinear(ctx, f"{prefix}.fc1", cfg.hidden, 2 * f, shard)
        else:
            self.fc1 = ColumnParallelLinear(ctx, f"{prefix}.fc1", cfg.hidden, f)
        self.fc2 = RowParallelLinear(ctx, f"{prefix}.fc2", f, cfg.hidden, std_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.fc1(enter_tp(x, self.ctx))
        if self.gated:
            gate, up = a.chunk(2, dim=-1)
            return self.fc2(self.act(gate) * up)
        return self.fc2(self.act(a))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln1(x)), then + mlp(ln2(.)) (dense or MoE)."""

    def __init__(self, cfg: ModelConfig, ctx: TPContext, index: int) -> None:
        super().__init__()
        prefix = f"blocks.{index}"
        std_out = INIT_STD / math.sqrt(2 * cfg.layers)  # GPT-2 scaled init of residual outputs
        kw = dict(device=ctx.device, dtype=ctx.dtype)
        self.ln1 = SPLayerNorm(ctx, cfg.hidden, eps=cfg.ln_eps, **kw)
        self.attn = Attention(cfg, ctx, f"{prefix}.attn", std_out)
        self.ln2 = SPLayerNorm(ctx, cfg.hidden, eps=cfg.ln_eps, **kw)
        if cfg.is_moe_layer(index):
            self.mlp = MoE(cfg, ctx, f"{prefix}.mlp", std_out, MLP)
        else:
            self.mlp = MLP(cfg, ctx, f"{prefix}.mlp", std_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPTStage(nn.Module):
    """The blocks [first_layer, first_layer + n) of a GPT, plus embeddings / head at the ends."""

    def __init__(self, cfg: ModelConfig, ctx: TPContext, stage: int, stages: int,
                 tracer: Tracer, micro_batch_size: int,
                 split: tuple[int, ...] | None = None) -> None:
        super().__init__()
        self.cfg, self.ctx, self.timer = cfg, ctx, PhaseTimer(tracer)
        self.first, self.last = stage == 0, stage == stages - 1
        split = split or (cfg.layers // stages,) * stages  # layers of each stage
        first = sum(split[:stage])
        self.layer_ids = list(range(first, first + split[stage]))
        kw = dict(device=ctx.device, dtype=ctx.dtype)
        cp = ctx.cp.size if ctx.cp is not None else 1
        self.pos_offset = (ctx.cp.index(ctx.rank) * (cfg.seq // cp)) if cp > 1 else 0
        """First position of this rank's sequence chunk (context parallelism)."""
        # per-rank share: 1/tp of the work, 1/cp of the tokens (causal imbalance ignored)
        self.flops_of = {i: layer_forward_flops(cfg, micro_batch_size, i) / (ctx.size * cp)
                         for i in self.layer_ids}
        self.layer_flops = self.flops_of[self.layer_ids[0]] if self.layer_ids else 0.0
        self.head_flops = head_forward_flops(cfg, micro_batch_size) / (ctx.size * cp)
        if self.first:
            self.wte = VocabParallelEmbedding(ctx, "wte", cfg.vocab, cfg.hidden)
            self.wpe = nn.Parameter(full_init(ctx.seed, "wpe.weight", (cfg.seq, cfg.hidden),
                                              INIT_STD).to(**kw))
        self.blocks = nn.ModuleList(Block(cfg, ctx, i) for i in self.layer_ids)
        if self.last:
            self.ln_f = SPLayerNorm(ctx, cfg.hidden, eps=cfg.ln_eps, **kw)
            if not cfg.tied:
                self.head = VocabParallelEmbedding(ctx, "head", cfg.vocab, cfg.hidden).weight
            elif not self.first:
                # the last stage keeps a copy of the tied embedding; its gradient is summed with
                # the first stage's over the embedding group (Megatron's embedding group)
                self.head = VocabParallelEmbedding(ctx, "wte", cfg.vocab, cfg.hidden).weight

    def head_weight(self) -> torch.Tensor:
        return self.wte.weight if (self.cfg.tied and self.first) else self.head

    def tied_copy(self) -> nn.Parameter | None:
        """The word-embedding parameter shared across stages (first or last stage, pp > 1);
        None on a middle stage, which holds neither copy."""
        if not self.cfg.tied or (self.first and self.last) or not (self.first or self.last):
            return None
        return self.wte.weight if self.first else self.head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids [b, s] on the first stage, else hidden states [b, s, h]; returns hidden
        states, or the last stage's local logits [b*s, V/tp]."""
        t = self.timer
        if self.first:
            x = t.forward("embedding", None, 0.0, self._embed, x)
            x = t.mark_out(x, "embedding", None)
        for i, block in zip(self.layer_ids, self.blocks, strict=False):
            x = t.mark_in(x, "layer", i, 2 * self.flops_of[i])
            x = t.forward("layer", i, self.flops_of[i], block, x)
            x = t.mark_out(x, "layer", i)
        if self.last:
            x = t.mark_in(x, "head", None, 2 * self.head_flops)
            x = t.forward("head", None, self.head_flops, self._head, x)
            x = t.mark_out(x, "head", None)
        return x

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids)  # [b, s/tp, h] under sequence parallelism
        start = self.pos_offset + (self.ctx.index * x.shape[1] if self.ctx.sp else 0)
        return x + sp_param(self.wpe, self.ctx)[start:start + x.shape[1]]

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln_f(x)
        if self.ctx.sp:
            x = gather_seq(x, self.ctx.comm, self.ctx.group)
        else:
            x = copy_to_tp(x, self.ctx.comm, self.ctx.group)
        return nn.functional.linear(x.reshape(-1, x.shape[-1]), self.head_weight())

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the local logits against ``targets`` [b, s]."""
        start = self.ctx.index * (self.cfg.vocab // self.ctx.size)
        per_token = vocab_parallel_cross_entropy(logits, targets.reshape(-1), start,
                                                 self.ctx.comm, self.ctx.group)
        return per_token.mean()
