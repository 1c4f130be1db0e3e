"""Fabric analysis: counts by tier, bisection bandwidth, oversubscription, diameter, ECMP width.

Closed forms (derived in ``docs/fabrics.md``), all from the link arrays:

* bisection (pods split into two halves, cores on either side): every byte crossing the cut
  climbs the source half's host, ToR-agg and (with several pods) agg-core links, so the cut is
  ``min(C_host, C_tor_agg, C_agg_core) / 2`` with ``C`` the total one-way capacity of a tier.
  For a k-ary fat-tree of rate B this is ``k^3/8 x B`` (full bisection).
* oversubscription of a tier = the largest downlink / uplink capacity ratio of its switches.
* diameter = links on the longest NIC-to-NIC route: 6 with a core, 4 with several ToRs, else 2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topologies.fabric import Fabric

NET_KINDS = ("host", "tor-agg", "agg-core")


@dataclass
class FabricReport:
    """What ``netsim topo`` prints (``to_json()`` keys are a CLI contract)."""

    name: str
    gpus: int
    servers: int
    nics: int
    switches: dict[str, int]
    links: int
    links_by_kind: dict[str, int]
    pods: int
    bisection_bps: int
    oversubscription: dict[str, float | None]
    diameter_hops: int
    ecmp_width: dict[str, int] = field(default_factory=dict)
    capacity_bps_by_kind: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "name": self.name, "gpus": self.gpus, "servers": self.servers, "nics": self.nics,
            "switches": self.switches, "links": self.links, "links_by_kind": self.links_by_kind,
            "directed_links": 2 * self.links, "pods": self.pods,
            "bisection_bps": self.bisection_bps, "oversubscription": self.oversubscription,
            "diameter_hops": self.diameter_hops, "ecmp_width": self.ecmp_width,
            "capacity_bps_by_kind": self.capacity_bps_by_kind,
        }


def tier_capacity_bps(fabric: Fabric) -> dict[str, int]:
    """Total one-way capacity of each link kind (counting each cable once)."""
    up = slice(0, None, 2)  # directed link 2p is the cable's upward direction
    kinds, caps = fabric.link_kind[up], fabric.link_capacity_bps[up]
    return {str(k): int(caps[kinds == k].sum()) for k in np.unique(kinds)}


def bisection_bps(fabric: Fabric) -> int:
    """Bisection bandwidth (one direction) of the pod-halves cut; see the module docstring."""
    cap = tier_capacity_bps(fabric)
    kinds = [k for k in NET_KINDS if cap.get(k)]
    if fabric.wiring.pods <= 1:
        kinds = [k for k in kinds if k != "agg-core"]
    return min(cap[k] for k in kinds) // 2 if kinds else 0


def oversubscription(fabric: Fabric) -> dict[str, float | None]:
    """Worst down/up capacity ratio over the switches of each tier (``None``: no uplinks).

    Per switch, wired downlink capacity / uplink capacity; the tier reports its maximum, so a
    partly filled ToR or pod does not hide the design ratio of the full ones.
    """
    up = slice(0, None, 2)  # directed link 2p runs upward: its head is the upper switch
    src, dst = fabric.link_src[up], fabric.link_dst[up]
    kind, cap = fabric.link_kind[up], fabric.link_capacity_bps[up].astype(np.float64)
    n = len(fabric.nodes)

    def ratio(down: str, upk: str) -> float | None:
        into = np.bincount(dst[kind == down], cap[kind == down], minlength=n)
        out = np.bincount(src[kind == upk], cap[kind == upk], minlength=n)
        has = out > 0
        return float((into[has] / out[has]).max()) if has.any() else None

    return {"tor": ratio("host", "tor-agg"), "agg": ratio("tor-agg", "agg-core")}


def diameter_hops(fabric: Fabric) -> int:
    """Links on the longest shortest route between two NICs through the fabric."""
    w = fabric.wiring
    if len(fabric.nics) < 2:
        return 0
    if w.pods > 1 and w.core_down.shape[0]:
        return 6
    return 4 if len(np.unique(w.nic_tor)) > 1 else 2


def sample_pairs(fabric: Fabric) -> dict[str, tuple[str, str]]:
    """One NIC pair per locality class (same ToR, same pod, across pods) where it exists."""
    w, nics = fabric.wiring, fabric.nics
    out: dict[str, tuple[str, str]] = {}
    first_tor = np.flatnonzero(w.nic_tor == w.nic_tor[0])
    if len(first_tor) > 1:
        out["same_tor"] = (nics[first_tor[0]], nics[first_tor[1]])
    pod = w.tor_pod[w.nic_tor]
    other = np.flatnonzero((pod == pod[0]) & (w.nic_tor != w.nic_tor[0]))
    if other.size:
        out["same_pod"] = (nics[0], nics[other[0]])
    far = np.flatnonzero(pod != pod[0])
    if far.size:
        out["cross_pod"] = (nics[0], nics[far[-1]])
    return out


def analyze(fabric: Fabric) -> FabricReport:
    """Summarise a fabric (counts, bisection, oversubscription, diameter, ECMP widths).

    Parameters
    ----------
    fabric : Fabric

    Returns
    -------
    FabricReport
    """
    from topologies.routing import Router

    router = Router(fabric)
    kinds = fabric.link_kind[0::2]
    by_kind = {str(k): int((kinds == k).sum()) for k in np.unique(kinds)}
    widths = {k: router.ecmp_width(a, b) for k, (a, b) in sample_pairs(fabric).items()}
    return FabricReport(
        name=fabric.name,
        gpus=len(fabric.gpus),
        servers=len(fabric.servers),
        nics=len(fabric.nics),
        switches={t: len(v) for t, v in fabric.switches.items()},
        links=fabric.num_links // 2,
        links_by_kind=by_kind,
        pods=fabric.wiring.pods,
        bisection_bps=bisection_bps(fabric),
        oversubscription=oversubscription(fabric),
        diameter_hops=diameter_hops(fabric),
        ecmp_width=widths,
        capacity_bps_by_kind=tier_capacity_bps(fabric),
    )


MAX_DRAW_NODES = 600


def draw(fabric: Fabric, path: str) -> str:
    """Render a small fabric to ``path`` (PNG/SVG/PDF) with matplotlib's Agg backend."""
    n = len(fabric.nodes)
    if n > MAX_DRAW_NODES:
        raise ValueError(f"fabric {fabric.name} has {n} nodes; --draw renders at most "
                         f"{MAX_DRAW_NODES} (try fat-tree-k4, fat-tree-k8 or leaf-spine-64)")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    layers = ["gpu", "nvswitch", "nic", "tor", "agg", "core"]
    colors = {"gpu": "#76b900", "nvswitch": "#999999", "nic": "#1f77b4", "tor": "#ff7f0e",
              "agg": "#d62728", "core": "#9467bd"}
    pos = {}
    layers = [r for r in layers if (fabric.node_role == r).any()]
    for level, role in enumerate(layers):
        members = [x for x, r in zip(fabric.nodes, fabric.node_role, strict=True) if r == role]
        for i, node in enumerate(members):
            pos[node] = ((i + 0.5) / max(len(members), 1), level)
    g = fabric.graph.to_undirected(as_view=True)
    fig, ax = plt.subplots(figsize=(12, 6))
    nx.draw_networkx_edges(g, pos, ax=ax, width=0.4, alpha=0.5)
    for role in layers:
        nodes = [x for x in g.nodes if g.nodes[x]["role"] == role]
        nx.draw_networkx_nodes(g, pos, nodelist=nodes, node_size=30, node_color=colors[role],
                               label=role, ax=ax)
    ax.set_title(f"{fabric.name}: {len(fabric.gpus)} GPUs")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_axis_off()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
