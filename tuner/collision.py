"""ECMP collision slowdown of a job's concurrent rings, from the flow engine's max-min rates.

A ring collective sends, at every step, one chunk from each member to its successor; when
all groups of a kind (every DP group of a stage) run at once, these flows share the fabric.
Each ring edge is ``channels_per_peer`` NCCL connections (NCCL's default
``NCCL_NCHANNELS_PER_NET_PEER`` is 2), each with ``qps`` QPs
(``NCCL_IB_QPS_PER_CONNECTION``), every QP its own RoCEv2 UDP source port and so its own
ECMP path (../shared/reference/nccl-roce.md section 8.2). NCCL creates the QPs once per
communicator, so the paths (and the collisions) last as long as the job.

The model: every ring *channel* is one lockstep commodity of the max-min allocation
(``netsim.flow.maxmin``): a ring moves at the pace of its slowest edge, and a connection
that round-robins its messages over ``q`` QPs puts ``1/q`` of its rate on each QP's path.
A long-lived collective sees the *first* max-min allocation (all rings active at once; no
ring finishes early and frees capacity for the others), so we compute that allocation once
(``FabricPaths.network_paths`` + ``SharingModel.rates``) instead of running the flow engine
to completion. The *collision slowdown* of a group is its channels' rate on a non-blocking
switch fabric (switch-to-switch links of infinite capacity; the NIC, PCIe and ToR downlinks
unchanged) divided by its rate on the real fabric: 1.0 means ECMP cost nothing.

:class:`FlowCommModel` wraps a ``netsim.workload`` comm model and multiplies the bandwidth
term of every network-scope call by this slowdown (the ``experiments/ecmp_split`` study's
model).

What uses it, and what does not: :mod:`tuner.ccsearch` locates the job's congestion points
with ``Slowdown.hot_link`` (where the most QPs share a switch-to-switch link), and the ECMP
split study prices its rings with it. ``netsim predict``, the placement search and the QP
search (:func:`tuner.search.search_qps`) do not: they use ``netsim.workload.flowcomm``, which
expands every call into the connections NCCL opens (16 channels per ring, not
``CHANNELS_PER_NET_PEER``) and runs the fluid flow engine to the end (rates re-shared as
commodities finish), not this first allocation. The two disagree on QP counts: on
``fat-tree-k4`` (gpt3-350m, TP 1, PP 2, DP 8, scheduler order) the 8 PP pairs' first-allocation
slowdown here is 2.0 / 1.75 / 1.5 / 1.5 for 1 / 2 / 4 / 8 QPs, while the flow engine's
64 MB send batch takes 8.91 / 7.84 / 7.22 / 6.78 ms; on megascale's ``gpt3-175b`` this model
gave 2 QPs a 1.003x slowdown and predict gives every count the same 22.5316 s. Hence the QP
search ranks counts by predict's iteration time, so its advice and predict agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: NCCL_NCHANNELS_PER_NET_PEER default (NCCL env.rst): connections per remote peer and NIC.
CHANNELS_PER_NET_PEER = 2


@dataclass(frozen=True)
class Slowdown:
    """Collision slowdown of every group (>= 1) and the QPs behind it."""

    per_group: np.ndarray
    flows: int                # connections (ring edges x channels)
    qps: int
    #: the switch-to-switch link with the highest offered load: src, dst, kind, gbps, qps
    #: (QPs routed over it) and ``over`` = offered load / capacity, every ring channel at its
    #: non-blocking rate
    hot_link: dict | None = None

    @property
    def worst(self) -> float:
        return float(self.per_group.max()) if self.per_group.size else 1.0

    @property
    def mean(self) -> float:
        return float(self.per_group.mean()) if self.per_group.size else 1.0


def ring_edges(groups: np.ndarray, server: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, src GPU, dst GPU) of every network ring edge of ``groups`` (n_groups x size)."""
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    if groups.shape[1] < 2:
        z = np.empty(0, np.int64)
        return z, z, z
    src, dst = groups.ravel(), np.roll(groups, -1, axis=1).ravel()
    gid = np.repeat(np.arange(groups.shape[0]), groups.shape[1])
    net = server[src] != server[dst]
    if groups.shape[1] == 2:  # a 2-ring is one pair: count it once
        first = np.tile([True, False], groups.shape[0])
        net &= first
    return gid[net], src[net], dst[net]


def fabric_paths(fabric, seed: int = 0, router=None):
    """``netsim.flow.paths.FabricPaths`` with the default ECMP router of ``seed``: build it
    once and pass it to every :func:`collision_slowdown` of one fabric and seed."""
    from netsim.flow.paths import FabricPaths
    from topologies.routing import Router

    return FabricPaths(fabric, router if router is not None else Router(fabric, seed=seed))


