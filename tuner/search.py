"""Settings search: QPs per connection, NCCL algorithm/protocol per size, DCQCN parameters.

* **ECMP entropy** (:func:`search_qps`): the iteration time ``netsim predict`` gives (the flow
  engine, every QP its own ECMP path) for 1, 2, 4, ... QPs per connection; the fewest QPs
  within the placement search's tie tolerance of the fastest (each extra QP is NIC state and
  work requests the flow engine does not price).
* **Collectives** (:func:`search_collectives`): ``netsim.collectives.run_collective`` of the
  job's DP group for every (algorithm, protocol) NCCL's tuner plugin can pick, per message-size
  bucket; the fastest wins a row of ``nccl_tuner.csv``.
* **Congestion control**: see :mod:`tuner.ccsearch` (packet engine on the hot spot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: NCCL defaults (env.rst, nccl-roce.md 2): NCCL_IB_QPS_PER_CONNECTION=1, SPLIT_DATA_ON_QPS=0.
DEFAULT_QPS = 1


@dataclass(frozen=True)
class QpChoice:
    """Predicted iteration time per QP count and the chosen count."""

    qps: int
    iteration_s: dict[int, float]       # qps -> netsim predict's iteration time
    slowdown: dict[int, float]          # qps -> iteration_s / the fastest count's (>= 1)
    cost: dict[int, float]              # qps -> the ranking score (= slowdown; ties: fewer QPs)
    split_data: int
    reason: str
    #: the paired out-of-sample check of a count other than 1 (``tuner.outofsample``)
    check: dict | None = None


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


def search_qps(fabric, job, gpu_of_rank: np.ndarray, candidates=(1, 2, 4, 8), seed: int = 0,
               calibration=None, background: list | None = None, rtol: float | None = None,
               known_s: dict[int, float] | None = None, shortcut: bool = True,
               progress=None) -> QpChoice:
    """Choose ``NCCL_IB_QPS_PER_CONNECTION`` by the iteration time ``netsim predict`` gives.

    Every candidate is scored with :func:`tuner.placement.iteration_scorer` (the flow engine,
    ``netsim.workload.flowcomm.FlowCommModel``, with that many QPs per connection: each QP its
    own UDP source port and ECMP path), on ``gpu_of_rank``, with the same seed, calibration and
    background jobs as ``predict``; so the advice and the predicted iteration agree, and the
    chosen count is never predicted slower than 1 QP (1 is always a candidate).

    Parameters
    ----------
    fabric, job, gpu_of_rank
        Where the job runs (``gpu_of_rank`` from :mod:`tuner.placement`).
    candidates
        QP counts to try (1 is added if missing).
    seed, calibration, background
        As for ``iteration_scorer``: the ECMP/QP-number seed, the calibration, the jobs
        already on the fabric.
    rtol
        Counts within ``rtol`` of the fastest are a tie, won by the fewest QPs (each QP is NIC
        state and work requests the flow engine does not price); default
        ``tuner.placement.SCORE_RTOL``, the placement search's tie.
    known_s
        Iteration times already predicted on ``gpu_of_rank`` by the same scorer (the placement
        search's 1-QP score): not predicted again.
    shortcut
        Stop after 1 QP when its time is within ``rtol`` of the iteration with no network
        contention at all (:func:`_uncontended_s`: the flow engine's own calls, each priced
        alone on the links every QP crosses, which no QP count can beat), since 1 QP then
        wins the tie
        whatever the others predict. The choice is the plain search's (tested); only the
        times of the counts not run are missing. Not taken with a calibration.
    """
    from tuner.placement import SCORE_RTOL, iteration_scorer

    rtol = SCORE_RTOL if rtol is None else rtol
    network = bool(job_groups(job, gpu_of_rank))
    candidates = sorted({1, *candidates}) if network else [1]
    times = {q: float(t) for q, t in (known_s or {}).items() if q in candidates}
    for q in candidates:
        if q not in times:
            score = iteration_scorer(fabric, job, calibration=calibration, qps=q, seed=seed,
                                     background=background)
            times[q] = score(gpu_of_rank)
        if progress:
            progress()
        if q == 1 and network and shortcut and calibration is None:
            bound = _uncontended_s(fabric, job, gpu_of_rank, seed)
            if times[1] <= bound * (1 - 1e-9) * (1 + rtol):
                return QpChoice(1, {1: times[1]}, {1: 1.0}, {1: 1.0}, 0, (
                    f"predicted iteration (netsim predict, flow engine) with 1 QP "
                    f"{times[1]:.4f} s, within {rtol:.1%} of the iteration with no network "
                    f"contention at all ({bound:.4f} s): no QP count can beat it by more"))
    fastest = min(times.values())
    slowdown = {q: t / fastest for q, t in times.items()}
    best = min(q for q in candidates if times[q] <= fastest * (1 + rtol))
    reason = "no network collective" if not network else (
        "predicted iteration (netsim predict, flow engine, every QP its own ECMP path) "
        "with " + ", ".join(f"{q} QP {times[q]:.4f} s" for q in candidates)
        + f"; fewest QPs within {rtol:.1%} of the fastest")
    # Split over QPs only adds a work request per QP per message; round-robin whole messages
    # (NCCL's default 0 since 2.20) spreads a ring's many chunks evenly too.
    return QpChoice(best, times, slowdown, dict(slowdown), 0, reason)


def _uncontended_s(fabric, job, gpu_of_rank: np.ndarray, seed: int = 0) -> float:
    """The iteration with no network contention, from the model of the predictions:
    ``predict`` with ``netsim.workload.flowcomm.UncontendedFlowCommModel`` (every call built
    as the flow engine builds it and priced alone on the links no QP count or ECMP path
    changes). Call by call it is never above the flow engine's time, so it bounds the
    prediction for every QP count from below (``tests/tuner/test_qp_search.py``)."""
    from netsim.model.hardware import get_hardware
    from netsim.workload import predict
    from netsim.workload.flowcomm import UncontendedFlowCommModel

    hw = get_hardware(job.gpu)
    return float(predict(job, fabric, hw, placement=gpu_of_rank,
                         comm_model=UncontendedFlowCommModel(fabric, hw, seed=seed)).iteration_s)


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
    from netsim.collectives.nccl import NcclConfig

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
