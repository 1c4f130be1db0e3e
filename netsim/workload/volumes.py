"""Bytes one rank moves per collective: the volumes that predict, contention and placement
share."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from netsim.workload.job import JobSpec


def cp_kv_width(model, tp: int) -> int:
    """Elements of K and V per token on one TP rank (key/value heads split over TP, or
    replicated when fewer than TP; MLA passes its decompressed per-head K and V)."""
    if model.kv_lora_rank:
        return model.heads // tp * (model.dhead + model.qk_rope_head_dim + model.v_head_dim)
    return 2 * max(model.kv // tp, 1) * model.dhead


def ep_bytes(job: JobSpec, model) -> float:
    """Bytes one rank sends in one dispatch (or combine) all-to-all: its tokens x top-k x
    hidden x capacity factor (tokens split over CP, and over TP by sequence parallelism)."""
    tokens = job.micro_batch * model.seq / job.cp / (job.tp if job.sequence_parallel else 1)
    return tokens * model.top_k * model.hidden * job.act_bytes * job.capacity_factor
