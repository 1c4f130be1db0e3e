"""Wire a :class:`PacketSim` from a fabric and flows, run it, and collect a :class:`PacketResult`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from heapq import heappush

import numpy as np

from netsim.packet.cc_adapter import make_cc, make_cnp_generator
from netsim.packet.config import PacketConfig, headroom_bytes_for, pause_quanta_for, quanta_ps
from netsim.packet.engine import PacketSim, _QpClock
from netsim.packet.headroom import check_headroom
from netsim.packet.qp import QP
from netsim.packet.result import FlowStats, PacketResult, PortStats
from netsim.packet.telemetry import Sampler, find_pause_cycle, hol_victims
from netsim.scenario.faults import LinkFlap
from netsim.scenario.traffic import Flow
from topologies.units import PS_PER_US, ns_to_ps

_QPN_BASE = 0x100  # first QP number a NIC hands out (sequential per NIC, as the driver does)


def _udp_sport(qpn: int) -> int:
    try:
        from topologies.routing import qp_udp_sport
    except ImportError:  # foundation not installed: the same shape of mapping (0xC000 | 14 bits)
        return 0xC000 | ((qpn ^ (qpn >> 14)) & 0x3FFF)
    return int(qp_udp_sport(qpn))


def _default_router(fabric, seed: int):
    from topologies.routing import Router

    return Router(fabric, seed=seed)


def _endpoint_nic(fabric, name: str) -> str:
    """The NIC a flow endpoint sends through (GPUs use their rail NIC)."""
    if name not in fabric.node_index:
        raise ValueError(f"flow endpoint {name!r} is not a node of fabric {fabric.name!r}")
    # A Fabric reads the role from its arrays; building its networkx graph for this alone
    # cost more CPU than a 128-host run's start-up (other fabric-like objects have a graph).
    role = fabric.role(name) if hasattr(fabric, "role") else fabric.graph.nodes[name].get("role")
    if role == "nic":
        return name
    if role == "gpu":
        return fabric.gpu_nic(name)
    raise ValueError(f"flow endpoint {name!r} is a {role}, not a NIC or GPU")


def _nic_route(router, fabric, src: str, dst: str, sport: int) -> tuple[int, ...]:
    path = tuple(int(x) for x in router.path(src, dst, sport))
    kinds = fabric.link_kind
    # Keep the NIC-to-NIC part (a router given GPU names may add PCIe hops).
    path = tuple(lid for lid in path if str(kinds[lid]) not in ("pcie", "nvlink"))
    if not path:
        raise ValueError(f"no network path from {src} to {dst}")
    return path


def _base_rtt_ps(sim: PacketSim, fwd, rev, cfg: PacketConfig) -> int:
    wire = cfg.wire_bytes
    ctrl = sim.ctrl_size
    t = sum(sim.L_prop[lid] + wire * 8 * 10**12 // sim.L_rate[lid] for lid in fwd)
    return t + sum(sim.L_prop[lid] + ctrl * 8 * 10**12 // sim.L_rate[lid] for lid in rev)


#: Memory of the packet simulator per fabric node and directed link, on top of the fabric:
#: 1,215 B measured for the empty simulator on fat-tree-k8 (tracemalloc peak of ``build_sim``),
#: rounded up to 2 KiB for queues and packets in flight. Used to refuse a fabric up front.
PACKET_BYTES_PER_ELEMENT = 2048


def check_packet_size(spec, source: str = "fabric") -> None:
    """Refuse a fabric too big to simulate packet by packet here (estimate and limit named)."""
    from topologies.files import FABRIC_BYTES_PER_ELEMENT, check_fabric_size

    check_fabric_size(spec, source, level="packet",
                      bytes_per_element=PACKET_BYTES_PER_ELEMENT + FABRIC_BYTES_PER_ELEMENT)


def build_sim(fabric, cfg: PacketConfig, rng: np.random.Generator) -> PacketSim:
    """A :class:`PacketSim` with the fabric's links as ports (no flows yet)."""
    n = int(fabric.num_links)
    src = np.asarray(fabric.link_src, dtype=np.int64)
    dst = np.asarray(fabric.link_dst, dtype=np.int64)
    nic_pos = {name: i for i, name in enumerate(fabric.nics)}
    nodes = fabric.nodes
    link_nic = [nic_pos.get(nodes[int(s)], -1) for s in src]
    pair = {(int(s), int(d)): i for i, (s, d) in enumerate(zip(src, dst, strict=False))}
    rev = [pair.get((int(d), int(s)), -1) for s, d in zip(src, dst, strict=False)]
    prop = [ns_to_ps(float(x)) for x in fabric.link_latency_ns]
    sim = PacketSim(src.tolist(), dst.tolist(), np.asarray(fabric.link_capacity_bps).tolist(), prop,
                    link_nic, rev, cfg, rng)
    for lid in range(n):
        rate = sim.L_rate[lid]
        sim.headroom[lid] = (cfg.headroom_bytes if cfg.headroom_bytes is not None else
                             headroom_bytes_for(rate, prop[lid], cfg.wire_bytes))
        quanta = (cfg.pfc_response_quanta if cfg.pfc_response_quanta is not None
                  else pause_quanta_for(rate))
        sim.P_resp[lid] = quanta_ps(quanta, rate)
        sim.P_ptime[lid] = quanta_ps(cfg.pfc_pause_quanta, rate)
        sim.P_commit[lid] = min(cfg.commit_ps, sim.P_resp[lid])
    sim.nic_active = [[] for _ in fabric.nics]
    sim.nic_names = list(fabric.nics)
    sim.node_names = list(fabric.nodes)
    if cfg.cnp_enabled:
        sim.cnp_gen = make_cnp_generator(cfg.cnp_interval_for_cc())
    return sim


