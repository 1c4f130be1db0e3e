"""Results of the packet engine: per flow, per port, counters, ledger and time series."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class FlowStats:
    """Outcome of one flow. ``fct_ns`` is start to the last byte at the receiver (None if not done)."""

    src: str
    dst: str
    bytes: int
    start_ns: float
    fct_ns: float | None
    completion_ns: float | None  # start to the last ACK at the sender (what NCCL waits for)
    throughput_gbps: float | None
    delivered_bytes: int
    retransmits: int  # data packets sent more than once
    retransmitted_bytes: int
    timeouts: int
    failed: bool  # a QP ran out of retries (QP error): NCCL would abort
    qps: int
    paths: list[list[int]] = field(default_factory=list)


@dataclass
class PortStats:
    """One egress port (directed link), only ports that carried something are reported."""

    link_id: int
    src: str
    dst: str
    kind: str
    utilization: float
    tx_bytes: int
    max_queue_bytes: int
    ecn_marks: int
    drops: int
    pfc_pauses_received: int  # PAUSE frames that stopped this egress
    paused_ns: float
    pfc_pauses_sent: int  # PAUSE frames the head node sent upstream on this link's ingress
    headroom_max_bytes: int


@dataclass
class PacketResult:
    """Everything :func:`simulate_packets` measured. ``to_json()`` has the CLI keys."""

    flows: list[FlowStats]
    ports: list[PortStats]
    drops: int
    drops_by_reason: dict
    pfc_pauses: int
    pfc_resumes: int
    ecn_marks: int
    cnps: int
    nacks: int
    timeouts: int
    sim_time_ns: float
    data_packets: int
    ctrl_packets: int
    events: int
    wall_s: float
    ledger: dict
    deadlocks: list[dict]
    hol_victims: list[dict]
    cc: str
    pfc: bool
    time_ns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    queue_bytes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # samples x links
    flow_delivered_bytes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # samples x flows
    trace: list | None = None
    stuck: int = 0  # flows neither finished nor failed when the run ended
    paused_at_end: list = field(default_factory=list)  # build.classify_paused
    pfc_counters: dict = field(default_factory=dict)  # refreshes, expiries, watchdog storms
    warnings: list = field(default_factory=list)  # headroom.HeadroomWarning: lossless sizing

    def stuck_warning(self) -> str | None:
        """One line naming the unfinished flows and the links still paused, or None."""
        if not self.stuck:
            return None
        links = ", ".join(f"{p['src']}->{p['dst']} ({p['reason']})" for p in self.paused_at_end[:8])
        more = f" and {len(self.paused_at_end) - 8} more" if len(self.paused_at_end) > 8 else ""
        return (f"warning: {self.stuck} flow(s) unfinished when the run ended at "
                f"{self.sim_time_ns / 1000:.1f} us; paused links: {links or 'none'}{more}")

    @property
    def completed(self) -> bool:
        return all(f.fct_ns is not None and not f.failed for f in self.flows)

    def flow_rates_gbps(self) -> np.ndarray:
        """Per-flow delivery rate between samples, Gb/s (samples-1 x flows)."""
        if len(self.time_ns) < 2:
            return np.zeros((0, len(self.flows)))
        dt = np.diff(self.time_ns)[:, None]
        return np.diff(self.flow_delivered_bytes, axis=0) * 8 / np.maximum(dt, 1e-9)

    def to_json(self, ports: bool = True) -> dict:
        """The CLI document: ``flows``, ``drops``, ``pfc_pauses``, ``ecn_marks``, ``cnps``, ``sim_time_ns`` ..."""
        flows = []
        for f in self.flows:
            d = dict(f.__dict__)
            d.pop("paths")
            flows.append(d)
        doc = {
            "cc": self.cc,
            "pfc": self.pfc,
            "flows": flows,
            "drops": self.drops,
            "drops_by_reason": self.drops_by_reason,
            "pfc_pauses": self.pfc_pauses,
            "pfc_resumes": self.pfc_resumes,
            "ecn_marks": self.ecn_marks,
            "cnps": self.cnps,
            "nacks": self.nacks,
            "timeouts": self.timeouts,
            "sim_time_ns": self.sim_time_ns,
            "data_packets": self.data_packets,
            "ctrl_packets": self.ctrl_packets,
            "events": self.events,
            "wall_s": self.wall_s,
            "failed_flows": sum(f.failed for f in self.flows),
            "stuck": self.stuck,
            "paused_at_end": self.paused_at_end,
            "pfc_counters": self.pfc_counters,
            "warnings": [w.to_json() for w in self.warnings],
            "max_fct_ns": max((f.fct_ns for f in self.flows if f.fct_ns is not None), default=None),
            "ledger": self.ledger,
            "deadlocks": self.deadlocks,
            "hol_victims": self.hol_victims,
        }
        if ports:
            doc["ports"] = [dict(p.__dict__) for p in self.ports]
        return doc
