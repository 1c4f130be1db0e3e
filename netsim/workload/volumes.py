"""Bytes one rank moves per collective: the volumes that predict, contention and placement
share."""

from __future__ import annotations

from dataclasses import dataclass
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
    """Bytes one rank sends in one dispatch (or combine) all-to-all: its tokens x copies x
    hidden x capacity factor (tokens split over CP, and over TP by sequence parallelism).

    A token goes to its ``top_k`` experts; with node-limited routing (``moe_node_limit`` M,
    DeepSeek-V3 sections 2.1.2 and 3.2.2) it crosses the network once per target node, to at
    most M nodes, and is forwarded to the experts inside a node over NVLink: min(top_k, M)
    copies (the NVLink forwarding is not priced apart)."""
    tokens = job.micro_batch * model.seq / job.cp / (job.tp if job.sequence_parallel else 1)
    return tokens * ep_copies(job, model) * model.hidden * job.act_bytes * job.capacity_factor


def ep_copies(job: JobSpec, model) -> int:
    """Copies of a token one dispatch sends: ``top_k``, or at most ``moe_node_limit``."""
    if job.moe_node_limit:
        return min(model.top_k, job.moe_node_limit)
    return model.top_k


@dataclass(frozen=True, slots=True)
class FsdpCalls:
    """Calls of each per-layer FSDP collective in one iteration of ``m`` micro-batches."""

    gather_forward: int
    """Parameter all-gathers before the layer's forward."""
    gather_backward: int
    """Parameter all-gathers before its backward (reshard-after-forward)."""
    reduce: int
    """Gradient reduce-scatters (with HSDP, each followed by the replicas' all-reduce)."""


def fsdp_calls(job: JobSpec) -> FsdpCalls:
    """Per-iteration calls for the sequence forward, backward, forward, ... of one layer:
    gradient accumulation without resharding gathers once (the first forward) and reduces
    once (the last backward); reshard-after-forward gathers again before every backward."""
    m = job.micro_batches
    once = job.fsdp_accumulate_unsharded
    return FsdpCalls(gather_forward=1 if once else m,
                     gather_backward=m if job.fsdp_reshard_after_forward else 0,
                     reduce=1 if once else m)


def fsdp_shard_ranks(job: JobSpec) -> tuple[int, int]:
    """(dense, expert) FSDP shard-group sizes: dense parameters over ``cp dp / R``, routed
    experts over the expert-data-parallel ranks ``cp dp / (ep R)`` (``R`` HSDP replicas)."""
    return (job.cp * job.dp // job.dp_replicate,
            job.cp * job.dp // job.ep // job.dp_replicate)
