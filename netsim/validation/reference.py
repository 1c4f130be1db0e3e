"""DCQCN checked against an independent simulator: the HPCC ns-3 simulator on the same scenarios.

One scenario definition feeds both simulators:

* :func:`ns3_inputs` writes the ns-3 topology, flow and config files (HPCC ns-3,
  ``alibaba-edu/High-Precision-Congestion-Control``, ``simulation/scratch/third.cc``);
* :func:`collect_ns3` reads that run's ``fct.txt``, ``pfc.txt`` and ``qlen.txt`` into one small
  record (kept under ``tests/data/hpcc-ns3/``);
* :func:`run_engine` builds the same fabric, flows, buffer, ECN/PFC thresholds and DCQCN
  parameters in our packet engine;
* :func:`compare` puts the two side by side: per-flow FCT, aggregate throughput, the hottest
  switch port's queue median and p99, PFC pause frames.

The mapping of ns-3's config names to our parameter names is :data:`NS3_TO_DCQCN`; where the
reference has no counterpart of one of our parameters, :func:`dcqcn_params_for` sets ours to
the reference's behaviour and says so. ``python -m netsim.validation.reference --help`` drives it.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topologies.units import PS_PER_US, gbps

#: Flow sizes: long (the targets apply) and short.
LONG_BYTES = 100_000_000
SHORT_BYTES = 8_000_000
SHAPES = ("incast2", "incast8", "trunk2", "perm16")
#: Shapes only the physics runs use (``netsim/validation/physics_ref.py``), not the comparison table.
PHYSICS_SHAPES = ("incast16",)
RATES_GBPS = (100, 400)
PARAM_SETS = ("nic-default", "paper")
LINK_DELAY_NS = 1000  # ns-3 topology file "0.001ms"
NS3_START_S = 2.0  # flows start here in ns-3 (third.cc's usual start; queue monitor from here)
NS3_MIB = 1024 * 1024
NS3_BUFFER_MB = 32  # BUFFER_SIZE: per switch, in MiB (third.cc: buffer_size * 1024 * 1024)
NS3_RESERVE_BYTES = 4 * 1024  # switch-mmu.cc: per-ingress reserve
NS3_RESUME_OFFSET_BYTES = 3 * 1024  # switch-mmu.cc: resume_offset
NS3_HEADER_BYTES = 48  # CustomHeader::GetStaticWholeHeaderSize with IntHeader mode NONE (CC_MODE 1)
NS3_ACK_BYTES = 60  # rdma-hw.cc pads ACK/NACK to 60 B
QLEN_SAMPLE_NS = 100  # third.cc qlen_mon_interval
QLEN_DUMP_NS = 100_000_000  # third.cc qlen_dump_interval: a cumulative histogram every 0.1 s
KEEP_PORTS = 1  # queue histograms kept per run: the port with the largest mean queue
FINE_KB = 256  # histogram bins are 1 KB below this queue, 4 KB above (quantile error < 1%)
#: ns-3 random-number runs (``NS_GLOBAL_VALUE=RngRun=N``: its ECN draws) of the long-flow
#: scenarios: the reference's own run-to-run spread is part of its answer (short: run 1).
NS3_RUNS = (1, 2, 3, 4)

#: Targets on long flows (issue 17).
TARGETS = {"fct": 0.10, "throughput": 0.05, "queue": 0.25}

#: ns-3 config name -> our DcqcnParams field (the parameters both models have).
NS3_TO_DCQCN = {
    "RP_TIMER": "rpg_time_reset_us",
    "FAST_RECOVERY_TIMES": "rpg_threshold",
    "RATE_AI": "rpg_ai_rate_mbps",
    "RATE_HAI": "rpg_hai_rate_mbps",
    "MIN_RATE": "rpg_min_rate_mbps",
    "EWMA_GAIN": "dce_tcp_g",
    "ALPHA_RESUME_INTERVAL": "dce_tcp_rtt_us",
    "RATE_DECREASE_INTERVAL": "rate_reduce_monitor_period_us",
    "CLAMP_TARGET_RATE": "clamp_tgt_rate",
}

#: Our DCQCN fields the reference does not model, set to the reference's behaviour.
NS3_FIXED = {
    "rpg_byte_reset_bytes": 0,  # rdma-hw.cc: increase events come from the timer only
    "initial_alpha_value": 1024,  # cnp_received_mlx: alpha = 1 on the first CNP
    "rate_to_set_on_first_cnp_mbps": 0.0,  # RateOnFirstCnp 1.0: keep the rate
    "rpg_gd": 11,  # cut R_C (1 - alpha/2)
    "rpg_min_dec_fac_pct": 50.0,  # alpha <= 1, so a cut keeps >= half anyway
    "min_time_between_cnps_us": 0.0,  # every ACK of a marked packet carries the CNP flag
    "clamp_tgt_rate_after_time_inc": True,  # CheckRateDecreaseMlx: R_T <- R_C iff rpTimeStage != 0
    "dce_tcp_g_reading": "old_weight",  # EWMA_GAIN is the new sample's weight; dce_tcp_g = 1024 (1 - g)
}

#: PacketConfig fields set to the reference's switch/NIC behaviour (where the engine has them).
NS3_ENGINE = {
    "ecn_mark_at": "dequeue",  # switch-node.cc SwitchNotifyDequeue
    "pfc_response_quanta": 0,  # qbb-net-device.cc: a received PAUSE stops the queue at once
    # ACK_HIGH_PRIO 1 (HPCC run.py for DCQCN) only sets the hosts' ACK queue to priority 0
    # (third.cc: RdmaEgressQueue::ack_q_idx); switches give ACK/NACK priority 0 only with their
    # AckHighPrio attribute, which third.cc never sets, so there ACKs take the data queue (the
    # ACK's pg aliases udp.pg in CustomHeader): they queue behind data and obey its PFC.
    "ack_class": "qp",
    "cnp_class": "qp",  # its CNP is a flag on those ACKs (rdma-hw.cc ReceiveUdp: SetCnp)
}


@dataclass(frozen=True)
class RefScenario:
    """One reference scenario: traffic shape, link rate, flow size and DCQCN parameter set."""

    shape: str
    rate_gbps: int
    flow_bytes: int
    params: str

    def __post_init__(self) -> None:
        if self.shape not in SHAPES + PHYSICS_SHAPES:
            raise ValueError(f"RefScenario.shape {self.shape!r}: use one of "
                             f"{', '.join(SHAPES + PHYSICS_SHAPES)}")
        if self.params not in PARAM_SETS:
            raise ValueError(f"RefScenario.params {self.params!r}: use one of {', '.join(PARAM_SETS)}")
        if self.rate_gbps <= 0 or self.flow_bytes <= 0:
            raise ValueError("RefScenario.rate_gbps and flow_bytes must be > 0")

    @property
    def name(self) -> str:
        size = "long" if self.flow_bytes >= LONG_BYTES else "short"
        return f"{self.shape}-{self.rate_gbps}g-{size}-{self.params}"

    @property
    def long(self) -> bool:
        return self.flow_bytes >= LONG_BYTES

    @classmethod
    def from_name(cls, name: str) -> RefScenario:
        """Inverse of :attr:`name`, e.g. ``incast8-100g-long-nic-default``."""
        try:
            shape, rate, size, params = name.split("-", 3)
            return cls(shape, int(rate.rstrip("g")), LONG_BYTES if size == "long" else SHORT_BYTES,
                       params)
        except (ValueError, TypeError):
            raise ValueError(f"bad reference scenario name {name!r}: e.g. incast8-100g-long-paper") from None


def all_scenarios() -> list[RefScenario]:
    """Every scenario of the reference set (4 shapes x 2 rates x 2 sizes x 2 parameter sets)."""
    return [RefScenario(s, r, b, p) for p in PARAM_SETS for r in RATES_GBPS
            for b in (LONG_BYTES, SHORT_BYTES) for s in SHAPES]


# ------------------------------------------------------------------------------ topology
@dataclass(frozen=True)
class RefTopology:
    """Hosts ``0..hosts-1`` then switches; cables in ns-3 file order; flows (src, dst) hosts."""

    hosts: int
    switches: int
    cables: tuple[tuple[int, int], ...]
    flows: tuple[tuple[int, int], ...]

    @property
    def nodes(self) -> int:
        return self.hosts + self.switches

    def name_of(self, node: int) -> str:
        return f"h{node}" if node < self.hosts else f"s{node - self.hosts}"

    def neighbor(self, node: int, ifindex: int) -> int:
        """Node at the far end of ns-3 interface *ifindex* (1-based: device 0 is loopback)."""
        k = 0
        for a, b in self.cables:
            if node in (a, b):
                k += 1
                if k == ifindex:
                    return b if a == node else a
        raise ValueError(f"node {node} has no interface {ifindex}")


def topology(shape: str) -> RefTopology:
    """The fabric and flows of *shape* (all links the same rate, single paths: no ECMP)."""
    if shape.startswith("incast"):
        n = int(shape[len("incast"):])
        sw = n + 1
        return RefTopology(n + 1, 1, tuple((h, sw) for h in range(n + 1)),
                           tuple((h, 0) for h in range(1, n + 1)))
    if shape == "trunk2":  # h0,h1 on s0 -> h2,h3 on s1 over the one s0-s1 trunk
        s0, s1 = 4, 5
        cables = ((0, s0), (1, s0), (2, s1), (3, s1), (s0, s1))
        return RefTopology(4, 2, cables, ((0, 2), (1, 3)))
    if shape == "perm16":  # 4 leaves x 4 hosts, one spine (4:1 at the leaf uplinks)
        leaves = [16 + i for i in range(4)]
        spine = 20
        cables = tuple((h, leaves[h // 4]) for h in range(16)) + tuple((lf, spine) for lf in leaves)
        return RefTopology(16, 5, cables, _permutation(16, seed=1))
    raise ValueError(f"unknown shape {shape!r}: use one of {', '.join(SHAPES)}")


def _permutation(n: int, seed: int) -> tuple[tuple[int, int], ...]:
    """A random permutation without fixed points (seeded)."""
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(n)
        if not np.any(p == np.arange(n)):
            return tuple((i, int(p[i])) for i in range(n))


# ------------------------------------------------------------------------------ parameters
def ns3_params(sc: RefScenario) -> dict[str, str]:
    """The DCQCN and ECN config lines of *sc* for ns-3 (``mix/config.txt`` names)."""
    rate = sc.rate_gbps
    if sc.params == "nic-default":
        from netsim.cc.params import DcqcnParams, EcnParams

        fw, ecn = DcqcnParams(), EcnParams()
        p = {"ALPHA_RESUME_INTERVAL": fw.dce_tcp_rtt_us, "RATE_DECREASE_INTERVAL": fw.rate_reduce_monitor_period_us,
             "RP_TIMER": fw.rpg_time_reset_us, "EWMA_GAIN": fw.g, "FAST_RECOVERY_TIMES": fw.rpg_threshold,
             "RATE_AI": f"{fw.rpg_ai_rate_mbps:g}Mb/s", "RATE_HAI": f"{fw.rpg_hai_rate_mbps:g}Mb/s",
             "MIN_RATE": f"{fw.rpg_min_rate_mbps:g}Mb/s", "CLAMP_TARGET_RATE": int(fw.clamp_tgt_rate)}
        kmin_kb, kmax_kb, pmax = ecn.kmin_bytes // 1000, ecn.kmax_bytes // 1000, ecn.pmax
    else:  # HPCC ns-3 run.py "dcqcn_paper": AI/HAI scaled by bw/25, ECN maps 100/400 KB per 25G
        p = {"ALPHA_RESUME_INTERVAL": 50, "RATE_DECREASE_INTERVAL": 50, "RP_TIMER": 55,
             "EWMA_GAIN": 0.00390625, "FAST_RECOVERY_TIMES": 1, "RATE_AI": f"{5 * rate // 25}Mb/s",
             "RATE_HAI": f"{50 * rate // 25}Mb/s", "MIN_RATE": "1000Mb/s", "CLAMP_TARGET_RATE": 0}
        kmin_kb, kmax_kb, pmax = 100 * rate // 25, 400 * rate // 25, 0.2
    bps = rate * 10**9
    p["KMAX_MAP"] = f"1 {bps} {kmax_kb}"
    p["KMIN_MAP"] = f"1 {bps} {kmin_kb}"
    p["PMAX_MAP"] = f"1 {bps} {pmax}"
    return {k: str(v) for k, v in p.items()}


def _rate_mbps(text: str) -> float:
    units = {"Gb/s": 1e3, "Mb/s": 1.0, "Kb/s": 1e-3}
    for u, f in units.items():
        if text.endswith(u):
            return float(text[: -len(u)]) * f
    raise ValueError(f"rate {text!r}: expected e.g. 50Mb/s")


def _dce_tcp_g_for(g: float) -> int:
    """Our ``dce_tcp_g`` whose EWMA gain (``DcqcnParams.g``) is the ns-3 ``EWMA_GAIN`` *g*."""
    from netsim.cc.params import DcqcnParams

    for cand in (round(1024 * (1 - g)), round(1024 * g)):
        if abs(DcqcnParams(dce_tcp_g=int(cand)).g - g) < 1e-9:
            return int(cand)
    raise ValueError(f"EWMA_GAIN {g} has no exact dce_tcp_g (a multiple of 1/1024)")


def dcqcn_params_for(sc: RefScenario) -> dict:
    """Our ``cc_params`` for *sc*: ns-3's values through :data:`NS3_TO_DCQCN`, plus
    :data:`NS3_FIXED` for what the reference does not model."""
    import dataclasses

    from netsim.cc.params import DcqcnParams

    p = ns3_params(sc)
    known = {f.name for f in dataclasses.fields(DcqcnParams)}
    out: dict = {k: v for k, v in NS3_FIXED.items() if k in known}
    for key, ours in NS3_TO_DCQCN.items():
        v = p[key]
        if key in ("RATE_AI", "RATE_HAI", "MIN_RATE"):
            out[ours] = _rate_mbps(v)
        elif key == "EWMA_GAIN":
            out[ours] = _dce_tcp_g_for(float(v))
        elif key in ("FAST_RECOVERY_TIMES", "CLAMP_TARGET_RATE"):
            out[ours] = int(v)
        else:
            out[ours] = float(v)
    out["clamp_tgt_rate"] = bool(out["clamp_tgt_rate"])
    return out


def ecn_for(sc: RefScenario) -> tuple[int, int, float]:
    """(Kmin bytes, Kmax bytes, Pmax) of *sc* (ns-3 maps are in KB of 1000 B)."""
    p = ns3_params(sc)
    return (int(p["KMIN_MAP"].split()[2]) * 1000, int(p["KMAX_MAP"].split()[2]) * 1000,
            float(p["PMAX_MAP"].split()[2]))


def ns3_headroom_bytes(rate_gbps: int) -> int:
    """third.cc: headroom = 3 x rate x link delay."""
    return rate_gbps * 10**9 * LINK_DELAY_NS // 8 // 10**9 * 3


# ------------------------------------------------------------------------------ ns-3 side
def ns3_inputs(sc: RefScenario, out_dir: Path) -> Path:
    """Write ``topology.txt``, ``flow.txt``, ``trace.txt`` and ``config.txt`` for *sc*.

    The config's file names are relative to *out_dir* (run ``third config.txt`` there).
    Returns the config path.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    topo = topology(sc.shape)
    rate = f"{sc.rate_gbps}Gbps"
    sw = " ".join(str(s) for s in range(topo.hosts, topo.nodes))
    lines = [f"{topo.nodes} {topo.switches} {len(topo.cables)}", sw]
    lines += [f"{a} {b} {rate} {LINK_DELAY_NS / 1e6:g}ms 0" for a, b in topo.cables]
    (out_dir / "topology.txt").write_text("\n".join(lines) + "\n")
    flows = [f"{s} {d} 3 100 {sc.flow_bytes} {NS3_START_S}" for s, d in topo.flows]
    (out_dir / "flow.txt").write_text("\n".join([str(len(flows))] + flows) + "\n")
    (out_dir / "trace.txt").write_text("0\n")
    (out_dir / "config.txt").write_text(_ns3_config(sc))
    return out_dir / "config.txt"


