"""ECMP collision slowdown of a job's concurrent rings, measured with the flow engine.

A ring collective sends, at every step, one chunk from each member to its successor; when
all groups of a kind (every DP group of a stage) run at once, these flows share the fabric.
Each ring edge is ``channels_per_peer`` NCCL connections (NCCL's default
``NCCL_NCHANNELS_PER_NET_PEER`` is 2), each with ``qps`` QPs
(``NCCL_IB_QPS_PER_CONNECTION``), every QP its own RoCEv2 UDP source port and so its own
ECMP path (../shared/reference/nccl-roce.md section 8.2). The flow engine's max-min rates
say how much slower than its NIC's line rate each ring's slowest edge runs: the *collision
slowdown* (1.0 = no loss).

:class:`FlowCommModel` wraps a ``netsim.workload`` comm model and multiplies the bandwidth
term of every network-scope call by this slowdown, so ``predict`` sees placements and QP
counts through ECMP collisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: NCCL_NCHANNELS_PER_NET_PEER default (NCCL env.rst): connections per remote peer and NIC.
CHANNELS_PER_NET_PEER = 2


@dataclass(frozen=True)
class Slowdown:
    """Collision slowdown of every group (>= 1) and the flows behind it."""

    per_group: np.ndarray
    flows: int
    qps: int
    #: the switch-to-switch link shared by the most QPs: src, dst, kind, gbps, qps and
    #: ``over`` = offered load / capacity with every QP at its NIC's fair share
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


def collision_slowdown(fabric, groups: np.ndarray, qps: int = 1,
                       channels_per_peer: int = CHANNELS_PER_NET_PEER, seed: int = 0,
                       router=None, model: str = "maxmin") -> Slowdown:
    """Slowdown of every ring in ``groups`` when all of them run one step at once.

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

    Returns
    -------
    Slowdown
        ``per_group[i]`` = NIC line rate / slowest edge rate of group i (1 for no network edge).
    """
    from netsim.flow import simulate_flows
    from netsim.traffic import Flow

    server = np.asarray(fabric.nic_server_index)[np.asarray(fabric.gpu_nic_index)]
    gid, src, dst = ring_edges(groups, server)
    n_groups = np.atleast_2d(groups).shape[0]
    if gid.size == 0:
        return Slowdown(np.ones(n_groups), 0, qps)
    size = 64 << 20  # large enough that latency is negligible against serialisation
    names = fabric.gpus
    flows = [Flow(names[s], names[d], size, 0, qps)
             for s, d in zip(src.tolist(), dst.tolist(), strict=False) for _ in range(channels_per_peer)]
    res = simulate_flows(fabric, flows, model=model, router=router, seed=seed)
    # NCCL splits an edge's bytes evenly over its channels and QPs, so the slowest QP sets
    # the pace: the edge finishes with its last channel flow (the engine finishes a flow
    # with its last QP); rate = bytes of the edge / that time.
    finish_s = (res.finish_ps - res.start_ps).reshape(-1, channels_per_peer).max(axis=1) / 1e12
    rate = channels_per_peer * size * 8.0 / np.maximum(finish_s, 1e-12)
    nic_up = np.asarray(fabric.wiring.nic_up_link)[np.asarray(fabric.gpu_nic_index)[src]]
    line = np.asarray(fabric.link_capacity_bps, dtype=np.float64)[nic_up]
    # edges leaving one NIC share it by design (not a collision): divide by that count
    per_nic = np.bincount(np.asarray(fabric.gpu_nic_index)[src], minlength=len(fabric.nics))
    fair = line / per_nic[np.asarray(fabric.gpu_nic_index)[src]]
    edge_slow = np.maximum(fair / np.maximum(rate, 1.0), 1.0)
    per_group = np.ones(n_groups)
    np.maximum.at(per_group, gid, edge_slow)
    return Slowdown(per_group, len(flows), qps, _hot_link(fabric, res, float(fair.max()),
                                                           channels_per_peer * qps))


def _hot_link(fabric, res, nic_share_bps: float, qps_per_edge: int) -> dict | None:
    """The fabric link of the run with the most QPs on it (from the flow engine's report)."""
    from netsim.flow.stats import fabric_link_mask

    mask = fabric_link_mask(fabric)
    rows = [h for h in res.links.hottest if mask[h["link"]]]
    if not rows:
        return None
    h = max(rows, key=lambda r: (r["qps"], r["utilization"]))
    cap = float(np.asarray(fabric.link_capacity_bps)[h["link"]])
    over = h["qps"] * nic_share_bps / qps_per_edge / cap
    return {"src": h["src"], "dst": h["dst"], "kind": h["kind"], "gbps": cap / 1e9,
            "qps": int(h["qps"]), "over": float(over)}


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
            self._cache[key] = collision_slowdown(self.fabric, groups, self.qps,
                                                  self.channels_per_peer, self.seed).per_group
        slow = self._cache[key]
        alpha = np.array([self._alpha(batch.op, groups.shape[1], loc, g) for g in groups[:1]])
        return np.where(net, alpha[0] + (t - alpha[0]) * slow, t)

    def _alpha(self, op: str, n: int, loc, group: np.ndarray) -> float:
        """Latency part of the base model (a zero-byte call)."""
        from netsim.workload.comm import CommBatch

        zero = CommBatch(op=op, kind="probe", groups=group[None, :], size_bytes=1.0)
        return float(self.base.batch_s(zero, loc)[0])
