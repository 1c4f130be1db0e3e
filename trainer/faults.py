"""Fault injection, the ground truth for ``netsim diagnose``.

``--inject-slow-rank R --slow-factor F``: every compute record of rank R (a block's, the
embedding's and the head's forward and backward, the optimizer step) takes F times longer.
After the work the rank sleeps ``(F - 1) x`` the record's compute time, which is the record's
duration minus the blocking collectives inside it (a forward or backward record contains its
block's tensor-parallel all-reduces; those are not compute, and waiting in them is not made
longer). The sleep releases the CPU, so the other ranks of a shared host do not slow down.

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

    def __post_init__(self) -> None:
        if self.slow_factor < 1.0:
            raise ValueError(f"slow_factor must be >= 1, got {self.slow_factor}")
        if self.link_delay_us < 0:
            raise ValueError(f"link_delay_us must be >= 0, got {self.link_delay_us}")
        if self.slow_link is not None:
            r, peer = self.slow_link
            if r == peer:
                raise ValueError(f"slow_link {r}:{peer}: a rank has no link to itself")

    def check_world(self, world_size: int) -> None:
        """Raise ValueError when a named rank is outside the world."""
        ranks = ([self.slow_rank] if self.slow_rank is not None else []) + list(self.slow_link or ())
        bad = [r for r in ranks if not 0 <= r < world_size]
        if bad:
            raise ValueError(f"fault injection names rank(s) {bad} outside the world of "
                             f"{world_size} ranks")

    @property
    def active(self) -> bool:
        return (self.slow_rank is not None and self.slow_factor > 1.0) or (
            self.slow_link is not None and self.link_delay_us > 0)


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
        self.slow = cfg.slow_rank == rank and cfg.slow_factor > 1.0
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
    def stretch(self, phase: str, start, end):
        """Sleep (F - 1) x the compute time of [start, end]; returns the new end stamp."""
        if phase not in SLOWED_PHASES:
            return end
        clock = self.tracer.clock
        if clock.cuda:
            clock._torch.cuda.synchronize()
        busy = clock.seconds(end) - clock.seconds(start) - self._blocked_s(start, end)
        extra = (self.cfg.slow_factor - 1.0) * max(busy, 0.0)
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
