"""The cross-check's per-group helpers (fast; the packet runs are in test_vs_packet.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from netsim.flow.crosscheck import bottleneck_groups, converged_window, jain, window_gbps


def _fabric(caps):
    return SimpleNamespace(link_capacity_bps=np.array(caps, float))


def _pk(paths, fct_ns=(10e6, 20e6, 30e6)):
    flows = [SimpleNamespace(paths=[p], start_ns=0.0, fct_ns=f) for p, f in zip(paths, fct_ns, strict=True)]
    t = np.array([0.0, 1e6, 2e6, 3e6])
    delivered = np.outer(t / 1e9, [100e9 / 8, 50e9 / 8, 25e9 / 8][:len(flows)])
    return SimpleNamespace(flows=flows, time_ns=t, flow_delivered_bytes=delivered)


def test_flows_group_on_the_link_with_the_least_capacity_per_flow():
    # link 2 carries flows 0 and 1 (50 each), link 4 flows 1 and 2 on a 40 G link (20 each):
    # flow 1's bottleneck is link 4, so flow 0 is alone on its own
    fab = _fabric([100e9, 100e9, 100e9, 100e9, 40e9])
    pk = _pk([[0, 2], [1, 2, 4], [3, 4]])
    assert bottleneck_groups(fab, pk) == [[1, 2]]


def test_jain_is_one_for_equal_rates_and_one_over_n_for_one_winner():
    assert jain(np.array([3.0, 3.0, 3.0])) == pytest.approx(1.0)
    assert jain(np.array([5.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)


def test_window_rates_come_from_the_delivered_bytes_series():
    pk = _pk([[0], [1], [2]])
    assert window_gbps(pk, 1e6, 3e6) == pytest.approx([100.0, 50.0, 25.0])
    assert converged_window(pk, after_ns=4e6) == (4e6, 10e6)
    with pytest.raises(ValueError, match="before the warm-up"):
        converged_window(pk, after_ns=11e6)
    with pytest.raises(ValueError, match="no two samples"):
        window_gbps(pk, 2.5e6, 2.9e6)
