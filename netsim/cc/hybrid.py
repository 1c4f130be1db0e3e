"""DCQCN+Swift hybrid in the spirit of MegaScale (Jiang et al., NSDI 2024, section 3.6).

MegaScale combined Swift's precise RTT measurement with DCQCN's fast ECN response but
published no formulas (nccl-roce.md 1.3); this is our design (``docs/congestion-control.md``):

- **Rate-based** like DCQCN (the NIC's rate limiter, ``cwnd_bytes`` is None).
- **ECN/CNP: fast multiplicative cut**, exactly DCQCN's: ``R <- R max(1 - alpha 1024/2^gd,
  min_dec_fac)`` at most once per ``rate_reduce_monitor_period``, with DCQCN's alpha.
- **RTT: Swift-style control toward a delay target** ``base_rtt + base_target + hops *
  hop_scaling + fs(W)``, with ``W = R * rtt`` the window the rate amounts to. Below the target,
  additive increase of ``ai_pkts`` packets per RTT in rate terms, ``R += ai * mtu * acked /
  (W * rtt)``; this replaces DCQCN's slow timer/byte-counter recovery. Above it, at most once
  per RTT, ``R *= max(1 - beta (rtt - target)/rtt, 1 - max_mdf)``.
- A CNP cut counts as the RTT's decrease (no second, delay-based cut in the same RTT), and an
  ACK that echoes ECN never increases the rate.
- The default target queueing (2 us) sits below the ECN Kmin's queueing delay, so delay control
  keeps queues short and ECN only fires on bursts (incast), which it cuts within one RTT.
"""

from __future__ import annotations

from netsim.cc.base import Clock
from netsim.cc.dcqcn import AlphaEstimator
from netsim.cc.params import HybridParams, flow_scaling_ps, mbps_bps, us_ps
from topologies.units import PS_PER_S, PS_PER_US


class Hybrid:
    """The hybrid sender of one QP (see the module docstring).

    Parameters
    ----------
    line_rate_bps : int
        NIC line rate: start rate and ceiling.
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
        self.params, self.clock = p, clock
        self.max_rate_bps = float(line_rate_bps)
        self.min_rate_bps = min(mbps_bps(p.rpg_min_rate_mbps), self.max_rate_bps)
        self.rate_bps = self.max_rate_bps
        self.cwnd_bytes = None
        self.base_rtt_ps = int(base_rtt_ps)
        self.rtt_ps = self.base_rtt_ps
        self._alpha = AlphaEstimator(1.0 - p.dce_tcp_g / 1024, us_ps(p.dce_tcp_rtt_us),
                                     p.initial_alpha_value / 1024)
        self._cut_scale = 1024.0 / float(1 << p.rpg_gd)
        self._min_factor = p.rpg_min_dec_fac_pct / 100.0
        self._monitor_ps = us_ps(p.rate_reduce_monitor_period_us)
        self._mtu = float(p.mtu_bytes)
        self._fixed_target_ps = self.base_rtt_ps + (p.base_target_us
                                                    + p.hops * p.hop_scaling_us) * PS_PER_US
        self._last_cut_ps: int | None = None
        self._cut_pending = False
        self._t_last_decrease: int | None = None
        self.cnps = self.ecn_cuts = self.delay_cuts = 0

    @property
    def alpha(self) -> float:
        """DCQCN's alpha, as of now."""
        return self._alpha.advance(self.clock.now_ps)

    def window_bytes(self, rtt_ps: int | None = None) -> float:
        """The window the current rate amounts to over ``rtt_ps`` (default: latest RTT)."""
        return self.rate_bps * (rtt_ps or self.rtt_ps) / 8 / PS_PER_S

    def target_delay_ps(self, rtt_ps: int | None = None) -> float:
        """Delay target for the current rate (ps)."""
        p = self.params
        w_pkts = self.window_bytes(rtt_ps) / self._mtu
        return self._fixed_target_ps + flow_scaling_ps(
            w_pkts, p.fs_range_us, p.fs_min_cwnd_pkts, p.fs_max_cwnd_pkts)

    def on_send(self, nbytes: int) -> None:
        """Nothing per packet: increase is clocked by ACKs, not by a byte counter."""

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        """Swift-style AI below the delay target, bounded MD above it (once per RTT)."""
        if rtt_ps is None or rtt_ps <= 0:
            return
        self.rtt_ps = rtt_ps
        p = self.params
        target = self.target_delay_ps(rtt_ps)
        if rtt_ps < target:
            if ecn_echo:
                return  # ECN says a queue passed Kmin: hold
            w = max(self.window_bytes(rtt_ps), self._mtu)
            step = p.ai_pkts * self._mtu * 8 * PS_PER_S / rtt_ps * (acked_bytes / w)
            self.rate_bps = min(self.rate_bps + step, self.max_rate_bps)
        elif self._can_decrease():
            factor = max(1.0 - p.beta * (rtt_ps - target) / rtt_ps, 1.0 - p.max_mdf)
            self.rate_bps = max(self.rate_bps * factor, self.min_rate_bps)
            self._t_last_decrease = self.clock.now_ps
            self.delay_cuts += 1

    def on_cnp(self) -> None:
        """DCQCN's fast cut, at most once per monitor period (deferred inside it)."""
        now = self.clock.now_ps
        self.cnps += 1
        self._alpha.on_cnp(now)
        if self._last_cut_ps is None or now - self._last_cut_ps >= self._monitor_ps:
            self._cut(now)
        elif not self._cut_pending:
            self._cut_pending = True
            self.clock.call_at(self._last_cut_ps + self._monitor_ps, self._deferred_cut)

    def on_timeout(self) -> None:
        """A timeout means loss: cut by max_mdf (Swift's reaction)."""
        self.rate_bps = max(self.rate_bps * (1.0 - self.params.max_mdf), self.min_rate_bps)
        self._t_last_decrease = self.clock.now_ps

    def _deferred_cut(self) -> None:
        self._cut_pending = False
        self._cut(self.clock.now_ps)

    def _cut(self, now: int) -> None:
        alpha = self._alpha.advance(now)
        factor = max(1.0 - self._cut_scale * alpha, self._min_factor)
        self.rate_bps = max(self.rate_bps * factor, self.min_rate_bps)
        self._last_cut_ps = now
        self._t_last_decrease = now  # the CNP cut is this RTT's decrease
        self.ecn_cuts += 1

    def _can_decrease(self) -> bool:
        last = self._t_last_decrease
        return last is None or self.clock.now_ps - last >= self.rtt_ps
