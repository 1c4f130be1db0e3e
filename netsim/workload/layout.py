"""Where every rank and every layer goes: the rank order, the process groups, the stage split.

Rank order (Megatron-Core ``parallel_state``, ``order="tp-cp-ep-dp-pp"``, innermost first):
``rank = tp_rank + tp (cp_rank + cp (dp_rank + dp pp_rank))``. Expert parallelism does not
add ranks: like Megatron-Core's expert ``RankGenerator`` (``tp-ep-dp-pp`` with expert TP =
TP), the ``cp x dp`` ranks of a (pipeline stage, TP rank) are split, in rank order, into
expert-parallel groups of ``ep`` consecutive ranks; ranks at the same position of the EP
groups form the expert-data-parallel group (``cp dp / ep`` ranks) that reduces the experts'
gradients. Dense gradients are reduced over ``cp x dp`` (CP ranks hold the same weights).

Pipeline split (``stage_layers``): layers divide evenly over the ``pp x v`` virtual stages
when they can. Otherwise Megatron-Core's ``--account-for-embedding-in-pipeline-split
--account-for-loss-in-pipeline-split`` rule applies: the embedding and the loss each count as
one layer, so ``layers + 2`` must divide by ``pp x v`` and the first and last virtual stage
build one layer fewer, which is Llama 3 405B's 126 layers on 16 stages (Llama 3 paper,
arXiv:2407.21783, section 3.3.2: one layer fewer on the first and on the last stage). With
virtual stages and neither rule dividing, the split is as even as it goes (``balanced_split``,
uneven interleaved stages such as DeepSeek-V3 on pp 4 x v 8).
``first_stage_layers`` / ``last_stage_layers`` override it as Megatron-Core's
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` do: the
remaining layers divide evenly over the other stages, and a stage's layers divide over its
``v`` chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

AXES = ("tp", "cp", "dp", "pp")
"""Axes that multiply into the world size (``ep`` is carved out of ``cp x dp``)."""


def parse_order(order: str) -> list[str]:
    """Axes of ``order`` innermost first, without ``ep``; ``ValueError`` naming the fix."""
    names = order.split("-")
    core = [a for a in names if a != "ep"]
    ok = (set(core) in ({"tp", "dp", "pp"}, set(AXES)) and len(core) == len(set(core))
          and names.count("ep") <= 1)
    if ok and "ep" in names:
        ok = names.index("ep") + 1 < len(names) and names[names.index("ep") + 1] == "dp"
    if not ok:
        raise ValueError(f"job.order {order!r}: name tp, dp, pp (and optionally cp, and ep "
                         "right before dp) once each, e.g. tp-cp-ep-dp-pp (Megatron-Core)")
    return core + (["cp"] if "cp" not in core else [])


def rank_ids(job) -> np.ndarray:
    """Global rank of every grid position, an array indexed ``[pp, dp, cp, tp]``."""
    sizes = {"tp": job.tp, "cp": job.cp, "dp": job.dp, "pp": job.pp}
    ranks = np.arange(job.world, dtype=np.int64)
    coords, rest = {}, ranks
    for axis in parse_order(job.order):
        coords[axis], rest = rest % sizes[axis], rest // sizes[axis]
    out = np.empty((job.pp, job.dp, job.cp, job.tp), dtype=np.int64)
    out[coords["pp"], coords["dp"], coords["cp"], coords["tp"]] = ranks
    return out


def gpu_grid(job, placement: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """GPU of every rank, indexed ``[pp, dp, cp, tp]`` (placement[r] = GPU of rank r)."""
    gpu_of = np.arange(job.world, dtype=np.int64) if placement is None \
        else np.asarray(placement, dtype=np.int64)
    if gpu_of.shape != (job.world,):
        raise ValueError(f"placement has {gpu_of.size} entries; the job has {job.world} ranks")
    if np.unique(gpu_of).size != gpu_of.size:
        raise ValueError("placement maps two ranks to the same GPU")
    return gpu_of[rank_ids(job)]


def tp_groups(grid4: np.ndarray, stage: int) -> np.ndarray:
    """(dp cp, tp) TP groups of one stage."""
    return grid4[stage].reshape(-1, grid4.shape[-1])


def cp_groups(grid4: np.ndarray, stage: int) -> np.ndarray:
    """(dp tp, cp) context-parallel rings of one stage."""
    g = grid4[stage]  # (dp, cp, tp)
    return g.transpose(0, 2, 1).reshape(-1, g.shape[1])


def replica_groups(grid4: np.ndarray, stage: int) -> np.ndarray:
    """(tp, dp cp) groups that reduce the dense gradients of one stage."""
    g = grid4[stage]
    return g.reshape(-1, g.shape[-1]).T


def split_replicas(job, grid4: np.ndarray, stage: int,
                   inner: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``cp x dp`` replicas of every TP rank of a stage, in rank order, cut into groups of
    ``inner`` consecutive ranks: (inner groups (n, inner), strided groups (n, cp dp / inner))."""
    ids = rank_ids(job)[stage].reshape(-1, job.tp).T  # (tp, dp cp) ranks
    g = grid4[stage].reshape(-1, job.tp).T
    order = np.argsort(ids, axis=1, kind="stable")
    ranked = np.take_along_axis(g, order, axis=1)  # replicas in rank order, per TP rank
    blocks = ranked.reshape(job.tp, -1, inner)  # (tp, outer, inner)
    return blocks.reshape(-1, inner), blocks.transpose(0, 2, 1).reshape(-1, blocks.shape[1])


