"""One congestion-control setting run on one packet-level scenario: the search's unit of work.

:class:`HotSpot` is a congestion point rebuilt packet by packet (a dumbbell collision or a NIC
incast); :func:`run_once` runs it with a search point (:func:`to_engine` maps the search's names
to ``PacketConfig`` and ``DcqcnParams``) and returns a :class:`CcOutcome`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Readings of ``rpg_byte_reset``'s unit every setting is judged under (64 B units, the engine's
#: default, and bytes, mstflint's sentence): the sources do not settle it
#: (docs/congestion-control.md), so a setting is accepted only if it is no worse than the
#: defaults under both. The advice then does not rest on the disputed semantics.
BYTE_COUNTER_READINGS = (64, 1)
#: Switch buffer of a scenario per port (assumption: a shallow shared buffer, about 1 MB per
#: port of a 64-port switch; deep-buffer switches make PFC rarer).
BUFFER_PER_PORT_BYTES = 1_000_000


@dataclass(frozen=True)
class HotSpot:
    """A packet-level congestion scenario: ``senders`` flows onto one ``link_gbps`` cable."""

    kind: str                 # "collision" or "incast"
    senders: int
    nic_gbps: float
    link_gbps: float
    flow_bytes: int
    buffer_bytes: int
    source: str               # what the flow engine found
    #: unit of the DCQCN byte counter this scenario runs with (None: the engine's default,
    #: ``DcqcnParams.rpg_byte_reset_unit_bytes``); see :data:`BYTE_COUNTER_READINGS`
    byte_unit_bytes: int | None = None
    #: flows start uniformly in [0, start_spread_ps] (drawn from the run's seed); 0: all at once
    start_spread_ps: int = 0

    def testbed(self):
        from netsim.packet.testbeds import dumbbell, star

        if self.kind == "incast":
            return star(self.senders + 1, host_gbps=self.nic_gbps)
        return dumbbell(self.senders, self.senders, host_gbps=self.nic_gbps,
                        core_gbps=self.link_gbps)

    def flows(self, seed: int = 0):
        """The scenario's flows; start offsets (if any) drawn from *seed*."""
        from netsim.scenario.traffic import Flow

        starts = [0] * self.senders
        if self.start_spread_ps > 0:
            rng = np.random.default_rng([int(seed), self.senders, 26])
            starts = [int(t) for t in rng.integers(0, self.start_spread_ps + 1, self.senders)]
        if self.kind == "incast":
            return [Flow(f"h{i}", f"h{self.senders}", self.flow_bytes, t)
                    for i, t in enumerate(starts)]
        return [Flow(f"l{i}", f"r{i}", self.flow_bytes, t) for i, t in enumerate(starts)]

    @property
    def bottleneck_gbps(self) -> float:
        return self.nic_gbps if self.kind == "incast" else min(self.link_gbps,
                                                                self.senders * self.nic_gbps)


@dataclass(frozen=True)
class CcOutcome:
    """Packet-engine metrics of one parameter setting (means over seeds)."""

    params: dict
    goodput: float            # delivered bits / makespan / bottleneck rate
    tail_fct_ns: float        # slowest flow's completion
    pause_ns: float           # sum over ports of the time their egress was PFC-paused
    pfc_pauses: float
    ecn_marks: float
    cnps: float
    failed: bool = False
    p99_fct_ns: float = 0.0   # 99th percentile of the flows' completion times


