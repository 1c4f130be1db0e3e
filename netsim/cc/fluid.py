"""A fluid bottleneck loop that drives the real congestion-control objects.

N senders share one bottleneck of capacity ``C``. Time advances in fixed steps ``dt``; in each
step sender ``i`` sends ``r_i dt`` bytes (``r_i`` = its ``rate_bps``, or ``cwnd / rtt`` when its
window binds), the queue follows ``dq = (sum r_i - C) dt`` (never below 0), and packets leaving
it are ECN-marked with the :class:`~netsim.cc.params.EcnParams` probability ``p(q)``: sender
``i``'s step carries at least one mark with probability ``1 - (1 - p)^(r_i dt / mtu)`` (the
DCQCN fluid model's term, Zhu et al. SIGCOMM 2015 section 4). A marked step reaches the
receiver after the one-way delay, where a :class:`~netsim.cc.base.CnpGenerator` decides on a
CNP that arrives back one more one-way delay later (for ``dcqcn`` and ``hybrid`` only, as the
packet engine's default); every step is also acknowledged after the
RTT ``base_rtt + q / C`` with that RTT as the sample (for Swift and the hybrid).

It is not the packet engine: it is the closed-form-ish check that each algorithm's equations
produce the published behaviour (fair share, high utilization, bounded queue) on one
bottleneck, fast enough for a unit test.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.cc.base import CnpGenerator, make_cc
from netsim.cc.params import EcnParams
from topologies.units import PS_PER_S


class EventClock:
    """A minimal heap-based :class:`~netsim.cc.base.Clock` (``now_ps``, ``call_at``)."""

    def __init__(self) -> None:
        self.now_ps = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0

    def call_at(self, t_ps: int, fn: Callable[[], None]) -> None:
        """Schedule ``fn`` at ``t_ps`` (ties run in scheduling order)."""
        if t_ps < self.now_ps:
            raise ValueError(f"call_at({t_ps}) is in the past (now_ps={self.now_ps})")
        heapq.heappush(self._heap, (int(t_ps), self._seq, fn))
        self._seq += 1

    def run_until(self, t_ps: int) -> None:
        """Run every callback due at or before ``t_ps``, then set ``now_ps = t_ps``."""
        heap = self._heap
        while heap and heap[0][0] <= t_ps:
            t, _, fn = heapq.heappop(heap)
            self.now_ps = t
            fn()
        self.now_ps = t_ps


@dataclass
class FluidResult:
    """Time series of one fluid run (one row per recorded step)."""

    time_ps: np.ndarray  # (steps,)
    queue_bytes: np.ndarray  # (steps,) bottleneck queue after the step
    rate_bps: np.ndarray  # (steps, n) sending rate of each flow in the step
    departed_bytes: np.ndarray  # (steps,) bytes the bottleneck sent in the step
    capacity_bps: float
    step_ps: int
    cnps: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (n,) CNPs per flow

    def _window(self, from_ps: int) -> np.ndarray:
        sel = self.time_ps >= from_ps
        if not sel.any():
            raise ValueError(f"from_ps={from_ps} is after the end of the run")
        return sel

    def utilization(self, from_ps: int = 0) -> float:
        """Bottleneck bytes sent / capacity x time, over steps at or after ``from_ps``."""
        sel = self._window(from_ps)
        cap = self.capacity_bps * self.step_ps / 8 / PS_PER_S * sel.sum()
        return float(self.departed_bytes[sel].sum() / cap)

    def mean_rates_bps(self, from_ps: int = 0) -> np.ndarray:
        """Time-averaged rate of each flow over steps at or after ``from_ps``."""
        return self.rate_bps[self._window(from_ps)].mean(axis=0)

    def jain_fairness(self, from_ps: int = 0) -> float:
        """Jain's index ``(sum x)^2 / (n sum x^2)`` of the time-averaged rates (1 = fair)."""
        x = self.mean_rates_bps(from_ps)
        return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))