def _ns3_config(sc: RefScenario) -> str:
    mon_end_ns = int(NS3_START_S * 1e9) + 2 * QLEN_DUMP_NS  # cumulative dumps at +0.1 s and +0.2 s
    head = {"ENABLE_QCN": 1, "USE_DYNAMIC_PFC_THRESHOLD": 1, "PACKET_PAYLOAD_SIZE": 4096,
            "TOPOLOGY_FILE": "topology.txt", "FLOW_FILE": "flow.txt", "TRACE_FILE": "trace.txt",
            "TRACE_OUTPUT_FILE": "mix.tr", "FCT_OUTPUT_FILE": "fct.txt", "PFC_OUTPUT_FILE": "pfc.txt",
            "SIMULATOR_STOP_TIME": f"{mon_end_ns / 1e9 + 1e-6:.7f}", "CC_MODE": 1}
    tail = {"DCTCP_RATE_AI": "1000Mb/s", "ERROR_RATE_PER_LINK": "0.0000", "L2_CHUNK_SIZE": 4000,
            "L2_ACK_INTERVAL": 1, "L2_BACK_TO_ZERO": 0, "HAS_WIN": 0, "GLOBAL_T": 1, "VAR_WIN": 0,
            "FAST_REACT": 0, "U_TARGET": 0.95, "MI_THRESH": 0, "INT_MULTI": 1, "MULTI_RATE": 0,
            "SAMPLE_FEEDBACK": 0, "PINT_LOG_BASE": 1.05, "PINT_PROB": 1.0, "RATE_BOUND": 1,
            "ACK_HIGH_PRIO": 1, "LINK_DOWN": "0 0 0", "ENABLE_TRACE": 0}
    p = ns3_params(sc)
    cc = {k: p[k] for k in ("ALPHA_RESUME_INTERVAL", "RATE_DECREASE_INTERVAL", "CLAMP_TARGET_RATE",
                            "RP_TIMER", "EWMA_GAIN", "FAST_RECOVERY_TIMES", "RATE_AI", "RATE_HAI",
                            "MIN_RATE")}
    ecn = {k: p[k] for k in ("KMAX_MAP", "KMIN_MAP", "PMAX_MAP")}
    mon = {"BUFFER_SIZE": NS3_BUFFER_MB, "QLEN_MON_FILE": "qlen.txt",
           "QLEN_MON_START": int(NS3_START_S * 1e9), "QLEN_MON_END": mon_end_ns}
    return "".join(f"{k} {v}\n" for d in (head, cc, tail, ecn, mon) for k, v in d.items())


