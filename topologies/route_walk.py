"""ECMP routes of many flows in one compiled pass: the walk of :meth:`Router._route_fast`.

:meth:`Router.route_many` routes with numpy, about thirty passes over a (flows x 6) hop matrix
and a compaction into CSR; a GPU path then joins PCIe (and PXN) hops around each route
(``netsim.flow.paths.concat_csr``). :func:`route_csr` walks each flow instead, writing its
path as it goes: its links before the NIC, its route hop by hop (the CRC-32 of the 5-tuple,
the switch's ``fmix32`` pick at the ToR, agg and core, the deterministic way down) and its
links after, the same arrays element for element (``tests/topologies/test_route_walk.py``).

The hash comes from per-NIC tables (:func:`hash_arrays`: the CRC-32 is affine, so a NIC's
address contributes the same bits to every tuple it is in) and each pick's next switch from
per-group tables (:func:`wiring_arrays`); :func:`topologies.route_load.route_load`, which
sums the routes per link instead of writing them, walks with the same tables.

Without numba, or for a router with failed links (the masked path), there is no compiled
walk: :func:`route_csr` returns None and the caller routes with :meth:`Router.route_many`.
"""

from __future__ import annotations

import numpy as np

from topologies.routing import IPPROTO_UDP, ROCEV2_UDP_DPORT, Router, _crc_field_tables, _positions

try:  # pragma: no cover - exercised where numba is installed
    from numba import njit
except ImportError:  # pragma: no cover
    njit = None

_M32 = 0xFFFFFFFF
#: Most links of one route (NIC up, ToR up, agg up, core down, agg down, ToR down).
MAX_HOPS = 6


def applies(router: Router) -> bool:
    """Whether the compiled walk routes as ``router`` does (numba, no failed links)."""
    return njit is not None and router._reach is None


def hash_arrays(router: Router) -> tuple:
    """Per NIC, the CRC-32 contribution of its address as the source and as the destination
    (with the constant part: destination port, protocol, the all-zero tuple's CRC), and the
    table of the source port's."""
    tabs, zero = _crc_field_tables()
    ip = np.asarray(router.fabric.nic_ip, np.uint32)
    hi, lo = ip >> np.uint32(16), ip & np.uint32(0xFFFF)
    tail = tabs[5][ROCEV2_UDP_DPORT] ^ tabs[6][IPPROTO_UDP] ^ zero
    return ((tabs[0][hi] ^ tabs[1][lo]).astype(np.int64),
            (tabs[2][hi] ^ tabs[3][lo] ^ tail).astype(np.int64), tabs[4])


def wiring_arrays(router: Router) -> tuple:
    """What a walk reads of the router and its fabric's wiring, in this order: the
    switches' hash seeds, the NICs' ToRs and links, the ToRs' pods and positions, each
    group's links and the switch each of them leads to (numbered within its tier)."""
    fab, wr = router.fabric, router.fabric.wiring
    i64 = np.int64
    dst = np.asarray(fab.link_dst, i64)

    def table(links, base):
        links = np.ascontiguousarray(links, i64)
        return links, dst[links] - int(base)

    return (np.asarray(router.switch_seed, np.uint32), wr.nic_tor.astype(i64),
            wr.nic_up_link.astype(i64), wr.nic_down_link.astype(i64), wr.tor_pod.astype(i64),
            wr.tor_pos.astype(i64), *table(wr.tor_up, wr.agg_base),
            *table(wr.agg_up, wr.core_base), *table(wr.core_down, wr.agg_base),
            np.ascontiguousarray(wr.agg_down, i64), int(wr.tor_base), int(wr.agg_base),
            int(wr.core_base))


