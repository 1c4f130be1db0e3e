"""Fully sharded data parallelism (FSDP / ZeRO-3; Zhao et al. 2023, "PyTorch FSDP", section 3)
on the data-parallel group, written on the trainer's own buckets and traced collectives.

Each transformer block is one unit: its parameters are one flat bucket sharded over dp (the
``reduce_scatter`` mode of ``trainer.data_parallel``: AdamW on this rank's shard). At rest a
rank holds only its shard (the flat parameter's storage is freed); before the block's forward
its parameters are all-gathered, after it they are freed again (``reshard_after_forward``), and
they are all-gathered once more when the gradient reaches the block's output, and freed when
every gradient of the block has been accumulated. The rest of the stage (embeddings, final
norm, head) is the root unit, gathered before the first forward of an iteration and freed after
the step. Gradients accumulate unsharded over the micro-batches and are reduce-scattered once,
during the last backward (FSDP's ``no_sync``: netsim's ``fsdp_accumulate_unsharded``). The
update is the sharded optimizer's, so losses equal the single process's.
"""

from __future__ import annotations

import torch
from torch import nn

from trainer.data_parallel import Bucket, DataParallel


class FSDP:
    """Drives a :class:`DataParallel` built with one bucket per unit (``units(stage)``)."""

    def __init__(self, dp: DataParallel, stage: nn.Module) -> None:
        self.dp, self.comm, self.group = dp, dp.comm, dp.group
        dp.gather_after_step = False
        owner = {id(p): b for b in dp.buckets for p in b.params}
        self.local = {id(b): b.master[b.shard].clone() for b in dp.buckets}
        self.full_bytes = {id(b): b.master.untyped_storage().nbytes() for b in dp.buckets}
        self.root = [b for b in dp.buckets
                     if not any(id(p) in _block_ids(stage) for p in b.params)]
        self.seen: dict[int, int] = {}
        for block in stage.blocks:
            b = owner[id(next(block.parameters()))]
            block.register_forward_pre_hook(lambda _m, _a, b=b: self.gather(b))
            block.register_forward_hook(lambda _m, _a, out, b=b: self._after_forward(b, out))
            for p in b.params:
                p.register_post_accumulate_grad_hook(lambda _p, b=b: self._after_grad(b))
        stage.register_forward_pre_hook(lambda _m, _a: self._gather_root())
        for b in dp.buckets:
            self.free(b)

    # -- gather and free -----------------------------------------------------------------------
    def gather(self, b: Bucket) -> None:
        """Materialize the unit's parameters: all-gather every rank's shard."""
        storage = b.master.untyped_storage()
        if storage.nbytes():
            return
        storage.resize_(self.full_bytes[id(b)])
        with torch.no_grad():
            self.comm.all_gather(b.master.data, self.local[id(b)], self.group, "dp")

    def _gather_root(self) -> None:
        for b in self.root:
            self.gather(b)

    def free(self, b: Bucket) -> None:
        """Keep only this rank's shard of the unit."""
        b.master.untyped_storage().resize_(0)

    def _after_forward(self, b: Bucket, out: torch.Tensor) -> torch.Tensor:
        self.free(b)
        if out.requires_grad:
            out.register_hook(lambda g, b=b: self.gather(b) or g)
        return out

    def _after_grad(self, b: Bucket) -> None:
        self.seen[id(b)] = self.seen.get(id(b), 0) + 1
        if self.seen[id(b)] == len(b.params):
            self.seen[id(b)] = 0
            self.free(b)

    # -- the DataParallel interface ------------------------------------------------------------
    def arm(self) -> None:
        self.dp.arm()

    def finish(self) -> None:
        self.dp.finish()

    def step(self) -> None:
        """AdamW on the shards (the freed flat parameters lent their shard slot for it)."""
        for b in self.dp.buckets:
            b.master.untyped_storage().resize_(self.full_bytes[id(b)])
            b.master.data[b.shard].copy_(self.local[id(b)])
        self.dp.step()
        for b in self.dp.buckets:
            self.local[id(b)].copy_(b.master[b.shard])
            self.free(b)

    @property
    def step_count(self) -> int:
        return self.dp.step_count

    def state_dict(self) -> dict:
        raise ValueError("checkpoints of --fsdp runs are not written by this trainer")

    def load_state_dict(self, state: dict) -> None:
        raise ValueError("checkpoints of --fsdp runs are not read by this trainer")


def _block_ids(stage: nn.Module) -> set[int]:
    return {id(p) for block in stage.blocks for p in block.parameters()}


def units(stage: nn.Module, params: list[nn.Parameter]) -> list[list[nn.Parameter]]:
    """One unit per block, in the stage's order, then the root unit (every other parameter)."""
    blocks = [list(block.parameters()) for block in stage.blocks]
    inside = _block_ids(stage)
    return blocks + [[p for p in params if id(p) not in inside]]
