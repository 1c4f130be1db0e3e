"""The compiled CSR concatenation and the pair merge of ``Incidence.from_entries`` are their
numpy forms exactly."""

from __future__ import annotations

import numpy as np
import pytest

import netsim.flow.csr_fast as csr_fast
from netsim.flow.link_order import unique_pairs
from netsim.flow.maxmin import _unique_pairs
from netsim.flow.paths import FabricPaths, concat_csr
from topologies import Clos3Spec, clos3
from topologies.routing import Router


def _piece(rng, n, most):
    lens = rng.integers(0, most + 1, n)
    indptr = np.r_[0, np.cumsum(lens)]
    return indptr, rng.integers(0, 1000, int(indptr[-1]))


@pytest.mark.skipif(csr_fast.njit is None, reason="the kernel needs numba")
def test_compiled_concatenation_is_the_numpy_one(rng):
    n = 2 * csr_fast.MIN_FLOWS + 3
    parts = [_piece(rng, n, k) for k in (1, 0, 4, 1)]  # includes an empty piece
    ip, lk = concat_csr(parts)
    ref_ip, ref_lk = concat_csr(parts, compiled=False)
    assert np.array_equal(ip, ref_ip) and np.array_equal(lk, ref_lk) and lk.dtype == np.int64


def test_paths_of_one_kind_are_the_rows_of_a_mixed_call(rng):
    # all-network pairs return their piece as it is: the rows the general assembly gives
    fabric = clos3(Clos3Spec(name="paths-8", servers=64, switch_radix=16, nic_speed_gbps=200,
                             port_speed_gbps=200, tor_downlink_split=1,
                             servers_per_tor_group=8))
    paths = FabricPaths(fabric, Router(fabric, seed=0))
    gps = int(fabric.gpus_per_server)
    n = len(paths.gpu_server)
    src = rng.integers(0, n, 400)
    dst = np.where(rng.random(400) < 0.5, src // gps * gps + (src + 1) % gps,
                   rng.integers(0, n, 400))
    sport = rng.integers(0, 1 << 16, 400)
    ip, lk, net = paths.gpu_paths(src, dst, sport)
    assert net.any() and not net.all()
    for kind in (True, False):
        rows = np.flatnonzero(net == kind)
        sub_ip, sub_lk, sub_net = paths.gpu_paths(src[rows], dst[rows], sport[rows])
        assert (sub_net == kind).all()
        want = [lk[ip[r]:ip[r + 1]] for r in rows]
        assert np.array_equal(np.diff(sub_ip), [len(w) for w in want])
        assert np.array_equal(sub_lk, np.concatenate(want))


@pytest.mark.skipif(csr_fast.njit is None, reason="the compiled walk needs numba")
def test_compiled_network_paths_are_the_joined_pieces(rng):
    # route_csr's one walk against route_many and concat_csr, with and without PXN proxies
    fabric = clos3(Clos3Spec(name="paths-8", servers=64, switch_radix=16, nic_speed_gbps=200,
                             port_speed_gbps=200, tor_downlink_split=1,
                             servers_per_tor_group=8))
    gps, n = int(fabric.gpus_per_server), len(fabric.gpus)
    src = rng.integers(0, n, 3000)
    dst = (src // gps + 1 + rng.integers(0, n // gps - 1, 3000)) % (n // gps) * gps \
        + rng.integers(0, gps, 3000)
    sport = rng.integers(0, 1 << 16, 3000)
    pxn = np.where(rng.random(3000) < 0.5, src // gps * gps + dst % gps, src)
    for via in (None, pxn, src):
        fast = FabricPaths(fabric, Router(fabric, seed=4))
        plain = FabricPaths(fabric, Router(fabric, seed=4))
        plain.compiled = False
        got = fast.network_paths(src, dst, sport, via)
        ref = plain.network_paths(src, dst, sport, via)
        assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(got, ref))
        assert len(got[1]) > 6 * len(src) * 0.5  # most cross the switches


@pytest.mark.parametrize("size", [0, 7, 50_000])
@pytest.mark.parametrize("compiled", [True, False])
def test_unique_pairs_is_numpys_unique(rng, size, compiled):
    flow, link = rng.integers(0, 300, size), rng.integers(0, 90, size)
    key, inv = np.unique(flow * 90 + link, return_inverse=True)
    got_key, got_inv = _unique_pairs(flow, link, 300, 90, compiled=compiled)
    assert np.array_equal(got_key, key) and np.array_equal(got_inv, inv.ravel())
    assert got_key.dtype == key.dtype and got_inv.dtype == np.int64


def test_unique_pairs_with_ids_out_of_range_are_numpys(rng):
    # the kernel declines (its counting sorts need the ranges); numpy's sort answers
    flow, link = rng.integers(0, 300, 20_000), rng.integers(0, 90, 20_000)
    assert unique_pairs(flow, link, 299, 90) is None and unique_pairs(flow, link, 300, 89) is None
    key, inv = np.unique(flow * 90 + link, return_inverse=True)
    got_key, got_inv = _unique_pairs(flow, link, 300, 90)
    assert np.array_equal(got_key, key) and np.array_equal(got_inv, inv.ravel())