def route_csr(router: Router, src_nic, dst_nic, sport, head: np.ndarray, tail: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """CSR paths: flow ``i`` crosses ``head[i]``, then its route, then ``tail[i]``.

    Parameters
    ----------
    router
        The ECMP router (its fabric and switch seeds).
    src_nic, dst_nic : array_like of int, shape (flows,)
        Positions in ``fabric.nics``.
    sport : array_like of uint16, shape (flows,)
        UDP source port of each flow.
    head, tail : numpy.ndarray of int64, shape (flows, k)
        Links before and after each flow's route, in order; ``-1`` is no link.

    Returns
    -------
    (indptr, links), the concatenation of ``head``'s links, :meth:`Router.route_many`'s and
    ``tail``'s, flow by flow, element for element; or None where the compiled walk does not
    apply (:func:`applies`).
    """
    if not applies(router):
        return None
    a, b = _positions(src_nic, dst_nic, len(router.fabric.nics), "nic")
    sp = np.ascontiguousarray(np.broadcast_to(np.asarray(sport, np.uint16), a.shape))
    i64 = np.int64
    head, tail = np.ascontiguousarray(head, i64), np.ascontiguousarray(tail, i64)
    for name, ends in (("head", head), ("tail", tail)):
        if ends.ndim != 2 or len(ends) != a.size:
            raise ValueError(f"{name} has shape {ends.shape}: give ({a.size}, k), k links "
                             "per flow")
    return _paths(a.astype(i64), b.astype(i64), sp, head, tail, *hash_arrays(router),
                  *wiring_arrays(router))


def _fmix(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _emit(link, out, k):
    """``link`` written to ``out[k]`` if it is one (>= 0: :meth:`Router.route_many` drops the
    hops of its matrix that are not); returns the next ``k``."""
    if link >= 0:
        out[k] = link
        return k + 1
    return k


def _paths_py(a, b, sp, head, tail, src_crc, dst_crc, port_crc, seed, nic_tor, nic_up,
              nic_down, tor_pod, tor_pos, tor_up, tor_up_agg, agg_up, agg_up_core, core_down,
              core_down_agg, agg_down, tor_base, agg_base, core_base):
    """One walk over the flows: each one's head, route (the hops of
    :meth:`Router._route_fast`, in order) and tail written in turn into room for the longest
    path, ``indptr`` as they go."""
    n = a.size
    indptr = np.zeros(n + 1, np.int64)
    out = np.empty(n * (head.shape[1] + MAX_HOPS + tail.shape[1]), np.int64)
    k = 0
    for i in range(n):
        x, y = a[i], b[i]
        for j in range(head.shape[1]):
            k = _emit(head[i, j], out, k)
        if x != y:
            ta, tb = nic_tor[x], nic_tor[y]
            k = _emit(nic_up[x], out, k)
            if ta != tb:
                h = src_crc[x] ^ dst_crc[y] ^ np.int64(port_crc[sp[i]])
                c = _fmix(h ^ np.int64(seed[tor_base + ta])) % tor_up.shape[1]
                k = _emit(tor_up[ta, c], out, k)
                agg = tor_up_agg[ta, c]
                if tor_pod[ta] != tor_pod[tb]:
                    c = _fmix(h ^ np.int64(seed[agg_base + agg])) % agg_up.shape[1]
                    k = _emit(agg_up[agg, c], out, k)
                    core = agg_up_core[agg, c]
                    c = _fmix(h ^ np.int64(seed[core_base + core])) % core_down.shape[2]
                    k = _emit(core_down[core, tor_pod[tb], c], out, k)
                    agg = core_down_agg[core, tor_pod[tb], c]
                k = _emit(agg_down[agg, tor_pos[tb]], out, k)
            k = _emit(nic_down[y], out, k)
        for j in range(tail.shape[1]):
            k = _emit(tail[i, j], out, k)
        indptr[i + 1] = k
    return indptr, out[:k]


if njit is not None:
    def _jit(fn, **kwargs):
        """Compiled, with the machine code cached on disk where numba finds a place for it."""
        try:
            return njit(cache=True, **kwargs)(fn)
        except RuntimeError:  # pragma: no cover - no writable cache location
            return njit(**kwargs)(fn)

    _fmix = _jit(_fmix, inline="always")
    _emit = _jit(_emit, inline="always")
    _paths = _jit(_paths_py, nogil=True)
