"""Topology-aware rank placement: which GPU runs which rank of a 3D-parallel job.

Strategies
----------
``linear``
    Ranks in order onto the free GPUs in the order the scheduler lists the free servers.
``random``
    The free servers shuffled (seeded), then filled in rank order (TP stays in a server).
``topo``
    TP inside a server (NVLink). The job's traffic matrix (DP gradient rings, PP activation
    chains, from the job's shapes) decides which group kind is heaviest; groups of that kind
    are packed whole under one ToR set (best fit), then one pod, in stage order so that
    neighbouring stages share a pod; every DP group sits at the same local GPU index in each
    server, hence on one rail (MegaScale section 3.6; Megatron ``tp-dp-pp``,
    ../shared/reference/nccl-roce.md sections 1.2, 1.5 and 6.1). A local search of block swaps
    then lowers the hop-weighted traffic cost. One candidate is restricted to the best-fit
    servers (``tuner.bestfit``: the fullest ToR set or pod that holds the job), and ties
    between candidates go to the one that leaves whole ToR sets and pods free for later jobs.

The unit of placement is a *block* of ``min(tp, gpus_per_server)`` consecutive ranks (one TP
group, or a server's share of it); a *slot* is the same number of consecutive GPUs in a free
server. Hop weights: 0 inside a server, 2 under one ToR, 4 inside a pod, 6 across pods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from tuner.bestfit import ServerDomains, best_fit_servers, packing_key

STRATEGIES = ("topo", "linear", "random")
HOPS_TOR, HOPS_POD, HOPS_CORE = 2, 4, 6
#: Extra hop weight of a byte that leaves a ToR (or pod) whose uplinks the background keeps
#: fully busy, per end: a saturated uplink costs more than the longest path through idle ones.
HOPS_BUSY = 2 * HOPS_CORE
#: Scores (simulated iteration times) within this relative difference are ties, decided by
#: the hop cost: smaller differences come from one ECMP hash draw and lie far below the
#: workload model's accuracy (docs/validation.md), so they are no reason to spread a job.
SCORE_RTOL = 1e-3


@dataclass(frozen=True)
class GpuLocality:
    """Server, ToR and pod ordinal of every GPU (arrays indexed by position in fabric.gpus)."""

    server: np.ndarray
    tor: np.ndarray
    pod: np.ndarray
    gpus_per_server: int
    tor_busy: np.ndarray | None = None
    """Utilisation of each ToR's uplinks by background traffic (0..1), if any."""
    pod_busy: np.ndarray | None = None
    """Utilisation of each pod's core links by background traffic (0..1), if any."""

    @classmethod
    def from_fabric(cls, fabric) -> GpuLocality:
        gpu_nic = np.asarray(fabric.gpu_nic_index, dtype=np.int64)
        server = np.asarray(fabric.nic_server_index, dtype=np.int64)[gpu_nic]
        tor = np.asarray(fabric.wiring.nic_tor, dtype=np.int64)[gpu_nic]
        pod = np.asarray(fabric.wiring.tor_pod, dtype=np.int64)[tor]
        return cls(server, tor, pod, int(fabric.gpus_per_server))

    def with_busy(self, tor_busy: np.ndarray, pod_busy: np.ndarray) -> GpuLocality:
        """The same locality with the background's busy uplinks (``tuner.background``)."""
        return GpuLocality(self.server, self.tor, self.pod, self.gpus_per_server,
                           np.asarray(tor_busy, np.float64), np.asarray(pod_busy, np.float64))

    def hops(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Hop weight between GPUs ``a`` and ``b`` (element-wise), plus ``HOPS_BUSY`` x the
        utilisation of every busy ToR / pod uplink set the bytes leave or enter by. Bytes
        between GPUs of one server go over NVLink: no hop, and no uplink however busy (the
        GPUs' NICs sit on different ToRs, one per rail, but these bytes never reach them)."""
        ta, tb = self.tor[a], self.tor[b]
        pa, pb = self.pod[a], self.pod[b]
        net = self.server[a] != self.server[b]
        h = np.where(~net, 0,
                     np.where(ta == tb, HOPS_TOR, np.where(pa == pb, HOPS_POD, HOPS_CORE)))
        if self.tor_busy is None:
            return h
        h = h + np.where(net & (ta != tb), HOPS_BUSY * (self.tor_busy[ta] + self.tor_busy[tb]),
                         0.0)
        return h + np.where(net & (pa != pb),
                            HOPS_BUSY * (self.pod_busy[pa] + self.pod_busy[pb]), 0.0)

    def server_busy(self, servers: list[int]) -> np.ndarray:
        """Mean utilisation of the ToR uplinks of each server's NICs (0 without background)."""
        if self.tor_busy is None:
            return np.zeros(len(servers))
        srv = np.asarray(servers, np.int64)
        first = np.searchsorted(self.server, srv)  # GPUs are numbered server by server
        gps = self.gpus_per_server
        tors = self.tor[first[:, None] + np.arange(gps)[None, :]]
        return self.tor_busy[tors].mean(axis=1)


@dataclass(frozen=True)
class TrafficEdges:
    """Directed rank -> rank network bytes of one iteration, by kind ("dp", "pp", "tp")."""

    src: np.ndarray
    dst: np.ndarray
    bytes_: np.ndarray
    kind: np.ndarray

    def total(self, kind: str | None = None) -> float:
        sel = slice(None) if kind is None else self.kind == kind
        return float(self.bytes_[sel].sum())


def _ring(members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ring successor pairs of every row of ``members`` (groups x size)."""
    if members.shape[1] < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return members.ravel(), np.roll(members, -1, axis=1).ravel()


def job_traffic(job) -> TrafficEdges:
    """Per-iteration traffic between ranks of a ``netsim.workload.JobSpec``.

    * DP: ring all-reduce of the stage's gradient shard, each rank sending
      ``2 (n-1)/n x G`` to its ring successor, ``G = params/(tp pp) x grad_bytes``
      (nccl-tests ring all-reduce, nccl-roce.md 2.1), over the ``cp x dp`` replicas; routed
      experts (``1/ep`` of them per rank) over the expert-data-parallel group;
    * PP: per micro-batch one activation forward and one gradient backward of
      ``b s h x 2 bytes`` (``/ tp`` with scatter-gather, Narayanan et al. 2021 section 4.1);
    * TP: ring all-reduces, 4 per layer per micro-batch of ``b s h x 2`` bytes (2 forward,
      2 backward; Megatron-LM), each rank sending ``2 (n-1)/n`` of it;
    * CP: the ring attention's KV chunks, three passes per layer per micro-batch (forward,
      backward KV and dKV) to the ring successor (``netsim.workload.predict._cp_times``);
    * EP: four all-to-alls per MoE layer per micro-batch (dispatch and combine, forward and
      backward), each rank sending ``1/ep`` of ``tokens x top-k x hidden`` to every other
      member (``netsim.workload.volumes.ep_bytes``).
    """
    from netsim.workload.layout import rank_ids, split_replicas
    from netsim.workload.volumes import cp_kv_width, ep_bytes

    m = job.model_config()
    grid4 = rank_ids(job)                                   # [pp, dp, cp, tp] ranks
    grid = grid4.reshape(job.pp, job.dp * job.cp, job.tp)
    reps = job.dp * job.cp
    act = job.micro_batch * m.seq // job.cp * m.hidden * 2
    layers = m.layers / job.pp
    parts = []
    experts = m.num_moe_layers * m.expert_params()
    if reps > 1:
        g = (m.params() - experts) / (job.tp * job.pp) * job.grad_bytes
        s, d = _ring(grid.transpose(0, 2, 1).reshape(-1, reps))
        parts.append((s, d, 2 * (reps - 1) / reps * g, "dp"))
    if experts and job.expert_dp > 1:  # experts: reduced over the expert-data-parallel group
        g = experts / (job.tp * job.ep * job.pp) * job.grad_bytes
        edp = np.concatenate([split_replicas(job, grid4, q, job.ep)[1] for q in range(job.pp)])
        s, d = _ring(edp)
        parts.append((s, d, 2 * (job.expert_dp - 1) / job.expert_dp * g, "dp"))
    if job.pp > 1:
        per_dir = act / (job.tp if job.scatter_gather else 1) * job.micro_batches
        a, b = grid[:-1].ravel(), grid[1:].ravel()
        parts += [(a, b, per_dir, "pp"), (b, a, per_dir, "pp")]
    if job.tp > 1:
        per = 4 * layers * job.micro_batches * act * 2 * (job.tp - 1) / job.tp
        s, d = _ring(grid.reshape(-1, job.tp))
        parts.append((s, d, per, "tp"))
    if job.cp > 1:
        kv = job.micro_batch * m.seq // job.cp * cp_kv_width(m, job.tp) * job.act_bytes
        s, d = _ring(grid4.transpose(0, 1, 3, 2).reshape(-1, job.cp))
        parts.append((s, d, 3 * layers * job.micro_batches * kv, "cp"))
    if job.ep > 1:
        groups = np.concatenate([split_replicas(job, grid4, q, job.ep)[0] for q in range(job.pp)])
        s = np.repeat(groups, job.ep, axis=1).ravel()
        d = np.tile(groups, (1, job.ep)).ravel()
        keep = s != d
        per = 4 * (m.num_moe_layers / job.pp) * job.micro_batches * ep_bytes(job, m) / job.ep
        parts.append((s[keep], d[keep], per, "ep"))
    if not parts:
        z = np.empty(0, np.int64)
        return TrafficEdges(z, z, np.empty(0), np.empty(0, dtype="<U2"))
    return TrafficEdges(
        np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
        np.concatenate([np.full(p[0].size, float(p[2])) for p in parts]),
        np.concatenate([np.full(p[0].size, p[3]) for p in parts]))


@dataclass
class Placement:
    """``gpu_of_rank[r]`` = position in ``fabric.gpus`` of rank r, with its traffic metrics."""

    strategy: str
    gpu_of_rank: np.ndarray
    cross_tor_bytes: float = 0.0
    cross_pod_bytes: float = 0.0
    hop_cost: float = 0.0
    iteration_s: float | None = None
    extra: dict = field(default_factory=dict)

    def ranks(self, fabric) -> list[dict]:
        """Rows of the trainer's placement file: rank, host, local_rank, gpu."""
        gps = int(fabric.gpus_per_server)
        rows = []
        for r, g in enumerate(self.gpu_of_rank.tolist()):
            gpu = fabric.gpus[g]
            nic = int(fabric.gpu_nic_index[g])
            rows.append({"rank": r, "host": fabric.servers[int(fabric.nic_server_index[nic])],
                         "local_rank": g % gps, "gpu": gpu})
        return rows

    def to_json(self) -> dict:
        return {"strategy": self.strategy, "cross_tor_bytes": self.cross_tor_bytes,
                "cross_pod_bytes": self.cross_pod_bytes, "hop_cost": self.hop_cost,
                "iteration_s": self.iteration_s}


def measure(gpu_of_rank: np.ndarray, traffic: TrafficEdges, loc: GpuLocality) -> dict[str, float]:
    """Cross-ToR bytes, cross-pod bytes and hop-weighted cost of a placement."""
    a, b = gpu_of_rank[traffic.src], gpu_of_rank[traffic.dst]
    net = loc.server[a] != loc.server[b]
    # NCCL's PXN (default): data leaves through the sender's server's NIC on the receiver's
    # rail, so a pair crosses ToRs only when that NIC's ToR is not the receiver's
    relay = loc.server[a] * loc.gpus_per_server + b % loc.gpus_per_server
    cross_tor = net & (loc.tor[relay] != loc.tor[b])
    cross_pod = net & (loc.pod[relay] != loc.pod[b])
    return {"cross_tor_bytes": float(traffic.bytes_[cross_tor].sum()),
            "cross_pod_bytes": float(traffic.bytes_[cross_pod].sum()),
            "hop_cost": float((traffic.bytes_ * loc.hops(a, b)).sum())}


# ---------------------------------------------------------------- blocks and slots

@dataclass
class _Layout:
    """Block/slot view of one job on one set of free servers."""

    unit: int                  # GPUs per block and per slot
    slot_gpus: np.ndarray      # (slots, unit) GPU positions, slots in free-list order
    n_blocks: int
    edges_a: np.ndarray        # block-level edges (a, b, bytes per GPU pair)
    edges_b: np.ndarray
    edges_w: np.ndarray

    def gpu_of_rank(self, slot_of_block: np.ndarray) -> np.ndarray:
        return self.slot_gpus[slot_of_block].reshape(-1)


def _layout(job, traffic: TrafficEdges, free_servers: list[int], gps: int) -> _Layout:
    unit = min(job.tp, gps)
    if gps % unit or (job.tp > gps and job.tp % gps):
        raise ValueError(f"tp={job.tp} must divide or be a multiple of gpus_per_server={gps}")
    per = gps // unit
    slot_gpus = np.array([[s * gps + j * unit + i for i in range(unit)]
                          for s in free_servers for j in range(per)], dtype=np.int64)
    n_blocks = job.world // unit
    if n_blocks > len(slot_gpus):
        raise ValueError(f"the job needs {job.world} GPUs but only {len(slot_gpus) * unit} "
                         "are free: give more free servers (--free) or shrink dp")
    ba, bb = traffic.src // unit, traffic.dst // unit
    keep = (ba != bb) & (traffic.src % unit == traffic.dst % unit)  # net edges pair offsets
    key = ba[keep] * n_blocks + bb[keep]
    uniq, inv = np.unique(key, return_inverse=True)
    w = np.bincount(inv, weights=traffic.bytes_[keep]) / unit
    return _Layout(unit, slot_gpus, n_blocks, uniq // n_blocks, uniq % n_blocks, w)


def _slot_cost(lay: _Layout, loc: GpuLocality, sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """Hop cost of one GPU pair bundle between slots (summed over the unit's offsets)."""
    return loc.hops(lay.slot_gpus[sa], lay.slot_gpus[sb]).sum(axis=-1)


def local_search(lay: _Layout, loc: GpuLocality, slot_of_block: np.ndarray,
                 rng: np.random.Generator, iterations: int) -> np.ndarray:
    """Hill-climb on the hop-weighted cost by swapping two slots' contents (blocks or empty)."""
    slots = len(lay.slot_gpus)
    block_of_slot = np.full(slots, -1, dtype=np.int64)
    block_of_slot[slot_of_block] = np.arange(lay.n_blocks)
    inc: list[list[int]] = [[] for _ in range(lay.n_blocks)]
    for e, (a, b) in enumerate(zip(lay.edges_a.tolist(), lay.edges_b.tolist(), strict=False)):
        inc[a].append(e)
        inc[b].append(e)
    sob = slot_of_block.copy()
    ea, eb, ew = lay.edges_a, lay.edges_b, lay.edges_w

    def cost(edges: np.ndarray) -> float:
        return float((ew[edges] * _slot_cost(lay, loc, sob[ea[edges]], sob[eb[edges]])).sum())

    props = rng.integers(0, slots, size=(iterations, 2))
    for s1, s2 in props.tolist():
        b1, b2 = block_of_slot[s1], block_of_slot[s2]
        if s1 == s2 or (b1 < 0 and b2 < 0):
            continue
        edges = np.unique(np.array((inc[b1] if b1 >= 0 else []) + (inc[b2] if b2 >= 0 else []),
                                   dtype=np.int64))
        if edges.size == 0:
            continue
        before = cost(edges)
        _swap(sob, block_of_slot, s1, s2)
        if cost(edges) >= before:
            _swap(sob, block_of_slot, s1, s2)  # undo: not an improvement
    return sob


def _swap(sob: np.ndarray, bos: np.ndarray, s1: int, s2: int) -> None:
    b1, b2 = bos[s1], bos[s2]
    bos[s1], bos[s2] = b2, b1
    if b1 >= 0:
        sob[b1] = s2
    if b2 >= 0:
        sob[b2] = s1


def _topo_initial(job, lay: _Layout, loc: GpuLocality, traffic: TrafficEdges,
                  spread: bool = False) -> np.ndarray:
    """Pack the heaviest groups whole under one ToR set, else one pod, stage by stage: in
    the tightest domain that fits (``_best_fit``), or with ``spread`` in the one whose
    uplinks the background keeps least busy, the most free slots breaking ties, so that
    successive groups go to different quiet domains (``_quiet_fit``)."""
    unit, n_blocks = lay.unit, lay.n_blocks
    reps = job.dp * job.cp
    per_block_grid = (np.arange(job.world) // unit).reshape(job.pp, reps, -1)[..., 0]
    dp_heavy = traffic.total("dp") / max(reps, 1) >= traffic.total("pp") / max(job.pp, 1)
    # groups of the heavy kind, in the order their neighbours should follow
    groups = per_block_grid if dp_heavy else per_block_grid.T          # (groups, members)
    if job.ep > 1 and traffic.total("ep") >= max(traffic.total("dp"), traffic.total("pp")):
        # the all-to-all dominates: each EP group (ep consecutive replicas) whole under one
        # ToR set if it fits, else one pod; groups in rank order so that a stage stays close
        groups = per_block_grid.reshape(-1, job.ep)
        ep_mode = True
    else:
        ep_mode = False
    blocks_per_rank_group = job.tp // unit if job.tp > unit else 1
    first_gpu = lay.slot_gpus[:, 0]
    slot_set = loc.tor[first_gpu]          # ToR of the slot's first GPU names its ToR set
    slot_pod = loc.pod[first_gpu]
    slot_off = (first_gpu % loc.gpus_per_server) // unit
    if ep_mode:  # an all-to-all wants whole servers of one ToR set (PXN), not one rail
        slot_off = np.zeros_like(slot_off)
        server_first = (first_gpu // loc.gpus_per_server) * loc.gpus_per_server
        slot_set = loc.tor[server_first]
    free = np.ones(len(first_gpu), dtype=bool)
    sob = np.full(n_blocks, -1, dtype=np.int64)
    fit = _best_fit
    if spread:
        busy = loc.tor_busy[loc.tor[lay.slot_gpus]].mean(axis=1)
        fit = partial(_quiet_fit, busy=busy)
    for members in groups:
        blocks = np.concatenate([np.arange(b, b + blocks_per_rank_group) for b in members])
        need = blocks.size
        chosen = fit(free, slot_set, slot_off, need) \
            if need <= free.sum() else None
        if chosen is None:
            chosen = fit(free, slot_pod, slot_off, need)
        if chosen is None:  # spills over pods: take the largest free pods first
            chosen = _spill(free, slot_pod, need)
        sob[blocks] = chosen
        free[chosen] = False
    return sob


def _best_fit(free: np.ndarray, domain: np.ndarray, offset: np.ndarray, need: int):
    """Slots of the tightest domain (ToR set / pod) with ``need`` free slots at one offset."""
    best, best_left = None, None
    for d in np.unique(domain[free]):
        for off in np.unique(offset[free & (domain == d)]):
            cand = np.flatnonzero(free & (domain == d) & (offset == off))
            left = cand.size - need
            if left >= 0 and (best_left is None or left < best_left):
                best, best_left = cand[:need], left
    return best


def _quiet_fit(free: np.ndarray, domain: np.ndarray, offset: np.ndarray, need: int,
               busy: np.ndarray):
    """Slots of the domain with ``need`` free slots at one offset whose slots the background
    keeps least busy (mean uplink utilisation), the most free slots breaking ties."""
    best, best_key = None, None
    for d in np.unique(domain[free]):
        in_d = free & (domain == d)
        for off in np.unique(offset[in_d]):
            cand = np.flatnonzero(in_d & (offset == off))
            if cand.size < need:
                continue
            key = (round(float(busy[in_d].mean()), 6), -cand.size)
            if best_key is None or key < best_key:
                best, best_key = cand[:need], key
    return best


def _spill(free: np.ndarray, domain: np.ndarray, need: int) -> np.ndarray:
    ids, counts = np.unique(domain[free], return_counts=True)
    order = ids[np.argsort(-counts, kind="stable")]
    cand = np.concatenate([np.flatnonzero(free & (domain == d)) for d in order])
    return cand[:need]


def place(fabric, job, strategy: str = "topo", free_servers: list[int] | None = None,
          rng: np.random.Generator | None = None, search_iterations: int = 4000,
          loc: GpuLocality | None = None, score=None) -> Placement:
    """Place ``job`` (a ``netsim.workload.JobSpec``) on ``fabric``.

    Parameters
    ----------
    fabric
        A ``topologies.Fabric``.
    job
        The job; its world size must fit in the free servers.
    strategy
        ``topo``, ``linear`` or ``random`` (see the module docstring).
    free_servers
        Positions in ``fabric.servers`` that are free, in the scheduler's order; None = all.
    rng
        Seeded generator for ``random`` and the local search (default seed 0).
    search_iterations
        Swap proposals of each local search (``topo`` only).
    score
        Optional ``score(gpu_of_rank) -> float`` (e.g. the simulated iteration time); ``topo``
        keeps the candidate with the lowest score, scores within ``SCORE_RTOL`` of the lowest
        counting as ties decided by the free servers each leaves packed (whole pods and ToR
        sets kept free, ``tuner.bestfit.packing_key``), then by the lowest hop cost.
        Candidates: ``_topo_candidates``.

    Returns
    -------
    Placement
        ``gpu_of_rank`` plus cross-ToR bytes, cross-pod bytes and hop cost.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"--strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    rng = rng if rng is not None else np.random.default_rng(0)
    loc = loc or GpuLocality.from_fabric(fabric)
    free = list(range(len(fabric.servers))) if free_servers is None else list(free_servers)
    if len(set(free)) != len(free):
        raise ValueError("--free lists a server twice")
    if free and not 0 <= min(free) <= max(free) < len(fabric.servers):
        raise ValueError(f"--free names a server outside 0..{len(fabric.servers) - 1}")
    traffic = job_traffic(job)
    lay = _layout(job, traffic, free, loc.gpus_per_server)
    if strategy == "linear":
        sob = np.arange(lay.n_blocks)
    elif strategy == "random":
        sob = _random_slots(lay, rng)
    else:
        cands = _topo_candidates(job, lay, loc, traffic, free, rng, search_iterations)
        return _choose(strategy, cands, traffic, loc, score, free)
    gpu_of_rank = lay.gpu_of_rank(sob)
    out = Placement(strategy, gpu_of_rank, **measure(gpu_of_rank, traffic, loc))
    if score:
        out.iteration_s = float(score(gpu_of_rank))
    return out


def _topo_candidates(job, lay: _Layout, loc: GpuLocality, traffic: TrafficEdges,
                     free: list[int], rng: np.random.Generator,
                     iterations: int) -> dict[str, np.ndarray]:
    """The default (scheduler order) as is, and packed / scheduler-order layouts refined by the
    hop-cost search; the best-fit servers (``tuner.bestfit``: the fullest ToR set or pod that
    holds the job) in the scheduler's order and packed and refined; with background load,
    also the packing of the quietest servers first."""
    per = loc.gpus_per_server // lay.unit
    fit = best_fit_servers(free, -(-lay.n_blocks // per), ServerDomains.from_locality(loc))
    lay_b = _layout(job, traffic, fit, loc.gpus_per_server)
    starts = {"packed": (lay, _topo_initial(job, lay, loc, traffic)),
              "scheduler-order+search": (lay, np.arange(lay.n_blocks)),
              "best-fit": (lay_b, _topo_initial(job, lay_b, loc, traffic))}
    if loc.tor_busy is not None and loc.tor_busy.any():
        quiet = [free[i] for i in np.argsort(loc.server_busy(free), kind="stable")]
        lay_q = _layout(job, traffic, quiet, loc.gpus_per_server)
        starts["quiet-first"] = (lay_q, _topo_initial(job, lay_q, loc, traffic))
        starts["spread-quiet"] = (lay_q, _topo_initial(job, lay_q, loc, traffic, spread=True))
    cands = {"scheduler-order": lay.gpu_of_rank(np.arange(lay.n_blocks)),
             "best-fit-order": lay_b.gpu_of_rank(np.arange(lay_b.n_blocks))}
    for name, (ly, sob) in starts.items():
        cands[name] = ly.gpu_of_rank(local_search(ly, loc, sob, rng, iterations))
    return cands


def _choose(strategy: str, cands: dict[str, np.ndarray], traffic: TrafficEdges,
            loc: GpuLocality, score, free: list[int]) -> Placement:
    """The candidate to recommend: never predicted slower than the default (the scheduler's
    order, ``cands["scheduler-order"]``); among those, the fastest, with scores within
    ``SCORE_RTOL`` of it tied and decided by the free servers each leaves packed
    (``tuner.bestfit.packing_key``: whole pods and ToR sets kept free for later jobs), then by
    the lowest hop cost."""
    metrics = {k: measure(g, traffic, loc) for k, g in cands.items()}
    packing = _packing(cands, loc, free)
    seen: dict[bytes, float] = {}
    scores = {}
    for k, g in cands.items():
        key = g.tobytes()
        if key not in seen:
            seen[key] = float(score(g)) if score else 0.0
        scores[k] = seen[key]
    default = scores["scheduler-order"]
    allowed = [k for k in cands if scores[k] <= default]
    floor = min(scores[k] for k in allowed)
    best = min(allowed, key=lambda k: (scores[k] > floor * (1 + SCORE_RTOL), packing[k],
                                       metrics[k]["hop_cost"], scores[k]))
    out = Placement(strategy, cands[best], **metrics[best])
    out.extra = {"candidate": best, "candidates": {k: {**metrics[k], "score": scores[k]}
                                                   for k in cands}}
    if score:
        out.iteration_s = scores[best]
    return out


def _packing(cands: dict[str, np.ndarray], loc: GpuLocality,
             free: list[int]) -> dict[str, tuple]:
    """``packing_key`` of the free servers each candidate leaves."""
    dom = ServerDomains.from_locality(loc)
    before = np.zeros(dom.tor_set.size, bool)
    before[free] = True
    out = {}
    for k, g in cands.items():
        after = before.copy()
        after[np.unique(loc.server[g])] = False
        out[k] = packing_key(after, dom)
    return out


def _random_slots(lay: _Layout, rng: np.random.Generator) -> np.ndarray:
    """A seeded random choice of slots for the blocks (TP blocks stay inside a server)."""
    return rng.permutation(len(lay.slot_gpus))[:lay.n_blocks]


def iteration_scorer(fabric, job, hardware=None, calibration=None, qps: int = 1, seed: int = 0,
                     background: list | None = None):
    """``score(gpu_of_rank) -> iteration_s``: ``netsim.workload.predict`` on the flow engine
    (``netsim.workload.flowcomm.FlowCommModel``, the model of ``netsim predict``) with ``qps``
    QPs per connection; with ``background`` (``tuner.background.BackgroundJob`` s), their
    traffic shares every flow-engine run."""
    from netsim.collectives.nccl import NcclConfig
    from netsim.model.hardware import get_hardware
    from netsim.workload import predict
    from tuner.background import check_disjoint, comm_model, network_batches

    hw = hardware or get_hardware(job.gpu)
    nccl = NcclConfig(qps_per_connection=qps, alpha_nvlink_us=hw.intra_latency_s * 1e6,
                      alpha_net_us=hw.net_latency_s * 1e6)
    overrides = calibration.comm_model(hw).overrides if calibration else None
    background = list(background or [])
    batches = [b for j in background for b in network_batches(j.job, j.gpu_of_rank)]
    cm = comm_model(fabric, hw, batches, seed, overrides)
    cm.nccl = nccl

    def score(gpu_of_rank: np.ndarray) -> float:
        check_disjoint(background, gpu_of_rank)
        return float(predict(job, fabric, hw, calibration=calibration, placement=gpu_of_rank,
                             comm_model=cm).iteration_s)

    return score


def background_locality(fabric, background: list | None, seed: int = 0,
                        loc: GpuLocality | None = None, cache: dict | None = None) -> GpuLocality:
    """The fabric's locality with the background jobs' busy uplinks (if there are any)."""
    from tuner.background import busy_uplinks, network_batches

    loc = loc or GpuLocality.from_fabric(fabric)
    if not background:
        return loc
    batches = [b for j in background for b in network_batches(j.job, j.gpu_of_rank)]
    return loc.with_busy(*busy_uplinks(fabric, batches, seed=seed, cache=cache))


def free_of_background(fabric, background: list | None,
                       free_servers: list[int] | None) -> list[int] | None:
    """The free servers minus every server a background job holds a GPU of."""
    if not background:
        return free_servers
    gps = int(fabric.gpus_per_server)
    held = {int(g) // gps for j in background for g in j.gpu_of_rank.tolist()}
    free = range(len(fabric.servers)) if free_servers is None else free_servers
    return [s for s in free if s not in held]


def compare_strategies(fabric, job, free_servers: list[int] | None = None, seed: int = 0,
                       hardware=None, calibration=None, search_iterations: int = 4000,
                       strategies: tuple[str, ...] = STRATEGIES,
                       background: list | None = None) -> dict[str, Placement]:
    """Every strategy's placement with its cross-ToR/pod bytes and predicted iteration time;
    with ``background`` jobs on the fabric, on the servers they leave free, scored with their
    traffic sharing the fabric, and ``topo`` steering clear of their busy uplinks."""
    score = iteration_scorer(fabric, job, hardware, calibration, seed=seed,
                             background=background)
    loc = background_locality(fabric, background, seed)
    free = free_of_background(fabric, background, free_servers)
    return {s: place(fabric, job, s, free, rng=np.random.default_rng(seed),
                     search_iterations=search_iterations, loc=loc, score=score)
            for s in strategies}


def topo_gains(results: dict[str, Placement]) -> bool:
    """Whether ``topo`` is worth applying: predicted faster than ``linear`` by at least the
    tie ``SCORE_RTOL`` (without predicted times: fewer cross-ToR or cross-pod bytes). When it
    is not, ``netsim recommend`` keeps the scheduler's order and says so."""
    t, lin = results["topo"], results["linear"]
    if t.iteration_s is not None and lin.iteration_s is not None:
        return lin.iteration_s / t.iteration_s - 1 >= SCORE_RTOL
    return (t.cross_tor_bytes < lin.cross_tor_bytes * (1 - 1e-9)
            or t.cross_pod_bytes < lin.cross_pod_bytes * (1 - 1e-9))


def verdict(results: dict[str, Placement]) -> str:
    """One sentence comparing the ``topo`` placement with ``linear`` (and ``random``)."""
    t, lin = results["topo"], results["linear"]
    gb = 1e9
    same = (math.isclose(t.cross_tor_bytes, lin.cross_tor_bytes, rel_tol=1e-9)
            and math.isclose(t.cross_pod_bytes, lin.cross_pod_bytes, rel_tol=1e-9))
    times = t.iteration_s is not None and lin.iteration_s is not None
    change = (lin.iteration_s / t.iteration_s - 1) if times else 0.0
    packed = t.extra.get("candidates", {}).get("packed")
    if same and abs(change) >= SCORE_RTOL:
        out = (f"topo vs linear: the same {lin.cross_tor_bytes / gb:.1f} GB cross-ToR per "
               "iteration, on other servers (uplinks the background leaves free)")
    elif same and packed is not None and packed["cross_tor_bytes"] < lin.cross_tor_bytes * (1 - 1e-9):
        out = (f"topo gives no gain over linear: the layouts with fewer cross-ToR bytes are not "
               f"predicted faster (packed: {packed['cross_tor_bytes'] / gb:.1f} GB cross-ToR, "
               f"{packed['score']:.4f} s; scheduler's order: {lin.cross_tor_bytes / gb:.1f} GB), "
               "so the scheduler's order stays")
    elif same:
        out = (f"topo gives no gain over linear: the scheduler's order is already ToR-aligned "
               f"here (both {lin.cross_tor_bytes / gb:.1f} GB cross-ToR, "
               f"{lin.cross_pod_bytes / gb:.1f} GB cross-pod per iteration)")
    else:
        out = (f"topo vs linear: cross-ToR {lin.cross_tor_bytes / gb:.1f} -> "
               f"{t.cross_tor_bytes / gb:.1f} GB, cross-pod {lin.cross_pod_bytes / gb:.1f} -> "
               f"{t.cross_pod_bytes / gb:.1f} GB per iteration")
    if times:
        if abs(change) < SCORE_RTOL:
            out += (f"; predicted iteration {lin.iteration_s:.4f} vs {t.iteration_s:.4f} s, "
                    f"equal within {SCORE_RTOL:.1%}")
            if not same:  # why moving bytes off the uplinks gains nothing
                out += ("; topo gives no gain over linear: the links its layout relieves do "
                        "not limit the iteration (their collectives are not the slowest, or "
                        "overlap compute)")
        else:
            out += (f"; predicted iteration {lin.iteration_s:.4f} -> {t.iteration_s:.4f} s "
                    f"({change:+.2%} throughput)")
    rnd = results.get("random")
    if rnd is not None and rnd.iteration_s is not None and times:
        out += (f"; random: {rnd.cross_tor_bytes / gb:.1f} GB cross-ToR, "
                f"{rnd.iteration_s:.4f} s")
    return out


def tor_oversubscription(fabric) -> float:
    """Host capacity under a ToR over its uplink capacity (1.0 = non-blocking), the worst ToR."""
    w = fabric.wiring
    cap = np.asarray(fabric.link_capacity_bps, np.float64)
    down = np.bincount(w.nic_tor, weights=cap[w.nic_up_link], minlength=len(w.tor_pod))
    up = cap[w.tor_up].sum(axis=1)
    return float(np.max(down / np.maximum(up, 1.0)))


def load_context(fabric, job, gpu_of_rank: np.ndarray, background: list | None = None,
                 seed: int = 0) -> str:
    """Under which load a placement verdict holds: the fabric's ToR oversubscription and how
    busy the job's traffic (at ``gpu_of_rank``, with the background's) keeps the busiest ToR
    uplinks, from one max-min allocation of all of it."""
    from tuner.background import busy_uplinks, network_batches

    batches = network_batches(job, gpu_of_rank)
    own = busy_uplinks(fabric, batches, seed=seed)[0]
    text = (f"load: ToR host:uplink capacity {tor_oversubscription(fabric):g}:1; the job's "
            f"traffic in the scheduler's order keeps the busiest ToR's uplinks {own.max():.0%} "
            "busy on average")
    if background:
        bg = [b for j in background for b in network_batches(j.job, j.gpu_of_rank)]
        both = busy_uplinks(fabric, batches + bg, seed=seed)[0]
        alone = busy_uplinks(fabric, bg, seed=seed)[0]
        text += (f"; {len(background)} background job(s) keep {np.mean(alone > 0.5):.0%} of "
                 f"the ToRs' uplinks over half busy, the busiest {both.max():.0%} with the job")
    return text


def read_free_servers(path, fabric) -> list[int]:
    """Free servers from a file (``tuner.inputs.read_free_servers``: names or positions,
    whitespace/comma separated, a JSON/YAML list, or ``{servers: [...]}``); order kept."""
    from tuner.inputs import read_free_servers as read

    return read(path, fabric)