def split_groups(groups: np.ndarray, inner: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row of ``groups`` cut into blocks of ``inner`` consecutive members: (the blocks
    (n, inner), the members at the same position of a row's blocks (n, row / inner))."""
    blocks = groups.reshape(groups.shape[0], -1, inner)  # (rows, outer, inner)
    return blocks.reshape(-1, inner), blocks.transpose(0, 2, 1).reshape(-1, blocks.shape[1])


def expert_groups(job, grid4: np.ndarray, stage: int) -> tuple[np.ndarray, np.ndarray]:
    """(EP groups (n, ep), expert-data-parallel groups (n, cp dp / ep)) of one stage."""
    return split_replicas(job, grid4, stage, job.ep)


def stage_layers(layers: int, pp: int, v: int, first: int | None = None,
                 last: int | None = None) -> np.ndarray:
    """Layers of every virtual stage ``q = chunk x pp + stage`` (see the module docstring)."""
    nq = pp * v
    if first is None and last is None:
        if layers % nq == 0:
            return np.full(nq, layers // nq, dtype=np.int64)
        if nq > 1 and (layers + 2) % nq == 0 and (layers + 2) // nq >= 2:
            out = np.full(nq, (layers + 2) // nq, dtype=np.int64)
            out[0] -= 1
            out[-1] -= 1
            return out
        if v > 1 and layers >= nq:
            return balanced_split(layers, nq)
        raise ValueError(f"layers {layers} not divisible by pp x virtual_stages = {nq}, nor "
                         f"layers + 2 (one fewer on the first and last stage): set "
                         f"--first-stage-layers/--last-stage-layers or change --pp/--virtual-stages")
    return _explicit_split(layers, pp, v, first, last)


def balanced_split(layers: int, nq: int) -> np.ndarray:
    """Uneven interleaved stages (e.g. DeepSeek-V3's 61 layers on pp 4 x v 8): ``layers + 2``
    units (the embedding and the loss count as one layer each) spread over the ``nq`` virtual
    stages as evenly as they go, the larger shares to the first and last virtual stage first
    (they give one unit each to the embedding and the loss), then in order."""
    base, extra = divmod(layers + 2, nq)
    out = np.full(nq, base, dtype=np.int64)
    order = [0, nq - 1] + list(range(1, nq - 1))
    out[order[:extra]] += 1
    out[0] -= 1
    out[-1] -= 1
    if (out < 1).any():
        raise ValueError(f"layers {layers} cannot give every one of {nq} virtual stages a "
                         "layer: lower --pp or --virtual-stages")
    return out


def _explicit_split(layers: int, pp: int, v: int, first: int | None,
                    last: int | None) -> np.ndarray:
    if pp < 2:
        raise ValueError("first_stage_layers/last_stage_layers need pp >= 2: drop them or "
                         "raise --pp")
    fixed = [x for x in (first, last) if x is not None]
    if any(x < 1 for x in fixed):
        raise ValueError("first_stage_layers/last_stage_layers must be >= 1")
    rest_stages = pp - len(fixed)
    rest = layers - sum(fixed)
    if rest < rest_stages or (rest_stages and rest % rest_stages) or (not rest_stages and rest):
        raise ValueError(f"after first/last stage layers ({first}, {last}) the remaining {rest} "
                         f"layers do not divide evenly over the other {rest_stages} stages: "
                         "change --first-stage-layers/--last-stage-layers")
    per = np.full(pp, rest // rest_stages if rest_stages else 0, dtype=np.int64)
    if first is not None:
        per[0] = first
    if last is not None:
        per[-1] = last
    if (per % v).any():
        s = int(np.flatnonzero(per % v)[0])
        raise ValueError(f"stage {s} has {per[s]} layers, not divisible by virtual_stages {v}: "
                         "change --virtual-stages or the first/last stage layers")
    return np.tile(per // v, v)  # q = chunk x pp + stage


def layer_kinds(moe_mask: np.ndarray, per_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dense layers, MoE layers) of every virtual stage, layers assigned in ``q`` order."""
    bounds = np.r_[0, np.cumsum(per_q)]
    moe = np.array([int(moe_mask[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:],
                                                              strict=True)], dtype=np.int64)
    return per_q - moe, moe
