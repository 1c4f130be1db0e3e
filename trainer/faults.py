"""Fault injection, the ground truth for ``netsim diagnose``.

``--inject-slow-rank R --slow-factor F``: every compute record of rank R (a block's, the
embedding's and the head's forward and backward, the optimizer step) takes F times longer.
On CPU, after the work the rank spins for ``(F - 1) x`` the record's thread CPU time: it needs
F times the CPU, as on a slower core, and a forward or backward record's blocking
tensor-parallel all-reduces (waits, no CPU of this thread) are not made longer. On CUDA it
sleeps ``(F - 1) x`` the record's duration minus the blocking collectives inside it.

Repeated, ``--inject-slow-rank R[:F]`` keeps every rank named, each with its own factor
(``F``, default ``--slow-factor``): ``FaultConfig.slow_ranks``.

``--inject-slow-link R:PEER --link-delay-us D``: R's sends to PEER take D microseconds longer.
Before R posts a send to PEER, or a collective whose group holds both R and PEER (every ring
or tree over such a group carries at least one message between them), it sleeps D; the call's
trace record starts before the sleep, so the delay is inside the call on R, and every other
member waits for it inside the same call. Collectives posted from the backward hooks
(``overlapped`` gradient buckets) are not delayed: their sleep would land inside R's backward
compute and make R look like a straggler instead of a slow link.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class FaultConfig:
    """Which fault to inject (none by default)."""

    slow_rank: int | None = None
    """Layout rank whose compute is ``slow_factor`` times slower."""
    slow_factor: float = 1.0
    slow_link: tuple[int, int] | None = None
    """(R, PEER): R's sends to PEER are ``link_delay_us`` slower."""
    link_delay_us: float = 0.0
    slow_ranks: tuple[tuple[int, float], ...] = ()
    """Every slow rank with its factor; ``slow_rank`` (with ``slow_factor``) is folded in and
    is the first of them afterwards."""

    def __post_init__(self) -> None:
        merged = {int(r): float(f) for r, f in self.slow_ranks}
        if self.slow_rank is not None:
            merged.setdefault(self.slow_rank, self.slow_factor)
        object.__setattr__(self, "slow_ranks", tuple(merged.items()))
        if self.slow_ranks:
            object.__setattr__(self, "slow_rank", self.slow_ranks[0][0])
        for factor in [self.slow_factor, *merged.values()]:
            if factor < 1.0:
                raise ValueError(f"slow_factor must be >= 1, got {factor}")
        if self.link_delay_us < 0:
            raise ValueError(f"link_delay_us must be >= 0, got {self.link_delay_us}")
        if self.slow_link is not None:
            r, peer = self.slow_link
            if r == peer:
                raise ValueError(f"slow_link {r}:{peer}: a rank has no link to itself")

    def check_world(self, world_size: int) -> None:
        """Raise ValueError when a named rank is outside the world."""
        ranks = [r for r, _ in self.slow_ranks] + list(self.slow_link or ())
        bad = [r for r in ranks if not 0 <= r < world_size]
        if bad:
            raise ValueError(f"fault injection names rank(s) {bad} outside the world of "
                             f"{world_size} ranks")

    @property
    def active(self) -> bool:
        return any(f > 1.0 for _, f in self.slow_ranks) or (
            self.slow_link is not None and self.link_delay_us > 0)

    def factor_of(self, rank: int) -> float:
        """How many times slower ``rank`` computes (1.0: not slowed)."""
        return dict(self.slow_ranks).get(rank, 1.0)


def parse_slow_rank(spec, factor: float) -> tuple[int, float]:
    """One ``--inject-slow-rank`` value: ``R``, ``"R:F"`` or ``[R, F]`` (YAML) -> (R, F);
    ``factor`` (``--slow-factor``) when F is not given."""
    parts = spec if isinstance(spec, (list, tuple)) else str(spec).split(":")
    try:
        if len(parts) not in (1, 2):
            raise ValueError
        return int(parts[0]), float(parts[1]) if len(parts) == 2 else float(factor)
    except (TypeError, ValueError):
        raise ValueError(f"inject_slow_rank (--inject-slow-rank) {spec!r}: expected R or R:F, "
                         "a layout rank and its slowdown such as 5:1.5") from None


