"""Checks of the parallel layout beyond the 3D ones: GQA with TP, CP, SP, EP, FSDP.

Each check raises ``ValueError`` with the reason and the flag that fixes it. The rules are
Megatron-Core's argument checks (``megatron/training/arguments.py``) where it has one:
query groups divisible by TP; sequence parallelism required when TP and EP are combined;
``seq_length`` divisible by ``2 x cp`` for the load-balanced ring attention; EP dividing the
data-parallel ranks (``cp x dp``) and the experts; and torchtitan's for FSDP2 (``dp_shard x
dp_replicate = dp``; experts sharded over the expert-data-parallel
ranks ``cp dp / ep``, which the replicas must divide).
"""

from __future__ import annotations


def validate_parallel(job, model) -> None:
    """Refuse a layout that cannot run, naming the fix."""
    _check_gqa(job, model)
    _check_sp(job)
    _check_cp(job, model)
    _check_ep(job, model)
    _check_fsdp(job)
    if not job.capacity_factor > 0:
        raise ValueError(f"job.capacity_factor must be > 0, got {job.capacity_factor}")


def _check_gqa(job, model) -> None:
    if job.tp > 1 and model.kv % job.tp and job.tp % model.kv:
        raise ValueError(f"kv_heads {model.kv} and tp {job.tp}: one must divide the other "
                         "(key/value heads split over, or replicated across, TP ranks); "
                         "change --tp or --kv-heads")


def _check_sp(job) -> None:
    if job.sequence_parallel and job.tp == 1:
        raise ValueError("sequence_parallel needs tp > 1 (it splits the TP region's "
                         "activations): drop --sp or raise --tp")


def _check_cp(job, model) -> None:
    if job.cp > 1 and model.seq % (2 * job.cp):
        raise ValueError(f"seq {model.seq} not divisible by 2 x cp = {2 * job.cp} (ring attention "
                         "splits the sequence into 2 cp load-balanced chunks): change --cp or --seq")


def _check_ep(job, model) -> None:
    if job.ep == 1:
        return
    if not model.moe:
        raise ValueError(f"ep {job.ep} on the dense model {model.name}: expert parallelism needs "
                         "an MoE model (experts > 0); drop --ep")
    if (job.cp * job.dp) % job.ep:
        raise ValueError(f"ep {job.ep} must divide cp x dp = {job.cp * job.dp} (expert-parallel "
                         "groups are carved out of the data-parallel ranks): change --ep or --dp")
    if model.experts % job.ep:
        raise ValueError(f"experts {model.experts} not divisible by ep {job.ep}: change --ep")
    if job.tp > 1 and not job.sequence_parallel:
        raise ValueError("tp > 1 with ep > 1 needs sequence parallelism (Megatron-Core's rule): "
                         "add --sp")


def _check_fsdp(job) -> None:
    if job.dp % job.dp_replicate:
        raise ValueError(f"dp_replicate {job.dp_replicate} must divide dp {job.dp}")
    if job.dp_replicate > 1 and not job.fsdp:
        raise ValueError("dp_replicate (HSDP replicas) needs fsdp: add --fsdp")
    if job.fsdp and job.distributed_optimizer:
        raise ValueError("fsdp already shards the optimizer state: drop --distributed-optimizer")
    if not job.fsdp and (job.fsdp_accumulate_unsharded or not job.fsdp_reshard_after_forward):
        raise ValueError("fsdp_reshard_after_forward / fsdp_accumulate_unsharded are FSDP "
                         "settings: add --fsdp or drop them")
    if job.fsdp and job.ep > 1 and (job.cp * job.dp // job.ep) % job.dp_replicate:
        raise ValueError(f"dp_replicate {job.dp_replicate} must divide the expert-data-parallel "
                         f"ranks cp x dp / ep = {job.cp * job.dp // job.ep} (experts are sharded "
                         "over them): change --dp-replicate or --ep")
    if job.fsdp and job.dp // job.dp_replicate < 2:
        raise ValueError("fsdp with a shard group of 1 rank shards nothing: raise --dp or "
                         "lower --dp-replicate")
