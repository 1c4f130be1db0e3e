"""NCCL-style algorithms as *plans*: phases of connections with bytes, lockstep groups and latency.

Engine-agnostic: a plan says which GPU sends how many bytes to which GPU, over which channel,
and which connections must move in lockstep; :mod:`netsim.collectives.runner` turns plans into
flow-engine commodities.

Modelling choices (see ``docs/flow-engine.md``):

* **Representative step.** NCCL's ring steps are symmetric: in each of the ``2(n-1)`` steps of
  an all-reduce every ring edge moves one chunk of ``S / (n C)`` bytes per channel. A ring
  channel is pipelined and credit-controlled (``NCCL_STEPS`` slots), so every edge moves at the
  pace of the slowest; we therefore simulate *all* edges of all channels at once, each channel
  one lockstep group, carrying the bytes of all its steps, and add the per-step latencies
  (``alpha``) separately: time = bytes / (bottleneck rate) + steps x alpha. On a non-blocking
  fabric this is exactly ``2(n-1)/n x S/B + 2(n-1) alpha``.
* **Rings across servers** (NCCL's graph search, simplified): ranks are grouped by server in
  order of first appearance; channel ``c`` enters every server at its member ``c mod k`` and
  visits the server's members over NVLink; the hop to the next server is rail-aligned through
  PXN (the data goes over NVLink to the GPU on the receiver's rail, then NIC to NIC on that
  rail), so channels spread over the rails.
* **Latency** follows NCCL's tuning model (``shared/reference/nccl-roce.md`` 2.2): a ring pays
  ``(nsteps - nInterSteps) alpha_nvlink + nInterSteps alpha_net``, with
  ``nInterSteps = 2 (servers - 1)`` for all-reduce and ``servers - 1`` otherwise; a tree pays
  ``2 ((k - 1) alpha_nvlink + depth alpha_net)``; each call adds the base latency once.
* **Pipelines** (tree, broadcast) also pay the fill of ``hops x chunk``: it is given as a byte
  scale of the lockstep group (``fill_scale``) so that it costs chunk / rate per hop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.collectives.nccl import NcclConfig

OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "sendrecv")
_ALIASES = {"all_reduce": "allreduce", "all-reduce": "allreduce", "all_gather": "allgather",
            "all-gather": "allgather", "reduce_scatter": "reducescatter",
            "reduce-scatter": "reducescatter", "all_to_all": "alltoall", "all-to-all": "alltoall",
            "send": "sendrecv", "recv": "sendrecv", "send_recv": "sendrecv", "p2p": "sendrecv",
            "bcast": "broadcast"}


def canonical_op(op: str) -> str:
    """Normalise an op name (``all_reduce``, ``all-reduce`` -> ``allreduce``)."""
    key = str(op).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in OPS:
        raise ValueError(f"op={op!r}: choose one of {', '.join(OPS)}")
    return key


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor (``doc/PERFORMANCE.md``; reference section 2.1)."""
    op = canonical_op(op)
    if op == "allreduce":
        return 2 * (n - 1) / n
    if op in ("allgather", "reducescatter", "alltoall"):
        return (n - 1) / n
    return 1.0


@dataclass
class Phase:
    """One phase of a plan.

    Attributes
    ----------
    name : str
    src, dst, via : np.ndarray[int64]
        GPU positions per connection; ``via`` is the PXN proxy (== src when none).
    channel : np.ndarray[int64]
    group : np.ndarray[int64]
        Lockstep group of each connection (-1: independent connection).
    bytes : np.ndarray[float64]
        Bytes each connection moves during the phase.
    latency_s : float
        Per-step latencies of the phase, added after its data.
    fill_scale : np.ndarray[float64]
        Per group: effective bytes / bytes (pipeline fill), 1.0 without one.
    """

    name: str
    src: np.ndarray
    dst: np.ndarray
    via: np.ndarray
    channel: np.ndarray
    group: np.ndarray
    bytes: np.ndarray
    latency_s: float
    fill_scale: np.ndarray

    @property
    def num_groups(self) -> int:
        return int(self.group.max()) + 1 if len(self.group) and self.group.max() >= 0 else 0


@dataclass
class Plan:
    op: str
    algo: str
    ranks: int
    servers: int
    phases: list


