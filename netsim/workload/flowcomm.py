"""Comm model on the flow engine: a batch of concurrent collectives shares the fabric.

Every call of a batch (the DP groups of *all* pipeline stages, say) is expanded into the
connections NCCL would open (``netsim.collectives.build_plan``: rings across servers with
PXN, 16 channels, one QP per connection by default), all of them routed with the fabric's
ECMP hash, and priced together, so groups that cross the same ToR uplinks contend and ECMP
collisions cost what they cost. Groups inside one server use the analytic NVLink model (the
flow engine gives the same line-rate answer, slower).

Two ways of pricing a batch, chosen by the shape of the traffic:

``fluid``
    The flow engine's fluid run (``netsim.flow.fluid.run_fluid``): every call starts at 0,
    rates are re-shared max-min whenever a commodity finishes; a call ends when its last
    commodity does, plus NCCL's latencies. Used for the ring collectives (DP gradient
    reduction, parameter all-gather, the tied-embedding all-reduce), whose channels are
    lockstep commodities: a batch of 64 rings of 192 GPUs is 1,024 commodities.
``steady``
    One max-min allocation with every connection of the batch active: a transfer takes its
    latency plus its bytes at the rate of its slowest connection. Used for the pipeline's
    point-to-point sends, which are independent connections (12,288 pairs x 2 directions x
    16 channels on megascale): the fluid run of such a batch re-shares rates at every one of
    thousands of distinct completion times (3,339 events, 528 s CPU for one stage boundary of
    the 12,288-GPU job), while the transfers it stands for are not one synchronised burst
    anyway but the repeated exchange of the 1F1B steady state, in which all of them are in
    flight together.

A rank runs one point-to-point exchange at a time (Megatron's 1F1B sends forward and
receives backward as one batched call, then the other way round), so a batch of sends whose
pairs share GPUs (stage ``s`` talks to ``s - 1`` and to ``s + 1``) is split into rounds in
which every GPU appears once; neighbouring stage boundaries alternate, as they do in 1F1B.

Payload efficiency: the engine already moves RoCEv2 payload at ``wire_efficiency`` (98%) of
line rate; NCCL's bus bandwidth is ``net_efficiency`` (90%) of line rate in the analytic
model, so the data bits are scaled by ``wire_efficiency / net_efficiency`` and the latencies
are NCCL's (``HardwareProfile.intra_latency_s``/``net_latency_s`` per step, 8.4 us base). On an
uncontended fabric a ring then costs exactly what the alpha-beta closed form says, and the
difference between the two models is contention alone.

Links whose constraint another link implies (same commodities, no less capacity: a GPU's
252G PCIe hop behind its own 200G NIC; the receiving NIC's downlink when one transfer is all
that it and the sending NIC's uplink carry) are dropped before the allocation, which leaves
it unchanged and cuts the entries of the 12,288-GPU job's send batches from 1.44 M to 0.79 M
(all PCIe entries, half of the host-link entries, a sixth of the ToR-agg entries).

Where the caller reads only the slowest call of each segment (``CommBatch.slowest_of``:
``predict`` keeps the slowest group of each stage), a steady allocation stops once those are
settled (``netsim.flow.maxmin.Slowest``): on the 12,288-GPU job's send rounds, after the
first round of the filling (``benchmarks/maxmin_rounds.py`` counts them), which is then
computed straight from the paths (``maxmin_first_round``). Where it is not settled there, the
allocation takes the incidence with every link, since dropping the dominated ones would cost
more than the rounds it saves; the segments' times are the same.

Caching: the plan of one call is built once per distinct (op, size, layout of its members
over servers) and replicated over the batch by substituting GPUs (exact: the plan depends on
nothing else); steady-state rates do not depend on the bytes, so they are computed once per
(op, groups) and reused for every size (a DP batch of one layer's and of all layers'
gradients share one allocation); a fluid result is kept per (op, groups, sizes).
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from netsim.model.hardware import HardwareProfile
from netsim.workload.comm import AnalyticCommModel, CommBatch, Locality, group_scopes

OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
       "broadcast": "broadcast", "all_to_all": "alltoall", "send": "sendrecv"}
NETWORK_KINDS = ("host", "tor-agg", "agg-core")
MODES = ("auto", "fluid", "steady")
FLUID_MAX_COMMODITIES = 4096  # auto mode: larger batches take the steady allocation


class FlowCommModel:
    """Price batches of concurrent collectives with the flow engine.

    Parameters
    ----------
    fabric : topologies.Fabric
    hw : HardwareProfile
        Efficiencies, latencies and ``network_scale`` (the fabric's network links are scaled
        by it; an infinite scale leaves nothing to simulate).
    nccl : NcclConfig, optional
        Default: ``NcclConfig`` with the profile's per-step latencies.
    sharing : str
        Flow engine sharing model, ``maxmin`` (default) or ``dcqcn``.
    seed : int
        Seeds the QP numbers (UDP source ports, hence ECMP paths) and the router.
    overrides : dict, optional
        Calibrated alpha-beta for the analytic part (groups inside one server).
    mode : {"auto", "fluid", "steady"}
        ``auto``: fluid for lockstep (ring) collectives of at most ``fluid_max_commodities``
        commodities, steady otherwise (see the module docstring).
    fluid_max_commodities : int
        Largest batch ``auto`` runs through the fluid loop.
    progress : callable, optional
        Called with a short message before each flow-engine run.
    """

    def __init__(self, fabric, hw: HardwareProfile, nccl=None, sharing: str = "maxmin",
                 seed: int = 0, overrides: dict | None = None, mode: str = "auto",
                 fluid_max_commodities: int = FLUID_MAX_COMMODITIES,
                 progress: Callable[[str], None] | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: choose one of {', '.join(MODES)}")
        from netsim.collectives.nccl import NcclConfig
        from netsim.flow.sharing import make_model

        self.hw, self.mode, self.seed = hw, mode, seed
        self.fluid_max_commodities = fluid_max_commodities
        self.analytic = AnalyticCommModel(hw, overrides)
        if nccl is None:
            nccl = NcclConfig(alpha_nvlink_us=hw.intra_latency_s * 1e6,
                              alpha_net_us=hw.net_latency_s * 1e6)
        self.nccl = nccl
        self.sharing = make_model(sharing)
        self.progress = progress
        self.fabric = _scaled(fabric, hw.network_scale)
        self._paths = None
        self._plans: dict = {}
        self._built: dict = {}
        self._fluid: dict = {}
        if self.retain_heap:
            from netsim.flow.heap_tuning import retain_freed_memory

            retain_freed_memory(large=True)
        self.runs = 0
        """Flow-engine runs made (fluid runs and steady allocations)."""

    retain_heap = True
    """Keep freed memory in the process (``netsim.flow.heap_tuning``, process-wide, once):
    each allocation's arrays of tens of MB are then reused, not faulted in again. Changes no
    number."""

    drop_dominated = True
    """Drop links another link's constraint implies (a subclass that adds other traffic to the
    batches turns this off and drops them after merging; ``tuner.background``)."""

    # -----------------------------------------------------------------------------------------
    def batch_s(self, batch: CommBatch, loc: Locality) -> np.ndarray:
        """Time of every call of ``batch``, seconds (input order)."""
        out = np.asarray(self.analytic.batch_s(batch, loc), dtype=np.float64).copy()
        if self.fabric is None:  # infinite network: nothing to simulate
            return out
        groups = np.atleast_2d(np.asarray(batch.groups, dtype=np.int64))
        sizes = batch.sizes()
        net = np.flatnonzero((group_scopes(groups, loc) > 0) & (sizes > 0))
        if net.size == 0:
            return out
        rounds = _rounds(groups[net]) if batch.op == "send" else [np.arange(net.size)]
        known = np.ones(len(out), bool)  # calls whose time in ``out`` is final
        known[net] = False
        for k, r in enumerate(rounds):
            idx = net[r]
            if self.progress is not None:
                tag = f" round {k + 1}/{len(rounds)}" if len(rounds) > 1 else ""
                self.progress(f"flow engine: {batch.kind} {batch.op} x{idx.size}{tag}")
            want = _wanted(batch.slowest_of, idx, out, known)
            out[idx] = self._price(OPS[batch.op], groups[idx], sizes[idx], want)
            known[idx] = True
        return out

    def _price(self, op: str, groups: np.ndarray, sizes: np.ndarray,
               want: _Want | None = None) -> np.ndarray:
        built = self._build(op, groups, sizes)
        mode = self.mode
        if mode == "auto":
            small = built.num_flows <= self.fluid_max_commodities
            mode = "fluid" if built.lockstep and small else "steady"
        if mode == "steady" and built.phases_per_call > 1:
            mode = "fluid"  # phases run one after the other: one allocation cannot say when
        if mode == "steady":
            return self._steady(built, sizes, want)
        key = (op, groups.tobytes(), groups.shape, sizes.tobytes())
        if key not in self._fluid:
            self._fluid[key] = self._run_fluid(built, sizes)
        return self._fluid[key]

    # -----------------------------------------------------------------------------------------
    stop_at_slowest = True
    """Where the caller reads only each segment's slowest call (``CommBatch.slowest_of``),
    stop the max-min allocation once those are settled (the same times: a choice of speed)."""

    def _steady(self, built: _Built, sizes: np.ndarray, want: _Want | None = None
                ) -> np.ndarray:
        """Latency + bytes at the max-min rate of the call's slowest commodity."""
        rate = built.rate
        if rate is None:
            self.runs += 1
            rule = self._rule(built, sizes, want)
            rate = None
            if rule is not None and built.csr is not None:  # settled at once: no incidence
                rate = self.sharing.settled_rates(*built.csr, built.capacity_bps, rule)
            if rate is None:
                # stopped after a round or few, the allocation costs less than dropping the
                # dominated links (which changes no rate) would
                inc = built.inc if rule is None else built.whole
                rate = self.sharing.rates(inc, built.capacity_bps, slowest=rule)
            if rule is None:  # every rate exact: kept for other sizes of these calls
                built.rate = rate
        return _call_times(built, sizes, rate)

    def _rule(self, built: _Built, sizes: np.ndarray, want: _Want | None):
        """The stop rule of this allocation (``netsim.flow.maxmin.Slowest``), or None."""
        if want is None or not self.stop_at_slowest or not self.sharing.stops_early:
            return None
        from netsim.flow.maxmin import Slowest

        c = built.com_call
        return Slowest(segment=want.segment[c], latency_s=built.latency_s[c],
                       size_bytes=sizes[c], bits_per_byte=built.bits_per_byte,
                       floor_s=want.floor_s)

    def _run_fluid(self, built: _Built, sizes: np.ndarray) -> np.ndarray:
        from netsim.flow.fluid import FluidProblem, run_fluid
        from topologies.units import PS_PER_S

        self.runs += 1
        problem = FluidProblem(
            inc=built.inc, capacity_bps=built.capacity_bps,
            size_bits=built.bits_per_byte * sizes[built.com_call], phase=built.phase,
            phase_chain=built.phase_chain, phase_latency_ps=built.phase_latency_ps,
            chain_start_ps=np.zeros(built.num_calls, np.int64))
        res = run_fluid(problem, self.sharing)
        return np.asarray(res.chain_end_ps, np.float64) / PS_PER_S

    # -----------------------------------------------------------------------------------------
    def _fabric_paths(self):
        if self._paths is None:
            from netsim.flow.paths import FabricPaths
            from topologies.routing import Router

            self._paths = FabricPaths(self.fabric, Router(self.fabric, seed=self.seed))
        return self._paths

    def _linear(self, op: str) -> bool:
        """Whether the plan's bytes are proportional to the call's size (no pipeline fill)."""
        return op in ("sendrecv", "alltoall") or (
            op != "broadcast" and self.nccl.algo in ("ring", "hierarchical"))

    def _build(self, op: str, groups: np.ndarray, sizes: np.ndarray,
               together: bool | None = None) -> _Built:
        """Commodities of every call, as ``netsim.collectives.simulate_calls`` makes them
        (cached per op and groups; per size too where bytes are not proportional to it).
        ``together``: an all-to-all call as one lockstep commodity (default for all-to-all;
        ``False`` keeps one commodity per connection, as max-min fairness against other
        traffic needs)."""
        linear = self._linear(op)
        together = (op == "alltoall") if together is None else together
        key = (op, groups.tobytes(), groups.shape, together) + (
            () if linear else (sizes.tobytes(),))
        if key not in self._built:
            self._built[key] = self._construct(op, groups, sizes, linear, together)
        return self._built[key]

    def _construct(self, op: str, groups: np.ndarray, sizes: np.ndarray, linear: bool,
                   together: bool = False) -> _Built:
        from netsim.flow.maxmin import Incidence
        from topologies.units import s_to_ps

        paths, cfg = self._fabric_paths(), self.nccl
        scale = self.sharing.wire_efficiency / self.hw.net_efficiency
        _, layout = _layouts(paths.gpu_server[groups])
        ref = np.full(len(groups), float(_REF_BYTES)) if linear else sizes
        comm = _comm_keys(groups)
        parts: dict[str, list] = {k: [] for k in ("com", "lens", "link", "weight", "bits",
                                                   "phase", "com_call", "ph_call", "ph_lat")}
        ncomm, nphase, lockstep, nphases = 0, 0, True, 0
        latency = np.zeros(len(groups))
        for u in np.unique(layout):
            for size in np.unique(ref[layout == u]):
                calls = np.flatnonzero((layout == u) & (ref == size))
                rep = groups[calls[0]]
                plan = self._template(op, rep, int(size))
                nphases = max(nphases, len(plan.phases))
                for pi, ph in enumerate(plan.phases):
                    extra = cfg.base_latency_s if pi == len(plan.phases) - 1 else 0.0
                    parts["ph_lat"].append(np.full(len(calls), s_to_ps(ph.latency_s + extra)))
                    parts["ph_call"].append(calls)
                    latency[calls] += ph.latency_s + extra
                    com, lens, link, weight, bits, per_call = _replicate(
                        paths, ph, plan.gpus, groups[calls], comm[calls], cfg, self.seed,
                        together=together)
                    lockstep &= bool((ph.group >= 0).all()) or together
                    parts["com"].append(ncomm + com)
                    parts["lens"].append(lens)
                    parts["link"].append(link)
                    parts["weight"].append(weight)
                    parts["bits"].append(bits * scale / int(size))
                    parts["phase"].append(np.repeat(nphase + np.arange(len(calls)), per_call))
                    parts["com_call"].append(np.repeat(calls, per_call))
                    ncomm += per_call * len(calls)
                    nphase += len(calls)
        cat = {k: v[0] if len(v) == 1 else np.concatenate(v) for k, v in parts.items()}
        inc, csr = None, None
        weight = np.repeat(cat["weight"], cat["lens"])
        if lockstep:  # a channel's connections may cross one link twice: sum them
            inc = Incidence.from_entries(np.repeat(cat["com"], cat["lens"]), cat["link"], weight,
                                         np.ones(len(cat["link"])), ncomm, self.fabric.num_links)
        else:  # one QP per commodity, entries already in commodity order: no duplicates
            indptr = np.zeros(ncomm + 1, np.int64)
            np.cumsum(_per_commodity(cat["com"], cat["lens"], ncomm), out=indptr[1:])
            csr = (indptr, cat["link"], weight)
        capacity = np.asarray(self.fabric.link_capacity_bps, np.float64)
        return _Built(incidence=inc, csr=csr, num_flows=ncomm, prune=self.drop_dominated,
                      capacity_bps=capacity,
                      bits_per_byte=cat["bits"], com_call=cat["com_call"], phase=cat["phase"],
                      phase_chain=cat["ph_call"].astype(np.int64),
                      phase_latency_ps=cat["ph_lat"].astype(np.int64), num_calls=len(groups),
                      lockstep=lockstep, phases_per_call=nphases, latency_s=latency)

    def _template(self, op: str, gpus: np.ndarray, size: int):
        """The plan of one call, cached per (op, size, layout of the members over servers)."""
        from netsim.collectives import build_plan

        paths = self._fabric_paths()
        key = (op, size, _first_same(paths.gpu_server[gpus][None, :]).tobytes())
        if key not in self._plans:
            self._plans[key] = _Mapped(build_plan(paths, gpus, op, size, self.nccl), gpus)
        return self._plans[key]


