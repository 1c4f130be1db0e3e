"""Data parallelism: gradient buckets reduced while the backward pass runs, and AdamW.

Parameters are grouped, in reverse registration order (about the order backward produces their
gradients), into buckets of at most ``bucket_bytes`` (PyTorch DDP's ``bucket_cap_mb`` idea).
Each parameter becomes a view into its bucket's flat ``master`` vector. During the backward of
the last micro-batch a post-accumulate-grad hook counts the ready gradients; when a bucket is
full it is copied into a flat buffer and reduced asynchronously (``overlapped`` in the trace):

- ``all_reduce``: every rank gets the summed bucket and runs the same AdamW step on all of it;
- ``reduce_scatter``: each rank gets the sum of its 1/dp shard, runs AdamW on that shard only
  (optimizer state is sharded, ZeRO-1 / Megatron's distributed optimizer), and the updated
  parameters are all-gathered.

AdamW is elementwise, so both modes compute the same update. With pipeline parallelism and a
tied embedding, the first and last stages' copies of the word embedding are summed over the
embedding group before their (last) bucket is reduced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from trainer.comm import Comm, Handle
from trainer.mesh import Group


@dataclass
class Bucket:
    params: list[nn.Parameter]
    offsets: list[int]
    numel: int
    master: torch.Tensor
    """Flat parameters (padded to a multiple of dp); the parameters are views into it."""
    shard: slice
    """The part of ``master`` whose optimizer state this rank owns."""
    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    ready: int = 0
    grad: torch.Tensor | None = None
    shard_grad: torch.Tensor | None = None
    handle: Handle | None = None
    hooked: bool = True


@dataclass(kw_only=True)
class AdamW:
    """Hyper-parameters; the update is torch.optim.AdamW's (decoupled decay, bias correction)."""

    lr: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float

    def update(self, p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor,
               step: int) -> None:
        b1, b2 = self.betas
        p.mul_(1 - self.lr * self.weight_decay)
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (v.sqrt() / math.sqrt(1 - b2**step)).add_(self.eps)
        p.addcdiv_(m, denom, value=-self.lr / (1 - b1**step))


def _by_size(params: list[nn.Parameter], bucket_bytes: int) -> list[list[nn.Parameter]]:
    """``params`` in order, cut into buckets of at most ``bucket_bytes`` (at least one each)."""
    groups: list[list[nn.Parameter]] = []
    current, size = [], 0
    for p in params:
        if current and size + p.numel() * p.element_size() > bucket_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(p)
        size += p.numel() * p.element_size()
    return groups + ([current] if current else [])


