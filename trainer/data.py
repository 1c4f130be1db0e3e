"""Synthetic, learnable token data: no downloads, a function of (seed, step) only.

Each sequence starts at a random token and follows ``x[t+1] = (5 x[t] + 1 + n[t]) mod V`` with
``n[t]`` uniform in {0, 1, 2, 3}: the next token has 2 bits of entropy given the current one, so
the loss falls from ln V towards ln 4 and a training curve shows learning. Every rank builds the
same global batch and takes its data-parallel slice, so any layout sees the same samples.
"""

from __future__ import annotations

import torch


def global_batch(seed: int, step: int, batch: int, seq: int, vocab: int) -> torch.Tensor:
    """Token ids [batch, seq + 1] of iteration ``step`` (inputs are [:, :-1], targets [:, 1:])."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    noise = torch.randint(0, 4, (batch, seq), generator=g)
    tokens = torch.empty(batch, seq + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
    for t in range(seq):
        tokens[:, t + 1] = (5 * tokens[:, t] + 1 + noise[:, t]) % vocab
    return tokens


def rank_batch(seed: int, step: int, global_size: int, seq: int, vocab: int, dp: int,
               dp_rank: int, micro_batches: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This data-parallel rank's (ids, targets), each [micro_batches, micro_batch_size, seq]."""
    tokens = global_batch(seed, step, global_size, seq, vocab)
    per = global_size // dp
    mine = tokens[dp_rank * per:(dp_rank + 1) * per]
    mine = mine.view(micro_batches, per // micro_batches, seq + 1)
    return mine[..., :-1].contiguous(), mine[..., 1:].contiguous()