def collision_slowdown(fabric, groups: np.ndarray, qps: int = 1,
                       channels_per_peer: int = CHANNELS_PER_NET_PEER, seed: int = 0,
                       router=None, model: str = "maxmin", paths=None) -> Slowdown:
    """Slowdown of every ring in ``groups`` when all of them run at once (first allocation).

    Parameters
    ----------
    fabric
        ``topologies.Fabric``.
    groups
        (n_groups, size) GPU positions; consecutive members are ring neighbours.
    qps
        QPs per connection (``NCCL_IB_QPS_PER_CONNECTION``).
    channels_per_peer
        NCCL connections per ring edge.
    seed
        Seeds the QP numbers (hence UDP source ports) and the default router's hash.
    router
        ``topologies.routing.Router``; default ``Router(fabric, seed=seed)``.
    model
        Sharing model of the flow engine (``maxmin``, ``dcqcn``, ...).
    paths
        A prebuilt :func:`fabric_paths` (saves rebuilding the per-GPU link tables).

    Returns
    -------
    Slowdown
        ``per_group[i]`` = non-blocking rate / real rate of group i (1 for no network edge).
    """
    from netsim.flow import Incidence, make_model, maxmin_rates
    from netsim.flow.qp import connection_qpn, udp_sport
    from netsim.flow.stats import fabric_link_mask

    if qps < 1 or channels_per_peer < 1:
        raise ValueError(f"qps={qps}, channels_per_peer={channels_per_peer}: both must be >= 1")
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    n_groups = groups.shape[0]
    server = np.asarray(fabric.nic_server_index)[np.asarray(fabric.gpu_nic_index)]
    gid, src, dst = ring_edges(groups, server)
    if gid.size == 0:
        return Slowdown(np.ones(n_groups), 0, qps)
    paths = paths if paths is not None else fabric_paths(fabric, seed, router)
    ch, per_edge = channels_per_peer, channels_per_peer * qps
    edge = np.repeat(np.arange(gid.size), per_edge)
    channel = np.tile(np.repeat(np.arange(ch), qps), gid.size)
    qp_index = np.tile(np.arange(qps), gid.size * ch)
    sport = udp_sport(connection_qpn(src[edge], dst[edge], channel, qp_index, seed))
    indptr, links = paths.network_paths(src[edge], dst[edge], sport)
    lens = np.diff(indptr)
    commodity = np.repeat(gid[edge] * ch + channel, lens)      # one per ring channel
    ncom = n_groups * ch
    inc = Incidence.from_entries(commodity, links, np.full(links.size, 1.0 / qps),
                                 np.ones(links.size), ncom, fabric.num_links)
    cap = np.asarray(fabric.link_capacity_bps, dtype=np.float64)
    fab = fabric_link_mask(fabric)
    sharing = make_model(model)
    rate = sharing.rates(inc, cap)
    # non-blocking fabric: the same rings with the switch-to-switch links unlimited
    ideal = maxmin_rates(inc, np.where(fab, np.inf, cap) * sharing.wire_efficiency)
    used = np.zeros(ncom, bool)
    used[commodity] = True
    per_group = np.ones(n_groups)
    if used.any():
        com = np.flatnonzero(used)
        slow = np.maximum(ideal[com] / np.maximum(rate[com], 1e-9), 1.0)
        np.maximum.at(per_group, com // ch, slow)
    return Slowdown(per_group, gid.size * ch, qps,
                    _hot_link(fabric, inc, ideal, fab, cap))


def _hot_link(fabric, inc, ideal: np.ndarray, fab: np.ndarray, cap: np.ndarray) -> dict | None:
    """The switch-to-switch link with the largest offered load / capacity (ties: more QPs)."""
    from netsim.flow import link_load

    offered = link_load(inc, np.where(np.isfinite(ideal), ideal, 0.0))
    qps = np.bincount(inc.e_link, weights=inc.e_count, minlength=inc.num_links)
    cand = np.flatnonzero(fab & (qps > 0))
    if cand.size == 0:
        return None
    over = offered[cand] / cap[cand]
    i = int(cand[np.lexsort((-qps[cand], -over))[0]])
    names = fabric.nodes
    return {"src": names[int(fabric.link_src[i])], "dst": names[int(fabric.link_dst[i])],
            "kind": str(fabric.link_kind[i]), "gbps": float(cap[i]) / 1e9, "qps": int(qps[i]),
            "over": float(offered[i] / cap[i])}


@dataclass
class FlowCommModel:
    """A ``netsim.workload`` comm model whose network calls pay the ECMP collision slowdown.

    ``base`` prices a call as if it had the NIC to itself (``AnalyticCommModel`` by default);
    network-scope calls get their bandwidth term multiplied by :func:`collision_slowdown` of
    the batch's groups (cached per batch of groups).
    """

    fabric: object
    base: object
    qps: int = 1
    seed: int = 0
    channels_per_peer: int = CHANNELS_PER_NET_PEER
    paths: object = None
    _cache: dict = field(default_factory=dict, repr=False)

    def batch_s(self, batch, loc) -> np.ndarray:
        from netsim.workload.comm import SCOPES, group_scopes

        t = np.asarray(self.base.batch_s(batch, loc), dtype=np.float64)
        groups = np.atleast_2d(np.asarray(batch.groups, dtype=np.int64))
        net = group_scopes(groups, loc) != SCOPES.index("server")
        if not net.any():
            return t
        key = (groups.tobytes(), groups.shape)
        if key not in self._cache:
            if self.paths is None:
                self.paths = fabric_paths(self.fabric, self.seed)
            self._cache[key] = collision_slowdown(self.fabric, groups, self.qps,
                                                  self.channels_per_peer, self.seed,
                                                  paths=self.paths).per_group
        slow = self._cache[key]
        alpha = np.array([self._alpha(batch.op, groups.shape[1], loc, g) for g in groups[:1]])
        return np.where(net, alpha[0] + (t - alpha[0]) * slow, t)

    def _alpha(self, op: str, n: int, loc, group: np.ndarray) -> float:
        """Latency part of the base model (a zero-byte call)."""
        from netsim.workload.comm import CommBatch

        zero = CommBatch(op=op, kind="probe", groups=group[None, :], size_bytes=1.0)
        return float(self.base.batch_s(zero, loc)[0])
