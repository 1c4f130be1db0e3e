"""Per-link load, hottest links and ECMP collision statistics of a flow-level run.

Collision statistics are about the *switch-to-switch* links (kinds ``tor-agg`` and
``agg-core``), where ECMP chooses: for every such link carrying traffic, how many QPs share it.
A QP *collides* when the busiest fabric link on its path carries another QP as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.flow.maxmin import Incidence

FABRIC_KINDS = ("tor-agg", "agg-core")


@dataclass
class LinkReport:
    """Link-level view of a run.

    Attributes
    ----------
    bytes_per_link : np.ndarray[float]
        Bytes every directed link carried.
    utilization : np.ndarray[float]
        ``8 x bytes / (capacity x makespan)`` per link.
    hottest : list[dict]
        The busiest links: ``link``, ``src``, ``dst``, ``kind``, ``bytes``, ``utilization``, ``qps``.
    ecmp : dict
        ``fabric_links_used``, ``max_qps_per_link``, ``mean_qps_per_link``,
        ``colliding_qp_fraction``, ``max_over_mean_load``.
    """

    bytes_per_link: np.ndarray
    utilization: np.ndarray
    hottest: list
    ecmp: dict

    def to_json(self) -> dict:
        return {"hottest_links": self.hottest, "ecmp": self.ecmp}


def link_report(fabric, inc: Incidence, bytes_per_commodity: np.ndarray, makespan_s: float,
                top: int = 10, qp_entries: tuple[np.ndarray, np.ndarray] | None = None
                ) -> LinkReport:
    """Build the :class:`LinkReport` of a run.

    Parameters
    ----------
    fabric : topologies.Fabric
    inc : Incidence
        Commodity/link incidence; weights count QPs of a commodity on a link.
    bytes_per_commodity : np.ndarray
        Bytes each commodity's member QP moved (a link carries ``weight x bytes``).
    makespan_s : float
        Duration the utilisation is averaged over.
    qp_entries : (qp, link) arrays, optional
        QP-level path entries for the collision statistics; by default every commodity is
        taken as one QP (right for plain flows, not for lockstep groups).
    """
    nl = fabric.num_links
    w = inc.e_weight
    per_link = np.bincount(inc.e_link, weights=w * bytes_per_commodity[inc.e_flow], minlength=nl)
    qps = np.bincount(inc.e_link, weights=inc.e_count, minlength=nl)
    cap = np.asarray(fabric.link_capacity_bps, np.float64)
    util = np.zeros(nl) if makespan_s <= 0 else per_link * 8 / (cap * makespan_s)
    order = np.argsort(-util, kind="stable")[:top]
    names = fabric.nodes
    hottest = [
        {"link": int(i), "src": names[int(fabric.link_src[i])], "dst": names[int(fabric.link_dst[i])],
         "kind": str(fabric.link_kind[i]), "bytes": float(per_link[i]),
         "utilization": float(util[i]), "qps": int(qps[i])}
        for i in order.tolist() if per_link[i] > 0
    ]
    if qp_entries is None:
        qp_entries = (inc.e_flow, inc.e_link)
    return LinkReport(per_link, util, hottest, ecmp_stats(fabric, *qp_entries, per_link))


def fabric_link_mask(fabric) -> np.ndarray:
    """True for the switch-to-switch links, where ECMP chooses."""
    return np.isin(np.asarray(fabric.link_kind).astype(str), FABRIC_KINDS)


def ecmp_stats(fabric, qp: np.ndarray, link: np.ndarray, per_link: np.ndarray) -> dict:
    """Collision statistics over the switch-to-switch links (see the module docstring).

    ``qp``, ``link``: one entry per (QP, link) of the QPs' paths.
    """
    fab = fabric_link_mask(fabric)
    on_fab = fab[link]
    qp, link = np.asarray(qp)[on_fab], np.asarray(link)[on_fab]
    qps = np.bincount(link, minlength=fabric.num_links)
    used = qps > 0
    if not used.any():
        return {"fabric_links_used": 0, "max_qps_per_link": 0, "mean_qps_per_link": 0.0,
                "colliding_qp_fraction": 0.0, "max_over_mean_load": 0.0}
    # per QP: the most shared fabric link on its path
    _, qp_idx = np.unique(qp, return_inverse=True)
    worst = np.zeros(qp_idx.max() + 1)
    np.maximum.at(worst, qp_idx, qps[link].astype(float))
    colliding = float(np.mean(worst >= 2))
    load = per_link[used]
    return {
        "fabric_links_used": int(used.sum()),
        "max_qps_per_link": int(qps[used].max()),
        "mean_qps_per_link": float(qps[used].mean()),
        "colliding_qp_fraction": colliding,
        "max_over_mean_load": float(load.max() / load.mean()),
    }