def simulate_bottleneck(cc: str, n_flows: int, *, capacity_bps: float, base_rtt_ps: int,
                        duration_ps: int, rng: np.random.Generator,
                        line_rate_bps: float | None = None, ecn: EcnParams | None = None,
                        params: Mapping[str, Any] | None = None, mtu_bytes: int = 4096,
                        step_ps: int = 1_000_000, start_ps: list[int] | None = None,
                        ) -> FluidResult:
    """Run ``n_flows`` senders of algorithm ``cc`` on one bottleneck.

    Parameters
    ----------
    cc : str
        ``none``, ``dcqcn``, ``swift`` or ``hybrid``.
    n_flows : int
        Number of senders (each a long flow).
    capacity_bps : float
        Bottleneck capacity.
    base_rtt_ps : int
        Unloaded RTT of every sender.
    duration_ps : int
        Simulated time.
    rng : numpy.random.Generator
        Draws the ECN marks.
    line_rate_bps : float, optional
        Each sender's NIC rate (default: the bottleneck capacity).
    ecn : EcnParams, optional
        Marking at the bottleneck (default: the Cumulus-derived defaults).
    params : mapping, optional
        Algorithm parameters passed to :func:`~netsim.cc.base.make_cc`.
    mtu_bytes : int
        Packet size for the marking probability.
    step_ps : int
        Fluid time step (default 1 us); feedback delays are rounded to it.
    start_ps : list of int, optional
        Start time of each flow (default: all at 0).

    Returns
    -------
    FluidResult
    """
    if n_flows < 1 or step_ps <= 0 or duration_ps < step_ps:
        raise ValueError("need n_flows >= 1, step_ps > 0 and duration_ps >= step_ps")
    ecn = ecn or EcnParams()
    clock = EventClock()
    line = float(line_rate_bps or capacity_bps)
    ccs = [make_cc(cc, line_rate_bps=int(line), base_rtt_ps=int(base_rtt_ps), clock=clock,
                   params=params) for _ in range(n_flows)]
    starts = np.asarray(start_ps if start_ps is not None else [0] * n_flows, dtype=np.int64)
    np_gen = CnpGenerator.for_cc(cc, params) if cc in ("dcqcn", "hybrid") else None
    wants_acks = cc in ("swift", "hybrid")
    steps = int(duration_ps // step_ps)
    out_q, out_dep = np.zeros(steps), np.zeros(steps)
    out_r = np.zeros((steps, n_flows))
    cnps = np.zeros(n_flows)
    q = 0.0
    cap_step = capacity_bps * step_ps / 8 / PS_PER_S
    carry = np.zeros(n_flows)  # fractional bytes, so on_send gets whole bytes
    for k in range(steps):
        now = k * step_ps
        clock.run_until(now)
        rtt = base_rtt_ps + q * 8 * PS_PER_S / capacity_bps
        rates = np.array([_send_rate(c, rtt) for c in ccs])
        rates[starts > now] = 0.0
        sent = rates * step_ps / 8 / PS_PER_S
        for i, c in enumerate(ccs):
            carry[i] += sent[i]
            whole = int(carry[i])
            if whole:
                carry[i] -= whole
                c.on_send(whole)
        backlog = q + sent.sum()
        departed = min(backlog, cap_step)
        q = backlog - departed
        p = ecn.mark_probability(q)
        marked = rng.random(n_flows) < 1.0 - (1.0 - p) ** (sent / mtu_bytes)
        _feedback(clock, ccs, np_gen, now, int(rtt), sent, marked, wants_acks, cnps)
        out_q[k], out_dep[k], out_r[k] = q, departed, rates
    return FluidResult(np.arange(steps, dtype=np.int64) * step_ps, out_q, out_r, out_dep,
                       float(capacity_bps), int(step_ps), cnps)


def _send_rate(cc, rtt_ps: float) -> float:
    """The fluid sending rate: the pacing rate, or the window over the RTT if that binds."""
    rate = cc.rate_bps
    if cc.cwnd_bytes is not None:
        rate = min(rate, cc.cwnd_bytes * 8 * PS_PER_S / rtt_ps)
    return rate


def _feedback(clock: EventClock, ccs: list, np_gen: CnpGenerator | None, now: int, rtt: int,
              sent: np.ndarray, marked: np.ndarray, wants_acks: bool, cnps: np.ndarray) -> None:
    """Schedule this step's CNPs (via the notification point) and ACKs."""
    half = rtt // 2
    for i, c in enumerate(ccs):
        if sent[i] <= 0:
            continue
        if marked[i] and np_gen is not None and np_gen.should_send(i, now + half):
            cnps[i] += 1
            clock.call_at(now + rtt, c.on_cnp)
        if wants_acks:
            acked, ecn_echo = int(sent[i]), bool(marked[i])
            clock.call_at(now + rtt, lambda c=c, a=acked, e=ecn_echo: c.on_ack(a, rtt, e))
