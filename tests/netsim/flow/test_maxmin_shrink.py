"""The max-min solver drops the entries of frozen flows each round: bit for bit the rates
of the loop that masks the full incidence every round (kept here as the reference)."""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow.maxmin import _RTOL, Incidence, _segment_min, maxmin_rates


def masked_maxmin(inc: Incidence, capacity, active=None, max_rate=None) -> np.ndarray:
    """Progressive filling over the full incidence with masks (the solver before the
    entries of frozen flows were dropped)."""
    nf, nl = inc.num_flows, inc.num_links
    unfrozen = np.ones(nf, bool) if active is None else np.asarray(active, bool).copy()
    rate = np.zeros(nf)
    ceiling = np.full(nf, np.inf) if max_rate is None else np.asarray(max_rate, np.float64)
    residual = np.asarray(capacity, np.float64).copy()
    e_flow_l, e_link_l = inc.e_flow[inc.by_link], inc.e_link[inc.by_link]
    for _ in range(nf + 1):
        if not unfrozen.any():
            break
        on = unfrozen[inc.e_flow]
        load = np.bincount(inc.e_link[on], weights=inc.e_weight[on], minlength=nl)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, np.maximum(residual, 0.0) / load, np.inf)
        m_flow = np.minimum(_segment_min(inc.e_flow[on], share[inc.e_link[on]], nf), ceiling)
        on_l = unfrozen[e_flow_l]
        link_min = _segment_min(e_link_l[on_l], m_flow[e_flow_l[on_l]], nl)
        bottleneck = (load > 0) & (share <= link_min * (1 + _RTOL))
        hit = np.zeros(nf, bool)
        hit[inc.e_flow[on & bottleneck[inc.e_link]]] = True
        hit |= unfrozen & (ceiling <= m_flow * (1 + _RTOL)) & np.isfinite(ceiling)
        free = unfrozen & ~np.isfinite(m_flow)
        rate[free] = np.inf
        unfrozen &= ~free
        hit &= unfrozen
        if not hit.any():
            continue
        rate[hit] = m_flow[hit]
        sel = hit[inc.e_flow]
        residual -= np.bincount(inc.e_link[sel],
                                weights=inc.e_weight[sel] * rate[inc.e_flow[sel]], minlength=nl)
        unfrozen &= ~hit
    return rate


def random_incidence(rng, nf: int, nl: int) -> Incidence:
    flows, links = [], []
    for f in range(nf):
        path = rng.choice(nl, size=int(rng.integers(1, 6)), replace=False)
        flows += [f] * len(path)
        links += path.tolist()
    weight = rng.choice([1.0, 2.0, 0.5, 1 / 3], size=len(links))
    return Incidence.from_entries(np.array(flows), np.array(links), weight,
                                  np.ones(len(links)), nf, nl)


@pytest.mark.parametrize("seed", range(12))
def test_shrinking_solver_is_bit_identical(seed):
    rng = np.random.default_rng(seed)
    nf, nl = int(rng.integers(5, 400)), int(rng.integers(3, 60))
    inc = random_incidence(rng, nf, nl)
    cap = rng.choice([100.0, 200.0, 400.0, 0.1 * np.pi], size=nl)
    if seed % 3 == 0:
        cap[rng.integers(nl)] = np.inf  # flows on infinite links only are unbounded
    active = rng.random(nf) < 0.8 if seed % 2 else None
    ceiling = np.where(rng.random(nf) < 0.2, 50.0 * rng.random(nf), np.inf) if seed % 4 == 1 \
        else None
    np.testing.assert_array_equal(maxmin_rates(inc, cap, active, ceiling),
                                  masked_maxmin(inc, cap, active, ceiling))