class DataParallel:
    """Buckets, hooks, the overlapped reduction and the (possibly sharded) optimizer step."""

    def __init__(self, params: list[nn.Parameter], group: Group, comm: Comm, mode: str,
                 bucket_bytes: int, opt: AdamW, tied: nn.Parameter | None = None,
                 embedding_group: Group | None = None, grad_divisor: int | None = None,
                 units: list[list[nn.Parameter]] | None = None) -> None:
        self.group, self.comm, self.mode, self.opt = group, comm, mode, opt
        self.grad_divisor = grad_divisor or group.size
        """Summed gradients are divided by this (dp x cp for expert parameters, whose group is
        smaller: Megatron-Core's expert_gradient_scaling_factor)."""
        self.embedding_group = embedding_group if tied is not None else None
        self.step_count = 0
        self.armed = False
        self.gather_after_step = True
        """All-gather the updated shards after the step (off under FSDP, ``trainer.fsdp``)."""
        ordered = [p for p in reversed(params) if p is not tied]
        groups = ([[p for p in u if p is not tied] for u in reversed(units)] if units is not None
                  else _by_size(ordered, bucket_bytes))
        self.buckets: list[Bucket] = [self._make_bucket(g) for g in groups if g]
        if tied is not None:  # reduced after the embedding-group sum, so never from a hook
            self.buckets.append(self._make_bucket([tied], hooked=False))
        self._owner = {id(p): b for b in self.buckets for p in b.params}
        for b in self.buckets:
            if b.hooked:
                for p in b.params:
                    p.register_post_accumulate_grad_hook(self._on_grad)

    def _make_bucket(self, params: list[nn.Parameter], hooked: bool = True) -> Bucket:
        n = sum(p.numel() for p in params)
        dp = self.group.size
        padded = -(-n // dp) * dp if self.mode == "reduce_scatter" else n
        ref = params[0]
        master = torch.zeros(padded, dtype=ref.dtype, device=ref.device)
        offsets, off = [], 0
        for p in params:
            offsets.append(off)
            master[off:off + p.numel()].copy_(p.detach().reshape(-1))
            p.data = master[off:off + p.numel()].view_as(p)
            off += p.numel()
        if self.mode == "reduce_scatter":
            per = padded // dp
            i = self.group.index(self.comm.rank)
            shard = slice(i * per, (i + 1) * per)
        else:
            shard = slice(0, padded)
        state = master[shard]
        return Bucket(params=params, offsets=offsets, numel=n, master=master, shard=shard,
                      exp_avg=torch.zeros_like(state), exp_avg_sq=torch.zeros_like(state),
                      hooked=hooked)

    # -- reduction -----------------------------------------------------------------------------
    def arm(self) -> None:
        """Launch bucket reductions from the hooks during the next backward (the last one)."""
        self.armed = True
        for b in self.buckets:
            b.ready, b.handle = 0, None

    def _on_grad(self, p: nn.Parameter) -> None:
        if not self.armed:
            return
        b = self._owner[id(p)]
        b.ready += 1
        if b.ready == len(b.params):
            self._launch(b, overlapped=True)

    def _launch(self, b: Bucket, overlapped: bool) -> None:
        grad = torch.zeros_like(b.master)
        for p, off in zip(b.params, b.offsets, strict=False):
            if p.grad is not None:
                grad[off:off + p.numel()].copy_(p.grad.reshape(-1))
        b.grad = grad
        if self.group.size == 1:
            b.shard_grad = grad
            return
        if self.mode == "all_reduce":
            b.handle = self.comm.all_reduce(grad, self.group, "dp", async_op=True,
                                            overlapped=overlapped)
            b.shard_grad = grad
        else:
            b.shard_grad = torch.empty_like(grad[b.shard])
            b.handle = self.comm.reduce_scatter(b.shard_grad, grad, self.group, "dp",
                                                async_op=True, overlapped=overlapped)

    def finish(self) -> None:
        """After the last backward: sum the tied embedding, reduce what is left, wait for all."""
        self.armed = False
        for b in self.buckets:
            if b.hooked and b.grad is None:
                self._launch(b, overlapped=False)  # e.g. a parameter that got no gradient
        if self.embedding_group is not None:
            tied = self.buckets[-1].params[0]
            if self.embedding_group.size > 1:
                self.comm.all_reduce(tied.grad, self.embedding_group, "other")
            self._launch(self.buckets[-1], overlapped=False)
        for b in self.buckets:
            if b.handle is not None:
                b.handle.wait()
            if self.grad_divisor > 1:
                b.shard_grad.div_(self.grad_divisor)

    # -- optimizer -----------------------------------------------------------------------------
    def step(self) -> None:
        """AdamW on this rank's shard of every bucket; all-gather shards when sharded."""
        self.step_count += 1
        for b in self.buckets:
            self.opt.update(b.master[b.shard], b.shard_grad, b.exp_avg, b.exp_avg_sq,
                            self.step_count)
            if self.mode == "reduce_scatter" and self.group.size > 1 and self.gather_after_step:
                self.comm.all_gather(b.master, b.master[b.shard].clone(), self.group, "dp")
            b.grad = b.shard_grad = None
            for p in b.params:
                p.grad = None

    # -- checkpoint ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"step_count": self.step_count,
                "buckets": [{"master": b.master.clone(), "exp_avg": b.exp_avg.clone(),
                             "exp_avg_sq": b.exp_avg_sq.clone()} for b in self.buckets]}

    def load_state_dict(self, state: dict) -> None:
        if len(state["buckets"]) != len(self.buckets):
            raise ValueError("checkpoint bucket layout differs: resume with the same layout and bucket_bytes")
        self.step_count = int(state["step_count"])
        for b, s in zip(self.buckets, state["buckets"], strict=False):
            for name in ("master", "exp_avg", "exp_avg_sq"):
                src = s[name]
                dst = getattr(b, name)
                if src.shape != dst.shape:
                    raise ValueError(f"checkpoint {name} shape {tuple(src.shape)} != {tuple(dst.shape)}: "
                                     f"resume with the same layout, dp_reduce and bucket_bytes")
                dst.copy_(src)
