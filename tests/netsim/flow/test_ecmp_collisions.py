"""ECMP collisions: measured slowdowns against the exact balls-in-bins expectation.

Cross-ToR permutation: every host of ToR t sends to the host at the same position under ToR
t+1. All flows of ToR t go to ToR t+1, so the uplink ToR t -> agg a and the downlink
agg a -> ToR t+1 carry the same flows: the load is N flows hashed onto M uplinks, one
independent experiment per ToR. With a NIC as fast as an uplink, the makespan is the most
loaded uplink's flow count k times the line-rate time; with NICs at half an uplink's speed
(the 2 x 200G split), it is max(1, k/2). With q QPs per flow, N q sub-flows of 1/q the bytes:
k/q. The exact distribution of the max bin count comes from the multinomial:
P(max <= k) = N!/M^N [x^N] (sum_{j<=k} x^j/j!)^M.
"""

from __future__ import annotations

import numpy as np
import pytest

from netsim.flow import SharingModel, simulate_flows
from netsim.flow.stats import max_load_distribution
from netsim.scenario.traffic import Flow

SIZE = 10_000_000
TRIALS = 60


def expected_slowdown(n_flows, uplinks, tors, qps, nic_over_uplink):
    p = max_load_distribution(n_flows * qps, uplinks, tors)
    k = np.arange(len(p))
    v = np.maximum(1.0, k * nic_over_uplink / qps)
    mean = float((p * v).sum())
    return mean, float(np.sqrt((p * v * v).sum() - mean ** 2))


def measured_slowdowns(fabric, per_tor, qps, trials=TRIALS):
    n = len(fabric.nics)
    nic_bps = float(fabric.link_capacity_bps[fabric.link_kind == "host"].max())
    nic_bps *= SharingModel().wire_efficiency
    ideal_ps = SIZE * 8 / nic_bps * 1e12
    flows = [Flow(fabric.nics[i], fabric.nics[(i + per_tor) % n], SIZE, 0, qps) for i in range(n)]
    out = []
    for seed in range(trials):  # the seed draws the QP numbers, hence the UDP source ports
        res = simulate_flows(fabric, flows, model="maxmin", seed=seed)
        # the finish time includes the (nanosecond) propagation latency: negligible here
        out.append(res.finish_ps.max() / ideal_ps)
    return np.array(out)


def _check(measured, mean, sd):
    se = sd / np.sqrt(len(measured))
    assert abs(measured.mean() - mean) <= 4 * se + 0.02 * mean, (measured.mean(), mean, se)


@pytest.mark.parametrize("qps", [1, 4])
def test_400g_nic_into_400g_uplinks_matches_hash_statistics(fabric_400g, qps):
    mean, sd = expected_slowdown(8, 8, 4, qps, nic_over_uplink=1.0)
    _check(measured_slowdowns(fabric_400g, 8, qps), mean, sd)


def test_split_downlinks_match_hash_statistics(fabric_2x200g):
    mean, sd = expected_slowdown(16, 8, 4, 1, nic_over_uplink=0.5)
    _check(measured_slowdowns(fabric_2x200g, 16, 1), mean, sd)


def test_more_qps_reduce_the_slowdown(fabric_400g):
    means = [measured_slowdowns(fabric_400g, 8, q, trials=30).mean() for q in (1, 2, 8)]
    assert means[0] > means[1] > means[2] > 1.0


def test_split_downlink_collides_less_than_400g_port(fabric_400g, fabric_2x200g):
    # same ToR bandwidth (8 x 400G up), same switches: the MegaScale split-downlink effect
    a = measured_slowdowns(fabric_400g, 8, 1)
    b = measured_slowdowns(fabric_2x200g, 16, 1)
    assert b.mean() < a.mean() - 0.3


def test_max_load_distribution_by_monte_carlo(rng):
    # independent check of the closed form: throw the balls
    p = max_load_distribution(12, 8, 2)
    throws = rng.integers(0, 8, size=(40_000, 2, 12))
    counts = np.stack([(throws == b).sum(axis=2) for b in range(8)], axis=2).max(axis=(1, 2))
    freq = np.bincount(counts, minlength=len(p)) / len(counts)
    np.testing.assert_allclose(freq, p, atol=0.01)
    assert p.sum() == pytest.approx(1.0)
