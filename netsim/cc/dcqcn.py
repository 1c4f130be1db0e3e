"""DCQCN reaction point (Zhu et al., SIGCOMM 2015) with NVIDIA ConnectX firmware semantics.

State per QP: current rate ``R_C`` (``rate_bps``), target rate ``R_T`` (``target_bps``) and
the congestion estimate ``alpha``. Sources of each rule are in ``docs/congestion-control.md``
(mstflint's mlxconfig parameter descriptions, the Mellanox DCQCN parameter page, HPCC's ns-3
``rdma-hw.cc``).

- **alpha** is updated every ``dce_tcp_rtt`` (1 us) once the first CNP has arrived:
  ``alpha <- (1-g) alpha + g`` if a CNP arrived since the previous update, else
  ``alpha <- (1-g) alpha``; ``g`` from ``dce_tcp_g`` and ``dce_tcp_g_reading``
  (default ``g = 1 - dce_tcp_g/1024``). The first CNP sets ``alpha =
  initial_alpha_value/1024``. Updates are computed lazily (closed form ``alpha (1-g)^k`` over
  ``k`` updates without CNP), so alpha costs no events.
- **Cut**, checked on a grid of ``rate_reduce_monitor_period`` anchored at the first CNP
  (mstflint: "the flow rate is reduced at the beginning of the next
  rate_reduce_monitor_period interval ... only if a CNP is received during the relevant time
  interval"; HPCC ns-3 ``CheckRateDecreaseMlx``): if a CNP arrived in the interval,
  ``R_T <- R_C`` when ``clamp_tgt_rate`` or (``clamp_tgt_rate_after_time_inc`` and an
  increase event happened since the previous cut: any, or a timer one with
  ``clamp_ati_reading = timer_only``), then ``R_C <- R_C max(1 - alpha 1024/2^rpg_gd,
  rpg_min_dec_fac)``, i.e. ``R_C (1 - alpha/2)`` for the default ``rpg_gd = 11``; never below
  ``rpg_min_rate``. The cut resets both increase counters and restarts the timer. The grid
  stops when a check finds no CNP and resumes on the next CNP at the next grid point.
- **Increase events** come from the timer (every ``rpg_time_reset`` us) and the byte counter
  (every ``rpg_byte_reset x rpg_byte_reset_unit_bytes`` bytes sent, ``DcqcnParams.byte_reset_bytes``:
  64 B units by default, 2 MB; mstflint's "Given in Bytes" is ``rpg_byte_reset_unit_bytes=1``,
  see docs/congestion-control.md for why the default is 64). With ``T`` and ``BC`` the events
  counted since the cut (including this one) and ``F = rpg_threshold``: fast recovery while
  ``max(T, BC) <= F`` (``R_C <- (R_T + R_C)/2``); hyper increase once ``min(T, BC) > F``
  (``R_T += HAI`` then halve the gap); additive increase otherwise (``R_T += AI`` then halve
  the gap). With the byte counter off the timer stage alone decides as in HPCC ns-3: fast
  while ``T <= F``, additive at ``T = F + 1``, hyper after. ``R_T`` never exceeds the line
  rate.
- Timers stop once the QP is back at line rate, so an uncongested QP schedules nothing.
"""

from __future__ import annotations

from functools import partial

from netsim.cc.base import Clock, register
from netsim.cc.params import DcqcnParams, mbps_bps, us_ps

# The rate is snapped to the line rate once within this fraction of it (the halving steps
# approach it only asymptotically); 1e-6 of 400 G is 0.4 Mb/s, below one AI step.
_SNAP_FRACTION = 1e-6


