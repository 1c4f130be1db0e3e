"""Closed forms of the 1F1B schedules (Narayanan et al. 2021 section 2.2)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.workload import simulate_pipeline, stage_order

REL = 1e-12  # exact arithmetic up to float rounding


@pytest.mark.parametrize("p,m", [(1, 4), (2, 2), (4, 8), (8, 32), (3, 7)])
def test_plain_1f1b_makespan_is_m_plus_p_minus_1(p, m):
    tf, tb = 1.0, 2.0
    run = simulate_pipeline(np.full(p, tf), np.full(p, tb), np.zeros(p), m, p, 1)
    assert run.makespan_s == pytest.approx((m + p - 1) * (tf + tb), rel=REL)
    # every stage computes m forwards and m backwards
    assert np.allclose(run.stage_busy_s, m * (tf + tb))


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 16, 4), (8, 32, 3)])
def test_interleaved_bubble_shrinks_by_v(p, m, v):
    tf, tb = 1.0, 2.0  # whole-stage times; each of the v chunks takes 1/v of them
    n = p * v
    run = simulate_pipeline(np.full(n, tf / v), np.full(n, tb / v), np.zeros(n), m, p, v)
    assert run.makespan_s == pytest.approx((m + (p - 1) / v) * (tf + tb), rel=1e-9)


def test_every_op_scheduled_once():
    p, m, v = 4, 8, 2
    for s in range(p):
        order = stage_order(s, p, m, v)
        assert sorted(order) == sorted({(k, mb, c) for k in (0, 1) for mb in range(m)
                                        for c in range(v)})


def test_transfer_delays_pipeline_by_hops():
    """With a transfer time d and blocking sends, the first backward of the first micro-batch
    reaches stage 0 after 2 (p - 1) hops each way: makespan grows by at least that."""
    p, m, d = 4, 4, 0.25
    base = simulate_pipeline(np.ones(p), 2 * np.ones(p), np.zeros(p), m, p, 1).makespan_s
    slow = simulate_pipeline(np.ones(p), 2 * np.ones(p), np.full(p, d), m, p, 1).makespan_s
    assert slow >= base + 2 * (p - 1) * d - 1e-12


def test_critical_path_is_contiguous_and_ends_at_makespan():
    p, m = 4, 6
    run = simulate_pipeline(np.ones(p), 2 * np.ones(p), np.full(p, 0.1), m, p, 1)
    path = run.critical_path
    assert path[-1]["end_s"] == pytest.approx(run.makespan_s)
    assert path[0]["start_s"] == 0.0
    assert all(a["end_s"] <= b["start_s"] + 1e-12 for a, b in zip(path, path[1:], strict=False))
