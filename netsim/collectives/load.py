"""All-to-all in *load mode*: per-link bytes of every QP routed in bulk, time from the hottest link.

An all-to-all of n ranks has n(n-1) rank pairs (1.5e8 at 12,288 GPUs); with PXN NCCL moves
them over n^2 / gpus_per_server network connections (1.9e7 at 12,288, 3.0e8 at 49,152), each
spread over 2 channels. The exact engine (:func:`netsim.collectives.run_collective`) gives every
QP a commodity in one fluid problem, which fits to about 2,048 GPUs. Load mode keeps what
decides an all-to-all on a large fabric, *which link carries how many bytes*, exactly as the
exact engine would place them:

* the same connections (PXN: NVLink to the GPU on the receiver's rail, then one network
  connection per (proxy GPU, receiver) pair; ``algorithms._pxn_aggregate``), the same channels
  and QPs, the same QP numbers (``connection_qpn``, keyed by the communicator), hence the same
  UDP source ports and the same ECMP paths (``Router.route_many``);
* generated and routed in chunks of source servers, each chunk folded into a per-link byte
  count (``np.bincount``) and dropped, so memory stays flat and the cost is linear in QPs.

Time: every QP of an all-to-all starts together and the slowest link must carry its bytes, so
``time >= max_l bytes_l / (capacity_l x wire efficiency x protocol efficiency)`` plus the
phase latency. Load mode reports that bound. It is exact when the hottest link stays saturated
until the end; under max-min a QP through the hottest link can be throttled elsewhere first,
so the exact engine can only be slower. ``tests/netsim/collectives/test_load.py`` measures the
gap on small fabrics. Sharing models: ``maxmin`` (the bound above) and ``dcqcn`` (contended
links, two QPs or more, derated by ``dcqcn_efficiency`` as in :mod:`netsim.flow.sharing`).
"""

from __future__ import annotations

import numpy as np

from netsim.collectives.algorithms import busbw_factor
from netsim.collectives.nccl import NcclConfig
from netsim.collectives.runner import CollectiveResult, _comm_key, resolve_ranks
from netsim.flow.heap_tuning import retain_freed_memory
from netsim.flow.paths import FabricPaths
from netsim.flow.qp import connection_prefix, qpn_of_prefix, udp_sport
from netsim.flow.sharing import SharingModel, make_model
from topologies.route_load import route_load

#: QPs routed per chunk: about 60 MB of temporaries, each array under glibc's mmap threshold
#: so that, with :func:`retain_freed_memory`, chunks reuse the heap instead of page-faulting
#: (issue 28: 4,000,000 took 1.1 GB and a third of the CPU in system time at 16,384 GPUs).
_CHUNK_QPS = 262_144


