"""--inject-slow-rank on CPU: the slowed rank does (F - 1) x each record's CPU time of real,
profiled work (``trainer.faults.busy_matmuls``), so its CPU time is F times the record's and
torch.profiler records the extra work as operators."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from trainer.faults import FaultConfig, FaultInjector, busy_matmuls  # noqa: E402


class _Clock:
    cuda = False

    def stamp(self):
        return time.perf_counter()


class _Tracer:
    clock = _Clock()


def _work() -> float:
    """Some model-like compute on this thread; returns its thread CPU seconds."""
    x, w = torch.randn(64, 128), torch.randn(128, 128)
    cpu0 = time.thread_time()
    for _ in range(200):
        x = torch.tanh(x @ w) / 8
    return time.thread_time() - cpu0


def test_busy_matmuls_spend_the_cpu_time_asked_in_profiled_products():
    from torch.profiler import ProfilerActivity, profile

    busy_matmuls(0.01)  # warm up the product
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        cpu0 = time.thread_time()
        n = busy_matmuls(0.2)
        spent = time.thread_time() - cpu0
    one = spent / n
    # within 1%: the last product's overshoot plus the profiler's own time between products
    assert n > 10 and one < 0.002 and spent == pytest.approx(0.2, rel=0.01)
    mm = [e for e in prof.events() if e.name == "aten::mm"]
    assert len(mm) == n
    assert busy_matmuls(0.0) == 0


@pytest.mark.parametrize("factor", [1.2, 2.0])
def test_slowed_record_takes_factor_times_the_cpu(factor):
    """The injected rank's record costs F times its own work in thread CPU time (the ratio is
    of CPU time, which another process on the core does not change)."""
    inj = FaultInjector(FaultConfig(slow_rank=0, slow_factor=factor), 0, _Tracer())
    ratios = []
    for _ in range(5):
        cpu0 = time.thread_time()
        base = _work()
        inj.stretch("forward", 0.0, 0.0, cpu_start=cpu0)
        ratios.append((time.thread_time() - cpu0) / base)
    assert sorted(ratios)[2] == pytest.approx(factor, rel=0.03)
    assert inj.stretch("iteration", 0.0, 0.0, cpu_start=time.thread_time()) == 0.0