def collect_ns3(sc: RefScenario, run_dir: Path, rng_run: int = 1) -> dict:
    """One compact record of an ns-3 run: flows, PFC pause frames, queue histograms.

    Queue histograms (one sample per 100 ns from the flows' start; bins of 1 KB, 4 KB from
    :data:`FINE_KB` up) are trimmed to
    the time the flows were active: third.cc keeps sampling after the last flow ends, and
    every queue is empty then, so those samples are removed from bin 0.
    """
    topo = topology(sc.shape)
    start_ns = int(NS3_START_S * 1e9)
    flows = []
    for line in (run_dir / "fct.txt").read_text().splitlines():
        sip, dip, _sp, _dp, size, t0, fct, alone = line.split()
        flows.append({"src": (int(sip, 16) >> 8) & 0xFFFF, "dst": (int(dip, 16) >> 8) & 0xFFFF,
                      "bytes": int(size), "start_ns": int(t0) - start_ns, "fct_ns": int(fct),
                      "standalone_fct_ns": int(alone)})
    flows.sort(key=lambda f: (f["src"], f["dst"]))
    end_ns = max(f["start_ns"] + f["fct_ns"] for f in flows) if flows else 0
    pauses: dict[str, int] = {}
    for line in (run_dir / "pfc.txt").read_text().splitlines():
        _t, node, _kind, ifx, typ = (int(x) for x in line.split())
        if typ == 1:  # QbbPfc trace: 1 = PAUSE received by this device (its egress stops)
            key = f"{topo.name_of(node)}->{topo.name_of(topo.neighbor(node, ifx))}"
            pauses[key] = pauses.get(key, 0) + 1
    queues = _qlen_histograms(topo, (run_dir / "qlen.txt").read_text(), end_ns)
    keep = sorted(queues, key=lambda k: -_hist_mean(queues[k]))[:KEEP_PORTS]
    queues = {k: queues[k] for k in sorted(keep)}
    return {"scenario": sc.name, "rng_run": rng_run, "flows": flows, "end_ns": end_ns,
            "pfc_pauses": pauses, "queue_hist_kb": queues, "queue_sample_ns": QLEN_SAMPLE_NS}