def parse_link(text: str) -> tuple[int, int]:
    """``"R:PEER"`` -> (R, PEER)."""
    try:
        r, peer = (int(x) for x in text.split(":"))
    except ValueError:
        raise ValueError(f"--inject-slow-link {text!r}: expected R:PEER, two layout ranks "
                         "such as 3:2") from None
    return r, peer


SLOWED_PHASES = ("forward", "backward", "optimizer")


class FaultInjector:
    """Applies a :class:`FaultConfig` on one rank (hooks of the Tracer and the Comm)."""

    def __init__(self, cfg: FaultConfig, rank: int, tracer) -> None:
        self.cfg, self.rank, self.tracer = cfg, rank, tracer
        self.factor = cfg.factor_of(rank)
        self.slow = self.factor > 1.0
        self.peer = None
        if cfg.slow_link is not None and cfg.slow_link[0] == rank and cfg.link_delay_us > 0:
            self.peer = cfg.slow_link[1]
        self.injected_s = 0.0
        """Total sleep injected on this rank (for the tests)."""

    def install(self, comm) -> None:
        """Hook the tracer (compute) and the comm (sends) of this rank."""
        if self.slow:
            self.tracer.compute_hook = self.stretch
        if self.peer is not None:
            comm.send_hook = self.delay_send

    # -- slow rank -----------------------------------------------------------------------------
    def stretch(self, phase: str, start, end, cpu_start: float | None = None):
        """Make the compute of [start, end] F times longer; returns the new end stamp.

        On CPU (``cpu_start``: the thread's CPU time when the record opened) the thread spins
        for (F - 1) x the record's CPU time, so it needs F times the CPU, as a slower core
        would; on a shared host the wall time then stretches with the contention. On CUDA it
        sleeps (F - 1) x the record's duration minus its blocking collectives, with the
        stream idle.
        """
        if phase not in SLOWED_PHASES:
            return end
        clock = self.tracer.clock
        if cpu_start is not None and not clock.cuda:
            extra = (self.factor - 1.0) * max(time.thread_time() - cpu_start, 0.0)
            until = time.thread_time() + extra
            while time.thread_time() < until:
                pass
        else:
            if clock.cuda:
                clock._torch.cuda.synchronize()
            busy = clock.seconds(end) - clock.seconds(start) - self._blocked_s(start, end)
            extra = (self.factor - 1.0) * max(busy, 0.0)
            time.sleep(extra)
        self.injected_s += extra
        return self.tracer.clock.stamp()

    def _blocked_s(self, start, end) -> float:
        """Seconds of blocking collectives of this rank inside [start, end]."""
        clock = self.tracer.clock
        s, e = clock.seconds(start), clock.seconds(end)
        total = 0.0
        for rec in self.tracer.pending():
            if rec.get("type") != "collective" or rec.get("overlapped") or rec["end_s"] is None:
                continue
            cs, ce = clock.seconds(rec["start_s"]), clock.seconds(rec["end_s"])
            total += max(0.0, min(ce, e) - max(cs, s))
        return total

    # -- slow link -----------------------------------------------------------------------------
    def delay_send(self, ranks, overlapped: bool = False):
        """Called before R posts a call to ``ranks``; sleeps when PEER is among them.

        Returns the stamp taken before the sleep (the call's start), or None (no delay).
        """
        if overlapped or self.peer not in ranks or self.rank not in ranks:
            return None
        start = self.tracer.stamp()
        delay = self.cfg.link_delay_us * 1e-6
        time.sleep(delay)
        self.injected_s += delay
        return start
