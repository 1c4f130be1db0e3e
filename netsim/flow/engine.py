"""``simulate_flows``: the flow-level engine for a list of :class:`netsim.scenario.traffic.Flow`.

Each flow is split into its QPs (bytes evenly over them, one UDP source port each, as the
packet engine does); every QP is routed with ``Router.route_many`` in one vectorised call, and
the QPs share links under the chosen model (:mod:`netsim.flow.sharing`), recomputed whenever a
QP starts or finishes (:mod:`netsim.flow.fluid`). A flow finishes when its last QP does, plus
the one-way propagation latency of its slowest path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from netsim.flow.fluid import FluidProblem, run_fluid
from netsim.flow.maxmin import Incidence
from netsim.flow.paths import FabricPaths, concat_csr
from netsim.flow.qp import connection_qpn, udp_sport
from netsim.flow.sharing import SharingModel, make_model
from netsim.flow.stats import LinkReport, link_report
from topologies.units import PS_PER_S


@dataclass
class FlowResult:
    """What :func:`simulate_flows` reports.

    Attributes
    ----------
    start_ps, finish_ps : np.ndarray[int64]
        Per flow (input order).
    size_bytes : np.ndarray[int64]
    throughput_bps : np.ndarray[float]
        ``8 x size / (finish - start)`` per flow.
    first_rate_bps : np.ndarray[float]
        Sum over the flow's QPs of their rate in the first allocation (before any completion).
    qp_flow : np.ndarray[int64]
        Flow of every QP; ``qp_sport`` its UDP source port.
    latency_ps : np.ndarray[int64]
        Per flow, the propagation latency of its slowest QP path (included in ``finish_ps``).
    links : LinkReport
        Per-link bytes, utilisation, hottest links and ECMP collision statistics.
    model : str
    events : int
        Number of rate recomputations.
    """

    start_ps: np.ndarray
    finish_ps: np.ndarray
    size_bytes: np.ndarray
    throughput_bps: np.ndarray
    first_rate_bps: np.ndarray
    qp_flow: np.ndarray
    qp_sport: np.ndarray
    latency_ps: np.ndarray
    links: LinkReport
    model: str
    events: int
    extra: dict = field(default_factory=dict)

    @property
    def makespan_ps(self) -> int:
        return int(self.finish_ps.max() - self.start_ps.min()) if len(self.finish_ps) else 0

    def to_json(self) -> dict:
        """The CLI's JSON document."""
        thr = self.throughput_bps
        return {
            "engine": "flow",
            "model": self.model,
            "flows": int(len(self.finish_ps)),
            "qps": int(len(self.qp_flow)),
            "makespan_s": self.makespan_ps / PS_PER_S,
            "mean_throughput_Gbps": float(thr.mean() / 1e9) if len(thr) else 0.0,
            "min_throughput_Gbps": float(thr.min() / 1e9) if len(thr) else 0.0,
            "events": self.events,
            **self.links.to_json(),
        }


def _endpoint_gpus(fabric, names) -> np.ndarray:
    """GPU positions of flow endpoints; a NIC stands for the first GPU on its rail."""
    gpu_pos = {g: i for i, g in enumerate(fabric.gpus)}
    nic_gpu = {}
    for i, n in enumerate(np.asarray(fabric.gpu_nic_index).tolist()):
        nic_gpu.setdefault(fabric.nics[n], i)
    out = np.empty(len(names), np.int64)
    for i, name in enumerate(names):
        if name in gpu_pos:
            out[i] = gpu_pos[name]
        elif name in nic_gpu:
            out[i] = nic_gpu[name]
        else:
            raise ValueError(f"flow endpoint {name!r} is neither a GPU nor a NIC of fabric "
                             f"{fabric.name!r}")
    return out


def simulate_flows(fabric, flows, model: str | SharingModel = "maxmin", router=None,
                   seed: int = 0, failed_links=()) -> FlowResult:
    """Simulate flows at flow level.

    Parameters
    ----------
    fabric : topologies.Fabric
    flows : sequence of netsim.scenario.traffic.Flow
        ``src``/``dst`` are GPU or NIC names (a NIC endpoint means traffic that starts and ends
        at the NIC, with no PCIe hop).
    model : {"maxmin", "dcqcn", "pfc"} or SharingModel
    router : topologies.routing.Router, optional
        Default ``Router(fabric, seed=seed, failed_links=failed_links)``.
    seed : int
        Seeds the QP numbers (hence UDP source ports) and the default router.
    failed_links : iterable of int
        Directed link ids that are down (used when ``router`` is not given).

    Returns
    -------
    FlowResult
    """
    if len(flows) == 0:
        raise ValueError("no flows to simulate: pass at least one Flow")
    sharing = make_model(model)
    if router is None:
        from topologies.routing import Router

        router = Router(fabric, seed=seed, failed_links=tuple(failed_links))
    paths = FabricPaths(fabric, router)
    nic_set = set(fabric.nics)
    nic_end_src = np.array([f.src in nic_set for f in flows])
    nic_end_dst = np.array([f.dst in nic_set for f in flows])
    src = _endpoint_gpus(fabric, [f.src for f in flows])
    dst = _endpoint_gpus(fabric, [f.dst for f in flows])
    qps = np.array([int(f.qps) for f in flows], np.int64)
    size = np.array([int(f.size_bytes) for f in flows], np.int64)
    start = np.array([int(f.start_ps) for f in flows], np.int64)
    qp_flow = np.repeat(np.arange(len(flows)), qps)
    qp_index = np.arange(len(qp_flow)) - np.repeat(np.cumsum(qps) - qps, qps)
    # the flow index stands in for the channel: two flows between one pair are two connections
    qpn = connection_qpn(src[qp_flow], dst[qp_flow], qp_flow, qp_index, seed)
    sport = udp_sport(qpn)
    nic_end = nic_end_src[qp_flow] | nic_end_dst[qp_flow]
    indptr, links, _ = paths.gpu_paths(src[qp_flow], dst[qp_flow], sport, force_net=nic_end)
    indptr, links = _strip_pcie(paths, indptr, links, nic_end_src[qp_flow], nic_end_dst[qp_flow])
    return _run_qps(fabric, paths, indptr, links, qp_flow, qp_index, sport, size, start, qps,
                    sharing)