def _qlen_histograms(topo: RefTopology, text: str, end_ns: int) -> dict[str, list]:
    blocks = text.split("time: ")
    last = [b for b in blocks if b.strip()][-1].splitlines()
    t_dump = int(last[0]) - int(NS3_START_S * 1e9)
    after = (t_dump - end_ns) // QLEN_SAMPLE_NS if t_dump > end_ns else 0
    out = {}
    for line in last[1:]:
        parts = [int(x) for x in line.split()]
        node, ifx, counts = parts[0], parts[1], parts[2:]
        if sum(counts[1:]) == 0:
            continue  # never above 1 KB: not kept
        counts[0] -= min(after, counts[0])
        key = f"{topo.name_of(node)}->{topo.name_of(topo.neighbor(node, ifx))}"
        merged: dict[int, int] = {}
        for kb, c in enumerate(counts):
            if c:
                k = kb if kb < FINE_KB else kb // 4 * 4
                merged[k] = merged.get(k, 0) + c
        out[key] = [[kb, c] for kb, c in sorted(merged.items())]
    return out


# ------------------------------------------------------------------------------ metrics
@dataclass
class RefMetrics:
    """What the comparison looks at, from either simulator."""

    fct_ns: list[float]  # per flow, in topology flow order (nan = unfinished)
    aggregate_gbps: float
    hot_port: str
    queue_p50_bytes: float
    queue_p99_bytes: float
    pauses: int
    extra: dict = field(default_factory=dict)


