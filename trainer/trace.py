"""Timing instrumentation and the ``trainer-trace/1`` files (schema in docs/trainer.md).

Times are seconds relative to the start of the run on the issuing rank's clock. On CPU a stamp
is ``time.perf_counter()``; on CUDA it is a ``torch.cuda.Event`` recorded on the current stream,
converted to seconds (``elapsed_time`` from a base event) when the step is flushed, so timing
never synchronizes the device in the middle of a step.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

SCHEMA = "trainer-trace/1"


def new_run_id() -> str:
    """A fresh run id (random, not seeded: two runs of one command and seed must differ)."""
    return uuid.uuid4().hex


def end_record(run_id: str, steps: int) -> dict[str, Any]:
    """The last record of a rank file: its run and how many iteration records precede it,
    so that a reader tells a whole file from one cut at a line boundary (issue #30)."""
    return {"type": "end", "run_id": run_id, "steps": steps}


class Clock:
    """Stamps on the host (perf_counter) or on the CUDA stream (events)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.t0 = time.perf_counter()
        if cuda:
            import torch

            self._torch = torch
            self.base = torch.cuda.Event(enable_timing=True)
            self.base.record()

    def host_now(self) -> float:
        """Seconds since the start on the host clock (usable from any thread)."""
        return time.perf_counter() - self.t0

    def stamp(self):
        """A stamp: a float on CPU, a recorded CUDA event on GPU."""
        if not self.cuda:
            return self.host_now()
        ev = self._torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def seconds(self, stamp) -> float:
        """Resolve a stamp to seconds since the start (the device must have passed it)."""
        if isinstance(stamp, float):
            return stamp
        return self.base.elapsed_time(stamp) / 1e3


class Tracer:
    """Collects compute, collective and iteration records of one rank.

    ``step`` and ``microbatch`` are the current position, set by the schedule; records take
    them when they are opened. Records are kept with unresolved stamps and written at
    :meth:`flush` (once per step).
    """

    def __init__(self, clock: Clock, path: Path | None, enabled: bool = True) -> None:
        self.clock = clock
        self.enabled = enabled
        self.step = 0
        self.microbatch: int | None = None
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # collective end callbacks run on backend threads
        self._file = open(path, "w") if (path is not None and enabled) else None
        self._cpu_start: dict[tuple, float] = {}
        """Thread CPU time at the start of each open compute record (CPU runs)."""
        self.compute_hook = None
        """Fault injection (``trainer.faults``): ``hook(phase, start, end) -> end``."""
        self.ranges = None
        """Profiler ranges (``trainer.profiling.Ranges``) while ``--profile`` records."""

    def stamp(self, open_range: tuple | None = None):
        """A time stamp; ``open_range`` (phase, name, layer) also opens a profiler range that
        the matching :meth:`compute` closes."""
        if open_range is not None and self.ranges is not None:
            self.ranges.open(open_range, self.microbatch, self.step)
        if open_range is not None and self.enabled and not self.clock.cuda:
            # the step: the whole process (backend threads too); a compute record: this thread
            cpu = time.process_time if open_range[0] == "iteration" else time.thread_time
            self._cpu_start[open_range] = cpu()
        return self.clock.stamp() if self.enabled else 0.0

    def pending(self) -> list[dict[str, Any]]:
        """Records of the current step not yet written (a copy)."""
        with self._lock:
            return list(self._pending)

    def add(self, record: dict[str, Any]) -> None:
        if self.enabled:
            with self._lock:
                self._pending.append(record)

    def write_now(self, record: dict[str, Any]) -> None:
        """Write a record without stamps immediately (meta)."""
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def compute(self, phase: str, layer: int | None, start, end, flops: float | None,
                name: str, microbatch: int | None = None) -> None:
        mb = self.microbatch if microbatch is None else microbatch
        key = (phase, name, layer)
        cpu0 = self._cpu_start.pop(key, None)
        if self.compute_hook is not None:
            end = self.compute_hook(phase, start, end, cpu0)
        if self.ranges is not None:
            self.ranges.close(key)
        rec = {"type": "compute", "step": self.step, "phase": phase, "layer": layer,
               "name": name, "microbatch": mb, "start_s": start, "end_s": end, "flops": flops}
        if cpu0 is not None:
            cpu = time.process_time if phase == "iteration" else time.thread_time
            rec["cpu_s"] = cpu() - cpu0
            if self.ranges is not None:
                self.ranges.mark_cpu(key, mb, self.step, rec["cpu_s"])
        self.add(rec)

    def flush(self) -> list[dict[str, Any]]:
        """Resolve stamps, write pending records, return them."""
        if self.clock.cuda and self.enabled:
            self.clock._torch.cuda.synchronize()
        with self._lock:
            records, self._pending = self._pending, []
        for r in records:
            for key in ("start_s", "end_s"):
                if key in r:
                    r[key] = self.clock.seconds(r[key])
        records.sort(key=lambda r: (r.get("start_s", 0.0), r["type"]))
        if self._file is not None:
            self._file.writelines(json.dumps(r) + "\n" for r in records)
            self._file.flush()
        return records

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