class _Layout:
    """Ranks grouped by server: ``members[s]`` = GPU positions of server ``s`` in rank order."""

    def __init__(self, gpus: np.ndarray, paths) -> None:
        self.gpus = gpus
        self.paths = paths
        srv = paths.gpu_server[gpus]
        _, first = np.unique(srv, return_index=True)
        order = srv[np.sort(first)]  # servers in order of first appearance
        self.server_ids = order
        rank_of = np.empty(len(srv), np.int64)  # server order of each rank's server
        uniq, inv = np.unique(srv, return_inverse=True)
        pos = np.empty(len(uniq), np.int64)
        pos[np.searchsorted(uniq, order)] = np.arange(len(order))
        rank_of[:] = pos[inv]
        sorted_idx = np.argsort(rank_of, kind="stable")
        self.k = np.bincount(rank_of, minlength=len(order))
        self.members = np.split(gpus[sorted_idx], np.cumsum(self.k)[:-1])
        self.gps = int(paths.fabric.gpus_per_server)

    @property
    def num_servers(self) -> int:
        return len(self.members)

    def proxy(self, src: np.ndarray, dst: np.ndarray, pxn: bool) -> np.ndarray:
        """PXN proxy: the GPU of src's server on dst's rail (src itself without PXN)."""
        if not pxn:
            return src
        p = self.paths
        via = p.gpu_server[src] * self.gps + p.gpu_local[dst]
        same = p.gpu_server[src] == p.gpu_server[dst]
        return np.where(same, src, via)


def _ring_orders(lay: _Layout, channels: int) -> list[np.ndarray]:
    """Ring sequence of GPU positions for every channel (see the module docstring)."""
    flat = np.concatenate(lay.members)
    k = np.repeat(lay.k, lay.k)
    offset = np.repeat(np.cumsum(lay.k) - lay.k, lay.k)
    j = np.arange(len(flat)) - offset
    return [flat[offset + (j + c) % k] for c in range(channels)]


def _ring_edges(orders: list[np.ndarray], closed: bool = True):
    src, dst, ch = [], [], []
    for c, seq in enumerate(orders):
        nxt = np.roll(seq, -1)
        s, d = (seq, nxt) if closed else (seq[:-1], nxt[:-1])
        src.append(s)
        dst.append(d)
        ch.append(np.full(len(s), c))
    return np.concatenate(src), np.concatenate(dst), np.concatenate(ch)


def _ring_latency(nsteps: int, inter_steps: int, nccl: NcclConfig) -> float:
    inter = min(inter_steps, nsteps)
    return (nsteps - inter) * nccl.alpha_nvlink_s + inter * nccl.alpha_net_s


def _phase(name, src, dst, via, ch, group, nbytes, latency_s, groups, fill=None) -> Phase:
    fill_scale = np.ones(groups) if fill is None else np.asarray(fill, np.float64)
    return Phase(name, src.astype(np.int64), dst.astype(np.int64), via.astype(np.int64),
                 ch.astype(np.int64), group.astype(np.int64), np.asarray(nbytes, np.float64),
                 float(latency_s), fill_scale)


def ring_phase(lay: _Layout, op: str, size_bytes: int, nccl: NcclConfig, name: str = "") -> Phase:
    """Ring all-reduce / all-gather / reduce-scatter over the ranks of ``lay``."""
    n, nn, ch = len(lay.gpus), lay.num_servers, nccl.channels
    steps = 2 * (n - 1) if op == "allreduce" else n - 1
    inter = 2 * (nn - 1) if op == "allreduce" else nn - 1
    src, dst, chan = _ring_edges(_ring_orders(lay, ch))
    via = lay.proxy(src, dst, nccl.pxn)
    per_edge = steps * size_bytes / (n * ch)
    return _phase(name or f"ring-{op}", src, dst, via, chan, chan, np.full(len(src), per_edge),
                  _ring_latency(steps, inter, nccl), ch)


def broadcast_phase(lay: _Layout, size_bytes: int, nccl: NcclConfig) -> Phase:
    """Pipelined chain from rank 0 (NCCL's ring broadcast)."""
    n, nn, ch = len(lay.gpus), lay.num_servers, nccl.channels
    src, dst, chan = _ring_edges(_ring_orders(lay, ch), closed=False)
    via = lay.proxy(src, dst, nccl.pxn)
    per = size_bytes / ch
    chunk = min(nccl.chunk_bytes, per) if per > 0 else 0.0
    fill = (per + max(n - 2, 0) * chunk) / per if per > 0 else 1.0
    return _phase("chain-broadcast", src, dst, via, chan, chan, np.full(len(src), per),
                  _ring_latency(n - 1, nn - 1, nccl), ch, np.full(ch, fill))


def _btree_parent(m: int, mirror: bool) -> np.ndarray:
    """Parent of every node of a heap-ordered binary tree on m nodes (-1 for the root).

    The second tree of the double binary tree is the mirror image (node i -> m-1-i), so the
    interior nodes of one tree are mostly leaves of the other (NCCL ``trees.cc`` idea).
    """
    idx = np.arange(m)
    label = m - 1 - idx if mirror else idx
    parent_label = (label - 1) // 2
    parent = np.where(label == 0, -1, m - 1 - parent_label if mirror else parent_label)
    return parent


