"""The :class:`Fabric`: a tiered data-centre fabric as numpy link arrays plus a networkx graph.

Builders (``topologies.builders``) produce the physical links as arrays first and call
:func:`assemble`; the ``networkx.DiGraph`` is made from those arrays on first access of
``Fabric.graph``, because most users (the flow engine, the router) only need the arrays and
building 100k+ attributed edges in networkx costs more than the rest of the build.

Directed link ids: physical link ``p`` has directed links ``2p`` (tail -> head as built, i.e.
toward the higher tier) and ``2p + 1`` (the reverse).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # imported on first use of Fabric.graph (networkx takes ~0.15 s CPU to load)
    import networkx as nx

TIERS = ("tor", "agg", "core")
ROLES = ("gpu", "nic", "nvswitch", "tor", "agg", "core")


@dataclass
class Wiring:
    """Tier structure the router walks (ordinals are positions inside a role's list).

    ``tor_up[t]``: directed links ToR ``t`` -> agg; ``agg_down[a, tor_pos[t]]``: agg ``a`` -> ToR
    ``t`` (-1 when ``a`` is not in ``t``'s pod); ``agg_up[a]``: agg -> core;
    ``core_down[c, pod]``: core ``c`` -> the aggs of ``pod`` it connects to.
    """

    nic_tor: np.ndarray        # (nics,) ToR ordinal of each NIC
    nic_up_link: np.ndarray    # (nics,) directed link NIC -> ToR
    nic_down_link: np.ndarray  # (nics,) directed link ToR -> NIC
    tor_pod: np.ndarray        # (tors,)
    tor_pos: np.ndarray        # (tors,) position of the ToR inside its pod
    tor_up: np.ndarray         # (tors, U_t)
    agg_pod: np.ndarray        # (aggs,)
    agg_down: np.ndarray       # (aggs, tors_per_pod)
    agg_up: np.ndarray         # (aggs, U_a), U_a = 0 without a core tier
    core_down: np.ndarray      # (cores, pods, s)
    tor_base: int              # node index of ToR ordinal 0 (aggs, cores likewise)
    agg_base: int
    core_base: int

    @property
    def pods(self) -> int:
        return int(self.tor_pod.max()) + 1 if len(self.tor_pod) else 0


@dataclass
class Fabric:
    """A built fabric: node lists, directed-link arrays, the routing structure and a lazy graph.

    See ``docs/architecture.md`` (section topologies) for the contract other packages rely on.
    """

    name: str
    spec: Any
    nodes: list[str]
    node_role: np.ndarray          # (nodes,) role string per node
    node_attrs: dict[str, np.ndarray]  # server, rail, pod, index arrays (-1 / "" when n/a)
    gpus: list[str]
    nics: list[str]
    servers: list[str]
    switches: dict[str, list[str]]
    link_src: np.ndarray
    link_dst: np.ndarray
    link_capacity_bps: np.ndarray
    link_latency_ns: np.ndarray
    link_kind: np.ndarray
    link_port: np.ndarray          # (links,) port number on the tail node
    nic_ip: np.ndarray
    gpu_nic_index: np.ndarray      # (gpus,) position in ``nics`` of each GPU's rail NIC
    nic_server_index: np.ndarray   # (nics,) position in ``servers``
    gpus_per_server: int
    nics_per_server: int
    wiring: Wiring
    node_index: dict[str, int] = field(default_factory=dict)
    _graph: nx.DiGraph | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.node_index:
            self.node_index = {n: i for i, n in enumerate(self.nodes)}
        self._gpu_pos = {g: i for i, g in enumerate(self.gpus)}
        self._nic_pos = {n: i for i, n in enumerate(self.nics)}
        self._server_pos = {s: i for i, s in enumerate(self.servers)}

    # -- sizes -------------------------------------------------------------------------------
    @property
    def num_links(self) -> int:
        """Number of directed links (two per physical link)."""
        return int(len(self.link_src))

    @property
    def link_phys(self) -> np.ndarray:
        """Physical link id of every directed link (both directions share it)."""
        return np.arange(self.num_links, dtype=np.int64) // 2

    # -- lookups -----------------------------------------------------------------------------
    def gpu_nic(self, gpu: str) -> str:
        """The NIC (rail) that ``gpu`` sends through."""
        return self.nics[int(self.gpu_nic_index[self._gpu_pos[gpu]])]

    def nic_server(self, nic: str) -> str:
        """The server that holds ``nic``."""
        return self.servers[int(self.nic_server_index[self._nic_pos[nic]])]

    def server_gpus(self, server: str) -> list[str]:
        """The GPUs of ``server`` in local order."""
        s = self._server_pos[server]
        g = self.gpus_per_server
        return self.gpus[s * g:(s + 1) * g]

    def gpu_position(self, gpu: str) -> int:
        """Position of ``gpu`` in ``fabric.gpus``."""
        return self._gpu_pos[gpu]

    def nic_position(self, nic: str) -> int:
        """Position of ``nic`` in ``fabric.nics``."""
        return self._nic_pos[nic]

    def link_id(self, u: str, v: str) -> int:
        """Directed link id of the edge ``u -> v`` (KeyError if there is none)."""
        iu, iv = self.node_index[u], self.node_index[v]
        cand = self._out_links(iu)
        hit = cand[self.link_dst[cand] == iv]
        if len(hit) == 0:
            raise KeyError(f"no link {u} -> {v}")
        return int(hit[0])

    def _out_links(self, node: int) -> np.ndarray:
        if not hasattr(self, "_out_order"):
            order = np.argsort(self.link_src, kind="stable")
            starts = np.searchsorted(self.link_src[order], np.arange(len(self.nodes) + 1))
            self._out_order, self._out_starts = order, starts
        return self._out_order[self._out_starts[node]:self._out_starts[node + 1]]

    def role(self, node: str) -> str:
        return str(self.node_role[self.node_index[node]])

    # -- the graph ---------------------------------------------------------------------------
    @property
    def graph(self) -> nx.DiGraph:
        """``networkx.DiGraph`` of the fabric (built from the arrays on first use, then cached)."""
        if self._graph is None:
            self._graph = self._build_graph()
        return self._graph

    def _build_graph(self) -> nx.DiGraph:
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        attrs = self.node_attrs
        server = attrs["server"].tolist()
        rail, pod, index = (attrs[k].tolist() for k in ("rail", "pod", "index"))
        roles = self.node_role.tolist()
        g.add_nodes_from(
            (n, {"role": roles[i], "server": server[i], "rail": rail[i], "pod": pod[i],
                 "index": index[i]})
            for i, n in enumerate(self.nodes)
        )
        nodes = self.nodes
        src, dst = self.link_src.tolist(), self.link_dst.tolist()
        cap, lat = self.link_capacity_bps.tolist(), self.link_latency_ns.tolist()
        kind, port = self.link_kind.tolist(), self.link_port.tolist()
        g.add_edges_from(
            (nodes[src[i]], nodes[dst[i]],
             {"capacity_bps": cap[i], "latency_ns": lat[i], "link_id": i, "phys": i >> 1,
              "port": port[i], "kind": kind[i]})
            for i in range(len(src))
        )
        return g


def assemble(
    *,
    name: str,
    spec: Any,
    nodes: list[str],
    node_role: np.ndarray,
    node_attrs: dict[str, np.ndarray],
    counts: dict[str, int],
    phys: dict[str, np.ndarray],
    wiring_parts: dict[str, Any],
    nic_ip: np.ndarray,
    gpu_nic_index: np.ndarray,
    nic_server_index: np.ndarray,
    gpus_per_server: int,
    nics_per_server: int,
    servers: list[str],
) -> Fabric:
    """Turn physical-link arrays into a :class:`Fabric`.

    ``phys`` holds equal-length arrays ``u, v, kind, capacity_bps, latency_ns, port_u, port_v``
    (one entry per physical link); directed link ``2p`` is ``u -> v``, ``2p + 1`` is ``v -> u``.
    ``counts`` gives the number of nodes of each role, in the order of ``ROLES``.
    """
    u, v = phys["u"].astype(np.int64), phys["v"].astype(np.int64)
    n = len(u)
    link_src = np.empty(2 * n, np.int64)
    link_dst = np.empty(2 * n, np.int64)
    link_src[0::2], link_src[1::2] = u, v
    link_dst[0::2], link_dst[1::2] = v, u
    link_port = np.empty(2 * n, np.int64)
    link_port[0::2], link_port[1::2] = phys["port_u"], phys["port_v"]
    offs = np.cumsum([0] + [counts[r] for r in ROLES])
    base = dict(zip(ROLES, offs[:-1].tolist(), strict=True))
    span = {r: (int(offs[i]), int(offs[i + 1])) for i, r in enumerate(ROLES)}
    wiring = Wiring(tor_base=base["tor"], agg_base=base["agg"], core_base=base["core"],
                    **wiring_parts)
    return Fabric(
        name=name,
        spec=spec,
        nodes=nodes,
        node_role=node_role,
        node_attrs=node_attrs,
        gpus=nodes[slice(*span["gpu"])],
        nics=nodes[slice(*span["nic"])],
        servers=servers,
        switches={t: nodes[slice(*span[t])] for t in TIERS},
        link_src=link_src,
        link_dst=link_dst,
        link_capacity_bps=np.repeat(phys["capacity_bps"].astype(np.int64), 2),
        link_latency_ns=np.repeat(phys["latency_ns"].astype(np.float64), 2),
        link_kind=np.repeat(phys["kind"].astype(str), 2),
        link_port=link_port,
        nic_ip=nic_ip.astype(np.uint32),
        gpu_nic_index=gpu_nic_index.astype(np.int64),
        nic_server_index=nic_server_index.astype(np.int64),
        gpus_per_server=gpus_per_server,
        nics_per_server=nics_per_server,
        wiring=wiring,
    )


def kind_mask(fabric, kinds: tuple[str, ...]) -> np.ndarray:
    """True for the directed links of ``fabric`` whose kind is one of ``kinds``, computed once
    per fabric and ``kinds`` (kept on the fabric object: read-only). Any object with
    ``link_kind`` will do (the packet engine's small testbeds too)."""
    cache = fabric.__dict__.setdefault("_kind_masks", {})
    key = tuple(kinds)
    if key not in cache:
        mask = np.isin(np.asarray(fabric.link_kind).astype(str), key)
        mask.flags.writeable = False
        cache[key] = mask
    return cache[key]


def gpu_links(fabric, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU (``fabric.gpus`` order), the id of its ``kind`` link out of it and of its
    ``kind`` link into it, -1 where it has none; computed once per fabric and kind (kept on the
    fabric object: read-only)."""
    cache = fabric.__dict__.setdefault("_gpu_links", {})
    if kind not in cache:
        node = np.array([fabric.node_index[g] for g in fabric.gpus], np.int64)
        mask = kind_mask(fabric, (kind,))
        pair = tuple(_links_at(node, end, mask) for end in (fabric.link_src, fabric.link_dst))
        for a in pair:
            a.flags.writeable = False
        cache[kind] = pair
    return cache[kind]


def _links_at(node: np.ndarray, end: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Id of the masked link whose ``end`` (tail or head array) is each of ``node``; -1 if
    none."""
    out = np.full(len(node), -1, np.int64)
    ids = np.flatnonzero(mask)
    if len(ids) == 0:
        return out
    order = np.argsort(node)
    ends = np.asarray(end)[ids]
    k = np.clip(np.searchsorted(node[order], ends), 0, len(node) - 1)
    sel = node[order][k] == ends
    out[order[k[sel]]] = ids[sel]
    return out
