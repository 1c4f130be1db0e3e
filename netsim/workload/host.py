"""The host as a shared resource: ranks that run their work on a server's CPU cores.

On a GPU job every rank has its own accelerator and the host is never the bottleneck
(``HardwareProfile.host_cores`` is infinite and this module changes nothing). On the CPU
trainer (gloo, ``--device cpu``) the ranks of one server time-slice its cores, and the
iteration is bounded by the host's throughput as well as by the per-rank critical path.

Model: the operating system's scheduler is work-conserving processor sharing. Every runnable
rank progresses at ``min(1, C / n)`` of a dedicated core when ``n`` ranks are runnable on
``C`` cores, so no schedule finishes before the host has done its work,

    T >= max over servers of  sum over its ranks of W_r / C,

and no rank runs faster than on a dedicated core, ``T >= T_crit`` (the critical path of the
pipeline with dedicated-core task times). The model takes ``T = max(T_crit, T_host)``, exact
in the two regimes that matter here: a host with more cores than runnable ranks (``T_crit``)
and a host busy for the whole iteration (``T_host``; ``tests/netsim/workload/test_host.py``
checks both closed forms). Between them (a host idle during part of a pipeline bubble) it is
a lower bound.

``W_r``, one rank's CPU work in an iteration, in dedicated-core seconds: its compute tasks
(the fitted compute model), plus what every collective costs the CPU on each member (gloo
copies, reductions and loopback TCP): ``cpu_msg_s`` per message (a ring step of NCCL's and
gloo's ring algorithms: ``2 (n - 1)`` for an all-reduce of ``n`` ranks, ``n - 1`` for a
reduce-scatter or all-gather, one for a send or a receive) plus ``bus bytes /
cpu_bytes_per_s``, plus a fixed ``cpu_iter_s`` per rank and iteration (framework overhead
outside the traced operations). ``netsim.diagnose.calibration`` fits the three parameters from the trainer's
traces; calls are counted as the trainer makes them (``docs/trainer.md``, "Analytic volumes").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netsim.workload.comm import bus_factor, ring_steps

DP_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP bucket_cap_mb = 25 (the trainer's --bucket-mb default)


@dataclass(frozen=True, slots=True)
class HostCost:
    """CPU cost of the work outside the fitted compute tasks, dedicated-core seconds."""

    cpu_msg_s: float = 0.0
    """Per message (ring step; a send or a receive is one) on each member rank."""
    cpu_bytes_per_s: float = math.inf
    """Bus bytes per second a rank's CPU moves in collectives (nccl-tests bus bytes)."""
    cpu_iter_s: float = 0.0
    """Per rank and iteration: framework overhead outside the traced operations."""
    utilization: float = 1.0
    """Fraction of the cores left to the run that its ranks keep busy (in (0, 1]): below 1
    when at moments every rank of a server waits (a loopback transfer in flight, all ranks
    in one collective) while cores sit idle. The bound is then ``work / (C x utilization)``;
    ``netsim.diagnose.calibration`` measures it on the calibration runs (their CPU time over their
    wall time and the cores left to them)."""

    def work_s(self, messages: float, bus_bytes: float) -> float:
        """CPU seconds of one rank-iteration whose collectives send ``messages`` messages
        (ring steps) of ``bus_bytes`` in all."""
        bw = 0.0 if math.isinf(self.cpu_bytes_per_s) else bus_bytes / self.cpu_bytes_per_s
        return self.cpu_iter_s + messages * self.cpu_msg_s + bw