def _hist_quantile(hist: list, q: float) -> float:
    kb = np.array([h[0] for h in hist], dtype=float)
    c = np.cumsum([h[1] for h in hist], dtype=float)
    i = min(int(np.searchsorted(c, q * c[-1], side="left")), len(kb) - 1)
    width = 1.0 if kb[i] < FINE_KB else 4.0
    return float((kb[i] + width / 2) * 1000)  # bin centre


def _hist_mean(hist: list) -> float:
    kb = np.array([h[0] for h in hist], dtype=float)
    c = np.array([h[1] for h in hist], dtype=float)
    return float((kb * c).sum() / max(c.sum(), 1.0)) * 1000


def ns3_metrics(sc: RefScenario, rec: dict) -> RefMetrics:
    """:class:`RefMetrics` of a stored ns-3 record (hot port: largest mean queue)."""
    topo = topology(sc.shape)
    by_pair = {(f["src"], f["dst"]): f for f in rec["flows"]}
    fct = [float(by_pair[p]["fct_ns"]) if p in by_pair else math.nan for p in topo.flows]
    total = sc.flow_bytes * len(topo.flows)
    agg = total * 8 / rec["end_ns"] if rec["end_ns"] else 0.0
    hists = rec["queue_hist_kb"]
    hot = max(hists, key=lambda k: _hist_mean(hists[k])) if hists else ""
    p50 = _hist_quantile(hists[hot], 0.5) if hot else 0.0
    p99 = _hist_quantile(hists[hot], 0.99) if hot else 0.0
    return RefMetrics(fct, agg, hot, p50, p99, int(sum(rec["pfc_pauses"].values())))


def _engine_setup(sc: RefScenario):
    from netsim.packet.config import PacketConfig
    from netsim.packet.testbeds import ShortestPathRouter, SmallFabric
    from netsim.scenario.traffic import Flow

    topo = topology(sc.shape)
    roles = {topo.name_of(i): ("nic" if i < topo.hosts else "tor") for i in range(topo.nodes)}
    cables = [(topo.name_of(a), topo.name_of(b), gbps(sc.rate_gbps), float(LINK_DELAY_NS))
              for a, b in topo.cables]
    fabric = SmallFabric(sc.name, roles, cables)
    flows = [Flow(topo.name_of(s), topo.name_of(d), sc.flow_bytes) for s, d in topo.flows]
    kmin, kmax, pmax = ecn_for(sc)
    ports = max(sum(1 for c in topo.cables if s in c) for s in range(topo.hosts, topo.nodes))
    hdrm = ns3_headroom_bytes(sc.rate_gbps)
    cfg = PacketConfig(
        mtu_bytes=4096, header_bytes=NS3_HEADER_BYTES, wire_gap_bytes=0, ctrl_bytes=NS3_ACK_BYTES,
        ack_every_packets=1, cc="dcqcn", cc_params=dcqcn_params_for(sc), cnp_interval_ps=0,
        buffer_bytes=NS3_BUFFER_MB * NS3_MIB - ports * (hdrm + NS3_RESERVE_BYTES),
        pfc_alpha=1 / 8, pfc_xon_offset_bytes=NS3_RESUME_OFFSET_BYTES, headroom_bytes=hdrm,
        ecn_kmin_bytes=kmin, ecn_kmax_bytes=kmax, ecn_pmax=pmax,
        sample_interval_ps=PS_PER_US, max_time_ps=200 * 10**9)
    cfg = _with_reference_marking(cfg)
    return topo, fabric, flows, cfg, ShortestPathRouter(fabric)


