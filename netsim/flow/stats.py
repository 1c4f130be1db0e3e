"""Per-link load, hottest links and ECMP collision statistics of a flow-level run.

Collision statistics are about the *switch-to-switch* links (kinds ``tor-agg`` and
``agg-core``), where ECMP chooses: for every such link carrying traffic, how many QPs share it.
A QP *collides* when the busiest fabric link on its path carries another QP as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netsim.flow.maxmin import Incidence
from topologies.fabric import kind_mask

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
    return kind_mask(fabric, FABRIC_KINDS)


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


def max_load_distribution(n_flows: int, n_paths: int, experiments: int = 1) -> np.ndarray:
    """Exact distribution of the fullest ECMP path when flows hash uniformly (balls in bins).

    ``P(max <= k) = N! / M^N [x^N] (sum_{j <= k} x^j / j!)^M`` for N flows on M paths; with
    several independent experiments (ToRs), the max over them has CDF ``P(max <= k)^E``.

    Parameters
    ----------
    n_flows, n_paths : int
    experiments : int
        Independent hash experiments the maximum is taken over.

    Returns
    -------
    np.ndarray
        ``p[k]`` = probability that the fullest path carries ``k`` flows, k = 0..n_flows.
    """
    if n_flows < 0 or n_paths < 1 or experiments < 1:
        raise ValueError("max_load_distribution: need n_flows >= 0, n_paths >= 1, experiments >= 1")
    from math import lgamma

    # work in log space: N! / M^N overflows floats for a few hundred flows
    j = np.arange(n_flows + 1)
    log_fact = np.array([lgamma(x + 1) for x in j])
    cdf = np.zeros(n_flows + 1)
    for k in range(n_flows + 1):
        term = np.exp(-log_fact[: k + 1])
        acc = np.array([1.0])
        for _ in range(n_paths):
            acc = np.convolve(acc, term)[: n_flows + 1]
        coef = acc[n_flows] if len(acc) > n_flows else 0.0
        cdf[k] = 0.0 if coef == 0 else np.exp(np.log(coef) + log_fact[n_flows]
                                              - n_flows * np.log(n_paths))
    cdf = np.minimum(cdf, 1.0) ** experiments
    return np.diff(np.r_[0.0, cdf])
