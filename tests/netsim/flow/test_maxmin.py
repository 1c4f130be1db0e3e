"""Max-min fair rates against independent solutions: hand-derived and the lexicographic LP."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from netsim.flow.maxmin import Incidence, maxmin_rates


def lexicographic_maxmin(a: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Max-min fair rates by the textbook sequence of LPs (independent of progressive filling).

    Round k: maximise t subject to A r <= c, r_f >= t for unfixed flows, r_f = fixed value for
    fixed ones. Then every unfixed flow that cannot exceed t (its own LP maximum with the others
    held at >= t) is fixed at t.
    """
    nl, nf = a.shape
    fixed = np.full(nf, np.nan)
    while np.isnan(fixed).any():
        free = np.isnan(fixed)
        # variables: r (nf) and t; maximise t
        c = np.r_[np.zeros(nf), -1.0]
        a_ub = [np.c_[a, np.zeros(nl)]]
        b_ub = [cap]
        rows = np.flatnonzero(free)
        g = np.zeros((len(rows), nf + 1))
        g[np.arange(len(rows)), rows] = -1.0
        g[:, -1] = 1.0
        a_ub.append(g)
        b_ub.append(np.zeros(len(rows)))
        bounds = [(v, v) if not np.isnan(v) else (0, None) for v in fixed] + [(0, None)]
        res = linprog(c, A_ub=np.vstack(a_ub), b_ub=np.concatenate(b_ub), bounds=bounds,
                      method="highs")
        assert res.status == 0
        t = res.x[-1]
        for f in rows:
            obj = np.zeros(nf + 1)
            obj[f] = -1.0
            bnd = [(v, v) if not np.isnan(v) else (t * (1 - 1e-9), None) for v in fixed]
            r2 = linprog(obj, A_ub=np.c_[a, np.zeros(nl)], b_ub=cap, bounds=bnd + [(0, None)],
                         method="highs")
            if -r2.fun <= t * (1 + 1e-7):
                fixed[f] = t
    return fixed


def test_parking_lot_hand_derived():
    # 3 links of capacity 1 in a row; flow 0 crosses all, flows 1..3 one link each.
    # Max-min: every link has 2 flows, so every flow gets 1/2.
    a = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1]], float)
    r = maxmin_rates(Incidence.from_matrix(a), np.ones(3))
    np.testing.assert_allclose(r, [0.5, 0.5, 0.5, 0.5])


def test_two_level_bottleneck_hand_derived():
    # link 0 (cap 1) carries flows 0,1,2; link 1 (cap 10) carries flows 2,3.
    # flows 0,1,2 get 1/3 at link 0; flow 3 takes the rest of link 1: 10 - 1/3.
    a = np.array([[1, 1, 1, 0], [0, 0, 1, 1]], float)
    r = maxmin_rates(Incidence.from_matrix(a), np.array([1.0, 10.0]))
    np.testing.assert_allclose(r, [1 / 3, 1 / 3, 1 / 3, 10 - 1 / 3])


def test_weights_count_member_qps():
    # a group with 2 QPs on link 0 and a single flow: 2 r + s <= 3, level r = s = 1
    a = np.array([[2.0, 1.0]])
    r = maxmin_rates(Incidence.from_matrix(a), np.array([3.0]))
    np.testing.assert_allclose(r, [1.0, 1.0])


@pytest.mark.parametrize("case", range(12))
def test_random_cases_match_lexicographic_lp(case):
    rng = np.random.default_rng(1000 + case)
    nl, nf = rng.integers(3, 9), rng.integers(3, 12)
    a = (rng.random((nl, nf)) < 0.35).astype(float)
    if case % 3 == 0:  # weighted incidence (lockstep groups)
        a *= rng.integers(1, 4, size=a.shape)
    home = rng.integers(0, nl, nf)  # every flow crosses at least one link
    a[home, np.arange(nf)] = np.maximum(a[home, np.arange(nf)], 1.0)
    cap = rng.choice([1.0, 2.0, 4.0, 2.5], size=nl)
    got = maxmin_rates(Incidence.from_matrix(sp.csr_matrix(a)), cap)
    want = lexicographic_maxmin(a, cap)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # feasibility and saturation: every flow has a saturated link on its path
    load = a @ got
    assert np.all(load <= cap * (1 + 1e-9))


def test_inactive_flows_use_nothing():
    a = np.array([[1, 1, 1]], float)
    r = maxmin_rates(Incidence.from_matrix(a), np.array([3.0]), active=np.array([1, 0, 1], bool))
    np.testing.assert_allclose(r, [1.5, 0.0, 1.5])


def test_capacity_shape_error_names_the_field():
    with pytest.raises(ValueError, match="capacity"):
        maxmin_rates(Incidence.from_matrix(np.ones((2, 2))), np.ones(3))