class AlphaEstimator:
    """DCQCN's alpha: an EWMA of "a CNP arrived", updated on a fixed period, evaluated lazily.

    Parameters
    ----------
    g : float
        Gain per update (the paper's g).
    period_ps : int
        Update period (``dce_tcp_rtt``).
    initial : float
        Value set by the first CNP (``initial_alpha_value / 1024``).
    """

    __slots__ = ("g", "period_ps", "initial", "value_", "_next_ps", "_flag")

    def __init__(self, g: float, period_ps: int, initial: float):
        self.g, self.period_ps, self.initial = g, period_ps, initial
        self.value_ = initial
        self._next_ps: int | None = None  # time of the next update; None before the first CNP
        self._flag = False

    def advance(self, now_ps: int) -> float:
        """Apply every update due at or before ``now_ps``; return alpha."""
        nxt = self._next_ps
        if nxt is None or now_ps < nxt:
            return self.value_
        n = (now_ps - nxt) // self.period_ps + 1
        keep = 1.0 - self.g
        value = keep * self.value_ + (self.g if self._flag else 0.0)
        if n > 1:
            value *= keep ** (n - 1)  # closed form of n-1 updates without CNP
        self.value_, self._flag = value, False
        self._next_ps = nxt + n * self.period_ps
        return value

    def on_cnp(self, now_ps: int) -> bool:
        """Record a CNP at ``now_ps``; return True if it was the first one."""
        if self._next_ps is None:
            self.value_, self._flag = self.initial, False
            self._next_ps = now_ps + self.period_ps
            return True
        self.advance(now_ps)
        self._flag = True
        return False


