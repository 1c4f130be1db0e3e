"""Context parallelism: causal ring attention over sequence chunks (Liu et al. 2023, "Ring
Attention with Blockwise Transformers"; Megatron-Core's context parallelism).

Each of the ``cp`` ranks of a context-parallel group holds one contiguous chunk of every
sequence (rank c: tokens ``[c s/cp, (c+1) s/cp)``). In the forward pass the key/value block
travels around the ring: at step j a rank holds the block of rank ``c - j`` (mod cp), attends to
it (the diagonal block causally, earlier blocks fully, later blocks not at all) and passes it on
to rank ``c + 1`` while it computes; partial results are merged exactly with their
log-sum-exp (the online softmax of Milakov & Gimelshein 2018 / FlashAttention). The backward
pass sends the blocks around again together with their accumulating key/value gradients; after
``cp - 1`` steps one last transfer of the gradients brings each home. Every transfer is a traced
``send``/``recv`` of kind ``cp`` (``group`` = [sender, receiver]).

Forward traffic per layer and rank: ``cp - 1`` blocks of 2 x b x kv_heads/tp x s/cp x d
elements; backward: ``cp - 1`` blocks of twice that (keys, values and their gradients) plus
one block of gradients. Grouped-query attention passes only the kv_heads blocks and expands
them to the query heads locally.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from trainer.comm import Comm, Handle, dtype_name, nbytes
from trainer.mesh import Group


def _post_shift(comm: Comm, group: Group, send: torch.Tensor,
                overlapped: bool) -> tuple[torch.Tensor, list[Handle]]:
    """Post the send of ``send`` to the next rank of the ring and the receive from the previous
    one; returns the receive buffer and the handles to wait on."""
    me = group.index(comm.rank)
    nxt, prv = group.ranks[(me + 1) % group.size], group.ranks[(me - 1) % group.size]
    recv = torch.empty_like(send)
    w_recv = dist.irecv(recv, src=comm.world_ranks[prv], group=group.pg)
    w_send = dist.isend(send, dst=comm.world_ranks[nxt], group=group.pg)
    size, dt = nbytes(send), dtype_name(send)
    return recv, [comm._record("recv", "cp", (prv, comm.rank), size, dt, overlapped, "irecv",
                               [w_recv]),
                  comm._record("send", "cp", (comm.rank, nxt), size, dt, overlapped, "isend",
                               [w_send])]


def _wait(handles: list[Handle]) -> None:
    for h in handles:
        h.wait()


def _expand(t: torch.Tensor, groups: int) -> torch.Tensor:
    """[b, kv_heads, n, d] -> [b, heads, n, d]: each key/value head serves ``groups`` heads."""
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)


def _fold(t: torch.Tensor, groups: int) -> torch.Tensor:
    """Sum a [b, heads, n, d] gradient back onto its [b, kv_heads, n, d] heads."""
    if groups == 1:
        return t
    b, h, n, d = t.shape
    return t.view(b, h // groups, groups, n, d).sum(dim=2)


def _scores(q: torch.Tensor, k: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        mask = torch.ones(n, n, dtype=torch.bool, device=s.device).triu_(1)
        s = s.masked_fill(mask, float("-inf"))
    return s


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, comm: Comm, group: Group):
        me, cp = group.index(comm.rank), group.size
        groups = q.shape[1] // k.shape[1]
        scale = 1.0 / math.sqrt(q.shape[-1])
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
        kv = torch.stack([k, v]).contiguous()
        for j in range(cp):
            src = (me - j) % cp
            nxt, handles = _post_shift(comm, group, kv, True) if j < cp - 1 else (None, [])
            if src <= me:  # later chunks are entirely in the causal future
                s = _scores(q, _expand(kv[0], groups), scale, causal=src == me)
                block_lse = torch.logsumexp(s, dim=-1)
                block_out = torch.matmul(torch.exp(s - block_lse.unsqueeze(-1)),
                                         _expand(kv[1], groups))
                new_lse = torch.logaddexp(lse, block_lse)
                out = (out * torch.exp(lse - new_lse).unsqueeze(-1)
                       + block_out * torch.exp(block_lse - new_lse).unsqueeze(-1))
                lse = new_lse
            _wait(handles)
            kv = nxt
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.comm, ctx.group = comm, group
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        comm, group = ctx.comm, ctx.group
        me, cp = group.index(comm.rank), group.size
        groups = q.shape[1] // k.shape[1]
        scale = 1.0 / math.sqrt(q.shape[-1])
        dout = dout.contiguous()
        delta = (dout * out).sum(dim=-1, keepdim=True)
        dq = torch.zeros_like(q)
        kv = torch.stack([k, v])
        block = torch.cat([kv, torch.zeros_like(kv)]).contiguous()  # [k, v, dk, dv]
        for j in range(cp):
            src = (me - j) % cp
            if src <= me:
                ke, ve = _expand(block[0], groups), _expand(block[1], groups)
                p = torch.exp(_scores(q, ke, scale, causal=src == me) - lse.unsqueeze(-1))
                dp = torch.matmul(dout, ve.transpose(-1, -2))
                ds = p * (dp - delta)
                dq += torch.matmul(ds, ke) * scale
                block[2] += _fold(torch.matmul(ds.transpose(-1, -2), q) * scale, groups)
                block[3] += _fold(torch.matmul(p.transpose(-1, -2), dout), groups)
            # pass the block and its gradients on; the last transfer carries the gradients home
            send = block if j < cp - 1 else block[2:].contiguous()
            block, handles = _post_shift(comm, group, send, False)
            _wait(handles)
        return dq, block[-2], block[-1], None, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, comm: Comm,
                   group: Group) -> torch.Tensor:
    """Causal attention of this rank's queries [b, heads, n, d] over the whole sequence whose
    keys and values [b, kv_heads, n, d] are spread in chunks over ``group``."""
    return _RingAttention.apply(q, k, v, comm, group)