def _with_reference_marking(cfg):
    """:data:`NS3_ENGINE` applied to *cfg* (the fields this engine has)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cfg)}
    return cfg.replace(**{k: v for k, v in NS3_ENGINE.items() if k in names})


@contextmanager
def ns3_pacing():
    """Pace like the reference, for evidence only: a DCQCN rate change applies from the QP's
    next send on, not to the departure already computed.

    HPCC ns-3's DCQCN (``rdma-hw.cc`` ``CheckRateDecreaseMlx``, ``FastRecoveryMlx``,
    ``ActiveIncreaseMlx``, ``HyperIncreaseMlx``) assigns ``q->m_rate`` directly; only HPCC,
    TIMELY and DCTCP call ``ChangeRate``, which moves ``m_nextAvail``. ``UpdateNextAvail`` sets
    the next departure at send time from the rate then. A QP that sent a 4 KB packet at
    ``MIN_RATE`` 1 Mb/s therefore waits 33 ms whatever its rate becomes meanwhile. Our engine
    (like a NIC's rate limiter) re-paces the waiting packet (``RcTransport._repace``); this
    context manager turns that off.
    """
    from netsim.packet.engine import PacketSim

    saved = PacketSim.__dict__.get("_repace")
    PacketSim._repace = lambda self, t, qp: None
    try:
        yield
    finally:
        if saved is None:
            del PacketSim._repace
        else:
            PacketSim._repace = saved


def run_engine(sc: RefScenario, seed: int = 1, *, emulate_ns3_pacing: bool = False,
               **overrides) -> tuple[RefMetrics, object]:
    """Run *sc* in our packet engine; returns its :class:`RefMetrics` and the PacketResult.

    *overrides* replace PacketConfig fields (to show a sensitivity, e.g. ``commit_ps=0``);
    ``emulate_ns3_pacing`` runs under :func:`ns3_pacing` (evidence for a difference, not a mode).
    """
    from netsim.packet.build import simulate_packets

    topo, fabric, flows, cfg, router = _engine_setup(sc)
    if overrides:
        cfg = cfg.replace(**overrides)
    with ns3_pacing() if emulate_ns3_pacing else nullcontext():
        res = simulate_packets(fabric, flows, cfg, seed=seed, router=router)
    fct = [f.fct_ns if f.fct_ns is not None else math.nan for f in res.flows]
    end = max((f.fct_ns for f in res.flows if f.fct_ns is not None), default=0.0)
    agg = sc.flow_bytes * len(flows) * 8 / end if end else 0.0
    q = np.asarray(res.queue_bytes, dtype=float)
    switch_ports = {lid for lid in range(fabric.num_links)
                    if fabric.nodes[int(fabric.link_src[lid])].startswith("s")}
    means = {lid: float(q[:, lid].mean()) for lid in switch_ports} if q.size else {}
    hot = max(means, key=means.get) if means else -1
    name = (f"{fabric.nodes[int(fabric.link_src[hot])]}->{fabric.nodes[int(fabric.link_dst[hot])]}"
            if hot >= 0 else "")
    col = q[:, hot] if hot >= 0 else np.zeros(1)
    m = RefMetrics(fct, agg, name, float(np.percentile(col, 50)), float(np.percentile(col, 99)),
                   int(res.pfc_pauses), {"ecn_marks": res.ecn_marks, "cnps": res.cnps,
                                         "wall_s": res.wall_s})
    return m, res


# ------------------------------------------------------------------------------ comparison
@dataclass
class Comparison:
    """Reference vs engine on one scenario.

    ``*_err`` are relative distances of the engine's value from the reference's band (the
    range over its :data:`NS3_RUNS`): 0 inside it, else (ours - nearest edge) / edge.
    ``ref`` is the band's first run, ``band`` every run.
    """

    scenario: str
    ref: RefMetrics
    ours: RefMetrics
    fct_err_max: float
    throughput_err: float
    queue_p50_err: float
    queue_p99_err: float
    band: list[RefMetrics] = field(default_factory=list)

    def ref_range(self, attr: str, scale: float = 1.0) -> tuple[float, float]:
        vals = [getattr(m, attr) / scale for m in (self.band or [self.ref])]
        return min(vals), max(vals)

    @property
    def within_targets(self) -> dict[str, bool]:
        return {"fct": abs(self.fct_err_max) <= TARGETS["fct"],
                "throughput": abs(self.throughput_err) <= TARGETS["throughput"],
                "queue_p50": abs(self.queue_p50_err) <= TARGETS["queue"],
                "queue_p99": abs(self.queue_p99_err) <= TARGETS["queue"]}

    def row(self) -> dict:
        r, o = self.ref, self.ours

        def rng(attr, scale=1.0, nd=0):
            lo, hi = self.ref_range(attr, scale)
            return [round(lo, nd) if nd else round(lo), round(hi, nd) if nd else round(hi)]

        return {"scenario": self.scenario, "ref_runs": len(self.band) or 1,
                "ref_gbps": rng("aggregate_gbps", 1.0, 1), "ours_gbps": round(o.aggregate_gbps, 1),
                "thr_err": round(self.throughput_err, 3), "fct_err_max": round(self.fct_err_max, 3),
                "hot_port_ref": r.hot_port, "hot_port_ours": o.hot_port,
                "q50_ref_kb": rng("queue_p50_bytes", 1e3), "q50_ours_kb": round(o.queue_p50_bytes / 1e3),
                "q99_ref_kb": rng("queue_p99_bytes", 1e3), "q99_ours_kb": round(o.queue_p99_bytes / 1e3),
                "pauses_ref": rng("pauses"), "pauses_ours": o.pauses}


def _rel(ours: float, ref: float, floor: float = 0.0) -> float:
    den = max(abs(ref), floor)
    return (ours - ref) / den if den else 0.0


def _band_err(ours: float, refs: list[float], floor: float = 0.0) -> float:
    """0 inside [min(refs), max(refs)], else the relative distance to the nearest edge."""
    lo, hi = min(refs), max(refs)
    if lo <= ours <= hi:
        return 0.0
    return _rel(ours, lo if ours < lo else hi, floor)


#: Shapes whose flows are exchangeable (same path length, same bottleneck, same start): which
#: of them finishes first depends on the sequence of random ECN draws, which two simulators do
#: not share, so their FCTs are compared as sorted vectors (order statistics). In ``perm16``
#: flows differ by path and are compared flow by flow.
EXCHANGEABLE = ("incast2", "incast8", "trunk2")
#: Queue errors are relative to max(reference, QUEUE_FLOOR_KMIN x Kmin): a queue far below the
#: marking threshold is one DCQCN does not see, and a few packets' difference there (one
#: 4 KB packet is a third of a 12 KB median) is no disagreement about the dynamics.
QUEUE_FLOOR_KMIN = 0.25


def compare(sc: RefScenario, band: list[RefMetrics] | RefMetrics, ours: RefMetrics) -> Comparison:
    """Distances of the engine from the reference's band over its runs (see
    :data:`EXCHANGEABLE` and :data:`QUEUE_FLOOR_KMIN`)."""
    band = [band] if isinstance(band, RefMetrics) else list(band)
    order = sorted if sc.shape in EXCHANGEABLE else list
    a = order(ours.fct_ns)
    bs = [order(m.fct_ns) for m in band]
    errs = [_band_err(o, [b[i] for b in bs]) for i, o in enumerate(a)]
    fct_err = max(errs, key=abs) if errs else 0.0
    floor = QUEUE_FLOOR_KMIN * ecn_for(sc)[0]
    return Comparison(sc.name, band[0], ours, fct_err,
                      _band_err(ours.aggregate_gbps, [m.aggregate_gbps for m in band]),
                      _band_err(ours.queue_p50_bytes, [m.queue_p50_bytes for m in band], floor),
                      _band_err(ours.queue_p99_bytes, [m.queue_p99_bytes for m in band], floor),
                      band)


DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "hpcc-ns3"


def load_reference(path: Path | None = None) -> dict[str, list[dict]]:
    """The stored ns-3 records by scenario name, one per RngRun in run order
    (``tests/data/hpcc-ns3/results.json.gz``)."""
    p = path or DATA_DIR / "results.json.gz"
    if not p.exists():
        raise ValueError(f"no reference results at {p}: run tests/data/hpcc-ns3/run_all.sh")
    out: dict[str, list[dict]] = {}
    for r in json.loads(gzip.decompress(p.read_bytes()))["runs"]:
        out.setdefault(r["scenario"], []).append(r)
    for recs in out.values():
        recs.sort(key=lambda r: r.get("rng_run", 1))
    return out


#: Engine seeds of the comparison: the reference's band spans four ns-3 RngRuns, so our side is
#: the median over three seeds (one seed's arbitration and ECN draws move a 2-flow incast's
#: aggregate by up to 20%: docs/validation.md, "Why they differ", item 4).
ENGINE_SEEDS = (1, 2, 3)


def median_metrics(sc: RefScenario, runs: list[RefMetrics]) -> RefMetrics:
    """The per-figure median of several engine runs of *sc* (FCTs element-wise, sorted first
    where flows are exchangeable; the hot port is the one most runs name)."""
    if len(runs) == 1:
        return runs[0]
    order = sorted if sc.shape in EXCHANGEABLE else list
    fct = np.median(np.array([order(m.fct_ns) for m in runs], dtype=float), axis=0)
    ports = [m.hot_port for m in runs]
    med = {k: float(np.median([getattr(m, k) for m in runs]))
           for k in ("aggregate_gbps", "queue_p50_bytes", "queue_p99_bytes")}
    return RefMetrics([float(x) for x in fct], med["aggregate_gbps"],
                      max(set(ports), key=ports.count), med["queue_p50_bytes"],
                      med["queue_p99_bytes"], int(np.median([m.pauses for m in runs])),
                      {"runs": [dataclasses.asdict(m) for m in runs]})


def compare_scenario(name: str, refs: dict[str, dict] | None = None, seed: int = 1,
                     emulate_ns3_pacing: bool = False, seeds: tuple[int, ...] | None = None
                     ) -> Comparison:
    """Run scenario *name* in the engine and compare it with the stored reference.

    With *seeds*, our side is :func:`median_metrics` over one engine run per seed (*seed* is
    then ignored).
    """
    refs = refs if refs is not None else load_reference()
    if name not in refs:
        raise ValueError(f"scenario {name!r} has no stored reference; known: {', '.join(sorted(refs))}")
    sc = RefScenario.from_name(name)
    runs = [run_engine(sc, seed=s, emulate_ns3_pacing=emulate_ns3_pacing)[0]
            for s in (seeds or (seed,))]
    return compare(sc, [ns3_metrics(sc, r) for r in refs[name]], median_metrics(sc, runs))


def markdown_table(comps: list[Comparison]) -> str:
    """The docs/validation.md table."""
    head = ("| scenario | ref Gb/s | ours Gb/s | thr err | worst FCT err | hot port ref/ours "
            "| q p50 KB ref / ours | q p99 KB ref / ours | pauses ref / ours | targets |")
    lines = [head, "|" + "---|" * 10]

    def span(v):
        return f"{v[0]}" if v[0] == v[1] else f"{v[0]}-{v[1]}"

    for c in comps:
        r = c.row()
        ok = "all met" if all(c.within_targets.values()) else \
            "missed: " + ", ".join(k for k, v in c.within_targets.items() if not v)
        lines.append(f"| {r['scenario']} | {span(r['ref_gbps'])} | {r['ours_gbps']} | {r['thr_err']:+.1%} "
                     f"| {r['fct_err_max']:+.1%} | {r['hot_port_ref']} / {r['hot_port_ours']} "
                     f"| {span(r['q50_ref_kb'])} / {r['q50_ours_kb']} | {span(r['q99_ref_kb'])} / {r['q99_ours_kb']} "
                     f"| {span(r['pauses_ref'])} / {r['pauses_ours']} | {ok} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ command line
def ns3_cli(prog: str, description: str, inputs_cmd: str,
            inputs_help: str) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    """The command line of an ns-3 reference driver and its subcommands: the first,
    ``inputs_cmd OUT_DIR [--scenario NAME]...``, writes ns-3 input files."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser(inputs_cmd, help=inputs_help)
    a.add_argument("out_dir", type=Path)
    a.add_argument("--scenario", action="append", default=None)
    return ap, sub


