"""Closed-loop checks on one bottleneck with the fluid queue + ECN loop of netsim.cc.fluid.

N long flows sharing a bottleneck must end with utilization >= 90% and Jain's fairness >= 0.95
(the issue's DCQCN criterion), with the queue bounded near the marking thresholds.
"""

from __future__ import annotations

import numpy as np
import pytest

from netsim.cc import EcnParams
from netsim.cc.fluid import EventClock, simulate_bottleneck

US = 1_000_000
MS = 1_000_000_000
CAPACITY_BPS = 400e9
UTILIZATION_MIN = 0.90
JAIN_MIN = 0.95


def run(cc, n, duration_ps, seed=7, stagger_ps=200 * US, **kw):
    return simulate_bottleneck(cc, n, capacity_bps=CAPACITY_BPS, base_rtt_ps=5 * US,
                               duration_ps=duration_ps, rng=np.random.default_rng(seed),
                               start_ps=[i * stagger_ps for i in range(n)], **kw)


#: DCQCN byte-counter readings (``netsim.cc.params.DcqcnParams``): the default 32767 x 64 B and
#: mstflint's literal 32767 B.
_BYTES = {"rpg_byte_reset_unit_bytes": 1}
_SLOW_FAIRNESS = (
    "8 flows started 200 us apart stay unfair with the default 2 MB byte counter: Jain 0.67 over "
    "the second half of 20 ms, 0.68 of 40 ms, 0.70 of 80 ms (rates 17-130 Gb/s); without a byte "
    "counter (HPCC ns-3's model) 0.79 / 0.80 / 0.83. After a cut each QP recovers to its own "
    "target rate; only the additive steps (5 Mb/s per 300 us timer or per 2 MB sent) equalize "
    "targets. With 32767 B the steps come every few us and Jain is 0.99 at 20 ms "
    "(docs/congestion-control.md, 'Fluid bottleneck')")


@pytest.mark.parametrize("n, params", [
    (2, None), (2, _BYTES), (8, _BYTES),
    pytest.param(8, None, marks=pytest.mark.xfail(strict=True, reason=_SLOW_FAIRNESS))])
def test_dcqcn_converges_to_fair_share_with_high_utilization(n, params):
    res = run("dcqcn", n, 20 * MS, params=params)
    settled = 10 * MS
    assert res.utilization(settled) >= UTILIZATION_MIN
    assert res.jain_fairness(settled) >= JAIN_MIN
    fair = CAPACITY_BPS / n
    assert np.all(np.abs(res.mean_rates_bps(settled) - fair) < 0.3 * fair)
    # the queue stays bounded near the marking thresholds (never far past Kmax)
    assert res.queue_bytes[res.time_ps >= settled].max() < EcnParams().kmax_bytes


@pytest.mark.parametrize("cc", ["swift", "hybrid"])
def test_delay_based_algorithms_share_fairly(cc):
    res = run(cc, 4, 10 * MS)
    settled = 5 * MS
    assert res.utilization(settled) >= UTILIZATION_MIN
    assert res.jain_fairness(settled) >= JAIN_MIN


def test_the_algorithms_give_measurably_different_queues():
    settled = 5 * MS
    res = {cc: run(cc, 4, 10 * MS) for cc in ("none", "dcqcn", "swift", "hybrid")}
    q = {cc: r.queue_bytes[r.time_ps >= settled] for cc, r in res.items()}
    # none: 4 x 400G into 400G, the queue only grows (no buffer limit in the fluid loop)
    assert q["none"].min() > 100 * EcnParams().kmax_bytes
    # Swift holds the queue near its delay target: base_target (+ flow scaling) x C
    swift_target_bytes = 5e-6 * CAPACITY_BPS / 8
    assert swift_target_bytes <= q["swift"].mean() <= 1.5 * swift_target_bytes
    # the hybrid's tighter target gives a shorter queue than Swift's, with far fewer CNPs and
    # a much smaller peak than DCQCN's sawtooth
    assert q["hybrid"].mean() < 0.6 * q["swift"].mean()
    assert q["hybrid"].max() < 0.5 * q["dcqcn"].max()
    assert res["hybrid"].cnps.sum() < 0.1 * res["dcqcn"].cnps.sum()


def test_same_seed_same_trajectory():
    a, b = run("dcqcn", 3, 2 * MS, seed=3), run("dcqcn", 3, 2 * MS, seed=3)
    assert np.array_equal(a.rate_bps, b.rate_bps) and np.array_equal(a.queue_bytes,
                                                                     b.queue_bytes)


def test_event_clock_runs_callbacks_in_time_order():
    clock, seen = EventClock(), []
    for t in (30, 10, 20, 10):
        clock.call_at(t, lambda t=t: seen.append((t, clock.now_ps)))
    clock.run_until(25)
    assert seen == [(10, 10), (10, 10), (20, 20)] and clock.now_ps == 25
    with pytest.raises(ValueError, match="past"):
        clock.call_at(5, lambda: None)