def simulate_packets(fabric, flows: Sequence[Flow], config: PacketConfig | None = None, seed: int = 0,
                     *, router=None, flaps: Sequence[LinkFlap] = ()) -> PacketResult:
    """Simulate *flows* packet by packet on *fabric*.

    Parameters
    ----------
    fabric : a ``topologies.Fabric`` (or an object with the same link arrays and names).
    flows : :class:`netsim.scenario.traffic.Flow` records (NIC or GPU endpoints).
    config : engine settings (:class:`PacketConfig`); default settings when None.
    seed : seeds ECMP (through the default Router), ECN draws and adaptive-retransmit jitter.
    router : an object with ``path(src, dst, sport) -> list[int]``; default
        ``topologies.routing.Router(fabric, seed=seed)``.
    flaps : link flap schedule (:class:`netsim.scenario.faults.LinkFlap`).

    Returns
    -------
    PacketResult
        Per-flow FCTs and retransmissions, per-port counters, a conservation ledger, time series.
    """
    cfg = config if config is not None else PacketConfig()
    if not flows:
        raise ValueError("simulate_packets needs at least one flow")
    rng = np.random.default_rng(seed)
    router = router if router is not None else _default_router(fabric, seed)
    sim = build_sim(fabric, cfg, rng)
    qps_by_flow = _make_qps(sim, fabric, flows, cfg, router, rng)
    for f in flaps:
        if not 0 <= f.link_id < len(sim.L_dst):
            raise ValueError(f"flap link id {f.link_id} out of range 0..{len(sim.L_dst) - 1}")
        sim.at(f.down_ps, sim._link_state, f.link_id, False)
        sim.at(f.up_ps, sim._link_state, f.link_id, True)
        sim.due_everywhere(f.down_ps)
        sim.due_everywhere(f.up_ps)
    if cfg.link_detect_ps is not None and flaps:
        sim.reroute = _rerouter(sim, fabric, flows, qps_by_flow, router)
    sampler = Sampler(sim, len(flows), cfg.sample_interval_ps or 5 * PS_PER_US)
    sampler.start(min(f.start_ps for f in flows))
    wall0 = time.perf_counter()
    sim.run(cfg.max_time_ps)
    wall = time.perf_counter() - wall0
    sampler.final(sim.env._now)
    return _collect(sim, fabric, flows, qps_by_flow, cfg, sampler, wall)


