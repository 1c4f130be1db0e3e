"""What the host was doing during a run: the ``host`` record of the native trace.

Calibrating a CPU run needs the cores its ranks shared and the load other processes put on
them (``netsim.workload.host``). Every rank measures, over the steps after the first (the
warm-up), its own CPU time (``getrusage``) and the busy time of all cores (``/proc/stat``,
Linux only; null elsewhere), and writes one ``host`` record at the end of its trace:
``host_cores``, ``ranks_per_host`` (torchrun's LOCAL_WORLD_SIZE), ``wall_s``, ``cpu_s`` (this
rank), ``host_busy_cores`` (all processes on the host, mean over the window), ``loadavg_1m``.
A reader sums ``cpu_s / wall_s`` over the ranks of a host to get the cores the trainer used;
the rest of ``host_busy_cores`` is other load.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any


def _host_busy_s() -> float | None:
    """Busy seconds of all cores since boot, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class HostWindow:
    """Start with :meth:`start` (after the warm-up step); :meth:`record` gives the record."""

    def __init__(self) -> None:
        self._t0: tuple[float, float, float | None] | None = None

    def start(self) -> None:
        self._t0 = (time.perf_counter(), _cpu_s(), _host_busy_s())

    def record(self) -> dict[str, Any]:
        wall0, cpu0, busy0 = self._t0 or (time.perf_counter(), _cpu_s(), _host_busy_s())
        wall = time.perf_counter() - wall0
        busy = _host_busy_s()
        host_busy = None if busy is None or busy0 is None or wall <= 0 else (busy - busy0) / wall
        return {"type": "host", "host_cores": os.cpu_count(),
                "ranks_per_host": int(os.environ.get("LOCAL_WORLD_SIZE", 0)) or None,
                "wall_s": wall, "cpu_s": _cpu_s() - cpu0, "host_busy_cores": host_busy,
                "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
