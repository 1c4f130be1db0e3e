"""Traced collectives and point-to-point transfers, with fallbacks for ops a backend lacks.

Every call records one ``collective`` trace record: op, kind (tp, pp, dp, other), the group's
layout ranks, bytes as nccl-tests counts them (all_reduce, broadcast, send/recv: the buffer;
reduce_scatter and all_to_all: the whole input; all_gather: the whole output), dtype, start/end
and whether compute ran while it was in flight (``overlapped``). ``impl`` says what actually ran
(e.g. ``all_reduce+slice`` when the backend has no reduce_scatter).

Megatron's conjugate operators for tensor parallelism (Shoeybi et al. 2019, "Megatron-LM",
section 3, Figure 3) are :func:`copy_to_tp` (*f*: identity forward, all-reduce backward) and
:func:`reduce_from_tp` (*g*: all-reduce forward, identity backward).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from trainer.mesh import Group
from trainer.trace import Tracer

_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _reduce_scatter_fn() -> Callable | None:
    # torch 2.13 renamed reduce_scatter_tensor to reduce_scatter_single (the old name warns)
    return getattr(dist, "reduce_scatter_single", None) or getattr(dist, "reduce_scatter_tensor", None)


def _all_gather_fn() -> Callable | None:
    return getattr(dist, "all_gather_single", None) or getattr(dist, "all_gather_into_tensor", None)


class Handle:
    """An in-flight collective; :meth:`wait` blocks and runs the completion step."""

    def __init__(self, works: list, on_done: Callable[[], None]) -> None:
        self._works = works
        self._on_done = on_done
        self.done = False

    def wait(self) -> None:
        if self.done:
            return
        for w in self._works:
            w.wait()
        self._on_done()
        self.done = True


class Comm:
    """Issues collectives on :class:`~trainer.mesh.Group` s and traces them."""

    def __init__(self, tracer: Tracer, world_ranks: tuple[int, ...], rank: int, cuda: bool) -> None:
        self.tracer = tracer
        self.rank = rank
        """Layout rank of this process (send/recv groups, chunk index of reduce_scatter)."""
        self.world_ranks = world_ranks
        self.cuda = cuda
        self.fallbacks: set[str] = set()
        """Ops that ran through a fallback, e.g. {"reduce_scatter"}."""
        self.send_hook = None
        """Fault injection (``trainer.faults``): ``hook(ranks, overlapped) -> start or None``,
        called before a call is posted."""
        self._early_start = None

    # -- bookkeeping ---------------------------------------------------------------------------
    def _record(self, op: str, kind: str, ranks, size: int, dtype: str, overlapped: bool,
                impl: str, works: list, finish: Callable[[], None] | None = None,
                extra: dict | None = None) -> Handle:
        """Record start now; the end when the works complete (callback on CPU, wait on CUDA).
        ``extra``: added keys of the record (e.g. an all-to-all's ``send_bytes``)."""
        rec = {"type": "collective", "step": self.tracer.step, "op": op, "kind": kind,
               "group": list(ranks), "bytes": size, "dtype": dtype, "start_s": None,
               "end_s": None, "overlapped": overlapped, "impl": impl,
               "microbatch": self.tracer.microbatch, **(extra or {})}
        rec["start_s"] = self.tracer.stamp() if self._early_start is None else self._early_start
        self._early_start = None
        if self.tracer.ranges is not None:
            self.tracer.ranges.close_comm()
        if not self.cuda and works and self.tracer.enabled:
            try:  # the end as the backend thread sees it; gloo send/recv have no future
                fut = works[-1].get_future()
            except RuntimeError:
                fut = None
            if fut is not None:
                fut.then(lambda _f: rec.__setitem__("end_s", self.tracer.clock.host_now()))

        def done() -> None:
            if finish is not None:
                finish()
            if rec["end_s"] is None:
                rec["end_s"] = self.tracer.stamp()
            self.tracer.add(rec)

        return Handle(works, done)

    def _pg(self, group: Group, kind: str | None = None, overlapped: bool = False):
        self._before_post(group.ranks, kind, overlapped)
        return group.pg

    def _before_post(self, ranks, kind: str | None, overlapped: bool, send: bool = True) -> None:
        """Hooks before a call is posted: a profiler range around it, the fault injection."""
        if self.tracer.ranges is not None:
            self.tracer.ranges.open_comm(kind, ranks)
        if send and self.send_hook is not None:
            self._early_start = self.send_hook(ranks, overlapped)

    # -- collectives ---------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, group: Group, kind: str, op: str = "sum",
                   async_op: bool = False, overlapped: bool = False) -> Handle:
        """In-place all-reduce of ``t``; returns a handle (already waited unless ``async_op``)."""
        work = dist.all_reduce(t, op=_OPS[op], group=self._pg(group, kind, overlapped),
                               async_op=True)
        h = self._record("all_reduce", kind, group.ranks, nbytes(t), dtype_name(t), overlapped,
                         "all_reduce", [work])
        if not async_op:
            h.wait()
        return h

    def _fused(self, op: str, fn: Callable | None, out: torch.Tensor, inp: torch.Tensor,
               counted: torch.Tensor, group: Group, kind: str, async_op: bool,
               overlapped: bool) -> Handle | None:
        """Run the tensor form ``fn`` of ``op`` and record it (size and dtype of ``counted``);
        None when this build lacks it or the backend refused it (now or before): the caller
        then falls back."""
        if fn is None or op in self.fallbacks:
            return None
        try:
            work = fn(out, inp, group=self._pg(group, kind, overlapped), async_op=True)
            h = self._record(op, kind, group.ranks, nbytes(counted), dtype_name(counted),
                             overlapped, op, [work])
            return h if async_op else (h.wait() or h)
        except (RuntimeError, NotImplementedError):
            self.fallbacks.add(op)
            return None

    def reduce_scatter(self, out: torch.Tensor, inp: torch.Tensor, group: Group, kind: str,
                       async_op: bool = False, overlapped: bool = False) -> Handle:
        """Sum ``inp`` over the group; this rank keeps chunk ``group.index(rank)`` in ``out``."""
        h = self._fused("reduce_scatter", _reduce_scatter_fn(), out, inp, inp, group, kind,
                        async_op, overlapped)
        if h is not None:
            return h
        # fallback: all-reduce a copy, keep this rank's chunk (same result, n/(n-1)x more bytes)
        buf = inp.clone()
        work = dist.all_reduce(buf, group=self._pg(group, kind, overlapped), async_op=True)
        me = group.index(self.rank)
        h = self._record("reduce_scatter", kind, group.ranks, nbytes(inp), dtype_name(inp),
                         overlapped, "all_reduce+slice", [work],
                         finish=lambda: out.copy_(buf.chunk(group.size)[me]))
        return h if async_op else (h.wait() or h)

    def all_gather(self, out: torch.Tensor, inp: torch.Tensor, group: Group, kind: str,
                   async_op: bool = False, overlapped: bool = False) -> Handle:
        """Concatenate every rank's ``inp`` into ``out`` (rank order of the group)."""
        h = self._fused("all_gather", _all_gather_fn(), out, inp, out, group, kind, async_op,
                        overlapped)
        if h is not None:
            return h
        chunks = list(out.chunk(group.size))
        work = dist.all_gather(chunks, inp, group=self._pg(group, kind, overlapped), async_op=True)
        h = self._record("all_gather", kind, group.ranks, nbytes(out), dtype_name(out),
                         overlapped, "all_gather(list)", [work])
        return h if async_op else (h.wait() or h)

    def p2p(self, sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[torch.Tensor, int]],
            kind: str = "pp") -> None:
        """Post every send and receive (peers are layout ranks), then wait for all of them.

        Posting both directions before waiting is what keeps the 1F1B exchange
        ``send_forward_recv_backward`` deadlock-free (Megatron batches them the same way).
        """
        me = self.rank
        handles = []
        for t, peer in recvs:
            self._before_post((peer, me), kind, False, send=False)
            w = dist.irecv(t, src=self.world_ranks[peer])
            handles.append(self._record("recv", kind, (peer, me), nbytes(t), dtype_name(t), False,
                                        "irecv", [w]))
        for t, peer in sends:
            self._before_post((me, peer), kind, False)
            w = dist.isend(t, dst=self.world_ranks[peer])
            handles.append(self._record("send", kind, (me, peer), nbytes(t), dtype_name(t), False,
                                        "isend", [w]))
        for h in handles:
            h.wait()


# -- Megatron's f and g ------------------------------------------------------------------------
class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm: Comm, group: Group):
        ctx.comm, ctx.group = comm, group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        ctx.comm.all_reduce(grad, ctx.group, "tp")
        return grad, None, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, comm: Comm, group: Group):
        out = x.contiguous().clone()
        comm.all_reduce(out, group, "tp")
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


def copy_to_tp(x: torch.Tensor, comm: Comm, group: Group) -> torch.Tensor:
    """Megatron's *f*: identity forward, all-reduce of the gradient in backward."""
    return x if group.size == 1 else _CopyToTP.apply(x, comm, group)


def reduce_from_tp(x: torch.Tensor, comm: Comm, group: Group) -> torch.Tensor:
    """Megatron's *g*: all-reduce forward, identity backward."""
    return x if group.size == 1 else _ReduceFromTP.apply(x, comm, group)