def simulate_paths(fabric, qp_paths, flow_bytes, flow_start_ps=None, qp_flow=None,
                   model: str | SharingModel = "maxmin") -> FlowResult:
    """Flow-level run on *given* QP paths (e.g. the paths the packet engine chose).

    Parameters
    ----------
    fabric : topologies.Fabric
    qp_paths : list of list[int]
        Directed link ids of every QP's path.
    flow_bytes : sequence of int
        Bytes of every flow (split evenly over its QPs).
    flow_start_ps : sequence of int, optional
    qp_flow : sequence of int, optional
        Flow of every QP (default: one QP per flow).
    model : {"maxmin", "dcqcn", "pfc"} or SharingModel
    """
    sharing = make_model(model)
    qp_flow = np.arange(len(qp_paths)) if qp_flow is None else np.asarray(qp_flow, np.int64)
    size = np.asarray(flow_bytes, np.int64)
    start = np.zeros(len(size), np.int64) if flow_start_ps is None else np.asarray(
        flow_start_ps, np.int64)
    qps = np.bincount(qp_flow, minlength=len(size))
    order = np.argsort(qp_flow, kind="stable")
    qp_paths = [list(qp_paths[i]) for i in order]
    qp_flow = qp_flow[order]
    qp_index = np.arange(len(qp_flow)) - np.repeat(np.cumsum(qps) - qps, qps)
    lens = np.array([len(p) for p in qp_paths], np.int64)
    indptr = np.zeros(len(qp_paths) + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    links = np.array([x for p in qp_paths for x in p], np.int64)
    paths = FabricPaths(fabric, router=None)
    return _run_qps(fabric, paths, indptr, links, qp_flow, qp_index,
                    np.zeros(len(qp_flow), np.uint16), size, start, qps, sharing)


def _run_qps(fabric, paths, indptr, links, qp_flow, qp_index, sport, size, start, qps,
             sharing) -> FlowResult:
    """Shared tail of the flow-level entry points: QPs with paths to a :class:`FlowResult`."""
    nflows = len(size)
    inc = Incidence.from_csr(indptr, links, fabric.num_links)
    # bytes split evenly over QPs; the first QPs take the remainder
    base, extra = size // qps, size % qps
    qp_bytes = base[qp_flow] + (qp_index < extra[qp_flow])
    nq = len(qp_flow)
    qp_lat = paths.path_latency_ps(indptr, links)
    problem = FluidProblem(
        inc=inc, capacity_bps=np.asarray(fabric.link_capacity_bps, np.float64),
        size_bits=qp_bytes.astype(np.float64) * 8, phase=np.arange(nq),
        phase_chain=np.arange(nq), phase_latency_ps=qp_lat, chain_start_ps=start[qp_flow])
    res = run_fluid(problem, sharing)
    finish = np.zeros(nflows, np.int64)
    np.maximum.at(finish, qp_flow, res.phase_end_ps)
    latency = np.zeros(nflows, np.int64)
    np.maximum.at(latency, qp_flow, qp_lat)
    first = np.bincount(qp_flow, weights=np.nan_to_num(res.first_rate_bps), minlength=nflows)
    with np.errstate(divide="ignore"):
        thr = size * 8.0 * PS_PER_S / np.maximum(finish - start, 1)
    report = link_report(fabric, inc, qp_bytes.astype(np.float64),
                         makespan_s=(finish.max() - start.min()) / PS_PER_S)
    return FlowResult(start, finish, size, thr, first, qp_flow, sport, latency, report,
                      sharing.name, res.events)


def _strip_pcie(paths: FabricPaths, indptr, links, nic_src, nic_dst):
    """Drop the PCIe hops of flows whose endpoint is a NIC rather than a GPU."""
    if not (nic_src.any() or nic_dst.any()):
        return indptr, links
    flow = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    pcie_up = np.zeros(paths.fabric.num_links, bool)
    pcie_up[paths.pcie_up[paths.pcie_up >= 0]] = True
    pcie_dn = np.zeros(paths.fabric.num_links, bool)
    pcie_dn[paths.pcie_down[paths.pcie_down >= 0]] = True
    drop = (pcie_up[links] & nic_src[flow]) | (pcie_dn[links] & nic_dst[flow])
    keep = ~drop
    new_len = np.bincount(flow[keep], minlength=len(indptr) - 1)
    ip = np.zeros(len(indptr), np.int64)
    np.cumsum(new_len, out=ip[1:])
    return concat_csr([(ip, links[keep])])
