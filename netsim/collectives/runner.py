"""Run collective plans on the flow engine: ``run_collective`` and ``run_concurrent``.

Every call becomes a chain of phases (:mod:`netsim.collectives.algorithms`); all calls share
one fluid problem, so collectives that overlap in time contend for the same uplinks (several
data-parallel groups at once, say). Network connections get their QPs from
:func:`netsim.flow.qp.connection_qpn`, keyed by the communicator (the ranks), the peer pair,
the channel and the QP index: a connection keeps its UDP source ports, hence its ECMP paths,
in every call of the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from netsim.collectives.algorithms import Plan, build_plan, busbw_factor, canonical_op
from netsim.collectives.nccl import NcclConfig
from netsim.flow.fluid import FluidProblem, run_fluid
from netsim.flow.maxmin import Incidence
from netsim.flow.paths import FabricPaths
from netsim.flow.qp import connection_qpn, udp_sport
from netsim.flow.sharing import SharingModel, make_model
from netsim.flow.stats import LinkReport, fabric_link_mask, link_report
from topologies.units import PS_PER_S, s_to_ps


@dataclass(frozen=True)
class CollectiveCall:
    """One collective of a concurrent run.

    Attributes
    ----------
    op : str
        ``allreduce``, ``allgather``, ``reducescatter``, ``broadcast``, ``alltoall``, ``sendrecv``.
    ranks : int or sequence of GPU names or positions
        An int ``n`` means the first ``n`` GPUs of the fabric.
    size_bytes : int
        nccl-tests size (see :func:`netsim.collectives.algorithms.build_plan`).
    start_s : float
    nccl : NcclConfig, optional
        Overrides the run's config for this call.
    """

    op: str
    ranks: object
    size_bytes: int
    start_s: float = 0.0
    nccl: NcclConfig | None = None


@dataclass
class CollectiveResult:
    """A collective's outcome in nccl-tests' terms plus the fabric's view.

    ``time_s`` (start to end), ``algbw_GBps = size / time`` and ``busbw_GBps = algbw x factor``
    (nccl-tests ``doc/PERFORMANCE.md``); GB is 1e9 bytes.
    """

    op: str
    algo: str
    proto: str
    ranks: int
    servers: int
    size_bytes: int
    start_s: float
    time_s: float
    algbw_GBps: float
    busbw_GBps: float
    channels: int
    qps_per_connection: int
    phases: list
    connections: int
    qps: int
    links: LinkReport | None = None
    model: str = "maxmin"
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {k: getattr(self, k) for k in (
            "op", "algo", "proto", "ranks", "servers", "size_bytes", "time_s", "algbw_GBps",
            "busbw_GBps", "channels", "qps_per_connection", "connections", "qps", "model")}
        out["phases"] = self.phases
        if self.links is not None:
            out.update(self.links.to_json())
        out.update(self.extra)
        return out


def resolve_ranks(fabric, ranks) -> np.ndarray:
    """GPU positions of the ranks: an int n (first n GPUs), GPU names, or GPU positions."""
    ng = len(fabric.gpus)
    if isinstance(ranks, (int, np.integer)):
        if not 2 <= int(ranks) <= ng:
            raise ValueError(f"ranks={ranks}: fabric {fabric.name!r} has {ng} GPUs; use 2..{ng}")
        return np.arange(int(ranks), dtype=np.int64)
    items = list(ranks)
    if items and isinstance(items[0], str):
        pos = {g: i for i, g in enumerate(fabric.gpus)}
        bad = [r for r in items if r not in pos]
        if bad:
            raise ValueError(f"ranks: {bad[:3]} are not GPUs of fabric {fabric.name!r}")
        return np.array([pos[r] for r in items], np.int64)
    arr = np.asarray(items, np.int64)
    if len(arr) and (arr.min() < 0 or arr.max() >= ng):
        raise ValueError(f"ranks: GPU positions must lie in 0..{ng - 1}")
    return arr


@dataclass
class _Built:
    """Commodities of all calls, before the fluid run."""

    flow: list = field(default_factory=list)      # entries: commodity id
    link: list = field(default_factory=list)
    weight: list = field(default_factory=list)
    count: list = field(default_factory=list)
    size_bits: list = field(default_factory=list)
    real_bytes: list = field(default_factory=list)  # per commodity, for link loads
    phase: list = field(default_factory=list)
    phase_chain: list = field(default_factory=list)
    phase_latency_ps: list = field(default_factory=list)
    ncomm: int = 0
    fabric_mask: np.ndarray | None = None
    nconn: list = field(default_factory=list)     # per call
    nqps: list = field(default_factory=list)
    qp_e: list = field(default_factory=list)      # QP-level fabric entries, for collisions
    qp_l: list = field(default_factory=list)
    nqp_total: int = 0


def _comm_key(gpus: np.ndarray) -> int:
    """A stable 16-bit communicator id from its ranks (distinct groups get distinct QPs)."""
    h = np.uint64(1469598103934665603)
    with np.errstate(over="ignore"):
        for x in (np.asarray(gpus, np.uint64)[:64].tolist() + [len(gpus)]):
            h = (h ^ np.uint64(x)) * np.uint64(1099511628211)
    return int(h) & 0xFFFF


def _add_phase(b: _Built, paths: FabricPaths, ph, nccl: NcclConfig, chain: int, comm: int,
               seed: int, extra_latency_s: float) -> tuple[int, int]:
    """Expand a phase into QPs, route them, and append its commodities to ``b``."""
    q = nccl.qps_per_connection
    net = paths.gpu_server[ph.via] != paths.gpu_server[ph.dst]
    nq = np.where(net, q, 1)
    conn = np.repeat(np.arange(len(ph.src)), nq)
    qi = np.arange(len(conn)) - np.repeat(np.cumsum(nq) - nq, nq)
    key_ch = ph.channel[conn] + 64 * comm
    sport = udp_sport(connection_qpn(ph.via[conn], ph.dst[conn], key_ch, qi, seed))
    indptr, links, _ = paths.gpu_paths(ph.src[conn], ph.dst[conn], sport, ph.via[conn])
    per_qp = ph.bytes[conn] / nq[conn]
    eff = nccl.proto_efficiency
    phase_id = len(b.phase_latency_ps)
    lockstep = ph.group[conn] >= 0
    if lockstep.any() and not lockstep.all():
        raise ValueError("a phase mixes lockstep and independent connections")  # pragma: no cover
    if lockstep.all():
        # one commodity per group; a QP puts 1/q of its connection's rate on each of its links
        com = b.ncomm + ph.group[conn]
        ncom = ph.num_groups
        weight = 1.0 / nq[conn]
        gbytes = np.zeros(ncom)
        gbytes[ph.group] = ph.bytes  # all connections of a group move the same bytes
        b.size_bits.append(gbytes * ph.fill_scale * 8 / eff)
        b.real_bytes.append(gbytes)
    else:
        com = b.ncomm + np.arange(len(conn))
        ncom = len(conn)
        weight = np.ones(len(conn))
        b.size_bits.append(per_qp * 8 / eff)
        b.real_bytes.append(per_qp)
    lens = np.diff(indptr)
    qp_of = np.repeat(np.arange(len(conn)) + b.nqp_total, lens)
    fab = b.fabric_mask[links]
    b.qp_e.append(qp_of[fab])
    b.qp_l.append(links[fab])
    b.nqp_total += len(conn)
    b.flow.append(np.repeat(com, lens))
    b.link.append(links)
    b.weight.append(np.repeat(weight, lens))
    b.count.append(np.ones(len(links)))
    b.phase.append(np.full(ncom, phase_id))
    b.phase_chain.append(chain)
    b.phase_latency_ps.append(s_to_ps(ph.latency_s + extra_latency_s))
    b.ncomm += ncom
    return len(ph.src), len(conn)


def simulate_calls(fabric, calls: list[CollectiveCall], nccl: NcclConfig | None = None,
                   model: str | SharingModel = "maxmin", router=None, seed: int = 0,
                   failed_links=(), with_links: bool = True) -> list[CollectiveResult]:
    """Run several collectives concurrently on one fabric; one result per call (input order).

    Parameters
    ----------
    fabric : topologies.Fabric
    calls : list of CollectiveCall
    nccl : NcclConfig, optional
        Default settings (``NcclConfig()``); a call's own ``nccl`` wins.
    model : {"maxmin", "dcqcn"} or SharingModel (``pfc`` needs per-QP paths: use simulate_flows)
    router : topologies.routing.Router, optional
        Default ``Router(fabric, seed=seed, failed_links=failed_links)``.
    seed : int
        Seeds QP numbers and the default router.
    failed_links : iterable of int
        Directed links that are down; flows re-hash onto the surviving next hops.
    with_links : bool
        Build the per-link report of each call (costs one pass over its entries).
    """
    if not calls:
        raise ValueError("calls is empty: give at least one CollectiveCall")
    base = nccl or NcclConfig()
    sharing = make_model(model)
    if router is None:
        from topologies.routing import Router

        router = Router(fabric, seed=seed, failed_links=tuple(failed_links))
    paths = FabricPaths(fabric, router)
    b = _Built(fabric_mask=fabric_link_mask(fabric))
    plans: list[Plan] = []
    span = []  # per call: (first commodity, end commodity, first/end QP-entry block)
    for ci, call in enumerate(calls):
        cfg = call.nccl or base
        gpus = resolve_ranks(fabric, call.ranks)
        if call.size_bytes < 0 or call.start_s < 0:
            raise ValueError(f"call {ci}: size_bytes and start_s must be non-negative")
        plan = build_plan(paths, gpus, call.op, int(call.size_bytes), cfg)
        plans.append(plan)
        comm = _comm_key(gpus)
        c0, e0 = b.ncomm, len(b.qp_e)
        nconn = nq = 0
        for pi, ph in enumerate(plan.phases):
            last = pi == len(plan.phases) - 1
            a, q = _add_phase(b, paths, ph, cfg, ci, comm, seed, cfg.base_latency_s if last else 0.0)
            nconn, nq = nconn + a, nq + q
        b.nconn.append(nconn)
        b.nqps.append(nq)
        span.append((c0, b.ncomm, e0, len(b.qp_e)))
    flow, link = np.concatenate(b.flow), np.concatenate(b.link)
    inc = Incidence.from_entries(flow, link, np.concatenate(b.weight), np.concatenate(b.count),
                                 b.ncomm, fabric.num_links)
    problem = FluidProblem(
        inc=inc, capacity_bps=np.asarray(fabric.link_capacity_bps, np.float64),
        size_bits=np.concatenate(b.size_bits), phase=np.concatenate(b.phase),
        phase_chain=np.asarray(b.phase_chain, np.int64),
        phase_latency_ps=np.asarray(b.phase_latency_ps, np.int64),
        chain_start_ps=np.array([s_to_ps(c.start_s) for c in calls], np.int64))
    res = run_fluid(problem, sharing)
    real_bytes = np.concatenate(b.real_bytes)
    out = []
    phase_of_call = np.asarray(b.phase_chain)
    for ci, (call, plan) in enumerate(zip(calls, plans, strict=True)):
        cfg = call.nccl or base
        start_ps = s_to_ps(call.start_s)
        t = (int(res.chain_end_ps[ci]) - start_ps) / PS_PER_S
        algbw = call.size_bytes / t / 1e9 if t > 0 else float("inf")
        phase_times, prev = [], start_ps
        for pi, ph in zip(np.flatnonzero(phase_of_call == ci), plan.phases, strict=True):
            phase_times.append({"name": ph.name, "time_s": (int(res.phase_end_ps[pi]) - prev) / PS_PER_S,
                                "latency_s": int(b.phase_latency_ps[pi]) / PS_PER_S})
            prev = int(res.phase_end_ps[pi])
        links = None
        if with_links:
            qp_entries = (np.concatenate(b.qp_e[span[ci][2]:span[ci][3]]),
                          np.concatenate(b.qp_l[span[ci][2]:span[ci][3]]))
            links = _call_links(fabric, inc, real_bytes, span[ci], t, qp_entries)
        out.append(CollectiveResult(
            op=plan.op, algo=plan.algo, proto=cfg.proto, ranks=plan.ranks, servers=plan.servers,
            size_bytes=int(call.size_bytes), start_s=call.start_s, time_s=t, algbw_GBps=algbw,
            busbw_GBps=algbw * busbw_factor(plan.op, plan.ranks), channels=cfg.channels,
            qps_per_connection=cfg.qps_per_connection, phases=phase_times,
            connections=b.nconn[ci], qps=b.nqps[ci], links=links, model=sharing.name,
            extra={"events": res.events}))
    return out


def _call_links(fabric, inc: Incidence, real_bytes, span, time_s, qp_entries) -> LinkReport:
    """Link report restricted to one call's commodities."""
    c0, c1 = span[0], span[1]
    sel = (inc.e_flow >= c0) & (inc.e_flow < c1)
    sub = Incidence._build(inc.num_links, c1 - c0, inc.e_flow[sel] - c0, inc.e_link[sel],
                           inc.e_weight[sel], inc.e_count[sel])
    return link_report(fabric, sub, real_bytes[c0:c1], time_s, qp_entries=qp_entries)


def run_collective(fabric, op: str, ranks, size_bytes: int, nccl: NcclConfig | None = None,
                   model: str | SharingModel = "maxmin", router=None, seed: int = 0,
                   failed_links=()) -> CollectiveResult:
    """Simulate one collective; see :func:`simulate_calls` for the parameters.

    Returns
    -------
    CollectiveResult
        ``time_s``, ``algbw_GBps``, ``busbw_GBps``, per-phase times, per-link load, the hottest
        links and ECMP collision statistics.
    """
    call = CollectiveCall(canonical_op(op), ranks, int(size_bytes))
    return simulate_calls(fabric, [call], nccl, model, router, seed, failed_links)[0]


def run_concurrent(fabric, calls: list[CollectiveCall], nccl: NcclConfig | None = None,
                   model: str | SharingModel = "maxmin", router=None, seed: int = 0,
                   failed_links=()) -> list[float]:
    """Finish time (seconds, absolute) of every call when all run on the fabric together."""
    res = simulate_calls(fabric, calls, nccl, model, router, seed, failed_links, with_links=False)
    return [r.start_s + r.time_s for r in res]