#: Links a connection crosses whatever its QP number and ECMP hash (``topologies.builders``
#: gives a GPU one link to its server's one NVSwitch and one PCIe hop to its NIC, a NIC one
#: cable to its ToR, ``Fabric.wiring.nic_up_link``), both ways.
FIXED_KINDS = ("nvlink", "pcie", "host")


class UncontendedFlowCommModel(FlowCommModel):
    """The flow model with contention removed: a lower bound of :class:`FlowCommModel`'s time
    for every call, at any QP count, ECMP seed, sharing model or background traffic.

    Every call is built exactly as the flow model builds it (same plan, commodities, bytes,
    latencies; ``_build``) and priced alone on the links no QP count or ECMP choice changes
    (``FIXED_KINDS``): per phase, the call's own bits on the busiest such link over its
    payload capacity (``SharingModel.rates`` caps every link there), plus the phase's latency. The flow model runs each phase's commodities at
    rates that fit every link's capacity (together with whatever else shares it), so a phase
    cannot end before that link has carried the call's bits: this time is never above the
    flow model's, call by call, hence not above ``predict``'s iteration (which only adds,
    maxes and overlaps call times). On a fabric where nothing else loads those links and the
    switches' links are no bottleneck, the two are equal.
    """

    drop_dominated = False  # keep every fixed link (a dominated one may be the tight one)

    def _price(self, op: str, groups: np.ndarray, sizes: np.ndarray,
               want: _Want | None = None) -> np.ndarray:
        built = self._build(op, groups, sizes)
        if built.alone_s_per_byte is None:
            built.alone_s_per_byte = _alone_s_per_byte(
                built, self.fabric, self.sharing.wire_efficiency)
        return built.latency_s + sizes * built.alone_s_per_byte


