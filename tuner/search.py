"""Settings search: QPs per connection, NCCL algorithm/protocol per size, DCQCN parameters.

* **ECMP entropy** (:func:`search_qps`): the flow engine's collision slowdown of the job's
  concurrent DP rings (and PP pairs) for 1, 2, 4, ... QPs per connection against a per-QP cost
  (each extra QP is one more work request per message and NIC QP-context state; modelled as a
  ``qp_cost`` fraction of the transfer time per extra QP, an assumption stated in the report).
* **Collectives** (:func:`search_collectives`): ``netsim.collectives.run_collective`` of the
  job's DP group for every (algorithm, protocol) NCCL's tuner plugin can pick, per message-size
  bucket; the fastest wins a row of ``nccl_tuner.csv``.
* **Congestion control**: see :mod:`tuner.ccsearch` (packet engine on the hot spot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tuner.collision import collision_slowdown

#: NCCL defaults (env.rst, nccl-roce.md 2): NCCL_IB_QPS_PER_CONNECTION=1, SPLIT_DATA_ON_QPS=0.
DEFAULT_QPS = 1
#: Fractional cost of each extra QP (assumption: one work request per QP per message, a few
#: microseconds per NCCL step of hundreds of microseconds; NIC QP cache pressure at scale).
QP_COST = 0.01


@dataclass(frozen=True)
class QpChoice:
    """Collision slowdown per QP count and the chosen count."""

    qps: int
    slowdown: dict[int, float]          # qps -> worst-group slowdown (mean over seeds)
    mean_slowdown: dict[int, float]     # qps -> mean-group slowdown
    cost: dict[int, float]              # qps -> slowdown x (1 + qp_cost (qps - 1))
    split_data: int
    reason: str


def job_groups(job, gpu_of_rank: np.ndarray) -> dict[str, np.ndarray]:
    """GPU groups of the job's network collectives: the DP rings of every stage (all stages
    at once, as the gradient reductions of a step overlap), the PP stage pairs, the CP rings
    and the EP all-to-alls (``ep_shift_rings``)."""
    from netsim.workload import rank_grid
    from netsim.workload.layout import gpu_grid, split_replicas

    grid = rank_grid(job, gpu_of_rank)              # [pp, dp x cp, tp]
    reps = job.dp * job.cp
    out = {}
    if reps > 1:
        out["dp"] = grid.transpose(0, 2, 1).reshape(-1, reps)
    if job.pp > 1:
        out["pp"] = np.stack([grid[:-1].ravel(), grid[1:].ravel()], axis=1)
    grid4 = gpu_grid(job, gpu_of_rank)
    if job.cp > 1:
        out["cp"] = grid4.transpose(0, 1, 3, 2).reshape(-1, job.cp)
    if job.ep > 1:
        ep = np.concatenate([split_replicas(job, grid4, q, job.ep)[0] for q in range(job.pp)])
        out["ep"] = ep_shift_rings(ep)
    return out


def ep_shift_rings(groups: np.ndarray, shifts: int = 4) -> np.ndarray:
    """An all-to-all as rings: member i sends to member i + k for every shift k, and each
    shift coprime to the group size is one ring through all members. Up to ``shifts`` such
    shifts, spread over 1 .. n-1, stand for the n - 1 concurrent peers of every member."""
    n = groups.shape[1]
    ks = [k for k in range(1, n) if math.gcd(k, n) == 1]
    ks = [ks[i] for i in np.unique(np.linspace(0, len(ks) - 1, min(shifts, len(ks))).astype(int))]
    rows = [groups[:, (np.arange(n) * k) % n] for k in ks]
    return np.concatenate(rows)


def search_qps(fabric, job, gpu_of_rank: np.ndarray, candidates=(1, 2, 4, 8),
               seeds=(0, 1), qp_cost: float = QP_COST, progress=None) -> QpChoice:
    """Choose ``NCCL_IB_QPS_PER_CONNECTION`` from the flow engine's collision slowdown.

    Parameters
    ----------
    fabric, job, gpu_of_rank
        Where the job runs (``gpu_of_rank`` from :mod:`tuner.placement`).
    candidates
        QP counts to try.
    seeds
        ECMP/QP-number seeds averaged over (collisions depend on the hash draw).
    qp_cost
        Fractional cost per extra QP.
    """
    from tuner.collision import fabric_paths
    from tuner.placement import job_traffic

    groups = job_groups(job, gpu_of_rank)
    if not groups:
        return QpChoice(1, {1: 1.0}, {1: 1.0}, {1: 1.0}, 0, "no network collective")
    traffic = job_traffic(job)
    weight = {k: traffic.total(k) for k in groups}
    paths = {s: fabric_paths(fabric, s) for s in seeds}   # one ECMP router per seed
    worst, mean, cost = {}, {}, {}
    for q in candidates:
        w, m = [], []
        for s in seeds:
            # DP rings and PP pairs run at different moments: price each kind on its own and
            # weight by its bytes per iteration
            sds = {k: collision_slowdown(fabric, g, qps=q, seed=s, paths=paths[s])
                   for k, g in groups.items()}
            total = sum(weight.values()) or 1.0
            w.append(sum(weight[k] * sd.worst for k, sd in sds.items()) / total)
            m.append(sum(weight[k] * sd.mean for k, sd in sds.items()) / total)
        if progress:
            progress()
        worst[q], mean[q] = float(np.mean(w)), float(np.mean(m))
        cost[q] = worst[q] * (1 + qp_cost * (q - 1))
    best = min(cost, key=lambda q: (round(cost[q], 6), q))
    kinds = " and ".join(f"{len(g)} {k.upper()} groups" for k, g in groups.items())
    reason = (f"flow-engine ECMP collision slowdown (byte-weighted) of the {kinds}: "
              + ", ".join(f"{q} QP {worst[q]:.2f}x" for q in candidates)
              + f"; {qp_cost:.0%} cost per extra QP")
    # Split over QPs only adds a work request per QP per message; round-robin whole messages
    # (NCCL's default 0 since 2.20) spreads a ring's many chunks evenly too.
    return QpChoice(best, worst, mean, cost, 0, reason)


@dataclass(frozen=True)
class CollectiveChoice:
    """Best (algorithm, protocol) per size bucket, with every candidate's time."""

    op: str
    ranks: int
    n_nodes: int
    rows: list[dict] = field(default_factory=list)   # {min_bytes, max_bytes, size, algo, proto,
                                                      #  channels, time_s, default_time_s, times}


