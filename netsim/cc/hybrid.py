"""DCQCN+Swift hybrid in the spirit of MegaScale (Jiang et al., NSDI 2024, section 3.6).

MegaScale combined Swift's precise RTT measurement with DCQCN's fast ECN response but
published no formulas (nccl-roce.md 1.3); this is our design (``docs/congestion-control.md``):

- **Precise RTT drives a Swift window** (:class:`~netsim.cc.swift.Swift`'s AI/MD, bounded by
  ``max_mdf``, at most one delay decrease per RTT) toward a delay target
  ``base_rtt + base_target + hops * hop_scaling + fs(cwnd)`` whose default queueing budget
  (2 us, 100 KB at 400 G) sits *below* the ECN Kmin's queueing delay (150 KB, 3 us at 400 G):
  delay control keeps queues short, so ECN stays quiet in steady state.
- **ECN/CNP gives DCQCN's fast multiplicative cut** when a burst outruns the delay loop
  (incast): ``cwnd <- cwnd max(1 - alpha 1024/2^gd, min_dec_fac)``, i.e. ``cwnd (1 - alpha/2)``,
  with DCQCN's alpha (EWMA of CNP arrivals, gain ``1 - dce_tcp_g/1024`` per ``dce_tcp_rtt``).
- At most one decrease per RTT from either signal (and one CNP cut per
  ``rate_reduce_monitor_period``); CNPs that find the RTT's decrease taken only feed alpha.
  DCQCN cuts every 4 us while marks last, which over-cuts while a standing queue drains (the
  marks reflect the queue before the previous cut took effect): in a 16:1 incast at 400 G
  that drove DCQCN's windows to the floor; once per RTT, as Swift, it does not.
  An ACK that echoes ECN never increases the window.
- Window in bytes (bytes in flight bounded, which keeps incast queues and PFC pauses small),
  paced below one packet as in Swift.

It differs from DCQCN (window, RTT-driven increase, no 300 us timer or byte counter) and from
Swift (reacts to CNPs, tighter delay target); the tests check both differences.
"""

from __future__ import annotations

from netsim.cc.base import Clock, register
from netsim.cc.dcqcn import AlphaEstimator
from netsim.cc.params import HybridParams, us_ps
from netsim.cc.swift import Swift


@register("hybrid")
class Hybrid(Swift):
    """The hybrid sender of one QP (see the module docstring).

    Parameters
    ----------
    line_rate_bps : int
        NIC line rate.
    base_rtt_ps : int
        Unloaded RTT of the QP's path (the delay target sits above it).
    clock : Clock
        The engine's clock.
    params : HybridParams, optional
    """

    name = "hybrid"

    def __init__(self, line_rate_bps: int, base_rtt_ps: int, clock: Clock,
                 params: HybridParams | None = None):
        p = params or HybridParams()
        super().__init__(line_rate_bps, base_rtt_ps, clock, p)  # same field names as Swift
        self._alpha = AlphaEstimator(1.0 - p.dce_tcp_g / 1024, us_ps(p.dce_tcp_rtt_us),
                                     p.initial_alpha_value / 1024)
        self._cut_scale = 1024.0 / float(1 << p.rpg_gd)
        self._min_factor = p.rpg_min_dec_fac_pct / 100.0
        self._monitor_ps = us_ps(p.rate_reduce_monitor_period_us)
        self._last_cut_ps: int | None = None
        self.cnps = self.ecn_cuts = 0

    @property
    def alpha(self) -> float:
        """DCQCN's alpha, as of now."""
        return self._alpha.advance(self.clock.now_ps)

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        """Swift's AI/MD on the RTT, except that an ECN-echoing ACK never increases."""
        if ecn_echo and rtt_ps and rtt_ps < self.target_delay_ps():
            self._retx = 0
            self.rtt_ps = rtt_ps
            return  # ECN says a queue passed Kmin somewhere: hold
        super().on_ack(acked_bytes, rtt_ps, ecn_echo)

    def on_cnp(self) -> None:
        """DCQCN's alpha-scaled cut, at most once per monitor period and once per RTT."""
        now = self.clock.now_ps
        self.cnps += 1
        self._alpha.on_cnp(now)
        if self._last_cut_ps is not None and now - self._last_cut_ps < self._monitor_ps:
            return
        if not self._can_decrease():
            return  # this RTT already had its decrease: its effect is not visible yet
        alpha = self._alpha.advance(now)
        self._set_cwnd(self.cwnd_bytes * max(1.0 - self._cut_scale * alpha, self._min_factor))
        self._last_cut_ps = now
        self._decreased()  # the CNP cut is this RTT's decrease
        self.ecn_cuts += 1