def _make_qps(sim, fabric, flows, cfg, router, rng) -> list[list[QP]]:
    nic_pos = {name: i for i, name in enumerate(fabric.nics)}
    table = _route_table(router, fabric, flows, nic_pos)
    next_qpn = [_QPN_BASE] * len(fabric.nics)
    out = []
    sim.flow_dlv = [0] * len(flows)
    for fi, fl in enumerate(flows):
        s_nic, d_nic = _endpoint_nic(fabric, fl.src), _endpoint_nic(fabric, fl.dst)
        if s_nic == d_nic:
            raise ValueError(f"flow #{fi} {fl.src}->{fl.dst} stays inside one NIC: no network traffic")
        ni = nic_pos[s_nic]
        share, extra = divmod(int(fl.size_bytes), int(fl.qps))
        qps = []
        for j in range(int(fl.qps)):
            qpn = next_qpn[ni]
            next_qpn[ni] += 1
            sport = _udp_sport(qpn)
            fwd = table.get((s_nic, d_nic, sport)) or _nic_route(router, fabric, s_nic, d_nic, sport)
            rev = table.get((d_nic, s_nic, sport)) or _nic_route(router, fabric, d_nic, s_nic, sport)
            payload = share + (1 if j < extra else 0)
            if payload == 0:
                continue
            qp = QP(sum(len(x) for x in out) + len(qps), fi, ni, fwd, rev, payload, cfg.mtu_bytes, sport)
            params = dict(cfg.cc_params)
            if cfg.cc_hops and cfg.cc in ("swift", "hybrid") and "hops" not in params:
                # Swift's per-hop target term: switches crossed = links - 1. Opt-in, since the
                # algorithms' defaults are tuned with hops = 0 (docs/congestion-control.md).
                params["hops"] = len(fwd) - 1
            qp.cc = make_cc(cfg.cc, line_rate_bps=sim.L_rate[fwd[0]],
                            base_rtt_ps=_base_rtt_ps(sim, fwd, rev, cfg), clock=_QpClock(sim, qp),
                            params=params)
            qp.ctrl_lat = sum(sim.L_prop[lid] + sim.ctrl_size * 8 * 10**12 // sim.L_rate[lid]
                              for lid in rev)
            if cfg.adaptive_retrans:
                qp.adapt_base = int(cfg.adaptive_base_ps * (1.0 + rng.random()))
            qps.append(qp)
        out.append(qps)
        sim.active_qps += len(qps)
        sim.at(int(fl.start_ps), _start_flow, sim, qps)
        for qp in qps:
            heappush(sim.P_due[qp.port], int(fl.start_ps))
            sim.P_ctrl_min[qp.port] = min(sim.P_ctrl_min[qp.port], qp.ctrl_lat)
    return out


def _route_table(router, fabric, flows, nic_pos) -> dict:
    """Every QP's forward and reverse NIC-to-NIC path, ``(src, dst, sport) -> links``, routed
    in one ``route_many`` call where the router is the fabric's own ``Router`` (per-flow
    hashing, so the same paths as one ``path`` call each); empty otherwise (routed per QP)."""
    from topologies.routing import Router

    if type(router) is not Router:
        return {}
    next_qpn = [_QPN_BASE] * len(fabric.nics)
    keys = []
    for fl in flows:
        s_nic, d_nic = _endpoint_nic(fabric, fl.src), _endpoint_nic(fabric, fl.dst)
        if s_nic == d_nic:
            return {}  # _make_qps raises on it
        ni = nic_pos[s_nic]
        for _ in range(int(fl.qps)):
            sport = _udp_sport(next_qpn[ni])
            next_qpn[ni] += 1
            keys += [(s_nic, d_nic, sport), (d_nic, s_nic, sport)]
    indptr, links = router.route_many([nic_pos[k[0]] for k in keys], [nic_pos[k[1]] for k in keys],
                                      [k[2] for k in keys])
    kinds, bounds, links = fabric.link_kind, indptr.tolist(), links.tolist()
    table = {}
    for i, key in enumerate(keys):
        path = tuple(lid for lid in links[bounds[i]:bounds[i + 1]]
                     if str(kinds[lid]) not in ("pcie", "nvlink"))
        if path:
            table[key] = path
    return table