#: Message sizes the collective search centres its buckets on: 64 KiB .. 1 GiB, x4 apart.
COLLECTIVE_SIZES = tuple(1 << k for k in range(16, 31, 2))

#: NCCL's example tuner plugin's names for the collective model's algorithms.
_PLUGIN_ALGO = {"ring": "ring", "tree": "tree"}


def search_collectives(fabric, ranks, nccl_base=None, op: str = "allreduce",
                       sizes=None, algos=("ring", "tree"),
                       protos=("ll", "ll128", "simple"), qps: int = 1,
                       progress=None) -> CollectiveChoice:
    """Per message size, the fastest (algorithm, protocol) of ``run_collective`` on ``ranks``.

    Buckets are centred (geometrically) on ``sizes``; the first starts at 0 and the last is
    open-ended, so the CSV covers every size.
    """
    from netsim.collectives import run_collective
    from netsim.nccl import NcclConfig

    base = (nccl_base or NcclConfig()).with_(qps_per_connection=qps)
    sizes = sorted(int(s) for s in (COLLECTIVE_SIZES if sizes is None else sizes))
    edges = [0] + [int(np.sqrt(a * b)) for a, b in zip(sizes, sizes[1:], strict=False)] + [1 << 40]
    rows = []
    server = np.asarray(fabric.nic_server_index)[np.asarray(fabric.gpu_nic_index)]
    pos = {g: i for i, g in enumerate(fabric.gpus)}
    idx = np.array([pos[r] if isinstance(r, str) else int(r) for r in ranks])
    n_nodes = int(np.unique(server[idx]).size)
    default_t = {}
    for k, size in enumerate(sizes):
        times = {}
        for a in algos:
            for p in protos:
                res = run_collective(fabric, op, list(ranks), size, base.with_(algo=a, proto=p))
                times[(a, p)] = float(res.time_s)
        if progress:
            progress()
        (a, p), t = min(times.items(), key=lambda kv: kv[1])
        default_t[size] = times.get(("ring", "simple"), t)
        rows.append({"min_bytes": edges[k], "max_bytes": edges[k + 1] - (k + 1 < len(sizes)),
                     "size": size, "algo": a, "proto": p, "channels": base.channels,
                     "time_s": t, "default_time_s": default_t[size],
                     "times": {f"{x}/{y}": v for (x, y), v in times.items()}})
    return CollectiveChoice(op, len(idx), n_nodes, rows)