def _call_times(built: _Built, sizes: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Each call's latency plus its bytes at its slowest commodity's rate."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s_per_byte = np.where(rate > 0, built.bits_per_byte / rate, np.inf)
    slowest = np.zeros(built.num_calls)
    np.maximum.at(slowest, built.com_call, s_per_byte)
    return built.latency_s + sizes * slowest


@dataclass(frozen=True)
class _Want:
    """What the caller reads of a priced set of calls: each segment's slowest (``segment``,
    one per call, numbered from 0), at least ``floor_s`` (the slowest already known)."""

    segment: np.ndarray
    floor_s: np.ndarray


def _wanted(slowest_of: np.ndarray | None, idx: np.ndarray, out: np.ndarray,
            known: np.ndarray) -> _Want | None:
    """The calls ``idx`` of a batch read by segment: their segments, renumbered from 0, with
    the slowest final time each already has among the ``known`` calls as its floor."""
    if slowest_of is None:
        return None
    seg = np.asarray(slowest_of, np.int64)
    ids, local = np.unique(seg[idx], return_inverse=True)
    floor = np.full(len(ids), -np.inf)
    k = np.flatnonzero(known & np.isin(seg, ids))
    np.maximum.at(floor, np.searchsorted(ids, seg[k]), out[k])
    return _Want(local.astype(np.int64), floor)


def _alone_s_per_byte(built: _Built, fabric, wire_efficiency: float) -> np.ndarray:
    """Per call: the sum over its phases of the busiest fixed link's seconds per call byte, at
    the payload capacity the sharing model gives a link (line rate x ``wire_efficiency``)."""
    inc = built.inc
    cap = built.capacity_bps * wire_efficiency
    fixed = np.isin(np.asarray(fabric.link_kind).astype(str), FIXED_KINDS)
    sel = fixed[inc.e_link]
    flow, link = inc.e_flow[sel], inc.e_link[sel]
    phase = built.phase[flow]
    s_per_byte = built.bits_per_byte[flow] * inc.e_weight[sel] / cap[link]
    key, where = np.unique(phase * np.int64(inc.num_links) + link, return_inverse=True)
    load = np.bincount(where.ravel(), weights=s_per_byte)
    busiest = np.zeros(len(built.phase_chain))
    np.maximum.at(busiest, key // inc.num_links, load)
    return np.bincount(built.phase_chain, weights=busiest, minlength=built.num_calls)


_REF_BYTES = 1 << 30  # size the plans of linear ops are built at (bytes per byte are exact)


@dataclass
class _Built:
    """Commodities of one batch; bytes per call byte, so one build serves every size.

    ``whole`` is the incidence with every link (built on first use from ``csr``, the paths of
    one-QP commodities, where no ``incidence`` was given: an allocation settled after its
    first round never needs it); ``inc`` the one full allocations take, without the links
    whose constraint another link implies when ``prune`` (dropped on first use)."""

    incidence: object
    csr: tuple | None
    num_flows: int
    capacity_bps: np.ndarray
    bits_per_byte: np.ndarray
    com_call: np.ndarray
    phase: np.ndarray
    phase_chain: np.ndarray
    phase_latency_ps: np.ndarray
    num_calls: int
    lockstep: bool
    phases_per_call: int
    latency_s: np.ndarray
    rate: np.ndarray | None = None
    alone_s_per_byte: np.ndarray | None = None
    prune: bool = False
    _pruned: object = None

    @property
    def whole(self):
        if self.incidence is None:
            from netsim.flow.maxmin import Incidence

            indptr, links, weights = self.csr
            self.incidence = Incidence.from_csr(indptr, links, len(self.capacity_bps), weights)
        return self.incidence

    @property
    def inc(self):
        if not self.prune:
            return self.whole
        if self._pruned is None:
            self._pruned = _drop_dominated(self.whole, self.capacity_bps)
        return self._pruned


@dataclass
class _Mapped:
    """A cached plan and the GPUs it was built for (its rank order)."""

    plan: object
    gpus: np.ndarray

    @property
    def phases(self):
        return self.plan.phases


def _replicate(paths, ph, rep_gpus, groups, comm, cfg, seed, together: bool = False):
    """Commodities of phase ``ph`` (built for ``rep_gpus``) for every group of ``groups``.

    Mirrors ``netsim.collectives.runner._add_phase`` call by call: the same connections, QP
    numbers (keyed by the communicator), paths, weights and bytes. Returns per path (a QP of a
    connection) its commodity (numbered from 0 for this block, call-major) and length, the
    paths' links one after the other, per path its weight, the bits of every commodity, and
    the commodities per call.

    ``together`` (all-to-all): the call's connections are one lockstep commodity, each
    connection carrying its share of the call's bytes, so that all peers finish together as
    NCCL's grouped sends of one all-to-all do; the steady allocation then prices a call by its
    most loaded link instead of by its largest connection at the all-active rate (which the
    fluid run would let speed up as the others finish).
    """
    from netsim.flow.qp import connection_qpn, udp_sport

    ng = len(groups)
    gps = int(paths.fabric.gpus_per_server)
    src, dst = _member_columns(paths, rep_gpus, ph.src, ph.dst, groups, gps)
    proxied = ph.via != ph.src
    if cfg.pxn:
        via_calc = np.where(paths.gpu_server[ph.src] == paths.gpu_server[ph.dst], ph.src,
                            paths.gpu_server[ph.src] * gps + paths.gpu_local[ph.dst])
        if not np.array_equal(via_calc, ph.via):
            raise ValueError("plan proxies are not NCCL PXN proxies: cannot replicate")
    if proxied.any():
        via = np.where(np.tile(proxied, ng), paths.gpu_server[src] * gps + paths.gpu_local[dst],
                       src)
    else:
        via = src
    nconn = len(ph.src)
    channel = np.tile(ph.channel, ng) + 64 * np.repeat(comm, nconn)
    byt = np.tile(ph.bytes, ng)
    group = ph.group
    q = cfg.qps_per_connection
    net = paths.gpu_server[via] != paths.gpu_server[dst]
    nq = np.where(net, q, 1)
    conn = np.repeat(np.arange(len(src)), nq)
    qi = np.arange(len(conn)) - np.repeat(np.cumsum(nq) - nq, nq)
    sport = udp_sport(connection_qpn(via[conn], dst[conn], channel[conn], qi, seed))
    indptr, links, _ = paths.gpu_paths(src[conn], dst[conn], sport, via[conn])
    eff = cfg.proto_efficiency
    call = conn // nconn
    if (group >= 0).all():
        ncom = ph.num_groups
        com = call * ncom + np.tile(group, ng)[conn]
        weight = 1.0 / nq[conn]
        gbytes = np.zeros(ncom)
        gbytes[group] = ph.bytes
        bits = np.tile(gbytes * ph.fill_scale * 8 / eff, ng)
    elif together:
        total = float(np.sum(ph.bytes))
        ncom = 1
        com = call
        weight = (byt[conn] / nq[conn]) / total
        bits = np.full(ng, total * 8 / eff)
    else:
        ncom = int(np.sum(np.where(paths.gpu_server[ph.via] != paths.gpu_server[ph.dst], q, 1)))
        com = np.arange(len(conn))
        weight = np.ones(len(conn))
        bits = (byt[conn] / nq[conn]) * 8 / eff
    return com, np.diff(indptr), links, weight, bits, ncom


def _per_commodity(com: np.ndarray, lens: np.ndarray, num: int) -> np.ndarray:
    """Entries per commodity, given each path's commodity and length (``np.bincount`` of the
    entries' commodities, without them: paths of one commodity add up)."""
    return np.bincount(com, weights=lens, minlength=num).astype(np.int64)


def _member_columns(paths, rep_gpus, src_t, dst_t, groups, gps):
    """Source and destination GPUs of every connection of a template plan (built for
    ``rep_gpus``) in every group, flattened call-major.

    A template end that is not a member is a PXN relay (an all-to-all's aggregated
    connection leaves from the GPU of the sender's server with the receiver's local index):
    it maps to the same server as the member it shares a server with, at the local index of
    the connection's other end.
    """
    rep = np.asarray(rep_gpus, np.int64)
    order = np.argsort(rep, kind="stable")

    def ranks(ends):
        ends = np.asarray(ends, np.int64)
        pos = np.minimum(np.searchsorted(rep[order], ends), len(rep) - 1)
        known = rep[order][pos] == ends
        return np.where(known, order[pos], 0), known

    s_rank, known_s = ranks(src_t)
    d_rank, known_d = ranks(dst_t)
    if not (known_s | known_d).all():
        raise ValueError("plan connection between two non-members: cannot replicate")
    # first member on each server of the template (the relay's server anchor)
    rep_srv = paths.gpu_server[rep]
    _, first = np.unique(rep_srv, return_index=True)
    srv_sorted = rep_srv[first]
    src, dst = groups[:, s_rank], groups[:, d_rank]
    for cols, known, ends, other in ((src, known_s, src_t, dst), (dst, known_d, dst_t, src)):
        j = np.flatnonzero(~known)
        if j.size == 0:
            continue
        srv = paths.gpu_server[np.asarray(ends, np.int64)[j]]
        k = np.minimum(np.searchsorted(srv_sorted, srv), len(srv_sorted) - 1)
        if not (srv_sorted[k] == srv).all():
            raise ValueError("plan relay on a server without members: cannot replicate")
        host = first[k]
        cols[:, j] = paths.gpu_server[groups[:, host]] * gps + paths.gpu_local[other[:, j]]
    return src.ravel(), dst.ravel()


def _drop_dominated(inc, capacity: np.ndarray):
    """The incidence without links whose constraint another link implies.

    Link ``l`` is dropped when another link carries exactly the same commodities with the same
    weights and has no more capacity (a GPU's PCIe hop behind its own NIC's 200G host link,
    say): the feasible rates, hence the max-min allocation, are the same without it.
    """
    from netsim.flow.maxmin import Incidence

    member, _ = dominated_links(inc, capacity)
    if len(member) == 0:
        return inc
    drop = np.zeros(inc.num_links, bool)
    drop[member] = True
    keep = ~drop[inc.e_link]
    return Incidence._build(inc.num_links, inc.num_flows, inc.e_flow[keep], inc.e_link[keep],
                            inc.e_weight[keep], inc.e_count[keep])


def dominated_links(inc, capacity: np.ndarray, compiled: bool = True
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Links whose constraint another link implies, and that link: ``(member, rep)`` with
    ``member[i]`` carrying exactly the commodities of ``rep[i]`` with the same weights and
    no less capacity. A ``rep`` is never a ``member``. ``compiled``: the per-entry passes in
    :mod:`netsim.workload.dominated_fast` where numba is present (same result)."""
    from netsim.workload.dominated_fast import available, same_entries, signatures

    fast = compiled and available()
    if fast:
        count, sig = signatures(inc.e_link, inc.e_flow, inc.e_weight, inc.num_links)
    else:
        count, sig = _signatures(inc)
    used = np.flatnonzero(count)
    # candidates: same (count, signature); representative = the smallest capacity
    key = np.lexsort((capacity[used], sig[used], count[used]))
    cand = used[key]
    same = (count[cand[1:]] == count[cand[:-1]]) & (sig[cand[1:]] == sig[cand[:-1]])
    head = np.r_[True, ~same]
    rep = cand[np.maximum.accumulate(np.where(head, np.arange(len(cand)), 0))]
    member = cand[~head]
    rep_of = rep[~head]
    empty = np.empty(0, np.int64)
    if len(member) == 0:
        return empty, empty
    if fast:
        ok = same_entries(inc.by_link, inc.e_flow, inc.e_weight, count, member, rep_of)
    else:
        ok = _same_entries(inc, count, member, rep_of)
    ok &= capacity[member] >= capacity[rep_of]
    return member[ok], rep_of[ok]


def _signatures(inc) -> tuple[np.ndarray, np.ndarray]:
    """Entries per link and a hash sum of each link's (commodity, weight) entries."""
    order = inc.by_link  # entries by link, commodities ascending within a link
    link, flow, weight = inc.e_link[order], inc.e_flow[order], inc.e_weight[order]
    count = np.bincount(link, minlength=inc.num_links)
    with np.errstate(over="ignore"):
        mixed = (flow.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)) * np.uint64(
            0xBF58476D1CE4E5B9)
        mixed ^= mixed >> np.uint64(31)
        mixed += (weight * 1e6).astype(np.uint64)
        sig = np.zeros(inc.num_links, np.uint64)
        used = np.flatnonzero(count)
        first = np.r_[0, np.cumsum(count[used])[:-1]]  # segments of ``link`` (sorted)
        sig[used] = np.add.reduceat(mixed, first)
    return count, sig


def _same_entries(inc, count, member, rep_of) -> np.ndarray:
    """Whether each member holds its rep's entries, position by position in link order."""
    order = inc.by_link
    flow, weight = inc.e_flow[order], inc.e_weight[order]
    start = np.r_[0, np.cumsum(count)[:-1]]
    n = count[member]
    pos = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    a = np.repeat(start[member], n) + pos
    b = np.repeat(start[rep_of], n) + pos
    equal = ((flow[a] == flow[b]) & (weight[a] == weight[b])).astype(np.uint8)
    return np.minimum.reduceat(equal, np.r_[0, np.cumsum(n)[:-1]]).astype(bool)


def _first_same(srv: np.ndarray) -> np.ndarray:
    """Per row, the index of the first member on the same server as each member."""
    eq = srv[:, :, None] == srv[:, None, :]
    return np.argmax(eq, axis=2)


def _layouts(srv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct server layouts of the groups (rows of ``srv``) and each group's layout."""
    if srv.shape[1] * srv.shape[1] * srv.shape[0] > 50_000_000:  # big groups: compare by rows
        first = np.stack([_first_same(row[None, :])[0] for row in srv])
    else:
        first = _first_same(srv)
    pattern, inverse = np.unique(first, axis=0, return_inverse=True)
    return pattern, inverse.ravel()


def _comm_keys(groups: np.ndarray) -> np.ndarray:
    """``netsim.collectives.runner._comm_key`` of every group (FNV-1a over its first 64 GPUs
    and its size), vectorised."""
    h = np.full(len(groups), 1469598103934665603, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    cols = [groups[:, j].astype(np.uint64) for j in range(min(groups.shape[1], 64))]
    cols.append(np.full(len(groups), groups.shape[1], dtype=np.uint64))
    with np.errstate(over="ignore"):
        for x in cols:
            h = (h ^ x) * prime
    return (h & np.uint64(0xFFFF)).astype(np.int64)


def _rounds(groups: np.ndarray) -> list[np.ndarray]:
    """Split calls into rounds in which no GPU appears twice (greedy, in input order).

    A function of the groups alone, so it is kept per exact groups (bytes and shape) across
    models: every scorer of a QP search or check prices the same pipeline sends."""
    g = np.ascontiguousarray(groups, np.int64)
    return list(_rounds_of(g.tobytes(), g.shape))


@functools.lru_cache(maxsize=16)
def _rounds_of(data: bytes, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    groups = np.frombuffer(data, np.int64).reshape(shape)
    rounds: list[list[int]] = []
    used: list[set] = []
    for i, row in enumerate(groups.tolist()):
        for r, u in zip(rounds, used, strict=True):
            if u.isdisjoint(row):
                r.append(i)
                u.update(row)
                break
        else:
            rounds.append([i])
            used.append(set(row))
    out = tuple(np.asarray(r, np.int64) for r in rounds)
    for r in out:
        r.setflags(write=False)  # shared by every later call with these groups
    return out


def _scaled(fabric, scale: float):
    """The fabric with its network links' capacity times ``scale`` (None when infinite)."""
    if math.isinf(scale):
        return None
    if scale == 1.0:
        return fabric
    out = copy.copy(fabric)
    cap = np.asarray(fabric.link_capacity_bps, dtype=np.float64).copy()
    net = np.isin(np.asarray(fabric.link_kind).astype(str), NETWORK_KINDS)
    cap[net] *= scale
    out.link_capacity_bps = cap.astype(np.asarray(fabric.link_capacity_bps).dtype)
    return out
