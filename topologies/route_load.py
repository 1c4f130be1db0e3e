"""Per-link load of many flows' ECMP routes, without materialising the routes.

Load-mode collectives (``netsim.collectives.load``) route tens of millions of QPs only to
count, per directed link, how many cross it and with what weight. :meth:`Router.route_many`
builds a (flows x 6) hop matrix and a CSR array for that, about thirty numpy passes per flow.
:func:`route_load` returns the same two per-link sums from one compiled pass (numba) that
walks each flow's route as :meth:`Router._route_fast` does, with the hash and the wiring
tables of :mod:`topologies.route_walk` (whose :func:`~topologies.route_walk.route_csr` writes
the routes out instead of summing them).

Flows come as connections with several source ports each (``sport`` of shape
(connections, ports)), so the CRC of the addresses is taken once per connection. The sums are
those of ``np.bincount`` over :meth:`Router.route_many`'s links in flow order, bit for bit
(``tests/topologies/test_route_load.py``). Without numba, or for a router with failed links
(the masked path), the plain route-and-bincount runs.
"""

from __future__ import annotations

import numpy as np

from topologies.route_walk import _fmix, applies, hash_arrays, njit, wiring_arrays
from topologies.routing import Router, _positions


def route_load(router: Router, src_nic, dst_nic, sport, weight,
               compiled: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-link sums over the routes of flows ``(src_nic[i], dst_nic[i], sport[i, j])``.

    Parameters
    ----------
    router
        The ECMP router (its fabric, switch seeds and failed links).
    src_nic, dst_nic : array_like of int, shape (connections,)
        Positions in ``fabric.nics``.
    sport : array_like of uint16, shape (connections, ports)
        UDP source port of each flow; row ``i`` holds connection ``i``'s flows.
    weight : array_like of float, shape (connections,)
        Weight of each flow of connection ``i``.
    compiled
        Use the compiled pass where it applies (tests compare both paths).

    Returns
    -------
    weighted : numpy.ndarray of float64, shape (links,)
        Sum of the weights of the flows crossing each link.
    flows : numpy.ndarray of int64, shape (links,)
        Number of flows crossing each link.
    """
    fab = router.fabric
    a, b = _positions(src_nic, dst_nic, len(fab.nics), "nic")
    sp = np.asarray(sport, np.uint16)
    sp = sp[:, None] if sp.ndim == 1 else sp  # one port per connection
    w = np.broadcast_to(np.asarray(weight, np.float64), a.shape)
    if not a.size:
        return np.zeros(fab.num_links), np.zeros(fab.num_links, np.int64)
    if compiled and applies(router):
        return _compiled(router, a, b, sp, np.ascontiguousarray(w))
    ip, lk = router.route_many(np.repeat(a, sp.shape[1]), np.repeat(b, sp.shape[1]), sp.ravel())
    nl = fab.num_links
    flow_w = np.repeat(np.repeat(w, sp.shape[1]), np.diff(ip))
    return (np.bincount(lk, weights=flow_w, minlength=nl),
            np.bincount(lk, minlength=nl).astype(np.int64))


def _compiled(router, a, b, sp, w):
    nl = router.fabric.num_links
    out_w, out_n = np.zeros(nl), np.zeros(nl, np.int64)
    _walk(a.astype(np.int64), b.astype(np.int64), np.ascontiguousarray(sp), w,
          *hash_arrays(router), *wiring_arrays(router), out_w, out_n)
    return out_w, out_n


def _add(link, wt, out_w, out_n):
    if link >= 0:
        out_w[link] += wt
        out_n[link] += 1


def _walk_py(a, b, sp, w, src_crc, dst_crc, port_crc, seed, nic_tor, nic_up, nic_down,
             tor_pod, tor_pos, tor_up, tor_up_agg, agg_up, agg_up_core, core_down,
             core_down_agg, agg_down, tor_base, agg_base, core_base, out_w, out_n):
    """Every flow's fast-path route (``Router._route_fast``), added to the per-link sums."""
    for i in range(a.size):
        x, y = a[i], b[i]
        if x == y:
            continue
        c0 = src_crc[x] ^ dst_crc[y]
        ta, tb, wt = nic_tor[x], nic_tor[y], w[i]
        for j in range(sp.shape[1]):
            _add(nic_up[x], wt, out_w, out_n)
            if ta == tb:
                _add(nic_down[y], wt, out_w, out_n)
                continue
            h = c0 ^ np.int64(port_crc[sp[i, j]])
            c = _fmix(h ^ np.int64(seed[tor_base + ta])) % tor_up.shape[1]
            _add(tor_up[ta, c], wt, out_w, out_n)
            agg = tor_up_agg[ta, c]
            if tor_pod[ta] != tor_pod[tb]:
                c = _fmix(h ^ np.int64(seed[agg_base + agg])) % agg_up.shape[1]
                _add(agg_up[agg, c], wt, out_w, out_n)
                core = agg_up_core[agg, c]
                c = _fmix(h ^ np.int64(seed[core_base + core])) % core_down.shape[2]
                _add(core_down[core, tor_pod[tb], c], wt, out_w, out_n)
                agg = core_down_agg[core, tor_pod[tb], c]
            _add(agg_down[agg, tor_pos[tb]], wt, out_w, out_n)
            _add(nic_down[y], wt, out_w, out_n)


if njit is not None:
    from topologies.route_walk import _jit

    _add = _jit(_add, inline="always")
    _walk = _jit(_walk_py, nogil=True)
