"""Swift (Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in the
Datacenter", SIGCOMM 2020): a window in bytes driven by RTTs measured on ACKs.

On each ACK with an RTT sample (the paper's Algorithm 1, with cwnd in packets of
``mtu_bytes``):

- ``rtt < target``: additive increase, ``cwnd += ai * acked / cwnd`` (``cwnd >= 1``) or
  ``cwnd += ai * acked`` (``cwnd < 1``): about ``ai`` packets per RTT;
- otherwise, at most once per RTT: ``cwnd *= max(1 - beta (rtt - target)/rtt, 1 - max_mdf)``.

``target = base_rtt + base_target + hops * hop_scaling + fs(cwnd)`` where ``fs`` is the flow
scaling of :func:`netsim.cc.params.flow_scaling_ps` (more queueing allowed for small windows, as
in Swift). On a NACK (the responder saw a gap: Swift's fast-recovery event, Algorithm 1
"on fast recovery") ``cwnd *= 1 - max_mdf`` once per RTT and the retransmit counter resets.
On a retransmit timeout, ``cwnd *= 1 - max_mdf`` (once per RTT), and after
``retx_reset_threshold`` consecutive timeouts ``cwnd`` drops to its floor. The window is
clamped to ``[min_cwnd_bytes, max_cwnd_pkts * mtu]``; below one packet the QP is paced at
``cwnd / rtt`` (``rate_bps``), otherwise at line rate with ``cwnd_bytes`` limiting the bytes
in flight.
"""

from __future__ import annotations

import math

from netsim.cc.base import Clock, register
from netsim.cc.params import SwiftParams
from topologies.units import PS_PER_S, PS_PER_US


@register("swift")
class Swift:
    """Swift sender of one QP.

    Parameters
    ----------
    line_rate_bps : int
        NIC line rate (pacing ceiling).
    base_rtt_ps : int
        Unloaded RTT of the QP's path; the initial window is one line-rate BDP of it.
    clock : Clock
        The engine's clock.
    params : SwiftParams, optional
    """

    name = "swift"

    @classmethod
    def build(cls, line_rate_bps: int, base_rtt_ps: int, clock: Clock, params) -> Swift:
        """The registry's constructor (:func:`netsim.cc.base.make_cc`)."""
        return cls(line_rate_bps, base_rtt_ps, clock, params)

    def __init__(self, line_rate_bps: int, base_rtt_ps: int, clock: Clock,
                 params: SwiftParams | None = None):
        p = params or SwiftParams()
        self.params, self.clock = p, clock
        self.line_rate_bps = float(line_rate_bps)
        self.base_rtt_ps = int(base_rtt_ps)
        self._mtu = float(p.mtu_bytes)
        self.min_cwnd_bytes = float(p.min_cwnd_bytes)
        self.max_cwnd_bytes = float(p.max_cwnd_pkts * p.mtu_bytes)
        bdp = self.line_rate_bps * self.base_rtt_ps / 8 / PS_PER_S
        self.cwnd_bytes = min(max(bdp, self._mtu), self.max_cwnd_bytes)
        self.rate_bps = self.line_rate_bps
        self.rtt_ps = self.base_rtt_ps  # latest RTT sample
        self._fixed_target_ps = self.base_rtt_ps + (p.base_target_us
                                                    + p.hops * p.hop_scaling_us) * PS_PER_US
        # flow-scaling constants of flow_scaling_ps, precomputed (on_ack is per ACK)
        fs_a = p.fs_range_us / (1.0 / math.sqrt(p.fs_min_cwnd_pkts)
                                - 1.0 / math.sqrt(p.fs_max_cwnd_pkts))
        self._fs = (fs_a * PS_PER_US, -fs_a / math.sqrt(p.fs_max_cwnd_pkts) * PS_PER_US,
                    p.fs_range_us * PS_PER_US)
        self._t_last_decrease: int | None = None
        self._retx = 0
        self.decreases = self.timeouts = self.nacks = 0

    def target_delay_ps(self) -> float:
        """The delay target for the current window (ps); see :func:`flow_scaling_ps`."""
        a, b, top = self._fs
        fs = a / math.sqrt(max(self.cwnd_bytes / self._mtu, 1e-9)) + b
        return self._fixed_target_ps + (top if fs > top else (fs if fs > 0.0 else 0.0))

    def on_send(self, nbytes: int) -> None:
        """Swift needs nothing per sent packet."""

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        """AI below the target delay, bounded MD (once per RTT) above it."""
        self._retx = 0
        if rtt_ps is None or rtt_ps <= 0:
            return
        self.rtt_ps = rtt_ps
        p = self.params
        cw = self.cwnd_bytes / self._mtu
        target = self.target_delay_ps()
        if rtt_ps < target:
            n = acked_bytes / self._mtu
            cw += p.ai_pkts * n / cw if cw >= 1.0 else p.ai_pkts * n
        elif self._can_decrease():
            cw *= max(1.0 - p.beta * (rtt_ps - target) / rtt_ps, 1.0 - p.max_mdf)
            self._decreased()
        self._set_cwnd(cw * self._mtu)

    def on_cnp(self) -> None:
        """Swift is delay-based: CNPs are ignored."""

    def on_nack(self) -> None:
        """Fast recovery (a NACK): cut by max_mdf at most once per RTT."""
        self._retx = 0
        self.nacks += 1
        if self._can_decrease():
            self._set_cwnd(self.cwnd_bytes * (1.0 - self.params.max_mdf))
            self._decreased()

    def on_timeout(self) -> None:
        """Cut by max_mdf, or to the floor after repeated timeouts."""
        self._retx += 1
        self.timeouts += 1
        if self._retx >= self.params.retx_reset_threshold:
            self._set_cwnd(self.min_cwnd_bytes)
        elif self._can_decrease():
            self._set_cwnd(self.cwnd_bytes * (1.0 - self.params.max_mdf))
            self._decreased()

    def _can_decrease(self) -> bool:
        last = self._t_last_decrease
        return last is None or self.clock.now_ps - last >= self.rtt_ps

    def _decreased(self) -> None:
        self._t_last_decrease = self.clock.now_ps
        self.decreases += 1

    def _set_cwnd(self, cwnd_bytes: float) -> None:
        self.cwnd_bytes = min(max(cwnd_bytes, self.min_cwnd_bytes), self.max_cwnd_bytes)
        if self.cwnd_bytes < self._mtu:  # pace one packet per rtt * mtu / cwnd
            self.rate_bps = min(self.line_rate_bps, self.cwnd_bytes * 8 * PS_PER_S / self.rtt_ps)
        else:
            self.rate_bps = self.line_rate_bps
