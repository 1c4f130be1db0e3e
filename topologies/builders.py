"""Fabric builders: pure functions from a spec dataclass to a :class:`~topologies.fabric.Fabric`.

All three shapes are one tiered structure (``_Tiered``) built with numpy index arithmetic,
no per-edge Python loops:

* :func:`clos3`: the three-layer CLOS of large training clusters (MegaScale, NSDI'24 §3.6:
  64 x 400G switches, 1:1 per tier, ToR downlinks split into 2 x 200G, multi-rail).
* :func:`fat_tree`: the classic k-ary fat-tree (Al-Fares et al., SIGCOMM'08), a clos3 with
  k-port switches, no split and k/2 servers per ToR.
* :func:`leaf_spine`: two tiers, every leaf wired once to every spine.

Wiring of the core (see ``docs/fabrics.md`` for the derivation): agg ``j`` of every pod belongs
to plane ``j // s``; each agg connects once to each of the ``U_a`` cores of its plane, and each
core connects to the ``s`` aggs of its plane in every pod, so a core uses ``s x pods`` ports.
``s`` (aggs of one pod per plane) is the largest divisor of the aggs per pod that fits the core
radix; no parallel links, so the graph stays a simple ``DiGraph``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import topologies.units as units
from topologies.fabric import ROLES, Fabric, assemble

# Defaults with sources (see /shared/reference/*.md):
# - 500 ns per network link: SimAI topology templates ("NIC latency (per link) 500 ns", a rounded
#   switch latency of 300-400 ns plus margin; maintainer reply on SimAI #260), peer-simulators.md.
# - NVLink 25 ns: same SimAI templates. NVLink bandwidth 2,400 Gb/s per GPU per direction:
#   A100 (MegaScale's Ampere GPUs), 600 GB/s bidirectional NVLink 3 = 300 GB/s each way.
# - PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 encoding = 252 Gb/s per direction; the
#   250 ns PCIe hop latency is an assumption (order of a PCIe switch traversal), not a measurement.
NET_LINK_LATENCY_NS = 500.0
NVLINK_LATENCY_NS = 25.0
NVLINK_GBPS = 2400.0
PCIE_GBPS = 252.0
PCIE_LATENCY_NS = 250.0
# Cable length per tier, for the PFC headroom of the switch files (``netsim recommend``), not
# for timing (the link latencies above are mostly switch latency): SONiC's defaults per
# neighbour role, sonic-buildimage files/build_templates/buffers_config.j2 ``ports2cable``
# (commit 086b03bd70f9): ToR to server 5 m, leaf to ToR 40 m, spine to leaf 300 m.
HOST_CABLE_M = 5.0
TOR_AGG_CABLE_M = 40.0
AGG_CORE_CABLE_M = 300.0
#: The longest cable a fabric file may state: 10 km, beyond any data-centre link.
MAX_CABLE_M = 10_000.0


def _check_cables(spec: object, names: tuple[str, ...]) -> None:
    for f in names:
        val = getattr(spec, f)
        _need(isinstance(val, (int, float, np.number)) and not isinstance(val, bool)
              and 0 < val <= MAX_CABLE_M,
              f"{f} must be a cable length in metres, > 0 and <= {MAX_CABLE_M:g}, got {val!r}")


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _check_positive(spec: object, names: tuple[str, ...], integer: bool) -> None:
    for f in names:
        val = getattr(spec, f)
        kind = "a positive integer" if integer else "a positive number"
        ok = isinstance(val, (int, np.integer)) and not isinstance(val, bool) if integer else (
            isinstance(val, (int, float, np.number)) and not isinstance(val, bool))
        _need(ok and val > 0, f"{f} must be {kind}, got {val!r}")


def _split_ports(radix: int, ratio: tuple[int, int], field: str) -> tuple[int, int]:
    """Ports down/up for a ``down:up`` ratio; refuse ratios that do not give whole ports."""
    _need(isinstance(ratio, (tuple, list)) and len(ratio) == 2
          and all(isinstance(x, int) and x > 0 for x in ratio),
          f"{field} must be two positive integers [down, up], got {ratio!r}")
    d, u = ratio
    _need(radix * d % (d + u) == 0,
          f"{field} {d}:{u} does not split switch_radix={radix} into whole ports: "
          f"choose a ratio whose parts sum to a divisor of {radix}")
    down = radix * d // (d + u)
    return down, radix - down


@dataclass(frozen=True)
class Clos3Spec:
    """Three-layer CLOS; the defaults are the MegaScale cluster (NSDI'24 §3.6)."""

    name: str = "clos3"
    servers: int = 1536
    gpus_per_server: int = 8
    nics_per_server: int = 8
    nic_speed_gbps: float = 200.0
    switch_radix: int = 64
    port_speed_gbps: float = 400.0
    tor_downlink_split: int = 2
    tor_down_up: tuple[int, int] = (1, 1)
    agg_down_up: tuple[int, int] = (1, 1)
    servers_per_tor_group: int = 64
    planes: int | None = None
    host_latency_ns: float = NET_LINK_LATENCY_NS
    tor_agg_latency_ns: float = NET_LINK_LATENCY_NS
    agg_core_latency_ns: float = NET_LINK_LATENCY_NS
    nvlink_gbps: float = NVLINK_GBPS
    nvlink_latency_ns: float = NVLINK_LATENCY_NS
    pcie_gbps: float = PCIE_GBPS
    pcie_latency_ns: float = PCIE_LATENCY_NS
    host_cable_m: float = HOST_CABLE_M
    tor_agg_cable_m: float = TOR_AGG_CABLE_M
    agg_core_cable_m: float = AGG_CORE_CABLE_M

    def cable_m(self) -> dict[str, float]:
        """Cable length per link kind (PFC headroom); validated."""
        _check_cables(self, ("host_cable_m", "tor_agg_cable_m", "agg_core_cable_m"))
        return {"host": float(self.host_cable_m), "tor-agg": float(self.tor_agg_cable_m),
                "agg-core": float(self.agg_core_cable_m)}

    def derive(self) -> dict[str, int]:
        """Validate and return the derived counts (ports per tier, ToRs, pods, planes, ...)."""
        self.cable_m()
        _check_positive(self, ("servers", "gpus_per_server", "nics_per_server", "switch_radix",
                               "tor_downlink_split", "servers_per_tor_group"), integer=True)
        _check_positive(self, ("nic_speed_gbps", "port_speed_gbps", "nvlink_gbps", "pcie_gbps"),
                        integer=False)
        for f in ("host_latency_ns", "tor_agg_latency_ns", "agg_core_latency_ns",
                  "nvlink_latency_ns", "pcie_latency_ns"):
            _need(getattr(self, f) >= 0, f"{f} must be >= 0, got {getattr(self, f)!r}")
        if self.planes is not None:
            _check_positive(self, ("planes",), integer=True)
        r = self.switch_radix
        tor_down, tor_up = _split_ports(r, tuple(self.tor_down_up), "tor_down_up")
        agg_down, agg_up = _split_ports(r, tuple(self.agg_down_up), "agg_down_up")
        host_ports = tor_down * self.tor_downlink_split
        host_port_gbps = self.port_speed_gbps / self.tor_downlink_split
        _need(host_ports >= self.servers_per_tor_group,
              f"switch_radix={r} is too small for tor_downlink_split={self.tor_downlink_split}: "
              f"a ToR has {tor_down} down ports x {self.tor_downlink_split} = {host_ports} host "
              f"ports, fewer than servers_per_tor_group={self.servers_per_tor_group}; raise "
              "switch_radix or tor_downlink_split, or lower servers_per_tor_group")
        _need(self.nic_speed_gbps <= host_port_gbps,
              f"nic_speed_gbps={self.nic_speed_gbps:g} exceeds the ToR host port speed "
              f"port_speed_gbps / tor_downlink_split = {host_port_gbps:g}: lower "
              "tor_downlink_split or nic_speed_gbps")
        groups = math.ceil(self.servers / self.servers_per_tor_group)
        tors = groups * self.nics_per_server
        pods = math.ceil(tors / agg_down)
        aggs_per_pod = tor_up
        planes = self.planes
        if pods > 1:
            if planes is None:
                fits = [p for p in range(1, aggs_per_pod + 1)
                        if aggs_per_pod % p == 0 and (aggs_per_pod // p) * pods <= r]
                _need(bool(fits), f"servers={self.servers} needs {pods} pods, but a core switch "
                      f"of switch_radix={r} reaches at most {r} pods: use bigger switches or "
                      "fewer servers")
                planes = fits[0]
            _need(aggs_per_pod % planes == 0,
                  f"planes={planes} must divide the aggs per pod ({aggs_per_pod})")
            _need((aggs_per_pod // planes) * pods <= r,
                  f"planes={planes}: each core would need {(aggs_per_pod // planes) * pods} "
                  f"ports, more than switch_radix={r}; use more planes")
            cores = planes * agg_up
        else:
            planes, cores = 0, 0
        return dict(tor_down=tor_down, tor_up=tor_up, agg_down=agg_down, agg_up=agg_up,
                    host_ports=host_ports, groups=groups, tors=tors, pods=pods,
                    aggs_per_pod=aggs_per_pod, aggs=pods * aggs_per_pod, planes=planes,
                    plane_size=aggs_per_pod // planes if planes else 0, cores=cores)


@dataclass(frozen=True)
class FatTreeSpec:
    """Classic k-ary fat-tree: k pods of k/2 ToRs and k/2 aggs, (k/2)^2 cores, k^3/4 host ports."""

    name: str = ""
    k: int = 4
    gpus_per_server: int = 1
    nics_per_server: int = 1
    link_speed_gbps: float = 100.0
    link_latency_ns: float = NET_LINK_LATENCY_NS
    nvlink_gbps: float = NVLINK_GBPS
    pcie_gbps: float = PCIE_GBPS
    host_cable_m: float = HOST_CABLE_M
    tor_agg_cable_m: float = TOR_AGG_CABLE_M
    agg_core_cable_m: float = AGG_CORE_CABLE_M

    def cable_m(self) -> dict[str, float]:
        """Cable length per link kind (PFC headroom); validated."""
        return self.to_clos3().cable_m()

    def to_clos3(self) -> Clos3Spec:
        _check_positive(self, ("k", "gpus_per_server", "nics_per_server"), integer=True)
        _check_positive(self, ("link_speed_gbps", "nvlink_gbps", "pcie_gbps"), integer=False)
        _need(self.link_latency_ns >= 0,
              f"link_latency_ns must be >= 0, got {self.link_latency_ns!r}")
        _need(self.k % 2 == 0, f"k must be even, got {self.k}")
        half = self.k // 2
        _need(half % self.nics_per_server == 0,
              f"nics_per_server={self.nics_per_server} must divide k/2={half} so that a server's "
              "rails land in one pod")
        return Clos3Spec(
            name=self.name or f"fat-tree-k{self.k}",
            servers=self.k ** 3 // 4 // self.nics_per_server,
            gpus_per_server=self.gpus_per_server, nics_per_server=self.nics_per_server,
            nic_speed_gbps=self.link_speed_gbps, switch_radix=self.k,
            port_speed_gbps=self.link_speed_gbps, tor_downlink_split=1,
            servers_per_tor_group=half, host_latency_ns=self.link_latency_ns,
            tor_agg_latency_ns=self.link_latency_ns, agg_core_latency_ns=self.link_latency_ns,
            nvlink_gbps=self.nvlink_gbps, pcie_gbps=self.pcie_gbps,
            host_cable_m=self.host_cable_m, tor_agg_cable_m=self.tor_agg_cable_m,
            agg_core_cable_m=self.agg_core_cable_m,
        )


@dataclass(frozen=True)
class LeafSpineSpec:
    """Two tiers: ``leaves`` ToRs (in rail groups of ``nics_per_server``), each wired to every spine."""

    name: str = "leaf-spine"
    leaves: int = 8
    spines: int = 8
    servers_per_leaf: int = 8
    gpus_per_server: int = 1
    nics_per_server: int = 1
    switch_radix: int = 16
    host_speed_gbps: float = 100.0
    uplink_speed_gbps: float = 100.0
    host_latency_ns: float = NET_LINK_LATENCY_NS
    uplink_latency_ns: float = NET_LINK_LATENCY_NS
    nvlink_gbps: float = NVLINK_GBPS
    pcie_gbps: float = PCIE_GBPS
    host_cable_m: float = HOST_CABLE_M
    uplink_cable_m: float = TOR_AGG_CABLE_M

    def cable_m(self) -> dict[str, float]:
        """Cable length per link kind (PFC headroom); validated."""
        _check_cables(self, ("host_cable_m", "uplink_cable_m"))
        return {"host": float(self.host_cable_m), "tor-agg": float(self.uplink_cable_m)}

    def derive(self) -> dict[str, int]:
        self.cable_m()
        _check_positive(self, ("leaves", "spines", "servers_per_leaf", "gpus_per_server",
                               "nics_per_server", "switch_radix"), integer=True)
        _check_positive(self, ("host_speed_gbps", "uplink_speed_gbps", "nvlink_gbps",
                               "pcie_gbps"), integer=False)
        for f in ("host_latency_ns", "uplink_latency_ns"):
            _need(getattr(self, f) >= 0, f"{f} must be >= 0, got {getattr(self, f)!r}")
        _need(self.leaves % self.nics_per_server == 0,
              f"leaves={self.leaves} must be a multiple of nics_per_server={self.nics_per_server}"
              " (one leaf per rail in every group)")
        _need(self.servers_per_leaf + self.spines <= self.switch_radix,
              f"switch_radix={self.switch_radix} is too small for a leaf: it needs "
              f"servers_per_leaf + spines = {self.servers_per_leaf + self.spines} ports")
        _need(self.leaves <= self.switch_radix,
              f"switch_radix={self.switch_radix} is too small for a spine wired to "
              f"{self.leaves} leaves")
        return dict(servers=self.leaves // self.nics_per_server * self.servers_per_leaf)


@dataclass(frozen=True)
class _Tiered:
    """The common shape every builder reduces to (all counts already validated)."""

    name: str
    spec: object
    servers: int
    gpus_per_server: int
    nics_per_server: int
    servers_per_group: int
    host_ports: int            # ToR host ports (for port numbering)
    tors: int
    tors_per_pod: int
    aggs_per_pod: int
    pods: int
    agg_up: int                # 0 without a core tier
    plane_size: int
    cores: int
    cap_bps: dict              # kind -> capacity
    lat_ns: dict               # kind -> latency


def clos3(spec: Clos3Spec | None = None) -> Fabric:
    """Build a three-layer CLOS.

    Parameters
    ----------
    spec : Clos3Spec, optional
        The parameters; ``Clos3Spec()`` (the MegaScale cluster) when omitted.

    Returns
    -------
    Fabric
    """
    spec = spec or Clos3Spec()
    d = spec.derive()
    host_gbps = min(spec.nic_speed_gbps, spec.port_speed_gbps / spec.tor_downlink_split)
    return _build(_Tiered(
        name=spec.name, spec=spec, servers=spec.servers, gpus_per_server=spec.gpus_per_server,
        nics_per_server=spec.nics_per_server, servers_per_group=spec.servers_per_tor_group,
        host_ports=d["host_ports"], tors=d["tors"], tors_per_pod=d["agg_down"],
        aggs_per_pod=d["aggs_per_pod"], pods=d["pods"],
        agg_up=d["agg_up"] if d["cores"] else 0, plane_size=d["plane_size"], cores=d["cores"],
        cap_bps={"nvlink": units.gbps(spec.nvlink_gbps), "pcie": units.gbps(spec.pcie_gbps),
                 "host": units.gbps(host_gbps), "tor-agg": units.gbps(spec.port_speed_gbps),
                 "agg-core": units.gbps(spec.port_speed_gbps)},
        lat_ns={"nvlink": spec.nvlink_latency_ns, "pcie": spec.pcie_latency_ns,
                "host": spec.host_latency_ns, "tor-agg": spec.tor_agg_latency_ns,
                "agg-core": spec.agg_core_latency_ns},
    ))


def fat_tree(k: int | FatTreeSpec = 4, **kwargs) -> Fabric:
    """Build the classic k-ary fat-tree (``fat_tree(4)`` or ``fat_tree(FatTreeSpec(k=8, ...))``).

    Parameters
    ----------
    k : int or FatTreeSpec
        Switch radix (even), or a full spec.
    **kwargs
        Other :class:`FatTreeSpec` fields when ``k`` is an int.
    """
    spec = k if isinstance(k, FatTreeSpec) else FatTreeSpec(k=k, **kwargs)
    fab = clos3(spec.to_clos3())
    fab.spec = spec
    return fab


def leaf_spine(spec: LeafSpineSpec | None = None, **kwargs) -> Fabric:
    """Build a two-tier leaf-spine fabric.

    Parameters
    ----------
    spec : LeafSpineSpec, optional
        The parameters (default ``LeafSpineSpec(**kwargs)``).
    """
    spec = spec or LeafSpineSpec(**kwargs)
    d = spec.derive()
    return _build(_Tiered(
        name=spec.name, spec=spec, servers=d["servers"], gpus_per_server=spec.gpus_per_server,
        nics_per_server=spec.nics_per_server, servers_per_group=spec.servers_per_leaf,
        host_ports=spec.servers_per_leaf, tors=spec.leaves, tors_per_pod=spec.leaves,
        aggs_per_pod=spec.spines, pods=1, agg_up=0, plane_size=0, cores=0,
        cap_bps={"nvlink": units.gbps(spec.nvlink_gbps), "pcie": units.gbps(spec.pcie_gbps),
                 "host": units.gbps(spec.host_speed_gbps),
                 "tor-agg": units.gbps(spec.uplink_speed_gbps)},
        lat_ns={"nvlink": NVLINK_LATENCY_NS, "pcie": PCIE_LATENCY_NS,
                "host": spec.host_latency_ns, "tor-agg": spec.uplink_latency_ns},
    ))


# -- the common array builder -----------------------------------------------------------------

def _build(t: _Tiered) -> Fabric:
    S, G, R = t.servers, t.gpus_per_server, t.nics_per_server
    counts = dict(gpu=S * G, nic=S * R, nvswitch=S if G > 1 else 0, tor=t.tors,
                  agg=t.pods * t.aggs_per_pod, core=t.cores)
    base = dict(zip(ROLES, np.cumsum([0] + [counts[r] for r in ROLES])[:-1].tolist(), strict=True))
    parts: list[dict] = []

    def add(kind, u, v, port_u, port_v):
        n = len(u)
        parts.append(dict(u=u, v=v, port_u=port_u, port_v=port_v,
                          kind=np.full(n, kind), capacity_bps=np.full(n, t.cap_bps[kind]),
                          latency_ns=np.full(n, float(t.lat_ns[kind]))))
        return sum(len(p["u"]) for p in parts) - n  # first physical id of this block

    gpu = np.arange(S * G)
    gserver, glocal = gpu // G, gpu % G
    if G > 1:  # the NVSwitch is only modelled when a server has GPUs to connect
        add("nvlink", gpu, base["nvswitch"] + gserver, np.zeros(S * G, np.int64), glocal)
    gpu_nic = gserver * R + glocal * R // G
    add("pcie", gpu, base["nic"] + gpu_nic, np.ones(S * G, np.int64), 1 + glocal)
    nic = np.arange(S * R)
    nserver, rail = nic // R, nic % R
    pos = nserver % t.servers_per_group
    nic_tor = (nserver // t.servers_per_group) * R + rail
    host0 = add("host", base["nic"] + nic, base["tor"] + nic_tor, np.zeros(S * R, np.int64), pos)
    wiring = _wire_switches(t, base, add)
    wiring.update(nic_tor=nic_tor, nic_up_link=2 * (host0 + nic),
                  nic_down_link=2 * (host0 + nic) + 1)
    phys = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    names, attrs, roles, servers = _node_names(t, counts, gserver, glocal, gpu_nic, nic_tor,
                                               wiring["tor_pod"])
    ip = (np.uint32(10) << np.uint32(24)) | (nic_tor.astype(np.uint32) << np.uint32(8)) \
        | (pos + 1).astype(np.uint32)
    return assemble(name=t.name, spec=t.spec, nodes=names, node_role=roles, node_attrs=attrs,
                    counts=counts, phys=phys, wiring_parts=wiring, nic_ip=ip,
                    gpu_nic_index=gpu_nic, nic_server_index=nserver, gpus_per_server=G,
                    nics_per_server=R, servers=servers)


def _wire_switches(t: _Tiered, base: dict, add) -> dict:
    """ToR-agg full mesh per pod, agg-core by planes; returns the router's tables."""
    Tp, Ap, P = t.tors_per_pod, t.aggs_per_pod, t.pods
    tor = np.repeat(np.arange(t.tors), Ap)
    j = np.tile(np.arange(Ap), t.tors)
    tor_pod, tor_pos = np.arange(t.tors) // Tp, np.arange(t.tors) % Tp
    agg = tor_pod[tor] * Ap + j
    ta0 = add("tor-agg", base["tor"] + tor, base["agg"] + agg, t.host_ports + j, tor_pos[tor])
    ta_ids = ta0 + np.arange(len(tor))
    tor_up = (2 * ta_ids).reshape(t.tors, Ap)
    n_agg = P * Ap
    agg_down = np.full((n_agg, Tp), -1, np.int64)
    agg_down[agg, tor_pos[tor]] = 2 * ta_ids + 1
    Ua, s = t.agg_up, t.plane_size
    core_down = np.full((t.cores, P, max(s, 1)), -1, np.int64)
    if t.cores:
        a = np.repeat(np.arange(n_agg), Ua)
        c = np.tile(np.arange(Ua), n_agg)
        a_pod, a_j = a // Ap, a % Ap
        core = (a_j // s) * Ua + c
        ac0 = add("agg-core", base["agg"] + a, base["core"] + core, Tp + c, a_pod * s + a_j % s)
        ac_ids = ac0 + np.arange(len(a))
        agg_up = (2 * ac_ids).reshape(n_agg, Ua)
        core_down[core, a_pod, a_j % s] = 2 * ac_ids + 1
    else:
        agg_up = np.zeros((n_agg, 0), np.int64)
    return dict(tor_pod=tor_pod, tor_pos=tor_pos, tor_up=tor_up,
                agg_pod=np.arange(n_agg) // Ap, agg_down=agg_down, agg_up=agg_up,
                core_down=core_down)


def _node_names(t: _Tiered, counts, gserver, glocal, gpu_nic, nic_tor, tor_pod):
    """Node names and attribute arrays in node-index order (gpus, nics, nvswitches, switches)."""
    S, G, R = t.servers, t.gpus_per_server, t.nics_per_server
    servers = [f"srv{s}" for s in range(S)]
    names = [f"srv{s}-gpu{g}" for s in range(S) for g in range(G)]
    names += [f"srv{s}-nic{r}" for s in range(S) for r in range(R)]
    if counts["nvswitch"]:
        names += [f"srv{s}-nvsw" for s in range(S)]
    for tier in ("tor", "agg", "core"):
        names += [f"{tier}{i}" for i in range(counts[tier])]
    roles = np.concatenate([np.full(counts[r], r) for r in ROLES])
    sv = np.array(servers, dtype=object)
    n_sw = counts["tor"] + counts["agg"] + counts["core"]
    srv_pod = tor_pod[nic_tor[::R]] if S else np.zeros(0, np.int64)
    nic_rail = np.tile(np.arange(R), S)
    server = np.concatenate([sv[gserver], np.repeat(sv, R), sv[:counts["nvswitch"]],
                             np.full(n_sw, "", dtype=object)])
    rail = np.concatenate([gpu_nic % R, nic_rail, np.full(counts["nvswitch"], -1),
                           np.arange(t.tors) % R, np.full(counts["agg"] + counts["core"], -1)])
    pod = np.concatenate([srv_pod[gserver], tor_pod[nic_tor], srv_pod[:counts["nvswitch"]],
                          tor_pod, np.arange(counts["agg"]) // max(t.aggs_per_pod, 1),
                          np.full(counts["core"], -1)])
    index = np.concatenate([np.arange(counts[r]) for r in ROLES])
    attrs = dict(server=server, rail=rail.astype(np.int64), pod=pod.astype(np.int64),
                 index=index.astype(np.int64), local=np.concatenate(
                     [glocal, nic_rail, np.full(counts["nvswitch"] + n_sw, -1)]))
    return names, attrs, roles, servers