def router_without(router, fabric, dead: Sequence[int]):
    """The same router (seed, hashing) with the cables of *dead* out of every ECMP group, or
    None when the router cannot say (then routes stay as they are)."""
    from topologies.routing import Router

    if hasattr(router, "without"):
        return router.without(dead)
    if isinstance(router, Router):
        return Router(fabric, seed=router.seed, polarized=router.polarized, failed_links=dead)
    return None


def _rerouter(sim, fabric, flows, qps_by_flow, router):
    """``reroute(t, dead)``: move every live QP onto the path its hash picks among the live
    members (link-down repair), or back once the link returns (restore)."""
    ends = [(_endpoint_nic(fabric, fl.src), _endpoint_nic(fabric, fl.dst)) for fl in flows]

    def reroute(t, dead):
        r = router_without(router, fabric, dead) if dead else router
        if r is None:
            return
        for (s_nic, d_nic), qps in zip(ends, qps_by_flow, strict=False):
            for qp in qps:
                if qp.done or qp.error:
                    continue
                try:
                    fwd = _nic_route(r, fabric, s_nic, d_nic, qp.sport)
                    rev = _nic_route(r, fabric, d_nic, s_nic, qp.sport)
                except ValueError:
                    continue  # no live path (a host link): the QP keeps retrying its own
                if fwd[0] != qp.port:
                    continue
                qp.fwd, qp.rev, qp.rport = fwd, rev, rev[0]
                qp.ctrl_lat = sum(sim.L_prop[lid] + sim.ctrl_size * 8 * 10**12 // sim.L_rate[lid]
                                  for lid in rev)

    return reroute


def _start_flow(t, sim, qps):
    for qp in qps:
        qp.progress_t = t
        sim.nic_active[qp.nic].append(qp)
    for port in sorted({qp.port for qp in qps}):
        sim._port_ready(t, port)


def _collect(sim, fabric, flows, qps_by_flow, cfg, sampler, wall) -> PacketResult:
    now = sim.env._now
    flow_stats = []
    for fi, (fl, qps) in enumerate(zip(flows, qps_by_flow, strict=False)):
        failed = any(q.error for q in qps)
        rx_done = [q.rx_done_ps for q in qps]
        tx_done = [q.tx_done_ps for q in qps]
        fct = None if failed or min(rx_done) < 0 else (max(rx_done) - fl.start_ps) / 1000
        comp = None if failed or min(tx_done) < 0 else (max(tx_done) - fl.start_ps) / 1000
        flow_stats.append(FlowStats(
            src=fl.src, dst=fl.dst, bytes=int(fl.size_bytes), start_ns=fl.start_ps / 1000,
            fct_ns=fct, completion_ns=comp,
            throughput_gbps=(fl.size_bytes * 8 / fct) if fct else None,
            delivered_bytes=sim.flow_dlv[fi], retransmits=sum(q.retx_pkts for q in qps),
            retransmitted_bytes=sum(q.retx_bytes for q in qps), timeouts=sum(q.timeouts for q in qps),
            failed=failed, qps=len(qps), paths=[list(q.fwd) for q in qps]))
    for lid in sim.paused_set:  # close pause intervals still open at the end
        sim.P_paused_ps[lid] += now - sim.P_pause_t0[lid]
    ports = _port_stats(sim, fabric, now)
    in_flight = _count_in_flight(sim)
    unique = sum(sum(min(q.max_sent, q.npkts) for q in qps) for qps in qps_by_flow)
    retx = sum(f.retransmits for f in flow_stats)
    ledger = {"injected": sim.inj_pkts, "delivered": sim.dlv_pkts,
              "dropped": sim.drop_buf + sim.drop_hr + sim.drop_link, "discarded": sim.disc_pkts,
              "in_flight": in_flight, "unique": unique, "retransmitted": retx,
              "injected_bytes": sim.inj_bytes, "delivered_bytes": sim.dlv_bytes}
    ts = sampler.arrays()
    return PacketResult(
        flows=flow_stats, ports=ports, drops=ledger["dropped"],
        drops_by_reason={"buffer": sim.drop_buf, "headroom": sim.drop_hr, "link_down": sim.drop_link},
        pfc_pauses=sim.pause_frames, pfc_resumes=sim.resume_frames, ecn_marks=sum(sim.P_ecn),
        cnps=sim.cnps_tx, nacks=sim.nacks_rx, timeouts=sim.timeouts, sim_time_ns=now / 1000,
        data_packets=sim.inj_pkts, ctrl_packets=sim.ctrl_pkts, events=sim.events, wall_s=wall,
        ledger=ledger, deadlocks=sim.deadlocks,
        hol_victims=hol_victims(sim, flow_stats, ports, cfg, fabric), cc=cfg.cc, pfc=cfg.pfc,
        time_ns=ts[0], queue_bytes=ts[1], flow_delivered_bytes=ts[2],
        stuck=sum(f.fct_ns is None and not f.failed for f in flow_stats),
        paused_at_end=classify_paused(sim),
        pfc_counters={"refreshes": sim.pause_refreshes, "expiries": sim.pause_expiries,
                      "watchdog_storms": sim.watchdog_storms, "ctrl_drops": sim.drop_ctrl,
                      "route_updates": sim.route_updates},
        warnings=check_headroom(fabric, cfg))


