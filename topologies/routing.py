"""Valley-free up/down ECMP routing with per-switch hashing of the RoCEv2 5-tuple.

Next-hop groups come from the tier structure (``Fabric.wiring``), never from enumerating
shortest paths: a flow goes up from its ToR to any agg (and from there to any core) that can
still reach the destination ToR, then down deterministically.

Hash. Every switch computes the standard CRC-32 (IEEE 802.3, the polynomial ASIC hash
engines offer) over the 13-byte tuple (src IP, dst IP, UDP sport, UDP dport 4791, protocol 17)
and keys it with its own seed through a non-linear finaliser (MurmurHash3 ``fmix32``). Why
the finaliser: CRC is affine over GF(2), so CRCs with different initial values differ by a
constant XOR and pick correlated buckets; ASICs avoid that by offering several hash functions
and per-switch seeds/bit selections. ``polarized=True`` gives every switch the same seed and so
the same function, which reproduces hash polarization. The HPCC/SimAI ns-3 simulators likewise
hash per flow with a per-switch seed (Murmur3 constants, seed = switch id), see
``shared/reference/peer-simulators.md``.

UDP source port. With a zero GRH flow label (NCCL sets ``flow_label = 0``) the Linux RDMA core
derives the flow label from the QP numbers (``rdma_calc_flow_label``) and the RoCEv2 source
port from the flow label (``rdma_flow_label_to_udp_sport``), include/rdma/ib_verbs.h;
:func:`qp_udp_sport` reproduces both.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from topologies.fabric import Fabric

ROCEV2_UDP_DPORT = 4791
IPPROTO_UDP = 17
_CHUNK = 1 << 16  # flows per block on the failure path (bounds the (flows x group) masks)


def _crc_table() -> np.ndarray:
    c = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        c = np.where(c & 1, np.uint32(0xEDB88320) ^ (c >> np.uint32(1)), c >> np.uint32(1))
    return c.astype(np.uint32)


_CRC_TABLE = _crc_table()


def crc32_tuple(src_ip, dst_ip, sport, dport=ROCEV2_UDP_DPORT, proto=IPPROTO_UDP) -> np.ndarray:
    """Vectorized CRC-32 (same as ``zlib.crc32``) of the 13-byte big-endian 5-tuple.

    CRC-32 of a fixed-length message is affine over GF(2): it is the CRC of the all-zero
    tuple XOR one table entry per 16-bit field (:func:`_crc_field_tables`), so a tuple costs
    five table look-ups (seven when ``dport`` or ``proto`` vary) instead of thirteen byte
    steps; :func:`_crc32_bytewise` is the byte-by-byte reference the tests compare against.

    Parameters
    ----------
    src_ip, dst_ip : array_like of uint32
    sport, dport : array_like of uint16
    proto : int or array_like of uint8
    """
    src = np.asarray(src_ip, dtype=np.uint32)
    dst = np.asarray(dst_ip, dtype=np.uint32)
    sp = np.asarray(sport, dtype=np.uint32)
    src, dst, sp = np.broadcast_arrays(src, dst, sp)
    tab, zero = _crc_field_tables()
    lo = np.uint32(0xFFFF)
    crc = tab[0][src >> np.uint32(16)] ^ tab[1][src & lo]
    crc ^= tab[2][dst >> np.uint32(16)]
    crc ^= tab[3][dst & lo]
    crc ^= tab[4][sp & lo]
    tail = tab[5][np.asarray(dport, np.uint32) & lo] ^ tab[6][np.asarray(proto, np.uint32) & 0xFF]
    return np.asarray(crc ^ (tail ^ zero))


_CRC_FIELDS = ((0, 2), (2, 2), (4, 2), (6, 2), (8, 2), (10, 2), (12, 1))  # (byte offset, width)
_crc_tables: tuple[tuple[np.ndarray, ...], np.uint32] | None = None


def _crc_field_tables() -> tuple[tuple[np.ndarray, ...], np.uint32]:
    """Per 16-bit field of the 13-byte tuple, the CRC contribution of every value (the CRC of
    the tuple holding that value there and zeros elsewhere, XOR the all-zero tuple's CRC);
    and the all-zero tuple's CRC. Built once from :func:`_crc32_bytewise`."""
    global _crc_tables
    if _crc_tables is None:
        zero = _crc32_bytewise(np.zeros((1, 13), np.uint8))[0]
        tabs = []
        for off, width in _CRC_FIELDS:
            v = np.arange(1 << (8 * width), dtype=np.uint32)
            msg = np.zeros((v.size, 13), np.uint8)
            for b in range(width):
                msg[:, off + b] = (v >> np.uint32(8 * (width - 1 - b))) & np.uint32(0xFF)
            tabs.append(_crc32_bytewise(msg) ^ zero)
        _crc_tables = (tuple(tabs), zero)
    return _crc_tables


def _crc32_bytewise(msg: np.ndarray) -> np.ndarray:
    """CRC-32 (``zlib.crc32``) of each row of a uint8 array, one table step per byte."""
    crc = np.full(msg.shape[0], 0xFFFFFFFF, dtype=np.uint32)
    eight, mask = np.uint32(8), np.uint32(0xFF)
    for j in range(msg.shape[1]):
        crc = _CRC_TABLE[(crc ^ msg[:, j].astype(np.uint32)) & mask] ^ (crc >> eight)
    return crc ^ np.uint32(0xFFFFFFFF)


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def ecmp_hash(src_ip, dst_ip, sport, seed=0, dport=ROCEV2_UDP_DPORT, proto=IPPROTO_UDP):
    """Hash a switch computes for the RoCEv2 5-tuple: ``fmix32(crc32(tuple) ^ seed)``.

    Parameters
    ----------
    src_ip, dst_ip : array_like of uint32
    sport : array_like of uint16
    seed : int or array_like of uint32
        The switch's hash seed (broadcasts against the flows).

    Returns
    -------
    numpy.ndarray of uint32 (a 0-d array for scalar input)
    """
    crc = crc32_tuple(src_ip, dst_ip, sport, dport, proto)
    return _fmix32(np.atleast_1d(crc ^ np.asarray(seed, dtype=np.uint32))).reshape(
        np.broadcast(crc, np.asarray(seed)).shape)


def qp_udp_sport(qpn, remote_qpn=1):
    """RoCEv2 UDP source port a Linux RDMA NIC derives from a QP pair (flow label 0).

    ``rdma_calc_flow_label``: ``v = lqpn * rqpn; v ^= v >> 20; v ^= v >> 40; fl = v & 0xFFFFF``;
    ``rdma_flow_label_to_udp_sport``: ``(fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14) | 0xC000``.

    Parameters
    ----------
    qpn : int or array_like
        Local QP number (24 bits).
    remote_qpn : int or array_like, default 1
        Remote QP number (1 gives the port as a function of the local QPN alone).

    Returns
    -------
    int (or numpy array of uint16) in 49152..65535
    """
    scalar = np.isscalar(qpn) and np.isscalar(remote_qpn)
    # a fresh array (the steps below work in place on it)
    v = np.asarray((np.asarray(qpn, dtype=np.uint64) & np.uint64(0xFFFFFF)) * (
        np.asarray(remote_qpn, dtype=np.uint64) & np.uint64(0xFFFFFF)))
    v ^= v >> np.uint64(20)
    v ^= v >> np.uint64(40)
    v &= np.uint64(0xFFFFF)  # the flow label
    low = v >> np.uint64(14)  # (fl & 0xFC000) >> 14 of a 20-bit label
    v &= np.uint64(0x3FFF)
    v ^= low
    v |= np.uint64(0xC000)
    port = v.astype(np.uint16)
    return int(port) if scalar else port


def _positions(src, dst, n: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination positions (``what``: "nic" or "gpu") as flat int64 arrays of one
    length, each in 0..n-1."""
    a = np.asarray(src, dtype=np.int64).ravel()
    b = np.asarray(dst, dtype=np.int64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"src_{what} and dst_{what} must have the same length")
    if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n):
        raise ValueError(f"src_{what}/dst_{what}: {what.upper()} positions must be in 0..{n - 1}")
    return a, b


def _indptr(lengths: np.ndarray) -> np.ndarray:
    """CSR row pointers of rows of these lengths: ``indptr[i]:indptr[i + 1]`` is row ``i``."""
    indptr = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return indptr


class Router:
    """Up/down ECMP router of a :class:`Fabric`.

    Parameters
    ----------
    fabric : Fabric
    seed : int
        Derives every switch's hash seed.
    polarized : bool
        Give every switch the same seed (reproduces hash polarization).
    failed_links : iterable of int
        Directed link ids; each takes its whole cable (both directions) out of every group.
    """

    def __init__(self, fabric: Fabric, seed: int = 0, polarized: bool = False,
                 failed_links: Iterable[int] = ()) -> None:
        self.fabric = fabric
        self.seed = int(seed)
        self.polarized = bool(polarized)
        n_nodes = len(fabric.nodes)
        key = _fmix32(np.array([self.seed & 0xFFFFFFFF], np.uint32))
        if polarized:  # one seed, so one hash function, on every switch
            self.switch_seed = np.full(n_nodes, key[0])
        else:
            idx = np.arange(n_nodes, dtype=np.uint32) * np.uint32(0x9E3779B9)
            self.switch_seed = _fmix32(idx ^ key)
        failed = np.asarray(list(failed_links), dtype=np.int64)
        if failed.size and (failed.min() < 0 or failed.max() >= fabric.num_links):
            raise ValueError(f"failed_links: link ids must be in 0..{fabric.num_links - 1}")
        self.alive = np.ones(fabric.num_links, bool)
        self.alive[failed] = False
        self.alive[failed ^ 1] = False  # a cable fails in both directions
        self.failed = failed
        self._reach = _Reach(fabric, self.alive) if failed.size else None
        self._skip_intact = True  # tests turn this off to compare with the all-masks path

    # -- public API --------------------------------------------------------------------------
    def route_many(self, src_nic, dst_nic, sport) -> tuple[np.ndarray, np.ndarray]:
        """Route many flows NIC to NIC at once.

        Parameters
        ----------
        src_nic, dst_nic : array_like of int
            Positions in ``fabric.nics``.
        sport : array_like of int
            UDP source port of each flow (broadcasts).

        Returns
        -------
        indptr : numpy.ndarray of int64, shape (flows + 1,)
        links : numpy.ndarray of int64
            ``links[indptr[i]:indptr[i + 1]]`` are the directed link ids of flow ``i``.
        """
        fab = self.fabric
        a, b = _positions(src_nic, dst_nic, len(fab.nics), "nic")
        sp = np.broadcast_to(np.asarray(sport, dtype=np.uint32), a.shape)
        h = crc32_tuple(fab.nic_ip[a], fab.nic_ip[b], sp)
        hops = np.full((a.size, 6), -1, np.int64)
        self._route_fast(a, b, h, hops)
        if self._reach is not None:
            # only flows that met a group with a dead member need the per-flow masks; the
            # others chose exactly what the masked path would (hash % full width)
            todo = np.flatnonzero(self._degraded(a, b, hops)) if self._skip_intact else \
                np.arange(a.size)
            for lo in range(0, todo.size, _CHUNK):
                sel = todo[lo:lo + _CHUNK]
                sub = np.full((sel.size, 6), -1, np.int64)
                self._route_failed(a[sel], b[sel], h[sel], sub)
                hops[sel] = sub
        same = a == b
        hops[same] = -1
        return _indptr((hops >= 0).sum(axis=1)), hops[hops >= 0]

    def route_gpus(self, src_gpu, dst_gpu, sport) -> tuple[np.ndarray, np.ndarray]:
        """Route many flows GPU to GPU: like :meth:`route_many`, with the hops inside servers.

        ``src_gpu``, ``dst_gpu`` are positions in ``fabric.gpus``; ``sport`` (broadcast) is
        unused for flows inside a server. Returns the CSR ``indptr, links`` of
        :meth:`route_many`: two GPUs of one server use ``[gpu -> nvswitch, nvswitch -> gpu]``,
        others ``[pcie up] + NIC route + [pcie down]``.
        """
        fab = self.fabric
        a, b = _positions(src_gpu, dst_gpu, len(fab.gpus), "gpu")
        up, down, nvl_up, nvl_down = self._gpu_links()
        sp = np.broadcast_to(np.asarray(sport, dtype=np.uint32), a.shape)
        g = fab.gpus_per_server
        local = (a // g == b // g) & (a != b) & (g > 1)
        net = (a // g != b // g) | ((g == 1) & (a != b))
        na, nb = fab.gpu_nic_index[a[net]], fab.gpu_nic_index[b[net]]
        n_ptr, n_links = self.route_many(na, nb, sp[net])
        lengths = np.zeros(a.size, np.int64)
        lengths[local] = 2
        lengths[net] = np.diff(n_ptr) + 2
        indptr = _indptr(lengths)
        links = np.empty(indptr[-1], np.int64)
        start = indptr[:-1]
        links[start[local]], links[start[local] + 1] = nvl_up[a[local]], nvl_down[b[local]]
        s_net, e_net = start[net], indptr[1:][net]
        links[s_net], links[e_net - 1] = up[a[net]], down[b[net]]
        # NIC-route links go between the two PCIe hops of each network flow
        offs = np.repeat(s_net + 1 - n_ptr[:-1], np.diff(n_ptr))
        links[np.arange(n_links.size) + offs] = n_links
        return indptr, links

    def _gpu_links(self):
        """Per GPU: PCIe link to/from its NIC, NVLink to/from its server's NVSwitch (-1: none)."""
        if not hasattr(self, "_gl"):
            fab = self.fabric
            n = len(fab.gpus)
            out = [np.full(n, -1, np.int64) for _ in range(4)]
            ids = np.arange(fab.num_links)
            is_gpu = fab.node_role == "gpu"
            for k, kind in enumerate(("pcie", "nvlink")):
                sel = fab.link_kind == kind
                frm = sel & is_gpu[fab.link_src]
                to = sel & is_gpu[fab.link_dst]
                out[2 * k][fab.link_src[frm]] = ids[frm]      # gpu node index = gpu position
                out[2 * k + 1][fab.link_dst[to]] = ids[to]
            self._gl = tuple(out)
        return self._gl

    def path(self, src: str, dst: str, sport: int) -> list[int]:
        """Directed link ids of one flow; ``src``/``dst`` are NIC or GPU names.

        GPU endpoints add the PCIe hop to/from the GPU's rail NIC; two GPUs of one server talk
        over NVLink through the server's NVSwitch.
        """
        fab = self.fabric
        if src == dst:
            return []
        head: list[int] = []
        tail: list[int] = []
        s_nic, d_nic = src, dst
        if fab.role(src) == "gpu" and fab.role(dst) == "gpu":
            s_srv = fab.nic_server(fab.gpu_nic(src))
            if s_srv == fab.nic_server(fab.gpu_nic(dst)) and src != dst:
                nvs = f"{s_srv}-nvsw"
                return [fab.link_id(src, nvs), fab.link_id(nvs, dst)]
        if fab.role(src) == "gpu":
            s_nic = fab.gpu_nic(src)
            head = [fab.link_id(src, s_nic)]
        if fab.role(dst) == "gpu":
            d_nic = fab.gpu_nic(dst)
            tail = [fab.link_id(d_nic, dst)]
        for name, node in (("src", s_nic), ("dst", d_nic)):
            if fab.role(node) != "nic":
                raise ValueError(f"{name}={node!r} is not a GPU or NIC of fabric {fab.name}")
        indptr, links = self.route_many([fab.nic_position(s_nic)], [fab.nic_position(d_nic)],
                                        [sport])
        return head + links.tolist() + tail

    def ecmp_width(self, src: str, dst: str) -> int:
        """Number of equal-cost (shortest, valley-free) paths between two NICs or GPUs."""
        fab, w = self.fabric, self.fabric.wiring
        nic = [fab.gpu_nic(x) if fab.role(x) == "gpu" else x for x in (src, dst)]
        if fab.role(src) == fab.role(dst) == "gpu" and \
                fab.nic_server(nic[0]) == fab.nic_server(nic[1]):
            return 1
        a, b = (fab.nic_position(x) for x in nic)
        alive = self.alive
        if a == b:
            return 1
        if not (alive[w.nic_up_link[a]] and alive[w.nic_down_link[b]]):
            return 0
        ta, tb = int(w.nic_tor[a]), int(w.nic_tor[b])
        if ta == tb:
            return 1
        reach = self._reach or _Reach(fab, alive)
        ups = w.tor_up[ta]
        ups = ups[alive[ups]]
        aggs = fab.link_dst[ups] - w.agg_base
        if w.tor_pod[ta] == w.tor_pod[tb]:
            return int(reach.agg_tor[aggs, tb].sum())
        total = 0
        for ag in aggs:
            for l2 in w.agg_up[ag][alive[w.agg_up[ag]]]:
                core = fab.link_dst[l2] - w.core_base
                downs = w.core_down[core, w.tor_pod[tb]]
                downs = downs[downs >= 0]
                ok = alive[downs] & reach.agg_tor[fab.link_dst[downs] - w.agg_base, tb]
                total += int(ok.sum())
        return total

    # -- internals ---------------------------------------------------------------------------
    def _pick(self, h: np.ndarray, node: np.ndarray, width) -> np.ndarray:
        return _fmix32(h ^ self.switch_seed[node]) % np.asarray(width, dtype=np.uint32)

    def _route_fast(self, a, b, h, hops) -> None:
        fab, w = self.fabric, self.fabric.wiring
        ta, tb = w.nic_tor[a], w.nic_tor[b]
        hops[:, 0] = w.nic_up_link[a]
        same_tor = ta == tb
        hops[same_tor, 1] = w.nic_down_link[b[same_tor]]
        up = ~same_tor
        cross = up & (w.tor_pod[ta] != w.tor_pod[tb])
        i_up = np.flatnonzero(up)
        k1 = self._pick(h[i_up], w.tor_base + ta[i_up], w.tor_up.shape[1])
        l1 = w.tor_up[ta[i_up], k1]
        hops[i_up, 1] = l1
        agg1 = fab.link_dst[l1] - w.agg_base
        in_pod = ~cross[i_up]
        i_in = i_up[in_pod]
        hops[i_in, 2] = w.agg_down[agg1[in_pod], w.tor_pos[tb[i_in]]]
        hops[i_in, 3] = w.nic_down_link[b[i_in]]
        i_x = i_up[~in_pod]
        if i_x.size:
            ag = agg1[~in_pod]
            k2 = self._pick(h[i_x], w.agg_base + ag, w.agg_up.shape[1])
            l2 = w.agg_up[ag, k2]
            core = fab.link_dst[l2] - w.core_base
            k3 = self._pick(h[i_x], w.core_base + core, w.core_down.shape[2])
            l3 = w.core_down[core, w.tor_pod[tb[i_x]], k3]
            agg2 = fab.link_dst[l3] - w.agg_base
            hops[i_x, 2], hops[i_x, 3] = l2, l3
            hops[i_x, 4] = w.agg_down[agg2, w.tor_pos[tb[i_x]]]
            hops[i_x, 5] = w.nic_down_link[b[i_x]]

    def _degraded(self, a, b, hops) -> np.ndarray:
        """Flows whose fast-path route crossed a group that has a dead member for them."""
        fab, w, reach = self.fabric, self.fabric.wiring, self._reach
        ta, tb = w.nic_tor[a], w.nic_tor[b]
        bad = ~(self.alive[w.nic_up_link[a]] & self.alive[w.nic_down_link[b]]) & (a != b)
        up = (ta != tb) & (a != b)
        bad |= up & ~reach.tor_full[ta, tb]
        cross = up & (w.tor_pod[ta] != w.tor_pod[tb]) & ~bad
        agg1 = fab.link_src[hops[cross, 2]] - w.agg_base
        core = fab.link_src[hops[cross, 3]] - w.core_base
        tbx = tb[cross]
        bad[cross] |= ~reach.agg_up_full[agg1, tbx] | ~reach.core_full[core, tbx]
        return bad

    def _choose(self, h, node, cand, ok, a, b):
        """Pick, per flow, the (hash mod live-count)-th valid member of ``cand``."""
        count = ok.sum(axis=1)
        if (count == 0).any():
            i = int(np.flatnonzero(count == 0)[0])
            raise ValueError(self._no_path(a[i], b[i]))
        k = self._pick(h, node, count.astype(np.uint32)).astype(np.int64)
        col = np.argmax(np.cumsum(ok, axis=1) > k[:, None], axis=1)
        return cand[np.arange(len(cand)), col]

    def _no_path(self, a, b) -> str:
        fab = self.fabric
        return (f"no path from {fab.nics[a]} to {fab.nics[b]}: the failed links "
                f"({len(self.failed)} given) disconnect them")

    def _route_failed(self, a, b, h, hops) -> None:
        fab, w, alive, reach = self.fabric, self.fabric.wiring, self.alive, self._reach
        ta, tb = w.nic_tor[a], w.nic_tor[b]
        dead = ~(alive[w.nic_up_link[a]] & alive[w.nic_down_link[b]]) & (a != b)
        if dead.any():
            i = int(np.flatnonzero(dead)[0])
            raise ValueError(self._no_path(a[i], b[i]))
        hops[:, 0] = w.nic_up_link[a]
        same_tor = ta == tb
        hops[same_tor, 1] = w.nic_down_link[b[same_tor]]
        i_up = np.flatnonzero(~same_tor)
        if not i_up.size:
            return
        ta_u, tb_u = ta[i_up], tb[i_up]
        cross = w.tor_pod[ta_u] != w.tor_pod[tb_u]
        cand = w.tor_up[ta_u]
        nxt = fab.link_dst[cand] - w.agg_base
        ok = alive[cand] & np.where(cross[:, None], reach.agg_up_tor[nxt, tb_u[:, None]],
                                    reach.agg_tor[nxt, tb_u[:, None]])
        l1 = self._choose(h[i_up], w.tor_base + ta_u, cand, ok, a[i_up], b[i_up])
        hops[i_up, 1] = l1
        agg1 = fab.link_dst[l1] - w.agg_base
        i_in, sel_in = i_up[~cross], ~cross
        hops[i_in, 2] = w.agg_down[agg1[sel_in], w.tor_pos[tb_u[sel_in]]]
        hops[i_in, 3] = w.nic_down_link[b[i_in]]
        i_x = i_up[cross]
        if not i_x.size:
            return
        ag, tbx = agg1[cross], tb_u[cross]
        cand = w.agg_up[ag]
        ok = alive[cand] & reach.core_tor[fab.link_dst[cand] - w.core_base, tbx[:, None]]
        l2 = self._choose(h[i_x], w.agg_base + ag, cand, ok, a[i_x], b[i_x])
        core = fab.link_dst[l2] - w.core_base
        cand = w.core_down[core, w.tor_pod[tbx]]
        ok = (cand >= 0) & alive[np.maximum(cand, 0)] & reach.agg_tor[
            fab.link_dst[np.maximum(cand, 0)] - w.agg_base, tbx[:, None]]
        l3 = self._choose(h[i_x], w.core_base + core, cand, ok, a[i_x], b[i_x])
        agg2 = fab.link_dst[l3] - w.agg_base
        hops[i_x, 2], hops[i_x, 3] = l2, l3
        hops[i_x, 4] = w.agg_down[agg2, w.tor_pos[tbx]]
        hops[i_x, 5] = w.nic_down_link[b[i_x]]


class _Reach:
    """Which aggs/cores can still reach each ToR downward (and aggs via a core) given failures."""

    def __init__(self, fabric: Fabric, alive: np.ndarray) -> None:
        w = fabric.wiring
        n_tor = len(w.tor_pod)
        n_agg = len(w.agg_pod)
        down = w.agg_down[:, w.tor_pos]                       # (aggs, tors) link agg -> ToR t
        same_pod = w.agg_pod[:, None] == w.tor_pod[None, :]
        self.agg_tor = same_pod & (down >= 0) & alive[np.maximum(down, 0)]
        n_core = w.core_down.shape[0]
        self.core_tor = np.zeros((n_core, n_tor), bool)
        if n_core:
            cd = w.core_down[:, w.tor_pod, :]                 # (cores, tors, s)
            valid = (cd >= 0) & alive[np.maximum(cd, 0)]
            agg = fabric.link_dst[np.maximum(cd, 0)] - w.agg_base
            self.core_tor = (valid & self.agg_tor[agg, np.arange(n_tor)[None, :, None]]).any(2)
        self.agg_up_tor = np.zeros((n_agg, n_tor), bool)
        self.agg_up_full = np.ones((n_agg, n_tor), bool)  # every uplink still leads to ToR t
        for k in range(w.agg_up.shape[1]):
            link = w.agg_up[:, k]
            core = fabric.link_dst[link] - w.core_base
            ok = alive[link][:, None] & self.core_tor[core]
            self.agg_up_tor |= ok
            self.agg_up_full &= ok
        self.core_full = np.ones((n_core, n_tor), bool)    # every downlink of the dst pod
        if n_core:
            self.core_full = (~(cd >= 0) | (valid & self.agg_tor[
                agg, np.arange(n_tor)[None, :, None]])).all(2)
        # ToR t, destination ToR u: are all of t's uplinks usable toward u?
        cross = w.tor_pod[:, None] != w.tor_pod[None, :]
        self.tor_full = np.ones((n_tor, n_tor), bool)
        for k in range(w.tor_up.shape[1]):
            link = w.tor_up[:, k]
            ag = fabric.link_dst[link] - w.agg_base
            ok = np.where(cross, self.agg_up_tor[ag], self.agg_tor[ag])
            self.tor_full &= alive[link][:, None] & ok