def _chains(members: list[np.ndarray], c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Channel *c*'s chain inside every server: each server's members rotated to start at
    member ``c mod k``; returns the heads and the chain hops' sources and destinations, server
    after server. One array operation where every server has as many members."""
    if not members:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    if len({len(m) for m in members}) == 1:
        k = len(members[0])
        rolled = np.roll(np.stack(members), -(c % k), axis=1)
        return rolled[:, 0], rolled[:, :-1].ravel(), rolled[:, 1:].ravel()
    chains = [np.roll(m, -(c % len(m))) for m in members]
    return (np.array([s[0] for s in chains]), np.concatenate([s[:-1] for s in chains]),
            np.concatenate([s[1:] for s in chains]))


def tree_phase(lay: _Layout, size_bytes: int, nccl: NcclConfig) -> Phase:
    """Double binary tree all-reduce: chain inside servers, two mirrored trees across them."""
    nn, ch = lay.num_servers, nccl.channels
    src, dst, chan, grp = [], [], [], []
    depth = int(np.ceil(np.log2(nn + 1))) if nn > 1 else 0
    for c in range(ch):
        heads, cs, cd = _chains(lay.members, c)
        for t in (0, 1):
            g = 2 * c + t
            parent = _btree_parent(nn, mirror=bool(t))
            child = np.flatnonzero(parent >= 0)
            up_s, up_d = heads[child], heads[parent[child]]
            # reduce goes up, broadcast comes down: both directions of every edge and chain hop
            es = np.concatenate([up_s, up_d, cd, cs])
            ed = np.concatenate([up_d, up_s, cs, cd])
            src.append(es)
            dst.append(ed)
            chan.append(np.full(len(es), c))
            grp.append(np.full(len(es), g))
    src, dst = np.concatenate(src), np.concatenate(dst)
    chan, grp = np.concatenate(chan), np.concatenate(grp)
    via = lay.proxy(src, dst, nccl.pxn)
    per = size_bytes / (2 * ch)
    chunk = min(nccl.chunk_bytes, per) if per > 0 else 0.0
    hops = 2 * (depth + int(lay.k.max()) - 1)
    fill = (per + hops * chunk) / per if per > 0 else 1.0
    lat = 2 * ((int(lay.k.max()) - 1) * nccl.alpha_nvlink_s + depth * nccl.alpha_net_s)
    return _phase("double-binary-tree", src, dst, via, chan, grp, np.full(len(src), per), lat,
                  2 * ch, np.full(2 * ch, fill))


def direct_phase(lay: _Layout, op: str, size_bytes: int, nccl: NcclConfig) -> Phase:
    """All-to-all or send/recv as independent connections (no lockstep)."""
    n, gps = len(lay.gpus), lay.gps
    p = lay.paths
    if op == "sendrecv":
        src, dst = lay.gpus, np.roll(lay.gpus, -1)
        nb = np.full(n, float(size_bytes))
    else:
        a = np.repeat(lay.gpus, n)
        b = np.tile(lay.gpus, n)
        keep = a != b
        src, dst = a[keep], b[keep]
        nb = np.full(len(src), size_bytes / n)
    net = p.gpu_server[src] != p.gpu_server[dst]
    if op == "alltoall" and nccl.pxn and net.any():
        src, dst, nb = _pxn_aggregate(src, dst, nb, net, p, gps)
        via = src  # the proxy hop is already a connection of its own
    else:
        via = lay.proxy(src, dst, nccl.pxn)
    ch = max(1, min(nccl.channels, 2)) if op == "alltoall" else nccl.channels
    # each peer connection is spread over ch channels (NCCL_NCHANNELS_PER_NET_PEER-like)
    src, dst, via = (np.repeat(x, ch) for x in (src, dst, via))
    chan = np.tile(np.arange(ch), len(nb))
    nb = np.repeat(nb / ch, ch)
    any_net = bool((p.gpu_server[src] != p.gpu_server[dst]).any())
    lat = nccl.alpha_net_s if any_net else nccl.alpha_nvlink_s
    return _phase(f"direct-{op}", src, dst, via, chan, np.full(len(src), -1), nb, lat, 0)


def _pxn_aggregate(src, dst, nb, net, p, gps):
    """All-to-all with PXN and shared connections: network bytes go NVLink to the GPU on the
    receiver's rail, then one connection per (sender rail GPU, receiver GPU) pair."""
    s_net, d_net, b_net = src[net], dst[net], nb[net]
    via = p.gpu_server[s_net] * gps + p.gpu_local[d_net]
    # network part: via -> dst, aggregated per pair
    key = via * (len(p.gpu_server) + 1) + d_net
    uk, inv = np.unique(key, return_inverse=True)
    agg_b = np.bincount(inv, weights=b_net)
    n_via, n_dst = uk // (len(p.gpu_server) + 1), uk % (len(p.gpu_server) + 1)
    # NVLink part: src -> via when they differ, aggregated per pair
    hop = s_net != via
    key2 = s_net[hop] * (len(p.gpu_server) + 1) + via[hop]
    uk2, inv2 = np.unique(key2, return_inverse=True)
    agg2 = np.bincount(inv2, weights=b_net[hop]) if len(uk2) else np.zeros(0)
    h_src, h_dst = uk2 // (len(p.gpu_server) + 1), uk2 % (len(p.gpu_server) + 1)
    src = np.concatenate([src[~net], n_via, h_src])
    dst = np.concatenate([dst[~net], n_dst, h_dst])
    nb = np.concatenate([nb[~net], agg_b, agg2])
    return src, dst, nb


def build_plan(paths, gpus: np.ndarray, op: str, size_bytes: int, nccl: NcclConfig) -> Plan:
    """Turn one collective call into a :class:`Plan`.

    Parameters
    ----------
    paths : netsim.flow.paths.FabricPaths
    gpus : np.ndarray[int64]
        GPU position of every rank, in rank order.
    op : str
        One of :data:`OPS` (aliases such as ``all_reduce`` accepted).
    size_bytes : int
        nccl-tests size: the buffer of all-reduce / broadcast / send, the *total* array of
        all-gather / reduce-scatter / all-to-all.
    nccl : NcclConfig
    """
    op = canonical_op(op)
    if len(gpus) < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {len(gpus)}")
    if len(np.unique(gpus)) != len(gpus):
        raise ValueError("ranks must be distinct GPUs: one rank per GPU")
    lay = _Layout(np.asarray(gpus, np.int64), paths)
    algo = nccl.algo
    if op in ("alltoall", "sendrecv"):
        algo = "direct"
        phases = [direct_phase(lay, op, size_bytes, nccl)]
    elif op == "broadcast":
        algo = "ring"
        phases = [broadcast_phase(lay, size_bytes, nccl)]
    elif op == "allreduce" and algo == "tree":
        phases = [tree_phase(lay, size_bytes, nccl)]
    elif op == "allreduce" and algo == "hierarchical":
        phases = _hierarchical(lay, size_bytes, nccl)
    else:
        algo = "ring"
        phases = [ring_phase(lay, op, size_bytes, nccl)]
    return Plan(op, algo, len(gpus), lay.num_servers, phases)


def _hierarchical(lay: _Layout, size_bytes: int, nccl: NcclConfig) -> list[Phase]:
    """Reduce-scatter inside servers (NVLink), rail-aligned all-reduce across, all-gather inside."""
    k = int(lay.k[0])
    if np.any(lay.k != k):
        raise ValueError("algo=hierarchical needs the same number of ranks in every server "
                         f"(got {sorted(set(lay.k.tolist()))}): use algo=ring")
    paths = lay.paths
    phases = []
    if k > 1:
        intra = [_Layout(m, paths) for m in lay.members]
        phases.append(_merge([ring_phase(x, "reducescatter", size_bytes, nccl) for x in intra],
                             "intra-reducescatter"))
    if lay.num_servers > 1:
        rails = [_Layout(np.array([m[j] for m in lay.members]), paths) for j in range(k)]
        phases.append(_merge([ring_phase(x, "allreduce", size_bytes / k, nccl) for x in rails],
                             "inter-allreduce"))
    if k > 1:
        intra = [_Layout(m, paths) for m in lay.members]
        phases.append(_merge([ring_phase(x, "allgather", size_bytes, nccl) for x in intra],
                             "intra-allgather"))
    return phases


def _merge(parts: list[Phase], name: str) -> Phase:
    """Run several independent rings as one phase (their groups renumbered)."""
    off, groups = 0, []
    for ph in parts:
        groups.append(ph.group + off)
        off += ph.num_groups
    cat = lambda attr: np.concatenate([getattr(ph, attr) for ph in parts])  # noqa: E731
    return Phase(name, cat("src"), cat("dst"), cat("via"), cat("channel"),
                 np.concatenate(groups), cat("bytes"), max(ph.latency_s for ph in parts),
                 np.concatenate([ph.fill_scale for ph in parts]))
