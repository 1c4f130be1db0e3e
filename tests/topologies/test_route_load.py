"""Per-link load of many routes: the compiled walk against route_many + bincount, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from topologies.route_load import njit, route_load
from topologies.routing import Router

pytestmark = pytest.mark.skipif(njit is None, reason="the compiled walk needs numba")


def _flows(fabric, rng, n=3000, ports=3):
    a = rng.integers(0, len(fabric.nics), n)
    b = rng.integers(0, len(fabric.nics), n)
    b[:50] = a[:50]                      # a NIC to itself: no links
    w = fabric.wiring
    same = np.flatnonzero(w.nic_tor == w.nic_tor[a[50]])
    b[50:100] = same[rng.integers(0, same.size, 50)]   # under one ToR
    sport = rng.integers(0, 1 << 16, (n, ports)).astype(np.uint16)
    weight = rng.random(n) * 7.3         # fractional: the sums' order shows in the last bits
    return a, b, sport, weight


@pytest.mark.parametrize("name", ["k4", "k8", "leafspine", "megascale"])
@pytest.mark.parametrize("polarized", [False, True])
def test_compiled_walk_equals_route_many(request, name, polarized, rng):
    fabric = request.getfixturevalue(name)
    router = Router(fabric, seed=5, polarized=polarized)
    a, b, sport, weight = _flows(fabric, rng)
    got_w, got_n = route_load(router, a, b, sport, weight)
    ref_w, ref_n = route_load(router, a, b, sport, weight, compiled=False)
    assert got_n.dtype == ref_n.dtype and np.array_equal(got_n, ref_n)
    assert got_w.tobytes() == ref_w.tobytes()
    # the counts are those of the routes themselves
    ip, lk = router.route_many(np.repeat(a, 3), np.repeat(b, 3), sport.ravel())
    assert np.array_equal(got_n, np.bincount(lk, minlength=fabric.num_links))
    assert got_n.sum() == ip[-1]


def test_failed_links_take_the_masked_path(k8, rng):
    router = Router(k8, seed=1, failed_links=[int(k8.wiring.tor_up[0, 0])])
    a, b, sport, weight = _flows(k8, rng, n=500)
    got_w, got_n = route_load(router, a, b, sport, weight)
    ip, lk = router.route_many(np.repeat(a, 3), np.repeat(b, 3), sport.ravel())
    assert np.array_equal(got_n, np.bincount(lk, minlength=k8.num_links))
    assert got_n[k8.wiring.tor_up[0, 0]] == 0


def test_one_port_per_connection_and_no_flows(k4):
    router = Router(k4)
    w1, n1 = route_load(router, [0, 1], [5, 9], np.array([49152, 50000], np.uint16), 2.0)
    w2, n2 = route_load(router, [0, 1], [5, 9], np.array([[49152], [50000]], np.uint16), 2.0)
    assert np.array_equal(n1, n2) and np.array_equal(w1, w2) and n1.sum() > 0
    assert np.array_equal(w1, 2.0 * n1)
    w0, n0 = route_load(router, [], [], np.zeros((0, 2), np.uint16), 1.0)
    assert not n0.any() and not w0.any() and n0.size == k4.num_links