def alltoall_load(fabric, ranks, size_bytes: int, nccl: NcclConfig | None = None,
                  model: str | SharingModel = "maxmin", router=None, seed: int = 0,
                  failed_links=()) -> CollectiveResult:
    """All-to-all of ``size_bytes`` (nccl-tests size: the total array per rank) in load mode.

    Parameters are those of :func:`netsim.collectives.run_collective`.

    Returns
    -------
    CollectiveResult
        ``time_s``, ``algbw_GBps``, ``busbw_GBps``; ``extra`` holds ``mode`` ("load"), the
        per-link bytes (``link_bytes``, an array), the bottleneck link and its utilisation time.
    """
    cfg = nccl or NcclConfig()
    sharing = make_model(model)
    if sharing.name == "pfc":
        raise ValueError("load mode has no pfc model: use maxmin or dcqcn")
    if router is None:
        from topologies.routing import Router

        router = Router(fabric, seed=seed, failed_links=tuple(failed_links))
    paths = FabricPaths(fabric, router)
    gpus = resolve_ranks(fabric, ranks)
    n = len(gpus)
    if n < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {n}")
    per_pair = size_bytes / n
    retain_freed_memory()
    load = np.zeros(fabric.num_links)
    qps_on = np.zeros(fabric.num_links)
    nconn, nqps = _nvlink_load(paths, gpus, per_pair, cfg, load, qps_on)
    comm = _comm_key(gpus)
    # network bytes in whole units (per_pair per connection, per_pair / QPs per QP), summed
    # exactly (integers below 2**53), so no result depends on the chunking
    units = np.zeros((2, fabric.num_links))
    for via, dst, mult in _network_connections(paths, gpus, cfg.pxn):
        c, q = _route_chunk(paths, via, dst, mult, cfg, comm, seed, units, qps_on)
        nconn, nqps = nconn + c, nqps + q
    per_qp = max(1, min(cfg.channels, 2)) * cfg.qps_per_connection
    load += units[0] * (per_pair / per_qp) + units[1] * per_pair
    cap = np.asarray(fabric.link_capacity_bps, np.float64) * sharing.wire_efficiency
    if sharing.name == "dcqcn":
        cap = np.where(qps_on >= 2, cap * sharing.dcqcn_efficiency, cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        busy_s = np.where(load > 0, load * 8 / cfg.proto_efficiency / cap, 0.0)
    hot = int(np.argmax(busy_s))
    net = bool((paths.gpu_server[gpus] != paths.gpu_server[gpus[0]]).any())
    latency_s = (cfg.alpha_net_s if net else cfg.alpha_nvlink_s) + cfg.base_latency_s
    t = float(busy_s[hot]) + latency_s
    algbw = size_bytes / t / 1e9
    servers = len(np.unique(paths.gpu_server[gpus]))
    return CollectiveResult(
        op="alltoall", algo="direct", proto=cfg.proto, ranks=n, servers=servers,
        size_bytes=int(size_bytes), start_s=0.0, time_s=t, algbw_GBps=algbw,
        busbw_GBps=algbw * busbw_factor("alltoall", n), channels=cfg.channels,
        qps_per_connection=cfg.qps_per_connection,
        phases=[{"name": "direct-alltoall-load", "time_s": t, "latency_s": latency_s}],
        connections=nconn, qps=nqps, links=None, model=sharing.name,
        extra={"mode": "load", "events": 0, "link_bytes": load, "bottleneck_link": hot,
               "bottleneck_busy_s": float(busy_s[hot])})


def _nvlink_load(paths, gpus, per_pair, cfg, load, qps_on) -> tuple[int, int]:
    """Bytes on NVLink: pairs inside a server, and (with PXN) the hop to the proxy GPU.

    As in the exact engine every NVLink connection is spread over the all-to-all's channels,
    one QP (commodity) each.
    """
    fab = paths.fabric
    ch = max(1, min(cfg.channels, 2))
    gps = max(int(fab.gpus_per_server), 1)
    srv, loc = paths.gpu_server[gpus], paths.gpu_local[gpus]
    ns = int(paths.gpu_server.max()) + 1
    k = np.bincount(srv, minlength=ns)  # ranks per server
    cnt = np.zeros((ns, gps), np.int64)  # ranks per (server, rail)
    np.add.at(cnt, (srv, loc), 1)
    on_rail = cnt.sum(axis=0)
    nl = fab.num_links
    # pairs inside a server: every rank sends to and receives from its k_s - 1 server mates
    mates = (k[srv] - 1).astype(np.float64)
    ends = [(paths.nvlink_up[gpus], mates), (paths.nvlink_down[gpus], mates)]
    if cfg.pxn:
        # rank (s, l) hands GPU (s, r) the bytes for the on_rail[r] - cnt[s, r] receivers on
        # rail r outside server s, per_pair bytes each (rails r != l)
        far = (on_rail[None, :] - cnt[srv]).astype(np.float64)  # (ranks, rails)
        far[np.arange(len(gpus)), loc] = 0.0
        via = (srv[:, None] * gps + np.arange(gps)[None, :]).ravel()
        hop = (far > 0).ravel()
        ends += [(paths.nvlink_up[np.repeat(gpus, gps)[hop]], far.ravel()[hop]),
                 (paths.nvlink_down[via[hop]], far.ravel()[hop])]
    pairs = int(np.sum(k * (k - 1))) + (int(np.count_nonzero(far)) if cfg.pxn else 0)
    for links, receivers in ends:
        ok = receivers > 0
        if ok.any() and np.any(links[ok] < 0):
            raise ValueError("fabric has no NVLink edges for some GPUs: cannot route inside a server")
        load += np.bincount(links[ok], weights=receivers[ok] * per_pair, minlength=nl)
        qps_on += np.bincount(links[ok], minlength=nl) * ch
    return pairs * ch, pairs * ch


def _network_connections(paths, gpus, pxn):
    """Yield (via, dst, rank pairs) of the network connections, a chunk of source servers at a
    time (a connection carries ``per_pair`` bytes per rank pair)."""
    fab = paths.fabric
    gps = max(int(fab.gpus_per_server), 1)
    srv, loc = paths.gpu_server[gpus], paths.gpu_local[gpus]
    servers = np.unique(srv)
    k = np.bincount(srv, minlength=int(paths.gpu_server.max()) + 1)
    n = len(gpus)
    per_server = n if pxn else n * gps  # connections a source server opens, about
    step = max(1, _CHUNK_QPS // (2 * per_server))
    by_rail = [gpus[loc == r] for r in range(gps)]
    for lo in range(0, len(servers), step):
        chunk = servers[lo:lo + step]
        vias, dsts, nbs = [], [], []
        if pxn:
            for r in range(gps):
                d = by_rail[r]
                v = chunk * gps + r
                vv, dd = np.repeat(v, len(d)), np.tile(d, len(v))
                keep = paths.gpu_server[dd] != paths.gpu_server[vv]
                vias.append(vv[keep])
                dsts.append(dd[keep])
                nbs.append(k[paths.gpu_server[vv[keep]]])
        else:
            src = gpus[np.isin(srv, chunk)]
            ss, dd = np.repeat(src, n), np.tile(gpus, len(src))
            keep = paths.gpu_server[dd] != paths.gpu_server[ss]
            vias.append(ss[keep])
            dsts.append(dd[keep])
            nbs.append(np.ones(int(keep.sum()), np.int64))
        yield np.concatenate(vias), np.concatenate(dsts), np.concatenate(nbs)


def _route_chunk(paths, via, dst, mult, cfg, comm, seed, units, qps_on) -> tuple[int, int]:
    """Expand connections into channel QPs as the exact engine does, route, add their rank
    pairs per link to ``units`` (row 0: over the network, per QP; row 1: PCIe, per
    connection)."""
    ch = max(1, min(cfg.channels, 2))  # as algorithms.direct_phase for all-to-all
    q = cfg.qps_per_connection
    per = ch * q
    # a connection's QPs in the exact engine's order: channel-major, then QP index
    chan = np.repeat(np.arange(ch), q) + 64 * comm
    qi = np.tile(np.arange(q), ch)
    prefix = connection_prefix(via, dst, seed)[:, None]
    sport = udp_sport(qpn_of_prefix(prefix, chan[None, :], qi[None, :]))
    weighted, flows = route_load(paths.router, paths.gpu_nic[via], paths.gpu_nic[dst], sport,
                                 mult)
    nl = units.shape[1]
    units[0] += weighted
    qps_on += flows
    # PCIe: the proxy GPU to its NIC, the receiver's NIC to the receiver
    units[1] += np.bincount(paths.pcie_up[via], weights=mult, minlength=nl)
    units[1] += np.bincount(paths.pcie_down[dst], weights=mult, minlength=nl)
    qps_on += np.bincount(paths.pcie_up[via], minlength=nl) * per
    qps_on += np.bincount(paths.pcie_down[dst], minlength=nl) * per
    return len(via) * ch, len(via) * per
