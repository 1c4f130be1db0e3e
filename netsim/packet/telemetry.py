"""Aggregated observability: sampled queues and flow progress, PFC deadlocks, HoL victims.

Time series are sampled, not traced: memory is bounded (at most ``MAX_SAMPLES`` rows; when
full, every other row is dropped and the period doubles). PFC deadlocks are not sampled: the
engine checks a paused port when it could have stalled for ``PacketConfig.pfc_deadlock_ps``
(:func:`stalled_cycle`), so their count does not depend on the sampling interval.
"""

from __future__ import annotations

import numpy as np

MAX_SAMPLES = 2048


class Sampler:
    """Periodic sampling of egress data-queue bytes and per-flow delivered bytes."""

    def __init__(self, sim, nflows: int, interval_ps: int):
        self.sim = sim
        self.interval = int(interval_ps)
        self.t: list[int] = []
        self.qb: list[list[int]] = []
        self.dlv: list[list[int]] = []
        self._switch_port = (np.asarray(sim.L_nic) < 0).astype(np.int64)
        self._rate = np.asarray(sim.L_rate, dtype=np.int64)

    def start(self, t0: int) -> None:
        self.sim.at(t0, self._tick)

    def _tick(self, t, _a, _b) -> None:
        self._record(t)
        sim = self.sim
        if sim.active_qps > 0:
            sim.at(t + self.interval, self._tick)

    def _record(self, t) -> None:
        if self.t and self.t[-1] == t:
            return
        self.t.append(t)
        sim = self.sim
        # Queued bytes plus the committed ones still to serialize on switch ports.
        busy = np.maximum(np.asarray(sim.P_busy, dtype=np.int64) - t, 0) * self._switch_port
        self.qb.append((np.asarray(sim.P_qb, dtype=np.int64) + busy * self._rate // 8 // 10**12).tolist())
        self.dlv.append(list(self.sim.flow_dlv))
        if len(self.t) >= MAX_SAMPLES:
            self.t, self.qb, self.dlv = self.t[::2], self.qb[::2], self.dlv[::2]
            self.interval *= 2

    def final(self, t) -> None:
        self._record(t)

    def arrays(self):
        return (np.asarray(self.t, dtype=np.float64) / 1000,
                np.asarray(self.qb, dtype=np.int64).reshape(len(self.t), -1),
                np.asarray(self.dlv, dtype=np.int64).reshape(len(self.t), -1))


def find_pause_cycle(sim) -> list[int] | None:
    """Links of a cycle of paused egress ports with queued data, or None.

    A paused port ``u -> v`` waits for ``v`` to drain; a directed cycle of such waits, each
    holding packets, can never drain by itself: a PFC deadlock.
    """
    waits = {}  # (u, v) -> link, the last one when parallel links wait (as DiGraph.add_edge)
    for lid in sim.paused_set:
        if sim.P_data[lid]:
            waits[sim.L_src[lid], sim.L_dst[lid]] = lid
    if len(waits) < 2:
        return None
    import networkx as nx  # only here: most runs end without two waiting ports

    g = nx.DiGraph()
    for (u, v), lid in waits.items():
        g.add_edge(u, v, link=lid)
    try:
        edges = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return None
    return [g.edges[u, v]["link"] for u, v in edges]


def stalled_cycle(sim, t: int, lk: int, window_ps: int) -> list[int] | None:
    """Links of a cycle through *lk* of stalled egress ports at *t*, or None.

    A port is stalled when it is paused, holds data, has been paused without a break for
    ``window_ps`` and no packet has left the ingress queue it feeds downstream for as long
    (``sim.I_out_ps``): nothing in the cycle moved for the whole window, so it cannot be a
    transient cycle of pauses that drain elsewhere, but a PFC deadlock. The cycle is *lk*
    followed by a shortest path of stalled ports back to its source.
    """
    since, out, cutoff = sim.P_pause_since, sim.I_out_ps, t - window_ps

    def stalled(lid: int) -> bool:
        return bool(sim.P_data[lid]) and 0 <= since[lid] <= cutoff and out[lid] <= cutoff

    if lk not in sim.paused_set or not stalled(lk):
        return None
    import networkx as nx

    g = nx.DiGraph()
    for lid in sim.paused_set:
        if stalled(lid):
            g.add_edge(sim.L_src[lid], sim.L_dst[lid], link=lid)
    u, v = sim.L_src[lk], sim.L_dst[lk]
    try:
        back = nx.shortest_path(g, v, u)
    except nx.NetworkXNoPath:
        return None
    return [lk] + [g.edges[a, b]["link"] for a, b in zip(back, back[1:], strict=False)]


def hol_victims(sim, flows, ports, cfg, fabric) -> list[dict]:
    """Flows slowed by PFC pauses on their path that do not cross a congestion root.

    A *root* is an egress port whose queue reached the ECN Kmin (or held a buffer-sized
    share) without being paused itself: the real bottleneck. A victim crosses a port that was
    paused but no root: it shares an upstream port with congested traffic, not its bottleneck.
    """
    paused = {p.link_id: p.paused_ns for p in ports if p.paused_ns > 0}
    if not paused:
        return []
    root_q = min(cfg.ecn_kmin_bytes, cfg.pfc_xoff_bytes or cfg.ecn_kmin_bytes)
    roots = {p.link_id for p in ports if p.max_queue_bytes >= root_q and p.link_id not in paused}
    out = []
    for fi, f in enumerate(flows):
        links = {lid for path in f.paths for lid in path}
        hit = links & paused.keys()
        if hit and not links & roots:
            out.append({"flow": fi, "src": f.src, "dst": f.dst,
                        "paused_links": sorted(hit),
                        "paused_ns_on_path": sum(paused[lid] for lid in hit)})
    return out
