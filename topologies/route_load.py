"""Per-link load of many flows' ECMP routes, without materialising the routes.

Load-mode collectives (``netsim.collectives.load``) route tens of millions of QPs only to
count, per directed link, how many cross it and with what weight. :meth:`Router.route_many`
builds a (flows x 6) hop matrix and a CSR array for that, about thirty numpy passes per flow.
:func:`route_load` returns the same two per-link sums from one compiled pass (numba) that
walks each flow's route as :meth:`Router._route_fast` does: the CRC-32 of the 5-tuple from
the per-field tables of :func:`topologies.routing.crc32_tuple`, the switch's ``fmix32`` pick
at the ToR, agg and core, and the deterministic way down.

Flows come as connections with several source ports each (``sport`` of shape
(connections, ports)), so the CRC of the addresses is taken once per connection. The sums are
those of ``np.bincount`` over :meth:`Router.route_many`'s links in flow order, bit for bit
(``tests/topologies/test_route_load.py``). Without numba, or for a router with failed links
(the masked path), the plain route-and-bincount runs.
"""

from __future__ import annotations

import numpy as np

from topologies.routing import IPPROTO_UDP, ROCEV2_UDP_DPORT, Router, _crc_field_tables, _positions

try:  # pragma: no cover - exercised where numba is installed
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

_M32 = 0xFFFFFFFF


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
    if compiled and njit is not None and router._reach is None:
        return _compiled(router, a, b, sp, np.ascontiguousarray(w))
    ip, lk = router.route_many(np.repeat(a, sp.shape[1]), np.repeat(b, sp.shape[1]), sp.ravel())
    nl = fab.num_links
    flow_w = np.repeat(np.repeat(w, sp.shape[1]), np.diff(ip))
    return (np.bincount(lk, weights=flow_w, minlength=nl),
            np.bincount(lk, minlength=nl).astype(np.int64))


def _compiled(router, a, b, sp, w):
    fab, wr = router.fabric, router.fabric.wiring
    tabs, zero = _crc_field_tables()
    tail = int(tabs[5][ROCEV2_UDP_DPORT] ^ tabs[6][IPPROTO_UDP] ^ zero)
    i64 = np.int64
    out_w, out_n = np.zeros(fab.num_links), np.zeros(fab.num_links, i64)
    _walk(a.astype(i64), b.astype(i64), np.ascontiguousarray(sp), w,
          np.asarray(fab.nic_ip, np.uint32), tabs[0], tabs[1], tabs[2], tabs[3], tabs[4], tail,
          np.asarray(router.switch_seed, np.uint32), wr.nic_tor.astype(i64),
          wr.nic_up_link.astype(i64), wr.nic_down_link.astype(i64), wr.tor_pod.astype(i64),
          wr.tor_pos.astype(i64), np.ascontiguousarray(wr.tor_up, i64),
          np.ascontiguousarray(wr.agg_down, i64), np.ascontiguousarray(wr.agg_up, i64),
          np.ascontiguousarray(wr.core_down, i64), np.asarray(fab.link_dst, i64),
          int(wr.tor_base), int(wr.agg_base), int(wr.core_base), out_w, out_n)
    return out_w, out_n


def _fmix(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _add(link, wt, out_w, out_n):
    if link >= 0:
        out_w[link] += wt
        out_n[link] += 1


def _walk_py(a, b, sp, w, ip, t0, t1, t2, t3, t4, tail, seed, nic_tor, nic_up, nic_down,
             tor_pod, tor_pos, tor_up, agg_down, agg_up, core_down, link_dst, tor_base,
             agg_base, core_base, out_w, out_n):
    """Every flow's fast-path route (``Router._route_fast``), added to the per-link sums."""
    for i in range(a.size):
        x, y = a[i], b[i]
        if x == y:
            continue
        sip, dip = np.int64(ip[x]), np.int64(ip[y])
        c0 = (np.int64(t0[sip >> 16]) ^ np.int64(t1[sip & 0xFFFF]) ^ np.int64(t2[dip >> 16])
              ^ np.int64(t3[dip & 0xFFFF]) ^ tail)
        ta, tb, wt = nic_tor[x], nic_tor[y], w[i]
        for j in range(sp.shape[1]):
            h = c0 ^ np.int64(t4[sp[i, j]])
            _add(nic_up[x], wt, out_w, out_n)
            if ta == tb:
                _add(nic_down[y], wt, out_w, out_n)
                continue
            l1 = tor_up[ta, _fmix(h ^ np.int64(seed[tor_base + ta])) % tor_up.shape[1]]
            _add(l1, wt, out_w, out_n)
            agg = link_dst[l1] - agg_base
            if tor_pod[ta] != tor_pod[tb]:
                l2 = agg_up[agg, _fmix(h ^ np.int64(seed[agg_base + agg])) % agg_up.shape[1]]
                core = link_dst[l2] - core_base
                l3 = core_down[core, tor_pod[tb],
                               _fmix(h ^ np.int64(seed[core_base + core])) % core_down.shape[2]]
                _add(l2, wt, out_w, out_n)
                _add(l3, wt, out_w, out_n)
                agg = link_dst[l3] - agg_base
            _add(agg_down[agg, tor_pos[tb]], wt, out_w, out_n)
            _add(nic_down[y], wt, out_w, out_n)


if njit is not None:
    def _jit(fn, **kwargs):
        """Compiled, with the machine code cached on disk where numba finds a place for it."""
        try:
            return njit(cache=True, **kwargs)(fn)
        except RuntimeError:  # pragma: no cover - no writable cache location
            return njit(**kwargs)(fn)

    _fmix = _jit(_fmix, inline="always")
    _add = _jit(_add, inline="always")
    _walk = _jit(_walk_py, nogil=True)