def classify_paused(sim) -> list[dict]:
    """Egress ports still paused at the end, each with why it cannot drain.

    ``cycle``: part of a cycle of paused ports holding data (a PFC deadlock); ``lost_resume``:
    the downstream ingress is below its XON level (or not in XOFF) yet the port stays paused;
    ``congested``: the downstream ingress is legitimately above XON.
    """
    if not sim.paused_set:
        return []
    cycle = set(find_pause_cycle(sim) or ())
    names = getattr(sim, "node_names", None)
    out = []
    for lid in sorted(sim.paused_set):
        node = sim.L_dst[lid]
        thr = sim.xoff_static if sim.xoff_static is not None else \
            sim.alpha * (sim.buffer - sim.S_used[node])
        if lid in cycle:
            why = "cycle"
        elif not sim.I_xoff[lid] or sim.I_bytes[lid] + sim.xon_off <= thr:
            why = "lost_resume"
        else:
            why = "congested"
        src, dst = sim.L_src[lid], node
        out.append({"link": lid, "src": names[src] if names else src,
                    "dst": names[dst] if names else dst, "queued_bytes": sim.P_qb[lid],
                    "reason": why})
    return out


def _port_stats(sim, fabric, now) -> list[PortStats]:
    nodes = fabric.nodes
    kinds = fabric.link_kind
    out = []
    for lid in range(len(sim.L_dst)):
        if not (sim.P_txb[lid] or sim.P_drop[lid] or sim.I_pause_tx[lid] or sim.P_pause_rx[lid]):
            continue
        cap = sim.L_rate[lid] * now / (8 * 10**12) if now else 0
        out.append(PortStats(
            link_id=lid, src=nodes[sim.L_src[lid]], dst=nodes[sim.L_dst[lid]], kind=str(kinds[lid]),
            utilization=(sim.P_txb[lid] / cap) if cap else 0.0, tx_bytes=sim.P_txb[lid],
            max_queue_bytes=sim.P_qmax[lid], ecn_marks=sim.P_ecn[lid], drops=sim.P_drop[lid],
            pfc_pauses_received=sim.P_pause_rx[lid], paused_ns=sim.P_paused_ps[lid] / 1000,
            pfc_pauses_sent=sim.I_pause_tx[lid], headroom_max_bytes=sim.I_hr_max[lid]))
    return out


def _count_in_flight(sim) -> int:
    """Data packets still queued or on a wire when the run stopped (counted from the state)."""
    n = sum(1 for d in sim.P_data for p in d if p.kind == 0)
    # on a wire: packets in the compiled build, heap entries ending in the packet otherwise
    return n + sum(1 for fly in sim.L_fly for item in fly
                   if (item if sim.hq is not None else item[-1]).kind == 0)
