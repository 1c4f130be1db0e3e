"""Configuration of the packet engine: one typed dataclass, every default with its source.

Sources (see ``../shared/reference/nccl-roce.md`` and ``peer-simulators.md``):

* MTU 4096 B: the RoCE path MTU NCCL uses on ConnectX (IB MTU 4096 = payload per packet).
* RoCEv2 per-packet overhead 62 B = Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4;
  plus 20 B of preamble and inter-frame gap on the wire (IEEE 802.3).
* ECN on the RoCE class: Kmin 150 KB / Kmax 1500 KB (NVIDIA Cumulus/Onyx ``roce lossless``
  defaults, nccl-roce.md 5.4); Pmax 0.2 (HPCC ns-3 ``PMAX_MAP``, peer-simulators.md 1.2).
* Switch buffer 32 MB and the dynamic PFC threshold alpha = 1/8 (HPCC ns-3 ``BUFFER_SIZE`` and
  ``switch-mmu.cc`` shift 3, peer-simulators.md 1.1/1.2).
* PFC headroom: SONiC's formula, ``2 x MTU + 2 x cable bytes + pause quanta x 512 / 8``
  with 905 quanta at 400G (IEEE 802.3 31B.3.7 via SONiC, nccl-roce.md 5.4).
* Retransmission: timer 4.096 us x 2^timeout, NCCL_IB_TIMEOUT default 20, NCCL_IB_RETRY_CNT 7
  (nccl-roce.md 2). Adaptive retransmission: ``adap_retrans`` ladder from a 4 us base
  (nccl-roce.md 5.3).
* CNP pacing: ``min_time_between_cnps`` 4 us (ConnectX mlxconfig dumps; see
  ``docs/congestion-control.md`` for the sources that disagree).
* ECN marking at dequeue by default (HPCC ns-3 ``SwitchNode::SwitchNotifyDequeue``), at
  enqueue on request (``ecn_mark_at``); ASICs differ, see ``docs/congestion-control.md``.
* PFC timing (IEEE 802.1Qbb / 802.3 Annex 31B): a PAUSE leaves after the frame in flight on
  the reverse port, crosses the cable and takes effect after the peer's response delay
  (``pfc_response_quanta``, default the 802.3 quanta per speed that SONiC's headroom formula
  uses); it lasts ``pfc_pause_quanta`` x 512 bit times unless refreshed (the switch resends
  XOFF every half pause time while the ingress stays above XON) or resumed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from topologies.units import KB, MB, PS_PER_US

#: IB local ACK timeout unit: 4.096 us, in ps (IB spec; NCCL env.rst, nccl-roce.md 2).
IB_TIMEOUT_UNIT_PS = 4_096_000

#: IEEE 802.3 pause quanta of the PFC peer response, per port speed in Gb/s (SONiC doc).
PAUSE_QUANTA = {10: 67, 25: 80, 40: 118, 50: 147, 100: 394, 200: 453, 400: 905}

CC_NAMES = ("none", "dcqcn", "swift", "hybrid")

#: ConnectX ``min_time_between_cnps`` default (mlxconfig dump, nccl-roce.md 5.1), when
#: ``netsim.cc`` is not installed to say otherwise.
DEFAULT_CNP_INTERVAL_PS = 4 * PS_PER_US

#: Link-down detection before a switch drops the member from its ECMP groups: 10 ms. Switch
#: guides leave the link debounce timer off by default (Dell PowerSwitch N4000 "link debounce
#: time": "Physical interfaces do not have debounce enabled by default", timer resolution about
#: 10 ms; Cisco Nexus 5000 "link debounce": off unless configured, 0-5000 ms), so detection is
#: the loss-of-signal notification, taken here as one 10 ms timer tick.
LINK_DETECT_PS = 10 * 10**9

#: How long a cycle of paused ports must stall (paused without a break, no packet out of the
#: ingress queues it feeds) to count as a PFC deadlock: 100 us. Longer than one full PAUSE
#: (65535 quanta) at 400G, 84 us, so a cycle held by PAUSE frames that nobody refreshes expires
#: before it counts at that speed; longer by an order of magnitude than the transient cycles
#: incasts make (under 7 us, issue 26); short enough to count a deadlock that forms in the
#: first 0.9 ms of a 1 ms run. A switch's own detector (SONiC pfcwd) polls every 200 ms by
#: default, a time scale no packet-level run reaches.
PFC_DEADLOCK_PS = 100 * PS_PER_US

#: Where switches mark ECN: at dequeue (HPCC ns-3) or at enqueue (RED at admission).
ECN_MARK_POINTS = ("dequeue", "enqueue")


@dataclass(frozen=True)
class PacketConfig:
    """Every knob of the packet engine. Sizes in bytes, times in ps, rates in bit/s.

    Parameters
    ----------
    mtu_bytes : payload bytes per data packet (RoCE path MTU).
    header_bytes, wire_gap_bytes : per-packet headers and preamble + IFG on the wire.
    ctrl_bytes : ACK / NACK / CNP frame size (minimum Ethernet frame).
    ack_every_packets : ACK coalescing: one ACK per this many in-order packets (and at message end).
    commit_ps : a NIC port commits paced data packets up to this far ahead per service
        (switch ports always serve one packet per service). A speed knob only: no result
        depends on it (``tests/netsim/packet/test_fast_paths.py`` compares digests of every
        reported figure at 0, 0.25, 0.5 and 1 us). The window never passes anything that could
        change what the NIC sends: a PAUSE taking effect (its PFC response delay), the next
        packet arriving at the NIC (its ACK/NAK leaves at the next packet boundary), a CNP or
        priority ACK on its way back, a congestion-control or retransmit timer of one of its
        QPs, a flow start, a link or route change; the congestion control sees each committed
        packet at its own departure time.
    ack_class : ``qp`` (default; ConnectX sends ACK/NAK in the QP's traffic class: they queue
        with data at every hop, share its buffer and are stopped by its PFC pauses, while CNPs
        travel in their own strict-priority class, cnp_dscp 48 / priority 6) or ``priority``
        (ACK/NAK with the CNPs: strict priority, never paused; the earlier model).
    cnp_class : ``priority`` (default; ConnectX's CNPs travel in their own strict-priority class,
        cnp_dscp 48 / priority 6) or ``qp`` (CNPs queue hop by hop with the data and the ACKs of
        their QP's class, as in HPCC ns-3, whose CNP is a flag on the ACK and whose switches put
        ACKs in the data queue: ``switch-node.cc`` gives ACKs priority 0 only with the switch
        attribute ``AckHighPrio``, which ``third.cc`` never sets; needs ``ack_class`` qp).
    fast_path : an arriving packet that finds its egress idle, its queue empty and no PFC
        threshold in reach goes straight to the wire (a speed shortcut; identical results,
        tested by digest).
    ctrl_per_hop : queue ACK/NACK/CNP at every hop (exact); default: they travel the reverse
        path in one event of propagation + serialization (strict priority, never paused),
        lost if a link of the path is down.
    cc : congestion control per QP: none, dcqcn, swift, hybrid (``netsim.cc``).
    cc_params : passed to ``netsim.cc.make_cc`` unchanged.
    cnp : whether receivers send CNPs on ECN marks; None = on for dcqcn and hybrid.
    cnp_interval_ps : notification point: at most one CNP per QP per interval; None = the
        congestion control's ``min_time_between_cnps_us`` (``cc_params`` or its default, 2 us),
        so the NP and the algorithm's parameter set agree; 0 = a CNP per marked packet.
    cc_hops : pass each QP's switch-hop count as ``params["hops"]`` to swift / hybrid (Swift's
        per-hop target term, part of Swift's target; on by default, off gives the target
        without it: base RTT of the QP + base target + flow scaling).
    pfc : PFC on the RoCE class (lossless) or off (lossy: overflow drops).
    buffer_bytes : shared buffer per switch.
    pfc_alpha : dynamic threshold: an ingress queue may hold alpha x (free shared buffer).
    pfc_xoff_bytes : static XOFF threshold per ingress queue instead of the dynamic one.
    pfc_xon_offset_bytes : resume when the ingress queue is this far below the threshold.
    headroom_bytes : per ingress queue; None = the SONiC formula from link rate and delay.
    ecn : RED-style marking on the RoCE egress queue.
    ecn_kmin_bytes, ecn_kmax_bytes, ecn_pmax : marking ramp.
    ecn_mark_at : ``dequeue`` (default; HPCC ns-3 marks when the packet leaves, with the queue
        behind it) or ``enqueue`` (marks on admission with the queue ahead of it).
    pfc_response_quanta : peer response delay in pause quanta (512 bit times at the paused
        port's speed); None = the IEEE 802.3 Annex 31B value per speed (400G: 905).
    pfc_pause_quanta : pause time a PAUSE frame carries (0xFFFF = 65535 quanta, the usual
        switch setting); the pause expires after it unless refreshed or resumed.
    pfc_refresh : the switch resends XOFF every half pause time while its ingress stays paused.
    pfc_watchdog_ps : PFC watchdog (storm detection): a port paused continuously this long with
        data queued ignores PAUSE for the same time (SONiC pfcwd, action forward); None = off.
    pfc_deadlock_ps : a PFC deadlock is counted when a cycle of paused ports, each holding
        data, has been paused without a break and let no packet out of the ingress queues it
        feeds for this long, once per such episode (``telemetry.stalled_cycle``); None = no
        detection. Default ``PFC_DEADLOCK_PS`` (100 us, reason there).
    link_detect_ps : a switch removes a down link from its ECMP groups this long after it went
        down and restores it this long after it came up (link-down detection); None = never.
    ib_timeout : the verbs ``timeout`` (NCCL_IB_TIMEOUT): retransmit timer 4.096 us x 2^n.
    retry_cnt : retries after the first timeout before the QP errors (NCCL_IB_RETRY_CNT, <= 7).
    adaptive_retrans : adap_retrans ladder (see ``docs/packet-engine.md``).
    adaptive_base_ps, adaptive_tries_per_step : first adaptive timeout and tries per doubling.
    max_time_ps : hard stop of the simulated time (flows still running are reported unfinished).
    sample_interval_ps : period of the queue / rate time series; None = automatic.
    trace : keep a per-packet trace (big: only on request).
    """

    mtu_bytes: int = 4096
    header_bytes: int = 62
    wire_gap_bytes: int = 20
    ctrl_bytes: int = 64
    ack_every_packets: int = 4
    commit_ps: int = 500_000
    ctrl_per_hop: bool = False
    cc: str = "none"
    cc_params: dict = field(default_factory=dict)
    cnp: bool | None = None
    cnp_interval_ps: int | None = None
    cc_hops: bool = True
    pfc: bool = True
    buffer_bytes: int = 32 * MB
    pfc_alpha: float = 1.0 / 8.0
    pfc_xoff_bytes: int | None = None
    pfc_xon_offset_bytes: int = 2 * 4096
    headroom_bytes: int | None = None
    ecn: bool = True
    ecn_kmin_bytes: int = 150 * KB
    ecn_kmax_bytes: int = 1500 * KB
    ecn_pmax: float = 0.2
    ecn_mark_at: str = "dequeue"
    fast_path: bool = True
    ack_class: str = "qp"
    cnp_class: str = "priority"
    pfc_response_quanta: int | None = None
    pfc_pause_quanta: int = 65535
    pfc_refresh: bool = True
    pfc_watchdog_ps: int | None = None
    pfc_deadlock_ps: int | None = PFC_DEADLOCK_PS
    link_detect_ps: int | None = LINK_DETECT_PS
    ib_timeout: int = 20
    retry_cnt: int = 7
    adaptive_retrans: bool = False
    adaptive_base_ps: int = 4 * PS_PER_US
    adaptive_tries_per_step: int = 2
    max_time_ps: int = 10**13  # 10 s
    sample_interval_ps: int | None = None
    trace: bool = False

    def __post_init__(self) -> None:
        _positive = ("mtu_bytes", "ctrl_bytes", "ack_every_packets", "buffer_bytes",
                     "max_time_ps", "adaptive_base_ps",
                     "adaptive_tries_per_step")
        for name in _positive:
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"PacketConfig.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("header_bytes", "wire_gap_bytes", "pfc_xon_offset_bytes", "commit_ps"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"PacketConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.cc not in CC_NAMES:
            raise ValueError(f"PacketConfig.cc must be one of {', '.join(CC_NAMES)}, got {self.cc!r}")
        if not 0 <= self.retry_cnt <= 7:
            raise ValueError(f"PacketConfig.retry_cnt must be in 0..7 (IB 3-bit field), got {self.retry_cnt}")
        if not 0 <= self.ib_timeout <= 31:
            raise ValueError(f"PacketConfig.ib_timeout must be in 0..31 (0 = infinite), got {self.ib_timeout}")
        if not 0.0 < self.pfc_alpha:
            raise ValueError(f"PacketConfig.pfc_alpha must be > 0, got {self.pfc_alpha}")
        if not 0.0 <= self.ecn_pmax <= 1.0:
            raise ValueError(f"PacketConfig.ecn_pmax must be in [0, 1], got {self.ecn_pmax}")
        if self.ecn_kmax_bytes < self.ecn_kmin_bytes:
            raise ValueError("PacketConfig.ecn_kmax_bytes must be >= ecn_kmin_bytes "
                             f"({self.ecn_kmax_bytes} < {self.ecn_kmin_bytes})")
        if self.ack_class not in ("qp", "priority"):
            raise ValueError(f"PacketConfig.ack_class must be qp or priority, got {self.ack_class!r}")
        if self.cnp_class not in ("priority", "qp") or (self.cnp_class == "qp"
                                                       and self.ack_class != "qp"):
            raise ValueError("PacketConfig.cnp_class must be priority, or qp with ack_class qp, "
                             f"got {self.cnp_class!r} (ack_class {self.ack_class!r})")
        if self.ecn_mark_at not in ECN_MARK_POINTS:
            raise ValueError(f"PacketConfig.ecn_mark_at must be one of {', '.join(ECN_MARK_POINTS)}, "
                             f"got {self.ecn_mark_at!r}")
        if self.pfc_response_quanta is not None and self.pfc_response_quanta < 0:
            raise ValueError("PacketConfig.pfc_response_quanta must be >= 0 quanta or None (IEEE "
                             f"table), got {self.pfc_response_quanta!r}")
        if not 1 <= self.pfc_pause_quanta <= 65535:
            raise ValueError("PacketConfig.pfc_pause_quanta must be in 1..65535 (16-bit field), "
                             f"got {self.pfc_pause_quanta!r}")
        for name in ("pfc_watchdog_ps", "link_detect_ps"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"PacketConfig.{name} must be >= 0 ps or None (off), got {v!r}")
        if self.pfc_deadlock_ps is not None and self.pfc_deadlock_ps <= 0:
            raise ValueError("PacketConfig.pfc_deadlock_ps must be > 0 ps or None (off), got "
                             f"{self.pfc_deadlock_ps!r}")
        if self.cnp_interval_ps is not None and self.cnp_interval_ps < 0:
            raise ValueError("PacketConfig.cnp_interval_ps must be >= 0 ps or None (the CC's "
                             f"min_time_between_cnps_us), got {self.cnp_interval_ps!r}")
        if self.sample_interval_ps is not None and self.sample_interval_ps <= 0:
            raise ValueError("PacketConfig.sample_interval_ps must be > 0 or None (automatic)")

    def replace(self, **changes) -> PacketConfig:
        """Return a copy with *changes* applied (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def wire_bytes(self) -> int:
        """Bytes a full data packet occupies on the wire."""
        return self.mtu_bytes + self.header_bytes + self.wire_gap_bytes

    @property
    def rto_ps(self) -> int | None:
        """Retransmit timeout 4.096 us x 2^ib_timeout, or None for 0 (infinite, IB spec)."""
        if self.ib_timeout == 0:
            return None
        return IB_TIMEOUT_UNIT_PS << self.ib_timeout

    @property
    def cnp_enabled(self) -> bool:
        """CNPs on unless set: on for the ECN-driven algorithms (DCQCN, hybrid)."""
        if self.cnp is not None:
            return bool(self.cnp)
        return self.cc in ("dcqcn", "hybrid")

    def cnp_interval_for_cc(self) -> int:
        """The notification point's CNP spacing in ps (explicit, else the CC's parameter)."""
        if self.cnp_interval_ps is not None:
            return int(self.cnp_interval_ps)
        us = self.cc_params.get("min_time_between_cnps_us")
        if us is None:
            try:
                from netsim.cc.base import CnpGenerator
            except ImportError:
                return DEFAULT_CNP_INTERVAL_PS
            return CnpGenerator.for_cc(self.cc, self.cc_params).min_interval_ps
        return int(round(float(us) * PS_PER_US))


def pause_quanta_for(rate_bps: int) -> float:
    """IEEE 802.3 Annex 31B peer-response quanta for a port speed (SONiC's table; linear
    in rate between listed speeds)."""
    gbps = rate_bps / 1e9
    return PAUSE_QUANTA.get(int(round(gbps)), 905 * gbps / 400)


def quanta_ps(quanta: float, rate_bps: int) -> int:
    """Pause quanta (512 bit times each) at *rate_bps*, in ps."""
    return int(quanta * 512 * 10**12 // rate_bps)


def headroom_bytes_for(rate_bps: int, latency_ps: int, mtu_bytes: int,
                       quanta: float | None = None) -> int:
    """PFC headroom per ingress queue from SONiC's formula (nccl-roce.md 5.4).

    ``2 x MTU + 2 x bytes on the cable + peer response``, with the peer response
    ``quanta x 512 / 8`` bytes (*quanta* default: the IEEE value for the port speed, linear in
    rate between listed speeds).
    """
    quanta = pause_quanta_for(rate_bps) if quanta is None else quanta
    cable = rate_bps * latency_ps // (8 * 10**12)
    return int(2 * mtu_bytes + 2 * cable + quanta * 512 // 8)
