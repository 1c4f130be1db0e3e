"""``--profile DIR``: torch.profiler (Kineto) Chrome traces, one file per rank.

The profiler follows a schedule (``torch.profiler.schedule``: skip ``wait`` steps, warm up for
``warmup``, record ``active``) so that the files stay small, and writes
``DIR/kineto-rank{R}.json`` (Chrome trace format) when the active steps end. Every step is a
``ProfilerStep#N`` range, N the trainer's step. What the trainer knows and a profiler does not
is added as ``record_function`` ranges and trace metadata, all optional for a reader:

- ``trainer/{phase}/{name}/{layer}/mb{microbatch}``: a compute record (phase forward,
  backward or optimizer; name layer, embedding, head; ``-`` for none), the same span as the
  ``compute`` record of the native trace;
- ``trainer/comm/{kind}/{r0,r1,...}``: around the posting of a collective (kind tp, pp, dp,
  other; the group's layout ranks). The collective's own events (``c10d::allreduce_``,
  ``gloo:all_reduce`` on the backend's thread, ``record_param_comms`` and NCCL kernels on CUDA)
  are the profiler's;
- ``trainer/cpu/{phase}/{name}/{layer}/mb{microbatch}/s{step}/{us}``: an empty range right
  after a compute record's range closes (and after the step's), carrying what a profiler does
  not measure: the record's thread CPU time (the step's: the process's) in microseconds, the
  native record's ``cpu_s`` (CPU runs only: on a host whose cores the ranks time-slice, wall
  time measures the scheduler as much as the rank);
- metadata ``trainer_meta``: the native trace's ``meta`` record as JSON.

``netsim.traces.kineto`` reads these files (and those of any PyTorch job).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RANGE_PREFIX = "trainer/"
DEFAULT_SCHEDULE = (1, 1, 3)
"""(wait, warmup, active) steps."""


def compute_range_name(phase: str, name: str, layer: int | None, microbatch: int | None) -> str:
    return (f"{RANGE_PREFIX}{phase}/{name}/{'-' if layer is None else layer}/"
            f"mb{'-' if microbatch is None else microbatch}")


def comm_range_name(kind: str | None, ranks) -> str:
    return f"{RANGE_PREFIX}comm/{kind or '-'}/{','.join(str(r) for r in ranks)}"


def cpu_mark_name(phase: str, name: str, layer: int | None, microbatch: int | None, step: int,
                  cpu_s: float) -> str:
    return (f"{RANGE_PREFIX}cpu/{phase}/{name}/{'-' if layer is None else layer}/"
            f"mb{'-' if microbatch is None else microbatch}/s{step}/{cpu_s * 1e6:.1f}")


def parse_schedule(text: str) -> tuple[int, int, int]:
    """``"W,U,A"`` -> (wait, warmup, active)."""
    try:
        wait, warmup, active = (int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--profile-schedule {text!r}: expected WAIT,WARMUP,ACTIVE steps, "
                         "e.g. 1,1,3") from None
    if wait < 0 or warmup < 0 or active < 1:
        raise ValueError(f"--profile-schedule {text!r}: wait and warmup must be >= 0, active >= 1")
    return wait, warmup, active


class Ranges:
    """Open and close ``record_function`` ranges out of order-free call sites."""

    def __init__(self) -> None:
        from torch.autograd.profiler import record_function

        self._rf = record_function
        self._open: dict[tuple, Any] = {}
        self._comm = None

    def open(self, key: tuple, microbatch: int | None, step: int) -> None:
        self.close(key)
        phase, name, layer = key
        rf = self._rf(compute_range_name(phase, name, layer, microbatch))
        rf.__enter__()
        self._open[key] = rf

    def close(self, key: tuple) -> None:
        rf = self._open.pop(key, None)
        if rf is not None:
            rf.__exit__(None, None, None)

    def mark_cpu(self, key: tuple, microbatch: int | None, step: int, cpu_s: float) -> None:
        """An empty range naming the CPU time of the record ``key`` just closed."""
        phase, name, layer = key
        with self._rf(cpu_mark_name(phase, name, layer, microbatch, step, cpu_s)):
            pass

    def open_comm(self, kind: str | None, ranks) -> None:
        self.close_comm()  # a posting that raised (a backend fallback) never closed its range
        self._comm = self._rf(comm_range_name(kind, ranks))
        self._comm.__enter__()

    def close_comm(self) -> None:
        if self._comm is not None:
            self._comm.__exit__(None, None, None)
            self._comm = None


class Profiler:
    """A scheduled torch.profiler session of one rank (``start``, ``step`` after every
    trainer step, ``stop``)."""

    def __init__(self, out_dir: str | Path, rank: int, meta: dict[str, Any], cuda: bool,
                 schedule: tuple[int, int, int] = DEFAULT_SCHEDULE, first_step: int = 0) -> None:
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler import schedule as make_schedule

        self.path = Path(out_dir) / f"kineto-rank{rank}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.meta = json.dumps(meta)
        wait, warmup, active = schedule
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        self.prof = profile(activities=activities, record_shapes=True,
                            schedule=make_schedule(wait=wait, warmup=warmup, active=active,
                                                   repeat=1),
                            on_trace_ready=self._export)
        self.prof.step_num = first_step
        self.written = False
        self.host: str | None = None

    def _export(self, prof) -> None:
        prof.export_chrome_trace(str(self.path))
        self.written = True

    def _tag(self) -> None:
        import torch

        if self.prof.profiler is not None and torch.autograd.profiler._is_profiler_enabled:
            self.prof.add_metadata_json("trainer_meta", self.meta)
            if self.host is not None:
                self.prof.add_metadata_json("trainer_host", self.host)

    def start(self) -> None:
        self.prof.start()
        self._tag()

    def step(self, host: dict[str, Any] | None = None) -> None:
        """After a trainer step; ``host``: the host record so far (``trainer/hostinfo.py``),
        kept in the document as ``trainer_host`` (a profiler-only run's load)."""
        if host is not None:
            self.host = json.dumps(host)
        self.prof.step()
        self._tag()

    def stop(self) -> None:
        self._tag()
        self.prof.stop()
