"""Fixtures of the congestion-control tests: a tiny heap-based fake clock."""

from __future__ import annotations

import heapq

import pytest


class FakeClock:
    """The engine's Clock protocol: ``now_ps`` plus one-shot ``call_at``; advanced by hand."""

    def __init__(self) -> None:
        self.now_ps = 0
        self.heap: list = []
        self._seq = 0

    def call_at(self, t_ps: int, fn) -> None:
        assert t_ps >= self.now_ps, "callbacks may not be scheduled in the past"
        heapq.heappush(self.heap, (t_ps, self._seq, fn))
        self._seq += 1

    def advance(self, t_ps: int) -> None:
        """Run every callback due at or before ``t_ps`` in time order, then stop at ``t_ps``."""
        while self.heap and self.heap[0][0] <= t_ps:
            t, _, fn = heapq.heappop(self.heap)
            self.now_ps = t
            fn()
        self.now_ps = t_ps

    def pending(self) -> int:
        return len(self.heap)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def line_rate_bps() -> int:
    return 400_000_000_000  # 400 Gb/s


@pytest.fixture
def base_rtt_ps() -> int:
    return 5_000_000  # 5 us
