"""Compiled routing into CSR paths: ``route_csr`` against ``Router.route_many`` with the fixed
links joined around each route, element for element."""

from __future__ import annotations

import numpy as np
import pytest

from topologies.route_walk import njit, route_csr
from topologies.routing import Router

pytestmark = pytest.mark.skipif(njit is None, reason="the compiled walk needs numba")


def _flows(fabric, rng, n=4000):
    a = rng.integers(0, len(fabric.nics), n)
    b = rng.integers(0, len(fabric.nics), n)
    b[:50] = a[:50]                                    # a NIC to itself: no route links
    w = fabric.wiring
    same = np.flatnonzero(w.nic_tor == w.nic_tor[a[50]])
    b[50:100] = same[rng.integers(0, same.size, 50)]   # under one ToR
    return a, b, rng.integers(0, 1 << 16, n).astype(np.uint16)


def _joined(router, a, b, sport, head, tail):
    """route_many's paths with head's and tail's links (>= 0) around them, by plain Python."""
    ip, lk = router.route_many(a, b, sport)
    paths = [[*(x for x in head[i] if x >= 0), *lk[ip[i]:ip[i + 1]], *(x for x in tail[i] if x >= 0)]
             for i in range(len(a))]
    indptr = np.r_[0, np.cumsum([len(p) for p in paths])].astype(np.int64)
    return indptr, np.array([x for p in paths for x in p], np.int64)


@pytest.mark.parametrize("name", ["k4", "k8", "leafspine", "megascale"])
@pytest.mark.parametrize("polarized", [False, True])
def test_compiled_paths_equal_route_many_joined(request, name, polarized, rng):
    fabric = request.getfixturevalue(name)
    router = Router(fabric, seed=3, polarized=polarized)
    a, b, sport = _flows(fabric, rng)
    n, nl = len(a), fabric.num_links
    # up to two links before (some absent), one after (some absent)
    head = np.where(rng.random((n, 2)) < 0.3, -1, rng.integers(0, nl, (n, 2)))
    tail = np.where(rng.random((n, 1)) < 0.2, -1, rng.integers(0, nl, (n, 1)))
    ip, lk = route_csr(router, a, b, sport, head, tail)
    ref_ip, ref_lk = _joined(router, a, b, sport, head, tail)
    assert ip.dtype == lk.dtype == np.int64
    assert np.array_equal(ip, ref_ip) and np.array_equal(lk, ref_lk)
    # without head and tail: route_many itself
    ip0, lk0 = route_csr(router, a, b, sport, np.zeros((n, 0), np.int64),
                         np.zeros((n, 0), np.int64))
    ref = router.route_many(a, b, sport)
    assert np.array_equal(ip0, ref[0]) and np.array_equal(lk0, ref[1])


def test_failed_links_and_no_flows(k8, rng):
    router = Router(k8, seed=1, failed_links=[int(k8.wiring.tor_up[0, 0])])
    a, b, sport = _flows(k8, rng, n=200)
    none = np.zeros((200, 0), np.int64)
    assert route_csr(router, a, b, sport, none, none) is None  # the masked path: route_many
    ip, lk = route_csr(Router(k8), [], [], np.zeros(0, np.uint16), np.zeros((0, 1), np.int64),
                       np.zeros((0, 1), np.int64))
    assert ip.tolist() == [0] and lk.size == 0


def test_ends_of_the_wrong_shape_are_refused(k4):
    with pytest.raises(ValueError, match="head has shape"):
        route_csr(Router(k4), [0, 1], [5, 9], np.zeros(2, np.uint16), np.zeros(2, np.int64),
                  np.zeros((2, 1), np.int64))
