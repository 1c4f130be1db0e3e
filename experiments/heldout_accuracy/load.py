"""What else the host was doing while a trainer run took its measurements.

A sampler thread reads ``/proc/stat`` (every core's busy time) and the CPU time of the
trainer's processes (``/proc/PID/stat`` utime + stime of torchrun's children) every
``interval_s``, and notes when rank 0's trace file grows (the trainer writes it once per
step). Over the steady-state window (the last ``steady_steps`` steps written) it reports the
cores the trainer used, the cores everything else used, and so the cores that were left to
the trainer: ``available_cores = host_cores - other_cores``. Linux only; elsewhere the
report is empty and the host model falls back to the nominal core count.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _busy_s() -> float:
    """Busy seconds of all cores since boot (``/proc/stat`` first line minus idle, iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) * TICK_S


def _tree_cpu_s(root: int) -> float:
    """utime + stime of ``root``'s descendants (the trainer ranks under torchrun), seconds."""
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) * TICK_S
        todo += [int(k) for k in kids]
    return total


class LoadSampler:
    """Samples while a trainer run is in progress (``start(pid)``, ``stop() -> dict``)."""

    def __init__(self, trace_file: Path, steady_steps: int, interval_s: float = 0.2) -> None:
        self.trace_file, self.interval_s = trace_file, interval_s
        self.steady_steps = steady_steps
        self.samples: list[tuple[float, float, float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._offset, self._steps, self._tail = 0, 0, b""
        self._stale: tuple[int, int] | None = None

    def _signature(self) -> tuple[int, int] | None:
        """(inode, modification time) of the trace file, None while it does not exist."""
        try:
            st = self.trace_file.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns

    def start(self, pid: int) -> None:
        if not Path("/proc/stat").exists():
            return
        # a file already there is an earlier run's: its steps are not this run's
        self._stale = self._signature()
        self._thread = threading.Thread(target=self._loop, args=(pid,), daemon=True)
        self._thread.start()

    def _steps_done(self) -> int:
        """Iteration records rank 0 has written so far (one per finished step); an earlier
        run's file counts from when it is rewritten."""
        sig = self._signature()
        if sig is None or sig == self._stale:
            return self._steps
        self._stale = None
        with open(self.trace_file, "rb") as fh:
            fh.seek(self._offset)
            new = fh.read()
        self._offset += len(new)
        text = self._tail + new
        self._steps += text.count(MARK)
        self._tail = text[-(len(MARK) - 1):]  # too short to hold a whole mark
        return self._steps

    def _loop(self, pid: int) -> None:
        while not self._stop.is_set():
            steps = self._steps_done()
            self.samples.append((time.monotonic(), _busy_s(), _tree_cpu_s(pid), steps))
            self._stop.wait(self.interval_s)

    def stop(self) -> dict:
        """Averages over the steady-state window (empty when it could not be found)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        total = self.samples[-1][3] if self.samples else 0
        if total < self.steady_steps + 1:
            return {}
        # the window: from the first sample after step ``total - steady - 1`` was written to
        # the first sample after the last step was
        i = next(k for k, x in enumerate(self.samples) if x[3] >= total - self.steady_steps)
        j = next(k for k, x in enumerate(self.samples) if x[3] >= total)
        if j == i:  # the window's steps all appeared in one sample: start at the one before
            if i == 0:
                return {}
            i -= 1
        (t0, b0, c0, _), (t1, b1, c1, _) = self.samples[i], self.samples[j]
        cores = os.cpu_count() or 1
        trainer, busy = (c1 - c0) / (t1 - t0), (b1 - b0) / (t1 - t0)
        other = max(0.0, busy - trainer)
        return {"host_cores": cores, "window_s": t1 - t0, "trainer_cores": trainer,
                "other_cores": other, "available_cores": max(cores - other, 0.1),
                "loadavg": os.getloadavg()[0],
                "samples": [[round(v, 4) for v in x] for x in self.samples]}


MARK = b'"type": "iteration"'