def to_engine(params: dict) -> tuple[dict, dict]:
    """Search point -> (PacketConfig overrides, DcqcnParams overrides)."""
    from topologies.units import PS_PER_US

    kmin = int(params["ecn_kmin_bytes"])
    cfg = {"ecn_kmin_bytes": kmin, "ecn_kmax_bytes": int(kmin * params["ecn_kmax_ratio"]),
           "ecn_pmax": float(params["ecn_pmax"]),
           "cnp_interval_ps": int(round(params["min_time_between_cnps_us"] * PS_PER_US))}
    cc = {"rpg_time_reset_us": float(params["rpg_time_reset_us"]),
          "rpg_byte_reset": int(params["rpg_byte_reset"]),
          "rpg_ai_rate_mbps": float(params["rpg_ai_rate_mbps"]),
          "rpg_hai_rate_mbps": float(params["rpg_hai_rate_mbps"]),
          "dce_tcp_g": int(params["dce_tcp_g"]),
          "min_time_between_cnps_us": float(params["min_time_between_cnps_us"])}
    return cfg, cc


def vendor_defaults() -> dict:
    """The search point of the vendor defaults (PacketConfig ECN, ConnectX DCQCN)."""
    from netsim.cc.params import DcqcnParams
    from netsim.packet import PacketConfig

    c, d = PacketConfig(), DcqcnParams()
    return {"ecn_kmin_bytes": c.ecn_kmin_bytes, "ecn_kmax_ratio": c.ecn_kmax_bytes / c.ecn_kmin_bytes,
            "ecn_pmax": c.ecn_pmax, "rpg_time_reset_us": d.rpg_time_reset_us,
            "rpg_byte_reset": d.rpg_byte_reset, "rpg_ai_rate_mbps": d.rpg_ai_rate_mbps,
            "rpg_hai_rate_mbps": d.rpg_hai_rate_mbps,
            "dce_tcp_g": d.dce_tcp_g,
            "min_time_between_cnps_us": d.min_time_between_cnps_us}


def evaluate_cc(hot: HotSpot, params: dict, seeds: tuple[int, ...] = (0, 1),
                cc: str = "dcqcn") -> CcOutcome:
    """Run the hot spot in the packet engine with ``params``: means over *seeds*."""
    return mean_outcome([run_once(hot, params, s, cc) for s in seeds])


def run_once(hot: HotSpot, params: dict, seed: int, cc: str = "dcqcn") -> CcOutcome:
    """One packet-engine run of the hot spot with ``params`` (top level: picklable)."""
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter

    cfg_kw, cc_kw = to_engine(params)
    if hot.byte_unit_bytes is not None:
        cc_kw["rpg_byte_reset_unit_bytes"] = int(hot.byte_unit_bytes)
    fab, flows = hot.testbed(), hot.flows(seed)
    cfg = PacketConfig(cc=cc, cc_params=cc_kw, buffer_bytes=hot.buffer_bytes, **cfg_kw)
    r = simulate_packets(fab, flows, cfg, seed=seed, router=ShortestPathRouter(fab, seed=seed))
    fct = [f.fct_ns for f in r.flows]
    failed = any(f.failed or f.fct_ns is None for f in r.flows)
    done = [x for x in fct if x is not None]
    # makespan from the first start to the last finish (a flow's FCT runs from its own start)
    ends = [fl.start_ps / 1e3 + x for fl, x in zip(flows, fct, strict=True) if x is not None]
    makespan = max(ends) if ends else math.inf
    p99 = float(np.percentile(done, 99)) if len(done) == len(fct) else math.inf
    total_bits = 8.0 * sum(f.size_bytes for f in flows)
    return CcOutcome(dict(params), total_bits / makespan / hot.bottleneck_gbps, makespan,
                     float(sum(p.paused_ns for p in r.ports)), float(r.pfc_pauses),
                     float(r.ecn_marks), float(r.cnps), failed, p99)


def mean_outcome(runs: list[CcOutcome]) -> CcOutcome:
    """Means over runs of one setting (failed if any run failed)."""
    keys = ("goodput", "tail_fct_ns", "pause_ns", "pfc_pauses", "ecn_marks", "cnps")
    m = {k: float(np.mean([getattr(o, k) for o in runs])) for k in keys}
    return CcOutcome(dict(runs[0].params), **m, failed=any(o.failed for o in runs),
                     p99_fct_ns=float(np.mean([o.p99_fct_ns for o in runs])))