def stage_calls(job, model, stage: int) -> tuple[float, float]:
    """Collective messages (ring steps) and bus bytes of one rank of stage ``stage`` per
    iteration.

    Counts follow the trainer (``docs/trainer.md``): per micro-batch ``4 L + first + last``
    TP all-reduces of ``b s h`` activations plus three of ``b s`` on the last stage (the
    vocabulary-parallel cross-entropy); ``m`` sends and ``m`` receives per pipeline
    neighbour; the stage's gradients in buckets of ``DP_BUCKET_BYTES`` (all-reduce, or
    reduce-scatter + all-gather), a tied embedding's copy in its own (``_own_tied_bucket``); the
    tied-embedding all-reduce between first and last stage;
    one 8-byte loss all-reduce over the world.
    """
    p, m, tp, dp = job.pp, job.micro_batches, job.tp, job.dp
    first, last = stage == 0, stage == p - 1
    cp = getattr(job, "cp", 1)
    act = job.micro_batch * model.seq // cp * model.hidden * job.act_bytes
    msgs = float(ring_steps("all_reduce", job.world))  # the loss all-reduce, 8 bytes
    bus = 8 * bus_factor("all_reduce", job.world)
    if tp > 1:
        n_act = m * (4 * model.layers // p + first + last)
        n_ce = 3 * m if last else 0
        msgs += (n_act + n_ce) * ring_steps("all_reduce", tp)
        bus += bus_factor("all_reduce", tp) * (n_act * act + n_ce * act / model.hidden)
    if p > 1:
        n_p2p = 2 * m * ((stage > 0) + (stage < p - 1))  # sends and receives
        msgs += n_p2p
        bus += n_p2p * act / (tp if job.scatter_gather else 1)
    if p > 1 and (first or last):
        msgs += ring_steps("all_reduce", 2)
        bus += model.vocab * model.hidden / tp * job.grad_bytes
    dense, expert = _stage_params_split(job, model, stage)
    tied = model.vocab * model.hidden if _own_tied_bucket(job, model, stage) else 0.0
    for params, n in ((dense - tied, dp * cp), (tied, dp * cp),
                      (expert, dp * cp // getattr(job, "ep", 1))):
        if n > 1 and params:
            m_b = _grad_reduction(job, params / tp * job.grad_bytes, n)
            msgs, bus = msgs + m_b[0], bus + m_b[1]
    m_b = _cp_ep_calls(job, model, stage)
    return msgs + m_b[0], bus + m_b[1]


def _own_tied_bucket(job, model, stage: int) -> bool:
    """Whether the stage's copy of a tied word embedding is reduced over dp in a bucket of its
    own: the trainer (``trainer/data_parallel.py``) reduces it after the embedding group's sum,
    never from a backward hook, on the first and the last stage when ``pp > 1``."""
    return bool(job.pp > 1 and stage in (0, job.pp - 1)
                and getattr(model, "tied_embeddings", False))


def _grad_reduction(job, grad: float, n: int) -> tuple[float, float]:
    """Messages and bus bytes of reducing ``grad`` bytes over ``n`` ranks in buckets."""
    buckets = max(1, math.ceil(grad / DP_BUCKET_BYTES))
    if job.distributed_optimizer:
        return (buckets * (ring_steps("reduce_scatter", n) + ring_steps("all_gather", n)),
                2 * bus_factor("all_gather", n) * grad)
    return buckets * ring_steps("all_reduce", n), bus_factor("all_reduce", n) * grad


def _stage_layer_ids(job, model, stage: int) -> range:
    per = model.layers // job.pp
    return range(stage * per, (stage + 1) * per)


def _stage_params_split(job, model, stage: int) -> tuple[float, float]:
    """(dense parameters, this rank's routed-expert parameters) of one stage (before tp):
    dense ones are reduced over dp x cp, expert ones over the cp x dp / ep ranks that hold
    the same experts."""
    moe = model.moe_layers() if getattr(model, "experts", 0) else None
    ids = _stage_layer_ids(job, model, stage)
    n_moe = 0 if moe is None else int(sum(bool(moe[i]) for i in ids))
    dense = (len(ids) - n_moe) * model.layer_params()
    expert = 0.0
    if n_moe:
        own = model.expert_params() / getattr(job, "ep", 1)
        dense += n_moe * (model.layer_params(True) - model.expert_params())
        expert = n_moe * own
    if stage in (0, job.pp - 1):
        dense += model.vocab * model.hidden
    return float(dense), float(expert)


def _stage_params(job, model, stage: int) -> float:
    return float(sum(_stage_params_split(job, model, stage)))


def _cp_ep_calls(job, model, stage: int) -> tuple[float, float]:
    """Ring-attention sends/receives and expert all-to-alls of one rank of ``stage`` per
    iteration, as the trainer issues them (``docs/trainer.md``): per layer and micro-batch
    ``cp - 1`` key/value blocks forward, ``cp - 1`` blocks with their gradients and one of
    gradients backward (each a send and a receive); per MoE layer and micro-batch five
    all-to-alls (counts, dispatch, combine and the two backward ones), the four token ones
    of ``b s/cp top_k h`` each."""
    cp, ep, m = getattr(job, "cp", 1), getattr(job, "ep", 1), job.micro_batches
    ids = _stage_layer_ids(job, model, stage)
    msgs = bus = 0.0
    if cp > 1:
        kv = (2 * job.micro_batch * model.seq // cp * model.kv * model.dhead * job.act_bytes
              / job.tp)
        per_layer_msgs = 2 * (cp - 1) + 2 * cp  # forward and backward, sends and receives
        per_layer_bus = 2 * (cp - 1) * kv + 2 * ((cp - 1) * 2 * kv + kv)
        msgs += m * len(ids) * per_layer_msgs
        bus += m * len(ids) * per_layer_bus
    if ep > 1 and getattr(model, "experts", 0):
        moe = model.moe_layers()
        n_moe = sum(bool(moe[i]) for i in ids)
        tokens = job.micro_batch * model.seq // cp * model.top_k * model.hidden * job.act_bytes
        msgs += m * n_moe * 5 * ring_steps("all_to_all", ep)
        bus += m * n_moe * 4 * tokens * bus_factor("all_to_all", ep)
    return msgs, bus


def host_bound_s(stage_work_s: np.ndarray, grid: np.ndarray, server: np.ndarray,
                 host_cores: float) -> float:
    """Processor-sharing bound: the busiest server's CPU work over its cores.

    Parameters
    ----------
    stage_work_s : (p,) array
        CPU work of one rank of each pipeline stage in an iteration, dedicated-core seconds.
    grid : (p, dp, tp) int array
        GPU (here: slot) index of every rank (``netsim.workload.job.rank_grid``).
    server : array
        Server ordinal of every slot (``Locality.server``).
    host_cores : float
        CPU cores per server; ``math.inf`` (a GPU job) gives 0.
    """
    if math.isinf(host_cores):
        return 0.0
    per_rank = np.broadcast_to(np.asarray(stage_work_s, float)[:, None, None], grid.shape)
    load = np.bincount(server[grid].ravel(), weights=per_rank.ravel())
    return float(load.max() / host_cores)