@register("dcqcn")
class Dcqcn:
    """DCQCN reaction point of one QP (see the module docstring for the equations).

    Parameters
    ----------
    line_rate_bps : int
        NIC line rate; the start rate and the ceiling (unless ``rpg_max_rate_mbps`` is lower).
    clock : Clock
        The engine's clock.
    params : DcqcnParams, optional
        Defaults to the ConnectX firmware defaults.
    """

    name = "dcqcn"

    @classmethod
    def build(cls, line_rate_bps: int, base_rtt_ps: int, clock: Clock, params) -> Dcqcn:
        """The registry's constructor (:func:`netsim.cc.base.make_cc`); DCQCN has no RTT."""
        return cls(line_rate_bps, clock, params)

    def __init__(self, line_rate_bps: int, clock: Clock, params: DcqcnParams | None = None):
        p = params or DcqcnParams()
        self.params, self.clock = p, clock
        cap = float(line_rate_bps)
        self.max_rate_bps = min(cap, mbps_bps(p.rpg_max_rate_mbps)) if p.rpg_max_rate_mbps else cap
        self.min_rate_bps = min(mbps_bps(p.rpg_min_rate_mbps), self.max_rate_bps)
        self.rate_bps = self.max_rate_bps  # RDMA QPs start at line rate
        self.target_bps = self.max_rate_bps
        self.cwnd_bytes = None
        self._alpha = AlphaEstimator(p.g, us_ps(p.dce_tcp_rtt_us), p.initial_alpha_value / 1024)
        self._cut_scale = p.cut_scale
        self._min_factor = p.rpg_min_dec_fac_pct / 100.0
        self._ai_bps, self._hai_bps = mbps_bps(p.rpg_ai_rate_mbps), mbps_bps(p.rpg_hai_rate_mbps)
        self._monitor_ps, self._timer_ps = us_ps(p.rate_reduce_monitor_period_us), us_ps(
            p.rpg_time_reset_us)
        self._byte_reset = p.byte_reset_bytes
        self._any_clamp = p.clamp_ati_reading == "any_increase"
        self._last_cut_ps: int | None = None
        self._grid0_ps = 0  # the first CNP: the rate-decrease checks run on its grid
        self._check_pending = False
        self._cnp_in_period = False
        self._timer_gen = 0  # bumping it cancels the outstanding timer callback
        self._t_stage = self._bc_stage = 0
        self._bytes = 0
        self._recovering = False  # increase machinery active (rate or target below the cap)
        self.cnps = self.cuts = self.increase_events = 0
        self.last_phase = ""  # phase of the latest increase event: fast, additive or hyper

    # -- observers ---------------------------------------------------------------------------
    @property
    def alpha(self) -> float:
        """Current alpha (updates due by now applied)."""
        return self._alpha.advance(self.clock.now_ps)

    @property
    def stages(self) -> tuple[int, int]:
        """Increase events since the last cut: (timer ``T``, byte counter ``BC``)."""
        return self._t_stage, self._bc_stage

    # -- interface ---------------------------------------------------------------------------
    def on_send(self, nbytes: int) -> None:
        """Byte counter: one increase event per ``rpg_byte_reset`` bytes while recovering."""
        if not self._recovering or not self._byte_reset:
            return
        self._bytes += nbytes
        while self._bytes >= self._byte_reset and self._recovering:
            self._bytes -= self._byte_reset
            self._bc_stage += 1
            self._increase()

    def on_ack(self, acked_bytes: int, rtt_ps: int | None, ecn_echo: bool) -> None:
        """DCQCN reacts to CNPs only; ACKs carry no signal for it."""

    def on_cnp(self) -> None:
        """Record the CNP for alpha and for the next rate-decrease check of the grid."""
        now = self.clock.now_ps
        self.cnps += 1
        first = self._alpha.on_cnp(now)
        self._cnp_in_period = True
        if first:
            self._grid0_ps = now
            rate = self.params.rate_to_set_on_first_cnp_mbps
            if rate:
                rate = min(mbps_bps(rate), self.max_rate_bps)
                self.rate_bps = self.target_bps = max(rate, self.min_rate_bps)
                self._restart_increase(now)
        if not self._check_pending:
            self._check_pending = True
            k = (now - self._grid0_ps) // self._monitor_ps + 1
            self.clock.call_at(self._grid0_ps + k * self._monitor_ps, self._check_decrease)

    def on_timeout(self) -> None:
        """No rate change on a retransmit timeout (the firmware's DCQCN has none)."""

    # -- internals ---------------------------------------------------------------------------
    def _check_decrease(self) -> None:
        """A grid point of ``rate_reduce_monitor_period``: cut if a CNP came in the interval."""
        now = self.clock.now_ps
        if not self._cnp_in_period:
            self._check_pending = False  # the grid sleeps until the next CNP
            return
        self._cnp_in_period = False
        self._cut(now)
        self.clock.call_at(now + self._monitor_ps, self._check_decrease)

    def _cut(self, now: int) -> None:
        alpha = self._alpha.advance(now)
        p = self.params
        increased = self._t_stage > 0 or (self._any_clamp and self._bc_stage > 0)
        if p.clamp_tgt_rate or (p.clamp_tgt_rate_after_time_inc and increased):
            self.target_bps = self.rate_bps
        factor = max(1.0 - self._cut_scale * alpha, self._min_factor)
        self.rate_bps = max(self.min_rate_bps, self.rate_bps * factor)
        self._last_cut_ps = now
        self.cuts += 1
        self._restart_increase(now)

    def _restart_increase(self, now: int) -> None:
        self._t_stage = self._bc_stage = self._bytes = 0
        self._recovering = True
        self._timer_gen += 1
        self.clock.call_at(now + self._timer_ps, partial(self._on_timer, self._timer_gen))

    def _on_timer(self, gen: int) -> None:
        if gen != self._timer_gen or not self._recovering:
            return  # cancelled by a later cut, or already back at line rate
        self._t_stage += 1
        self._increase()
        if self._recovering:
            self.clock.call_at(self.clock.now_ps + self._timer_ps, partial(self._on_timer, gen))

    def _phase(self, t: int, bc: int) -> str:
        f = self.params.rpg_threshold
        if not self._byte_reset:  # byte counter off: the timer stage alone (HPCC ns-3)
            return "fast" if t <= f else ("additive" if t == f + 1 else "hyper")
        if max(t, bc) <= f:
            return "fast"
        return "hyper" if min(t, bc) > f else "additive"

    def _increase(self) -> None:
        phase = self._phase(self._t_stage, self._bc_stage)
        self.last_phase = phase
        if phase == "additive":
            self.target_bps = min(self.target_bps + self._ai_bps, self.max_rate_bps)
        elif phase == "hyper":
            self.target_bps = min(self.target_bps + self._hai_bps, self.max_rate_bps)
        self.rate_bps = min((self.rate_bps + self.target_bps) / 2.0, self.max_rate_bps)
        self.increase_events += 1
        cap = self.max_rate_bps
        if self.target_bps >= cap and cap - self.rate_bps <= _SNAP_FRACTION * cap:
            self.rate_bps = cap
            self._recovering = False
            self._timer_gen += 1
