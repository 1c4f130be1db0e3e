"""Packet-level scenarios of a training job's own traffic, and the metrics CC is judged on.

A small leaf-spine (``tors`` ToRs x ``hosts_per_tor`` NICs, ``spines`` spines, ECMP by a hash
of the QP's UDP source port) carries one traffic pattern of a data/pipeline-parallel job:

* ``dp_ring``: the data-parallel ring, each NIC sends to the next rank, ranks placed so that
  every hop of the ring crosses ToRs (ring all-reduce steps; ECMP collisions on uplinks);
* ``pp_send``: pipeline stage ``i`` on ToR ``t`` sends activations to stage ``i`` on ToR ``t+1``;
* ``all_to_all``: every NIC sends to every other (expert/sequence parallel exchanges);
* ``incast8`` / ``incast16``: 8 or 16 NICs send to one (a gather, or a hot receiver), while
  idle NICs on other ToRs send to the receiver's ToR neighbours (bystanders: the flows PFC
  can block head-of-line).

:func:`run_scenario` returns the figures the CC study and the CC search compare: PFC pause
frames, time paused, head-of-line victims, goodput and the p50/p99 flow completion times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS = ("dp_ring", "pp_send", "all_to_all", "incast8", "incast16")


@dataclass(frozen=True)
class JobScenario:
    """One traffic pattern on a small leaf-spine.

    Parameters
    ----------
    kind : one of :data:`KINDS`.
    nic_gbps, uplink_gbps : host and ToR-spine link rates.
    tors, hosts_per_tor, spines : fabric size (incasts need tors x hosts_per_tor > senders).
    msg_bytes : bytes per flow (all-to-all: per pair).
    qps : QPs per flow (NCCL spreads a connection over ``NCCL_IB_QPS_PER_CONNECTION``).
    """

    kind: str
    nic_gbps: float = 400.0
    uplink_gbps: float = 400.0
    tors: int = 4
    hosts_per_tor: int = 8
    spines: int = 2
    msg_bytes: int = 4_000_000
    qps: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"JobScenario.kind {self.kind!r}: use one of {', '.join(KINDS)}")
        for name in ("tors", "hosts_per_tor", "spines", "msg_bytes", "qps"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"JobScenario.{name} must be > 0")
        if self.kind.startswith("incast") and int(self.kind[6:]) >= self.hosts:
            raise ValueError(f"JobScenario {self.kind} needs more than {self.kind[6:]} hosts "
                             f"(tors x hosts_per_tor = {self.hosts})")

    @property
    def hosts(self) -> int:
        return self.tors * self.hosts_per_tor

    def fabric(self):
        from netsim.packet.testbeds import SmallFabric
        from topologies.units import gbps

        roles = {f"h{i}": "nic" for i in range(self.hosts)}
        roles |= {f"t{j}": "tor" for j in range(self.tors)} | {f"p{k}": "spine" for k in range(self.spines)}
        cables = [(f"h{i}", f"t{i // self.hosts_per_tor}", gbps(self.nic_gbps), 1000.0)
                  for i in range(self.hosts)]
        cables += [(f"t{j}", f"p{k}", gbps(self.uplink_gbps), 1000.0)
                   for j in range(self.tors) for k in range(self.spines)]
        return SmallFabric(f"leaf-spine-{self.tors}x{self.hosts_per_tor}", roles, cables)

    def pairs(self) -> list[tuple[int, int]]:
        """(src, dst) host indices of the pattern."""
        n, h, t = self.hosts, self.hosts_per_tor, self.tors
        if self.kind == "dp_ring":  # rank r on host (r % t) * h + r // t: every hop crosses ToRs
            order = [(r % t) * h + r // t for r in range(n)]
            return [(order[r], order[(r + 1) % n]) for r in range(n)]
        if self.kind == "pp_send":
            return [(j * h + i, ((j + 1) % t) * h + i) for j in range(t) for i in range(h)]
        if self.kind == "all_to_all":
            return [(a, b) for a in range(n) for b in range(n) if a != b]
        k = int(self.kind[6:])
        # senders spread over the other ToRs first (the receiver's ToR downlink is the hot port)
        others = [i for i in range(n) if i // h != 0] + [i for i in range(1, h)]
        senders = others[:k]
        return [(s, 0) for s in senders] + self._bystanders(set(senders))

    def _bystanders(self, senders: set[int]) -> list[tuple[int, int]]:
        """Flows into the incast receiver's ToR from idle NICs elsewhere: they share the spine
        links that PFC pauses when that ToR's buffer fills, without sharing the hot port (the
        head-of-line victims PFC can make)."""
        h = self.hosts_per_tor
        src = [i for i in range(h, self.hosts) if i not in senders]
        dst = [i for i in range(1, h) if i not in senders]
        return list(zip(src, dst, strict=False))

    def flows(self):
        from netsim.scenario.traffic import Flow

        size = self.msg_bytes
        if self.kind == "all_to_all":
            size = max(4096, self.msg_bytes // (self.hosts - 1))
        return [Flow(f"h{a}", f"h{b}", size, 0, self.qps) for a, b in self.pairs()]


def run_scenario(sc: JobScenario, cc: str = "dcqcn", cc_params: dict | None = None, seed: int = 1,
                 **config) -> dict:
    """Run *sc* in the packet engine; return the study's figures.

    *config* overrides :class:`netsim.packet.PacketConfig` fields (ECN thresholds, buffer ...).
    ``goodput`` is delivered bytes over the makespan, relative to the rate the pattern could
    reach with every flow at its max-min fair share (no congestion control loss), so 1.0 means
    the CC lost nothing.
    """
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter

    fab = sc.fabric()
    flows = sc.flows()
    cfg = PacketConfig(cc=cc, cc_params=dict(cc_params or {}), **config)
    res = simulate_packets(fab, flows, cfg, seed=seed, router=ShortestPathRouter(fab, seed=seed))
    fct = np.array([f.fct_ns if f.fct_ns is not None else np.nan for f in res.flows], dtype=float)
    done = np.isfinite(fct)
    makespan = float(np.nanmax(fct)) if done.any() else math.inf
    ideal = ideal_makespan_ns(sc, flows, fab, res)
    return {"scenario": sc.kind, "cc": cc, "seed": seed, "flows": len(flows),
            "completed": bool(done.all()), "makespan_us": makespan / 1e3,
            "goodput": ideal / makespan if makespan > 0 else 0.0,
            "fct_p50_us": float(np.nanpercentile(fct, 50)) / 1e3 if done.any() else math.inf,
            "fct_p99_us": float(np.nanpercentile(fct, 99)) / 1e3 if done.any() else math.inf,
            "pfc_pauses": int(res.pfc_pauses),
            "paused_us": sum(p.paused_ns for p in res.ports) / 1e3,
            "hol_victims": len(res.hol_victims), "ecn_marks": int(res.ecn_marks),
            "cnps": int(res.cnps), "drops": int(res.drops), "timeouts": int(res.timeouts),
            "wall_s": float(res.wall_s)}


def ideal_makespan_ns(sc: JobScenario, flows, fab, res) -> float:
    """Makespan with every link's load spread at its capacity: the busiest link's bytes over
    its rate, on the paths the run used (so an ECMP collision is not charged to the CC)."""
    load: dict[int, float] = {}
    for f, st in zip(flows, res.flows, strict=True):
        share = f.size_bytes / max(len(st.paths), 1)
        for path in st.paths:
            for lid in path:
                load[lid] = load.get(lid, 0.0) + share
    rates = np.asarray(fab.link_capacity_bps, dtype=float)
    return max(b * 8 / rates[lid] * 1e9 for lid, b in load.items())
