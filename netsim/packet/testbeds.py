"""Small hand-made fabrics for crafted scenarios (dumbbell, incast star, HoL layout, ring).

They have the attributes of ``topologies.Fabric`` the packet engine reads, plus a
:class:`ShortestPathRouter` (ECMP over shortest paths by a CRC of the UDP source port), so
scenarios whose physics is computed by hand do not depend on the fabric builders.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import networkx as nx
import numpy as np

from topologies.units import gbps


class SmallFabric:
    """A Fabric-like graph from ``(u, v, rate_bps, latency_ns)`` cables (both directions)."""

    def __init__(self, name: str, roles: dict[str, str], cables: Iterable[tuple]):
        self.name = name
        g = nx.DiGraph()
        for node, role in roles.items():
            g.add_node(node, role=role)
        src, dst, cap, lat, kind = [], [], [], [], []
        self._ids: dict[tuple[str, str], int] = {}
        for phys, (u, v, rate, lat_ns) in enumerate(cables):
            for a, b in ((u, v), (v, u)):
                lid = len(src)
                k = "host" if "nic" in (roles[a], roles[b]) else "tor-agg"
                g.add_edge(a, b, capacity_bps=int(rate), latency_ns=float(lat_ns), link_id=lid,
                           phys=phys, kind=k)
                self._ids[(a, b)] = lid
                src.append(a)
                dst.append(b)
                cap.append(int(rate))
                lat.append(float(lat_ns))
                kind.append(k)
        self.graph = g
        self.nodes = list(roles)
        self.node_index = {n: i for i, n in enumerate(self.nodes)}
        self.nics = [n for n in self.nodes if roles[n] == "nic"]
        self.gpus: list[str] = []
        self.num_links = len(src)
        self.link_src = np.array([self.node_index[n] for n in src], dtype=np.int64)
        self.link_dst = np.array([self.node_index[n] for n in dst], dtype=np.int64)
        self.link_capacity_bps = np.array(cap, dtype=np.int64)
        self.link_latency_ns = np.array(lat, dtype=np.float64)
        self.link_kind = np.array(kind)

    def link_id(self, u: str, v: str) -> int:
        return self._ids[(u, v)]

    def gpu_nic(self, gpu: str) -> str:  # pragma: no cover - these fabrics have no GPUs
        raise ValueError(f"{gpu} is not a GPU of {self.name}")


class ShortestPathRouter:
    """ECMP over all shortest paths (hop count), chosen by a CRC32 of (src, dst, sport)."""

    def __init__(self, fabric: SmallFabric, seed: int = 0):
        self.fabric = fabric
        self.seed = seed
        self._paths: dict[tuple[str, str], list[list[str]]] = {}

    def without(self, dead) -> ShortestPathRouter:
        """The same router on the fabric minus the cables of the *dead* directed links."""
        r = ShortestPathRouter(self.fabric, self.seed)
        g = self.fabric.graph.copy()
        dead = set(dead)
        # a dead directed link takes its cable down: both directions go (each once: the
        # reverse direction may be listed as dead too)
        for u, v, lid in list(g.edges(data="link_id")):
            if lid in dead:
                for a, b in ((u, v), (v, u)):
                    if g.has_edge(a, b):
                        g.remove_edge(a, b)
        r._graph = g
        return r

    def path(self, src: str, dst: str, sport: int) -> list[int]:
        key = (src, dst)
        if key not in self._paths:
            g = getattr(self, "_graph", self.fabric.graph)
            try:
                self._paths[key] = sorted(nx.all_shortest_paths(g, src, dst))
            except nx.NetworkXNoPath:
                raise ValueError(f"no path from {src} to {dst}") from None
        paths = self._paths[key]
        h = zlib.crc32(f"{self.seed}:{src}:{dst}:{sport}".encode())
        nodes = paths[h % len(paths)]
        return [self.fabric.link_id(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]


def dumbbell(n_left: int = 1, n_right: int = 1, *, host_gbps: float = 400, core_gbps: float = 400,
             latency_ns: float = 1000.0) -> SmallFabric:
    """Hosts ``l0..`` on switch ``s0``, hosts ``r0..`` on ``s1``, one ``s0-s1`` cable."""
    roles = {f"l{i}": "nic" for i in range(n_left)} | {f"r{i}": "nic" for i in range(n_right)}
    roles |= {"s0": "tor", "s1": "tor"}
    cables = [(f"l{i}", "s0", gbps(host_gbps), latency_ns) for i in range(n_left)]
    cables += [(f"r{i}", "s1", gbps(host_gbps), latency_ns) for i in range(n_right)]
    cables.append(("s0", "s1", gbps(core_gbps), latency_ns))
    return SmallFabric(f"dumbbell-{n_left}x{n_right}", roles, cables)


def star(n_hosts: int, *, host_gbps: float = 400, latency_ns: float = 1000.0) -> SmallFabric:
    """``n_hosts`` hosts ``h0..`` on one switch ``s0`` (incast: many to one)."""
    roles = {f"h{i}": "nic" for i in range(n_hosts)} | {"s0": "tor"}
    cables = [(f"h{i}", "s0", gbps(host_gbps), latency_ns) for i in range(n_hosts)]
    return SmallFabric(f"star-{n_hosts}", roles, cables)


def hol_layout(n_hot: int = 3, *, host_gbps: float = 100, trunk_gbps: float = 400,
               latency_ns: float = 1000.0) -> SmallFabric:
    """Head-of-line blocking: victim ``a -> d`` shares the trunk ``s1 -> s2`` with ``b -> c``.

    ``c`` also receives from ``e0..`` on ``s2``, so the port ``s2 -> c`` is the congested one;
    the trunk is fast enough for ``a`` and ``b`` at line rate, so without PFC the victim does
    not care about ``c``'s congestion.
    """
    roles = {"a": "nic", "b": "nic", "c": "nic", "d": "nic"}
    roles |= {f"e{i}": "nic" for i in range(n_hot)} | {"s1": "tor", "s2": "tor"}
    r, t = gbps(host_gbps), gbps(trunk_gbps)
    cables = [("a", "s1", r, latency_ns), ("b", "s1", r, latency_ns), ("c", "s2", r, latency_ns),
              ("d", "s2", r, latency_ns), ("s1", "s2", t, latency_ns)]
    cables += [(f"e{i}", "s2", r, latency_ns) for i in range(n_hot)]
    return SmallFabric("hol", roles, cables)


def ring(n_switches: int = 3, *, gbps_: float = 100, latency_ns: float = 1000.0) -> SmallFabric:
    """Switches ``s0..`` in a ring, host ``h<i>`` on ``s<i>`` (cyclic buffer dependencies)."""
    roles = {f"h{i}": "nic" for i in range(n_switches)} | {f"s{i}": "tor" for i in range(n_switches)}
    r = gbps(gbps_)
    cables = [(f"h{i}", f"s{i}", r, latency_ns) for i in range(n_switches)]
    cables += [(f"s{i}", f"s{(i + 1) % n_switches}", r, latency_ns) for i in range(n_switches)]
    return SmallFabric(f"ring-{n_switches}", roles, cables)


class ClockwiseRouter(ShortestPathRouter):
    """Route a ring's traffic clockwise only (the classic PFC-deadlock recipe)."""

    def path(self, src: str, dst: str, sport: int) -> list[int]:
        n = len(self.fabric.nics)
        i, j = int(src[1:]), int(dst[1:])
        nodes = [src, f"s{i}"]
        k = i
        while k != j:
            k = (k + 1) % n
            nodes.append(f"s{k}")
        nodes.append(dst)
        return [self.fabric.link_id(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]