def run_cli(ap: argparse.ArgumentParser, argv: list[str] | None, dispatch) -> int:
    """``dispatch(parsed args)``; a ValueError is one line on stderr and exit status 2."""
    args = ap.parse_args(argv)
    try:
        return dispatch(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def write_json_gz(path: Path, doc: dict) -> None:
    """``doc`` as compact JSON and a newline, gzip level 9 without a time stamp (the same
    bytes for the same runs)."""
    text = json.dumps(doc, separators=(",", ":"))
    path.write_bytes(gzip.compress(text.encode() + b"\n", 9, mtime=0))


def main(argv: list[str] | None = None) -> int:
    ap, sub = ns3_cli("python -m netsim.validation.reference",
                      "HPCC ns-3 reference runs for DCQCN and the comparison.", "ns3-inputs",
                      "write ns-3 input files for every (or the named) scenario")
    b = sub.add_parser("ns3-collect", help="fold ns-3 run directories into one results.json")
    b.add_argument("runs_dir", type=Path)
    b.add_argument("out", type=Path)
    b.add_argument("--commit", default="")
    c = sub.add_parser("compare", help="run the engine on stored scenarios and print the table")
    c.add_argument("--scenario", action="append", default=None)
    c.add_argument("--long-only", action="store_true")
    c.add_argument("--json", action="store_true")
    c.add_argument("--reference-file", type=Path, default=None,
                   help="stored reference runs (default tests/data/hpcc-ns3/results.json.gz; "
                        "results-repaced.json.gz holds the re-paced reference's)")
    c.add_argument("--seeds", type=int, nargs="+", default=list(ENGINE_SEEDS),
                   help="engine seeds; ours is the median over them (default: 1 2 3)")
    c.add_argument("--ns3-pacing", action="store_true",
                   help="emulate the reference's DCQCN pacing (evidence, see ns3_pacing)")
    return run_cli(ap, argv, _dispatch)


def _dispatch(args) -> int:
    if args.cmd == "ns3-inputs":
        names = args.scenario or [s.name for s in all_scenarios()]
        for name in names:
            ns3_inputs(RefScenario.from_name(name), args.out_dir / name)
        print("\n".join(names))
        return 0
    if args.cmd == "ns3-collect":
        runs = []
        for d in sorted(p for p in args.runs_dir.iterdir() if p.is_dir()):
            for r in sorted(d.glob("run*/fct.txt")):
                runs.append(collect_ns3(RefScenario.from_name(d.name), r.parent,
                                        int(r.parent.name[3:])))
        write_json_gz(args.out, {"upstream_commit": args.commit, "runs": runs})
        print(f"{len(runs)} runs -> {args.out}", file=sys.stderr)
        return 0
    refs = load_reference(args.reference_file)
    names = args.scenario or sorted(refs)
    if args.long_only:
        names = [n for n in names if RefScenario.from_name(n).long]
    comps = []
    for name in names:
        print(f"running {name} ...", file=sys.stderr)
        comps.append(compare_scenario(name, refs, emulate_ns3_pacing=args.ns3_pacing,
                                      seeds=tuple(args.seeds)))
    if args.json:
        print(json.dumps([c.row() | {"within_targets": c.within_targets} for c in comps], indent=1))
    else:
        print(markdown_table(comps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
