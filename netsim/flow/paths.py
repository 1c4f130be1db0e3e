"""GPU-to-GPU paths on a fabric, vectorised: NVLink inside a server, PCIe + ECMP route outside.

A network path is ``pcie(gpu -> its NIC) + Router.route_many(NIC -> NIC) + pcie(NIC -> gpu)``.
With PXN (NCCL's default, ``NCCL_PXN_DISABLE=0``) a sender may hand its data over NVLink to a
peer GPU of its server and use *that* GPU's NIC, so the path starts with
``nvlink(gpu -> nvswitch) + nvlink(nvswitch -> proxy)``. Two GPUs of one server talk over
``nvlink(src -> nvswitch) + nvlink(nvswitch -> dst)``.

Everything works on arrays of GPU positions (``fabric.gpus`` order) and returns CSR path lists
(``indptr``, ``links``), the shape ``Router.route_many`` uses.
"""

from __future__ import annotations

import numpy as np

import netsim.flow.csr_fast as csr_fast
from topologies.fabric import gpu_links
from topologies.route_walk import route_csr


def concat_csr(parts: list[tuple[np.ndarray, np.ndarray]], compiled: bool = True
               ) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-flow path pieces: flow i's path is part0[i] + part1[i] + ...

    Parameters
    ----------
    parts : list of (indptr, links)
        CSR lists over the same number of flows.
    compiled : bool
        Copy in :mod:`netsim.flow.csr_fast`'s kernel where numba is present (same output).

    Returns
    -------
    indptr, links : np.ndarray[int64]
    """
    n = len(parts[0][0]) - 1
    lens = [np.diff(p[0]) for p in parts]
    total = np.sum(lens, axis=0) if parts else np.zeros(n, np.int64)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(total, out=indptr[1:])
    if compiled and len(parts) and csr_fast.available(n):
        return indptr, csr_fast.concat(parts, indptr)
    out = np.empty(int(indptr[-1]), np.int64)
    offset = indptr[:-1].copy()
    for (ip, lk), ln in zip(parts, lens, strict=True):
        if len(lk):
            flow = np.repeat(np.arange(n), ln)
            within = np.arange(len(lk)) - np.repeat(ip[:-1], ln)
            out[offset[flow] + within] = lk
        offset += ln
    return indptr, out


def _single(links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR with one link per flow, or none where the id is -1."""
    links = np.asarray(links, np.int64)
    has = links >= 0
    indptr = np.zeros(len(links) + 1, np.int64)
    np.cumsum(has, out=indptr[1:])
    return indptr, links[has]


class FabricPaths:
    """Per-GPU link ids of a fabric and vectorised path construction.

    Parameters
    ----------
    fabric : topologies.Fabric
    router : topologies.routing.Router
        Decides the ECMP path of every network flow (and knows the failed links).
    """

    compiled = True
    """Route network paths in one compiled walk (``topologies.route_walk.route_csr``) where
    it applies: the same arrays as routing with ``Router.route_many`` and joining the pieces
    (a choice of speed; tests compare both)."""

    def __init__(self, fabric, router) -> None:
        self.fabric = fabric
        self.router = router
        self.gpu_nic = np.asarray(fabric.gpu_nic_index, np.int64)
        g = max(int(fabric.gpus_per_server), 1)
        self.gpu_server = np.arange(len(fabric.gpus), dtype=np.int64) // g
        self.gpu_local = np.arange(len(fabric.gpus), dtype=np.int64) % g
        self.nvlink_up, self.nvlink_down = gpu_links(fabric, "nvlink")
        self.pcie_up, self.pcie_down = gpu_links(fabric, "pcie")

    def same_server(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.gpu_server[a] == self.gpu_server[b]

    def nvlink_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """GPU -> NVSwitch -> GPU for pairs of one server."""
        up, down = self.nvlink_up[src], self.nvlink_down[dst]
        if np.any(up < 0) or np.any(down < 0):
            raise ValueError("fabric has no NVLink edges for some GPUs: cannot route inside a server")
        return concat_csr([_single(up), _single(down)])

    def network_paths(self, src: np.ndarray, dst: np.ndarray, sport: np.ndarray,
                      via: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Paths of network flows from GPU ``src`` to GPU ``dst`` with UDP source port ``sport``.

        ``via`` (optional, GPU positions, same server as ``src``): send through that GPU's NIC
        (PXN); ``via == src`` means no proxy hop.
        """
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        via = src if via is None else np.asarray(via, np.int64)
        a, b = self.gpu_nic[via], self.gpu_nic[dst]
        sport = np.asarray(sport).astype(np.uint16)
        head, tail = self._head_links(src, via), self.pcie_down[dst]
        if self.compiled:
            got = route_csr(self.router, a, b, sport, np.column_stack(head), tail[:, None])
            if got is not None:
                return got
        ip, lk = self.router.route_many(a, b, sport)
        return concat_csr([*map(_single, head), (np.asarray(ip, np.int64),
                                                 np.asarray(lk, np.int64)), _single(tail)])

    def _head_links(self, src: np.ndarray, via: np.ndarray) -> list[np.ndarray]:
        """Per flow, the links before its NIC, in order (-1: none): the PXN hops to the proxy
        where any flow has one, then PCIe up to the NIC."""
        proxy = via != src
        if not proxy.any():
            return [self.pcie_up[via]]
        return [np.where(proxy, self.nvlink_up[src], -1),
                np.where(proxy, self.nvlink_down[via], -1), self.pcie_up[via]]

    def gpu_paths(self, src: np.ndarray, dst: np.ndarray, sport: np.ndarray,
                  via: np.ndarray | None = None, force_net: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Paths for any GPU pairs: NVLink inside a server, the network otherwise.

        ``force_net`` marks pairs that must use the network even inside one server (NIC
        endpoints).

        Returns
        -------
        indptr, links : CSR paths
        is_net : np.ndarray[bool]
            Whether each flow crosses the network.
        """
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        via = src if via is None else np.asarray(via, np.int64)
        is_net = ~self.same_server(src, dst)
        if force_net is not None:
            is_net |= np.asarray(force_net, bool)
        n = len(src)
        lens = np.zeros(n, np.int64)
        pieces = {}
        if (~is_net).any():
            pieces[False] = self.nvlink_paths(src[~is_net], dst[~is_net])
            lens[~is_net] = np.diff(pieces[False][0])
        if is_net.any():
            pieces[True] = self.network_paths(src[is_net], dst[is_net], np.asarray(sport)[is_net],
                                              via[is_net])
            lens[is_net] = np.diff(pieces[True][0])
        if len(pieces) == 1:  # all one kind: that piece is the answer, in flow order
            (ip, lk), = pieces.values()
            return ip, lk, is_net
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=indptr[1:])
        links = np.empty(int(indptr[-1]), np.int64)
        for key, (ip, lk) in pieces.items():
            rows = np.flatnonzero(is_net == key)
            ln = np.diff(ip)
            start = np.repeat(indptr[rows], ln)
            within = np.arange(len(lk)) - np.repeat(ip[:-1], ln)
            links[start + within] = lk
        return indptr, links, is_net

    def path_latency_ps(self, indptr: np.ndarray, links: np.ndarray) -> np.ndarray:
        """One-way propagation latency of each path, integer picoseconds."""
        lat_ps = np.rint(np.asarray(self.fabric.link_latency_ns, np.float64) * 1000.0)
        per = np.zeros(len(indptr) - 1)
        if len(links):
            flow = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
            per = np.bincount(flow, weights=lat_ps[links], minlength=len(indptr) - 1)
        return per.astype(np.int64)
