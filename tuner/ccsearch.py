"""DCQCN parameter search with the packet engine on the job's hot spot.

The hot spot comes from the flow engine (:func:`hot_spot`): the fabric link that the most
QPs of the job's concurrent collectives share (an ECMP collision on a ToR/agg uplink). It is
rebuilt as a packet-level dumbbell: ``n`` senders at the NIC rate whose flows all cross one
cable of the hot link's rate. If the job has no over-subscribed link, the fallback is an
8-to-1 incast at the NIC rate (the classic PFC storm), and the report says so.

Search space (switch ECN ramp and ConnectX DCQCN; names of ``netsim.cc.params`` and
``PacketConfig``): ``ecn_kmin_bytes``, ``ecn_kmax_bytes``, ``ecn_pmax``,
``rpg_time_reset_us`` (rate-increase timer), ``rpg_byte_reset_bytes`` (byte counter),
``rpg_ai_rate_mbps``, ``rpg_hai_rate_mbps``, ``dce_tcp_g`` (alpha gain, /1024) and
``min_time_between_cnps_us`` (CNP interval).

Objective: the PFC pause time must stay under a bound (a fraction of the vendor defaults'
pause time) and goodput may not drop more than ``max_goodput_loss`` below the defaults';
among the feasible settings the best ``goodput - 0.1 x tail FCT`` (both relative to the
defaults) wins. The search is sequential and model-based: a Latin-hypercube first batch, then
batches proposed by an RBF surrogate (``scipy.interpolate.RBFInterpolator``) of the penalised
objective; each batch is evaluated in parallel through a ``concurrent.futures`` executor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: (name, low, high, log-scale, integer) of every searched parameter; the ConnectX firmware
#: takes integers (us, Mb/s, /1024), so those are searched as integers and what is evaluated
#: is exactly what nic_dcqcn.conf gets.
SPACE = (
    ("ecn_kmin_bytes", 10_000, 1_000_000, True, True),
    ("ecn_kmax_ratio", 1.5, 20.0, True, False),         # kmax = kmin x ratio
    ("ecn_pmax", 0.01, 1.0, True, False),
    ("rpg_time_reset_us", 5, 600, True, True),
    ("rpg_byte_reset_bytes", 4096, 1_048_576, True, True),
    ("rpg_ai_rate_mbps", 1, 400, True, True),
    ("rpg_hai_rate_mbps", 10, 4000, True, True),
    ("dce_tcp_g", 960, 1023, False, True),               # alpha gain g = (1024 - x)/1024
    ("min_time_between_cnps_us", 1, 100, True, True),
)
#: Fraction of the default pause time the recommendation must stay under.
PAUSE_BOUND = 0.75
MAX_GOODPUT_LOSS = 0.02
#: Switch buffer of the hot-spot testbed per port (assumption: a shallow shared buffer, about
#: 1 MB per port of a 64-port switch; deep-buffer switches make PFC rarer).
BUFFER_PER_PORT_BYTES = 1_000_000


@dataclass(frozen=True)
class HotSpot:
    """A packet-level congestion scenario: ``senders`` flows onto one ``link_gbps`` cable."""

    kind: str                 # "collision" or "incast"
    senders: int
    nic_gbps: float
    link_gbps: float
    flow_bytes: int
    buffer_bytes: int
    source: str               # what the flow engine found

    def testbed(self):
        from netsim.packet.testbeds import dumbbell, star

        if self.kind == "incast":
            return star(self.senders + 1, host_gbps=self.nic_gbps)
        return dumbbell(self.senders, self.senders, host_gbps=self.nic_gbps,
                        core_gbps=self.link_gbps)

    def flows(self):
        from netsim.traffic import Flow

        if self.kind == "incast":
            return [Flow(f"h{i}", f"h{self.senders}", self.flow_bytes) for i in range(self.senders)]
        return [Flow(f"l{i}", f"r{i}", self.flow_bytes) for i in range(self.senders)]

    @property
    def bottleneck_gbps(self) -> float:
        return self.nic_gbps if self.kind == "incast" else min(self.link_gbps,
                                                                self.senders * self.nic_gbps)


def hot_spot(fabric, job, gpu_of_rank, qps: int = 1, seed: int = 0,
             flow_bytes: int = 1_000_000) -> HotSpot:
    """The job's worst collision (most QPs on one oversubscribed fabric link), or an incast."""
    from tuner.collision import collision_slowdown
    from tuner.search import job_groups

    best = None
    for kind, groups in job_groups(job, gpu_of_rank).items():
        sd = collision_slowdown(fabric, groups, qps=qps, seed=seed)
        link = sd.hot_link
        if link and (best is None or link["over"] > best[1]["over"]):
            best = (kind, link)
    nic_gbps = float(np.asarray(fabric.link_capacity_bps)[
        np.asarray(fabric.wiring.nic_up_link)[0]]) / 1e9
    if best and best[1]["over"] > 1.0:
        kind, link = best
        n = int(link["qps"])
        return HotSpot("collision", n, nic_gbps, link["gbps"], flow_bytes,
                       BUFFER_PER_PORT_BYTES * (n + 1),
                       f"{kind.upper()} step: {n} QPs of {nic_gbps:g}G NICs share "
                       f"{link['src']}->{link['dst']} ({link['gbps']:g}G, {link['kind']})")
    return HotSpot("incast", 8, nic_gbps, nic_gbps, flow_bytes, BUFFER_PER_PORT_BYTES * 9,
                   "no oversubscribed link in the job's collectives: 8-to-1 incast at the NIC")


@dataclass(frozen=True)
class CcOutcome:
    """Packet-engine metrics of one parameter setting (means over seeds)."""

    params: dict
    goodput: float            # delivered bits / makespan / bottleneck rate
    tail_fct_ns: float        # slowest flow's completion
    pause_ns: float           # sum over ports of the time their egress was PFC-paused
    pfc_pauses: float
    ecn_marks: float
    cnps: float
    failed: bool = False


def to_engine(params: dict) -> tuple[dict, dict]:
    """Search point -> (PacketConfig overrides, DcqcnParams overrides)."""
    from topologies.units import PS_PER_US

    kmin = int(params["ecn_kmin_bytes"])
    cfg = {"ecn_kmin_bytes": kmin, "ecn_kmax_bytes": int(kmin * params["ecn_kmax_ratio"]),
           "ecn_pmax": float(params["ecn_pmax"]),
           "cnp_interval_ps": int(round(params["min_time_between_cnps_us"] * PS_PER_US))}
    cc = {"rpg_time_reset_us": float(params["rpg_time_reset_us"]),
          "rpg_byte_reset_bytes": int(params["rpg_byte_reset_bytes"]),
          "rpg_ai_rate_mbps": float(params["rpg_ai_rate_mbps"]),
          "rpg_hai_rate_mbps": float(params["rpg_hai_rate_mbps"]),
          "dce_tcp_g": int(params["dce_tcp_g"]),
          "min_time_between_cnps_us": float(params["min_time_between_cnps_us"])}
    return cfg, cc


def vendor_defaults() -> dict:
    """The search point of the vendor defaults (PacketConfig ECN, ConnectX DCQCN)."""
    from netsim.cc.params import DcqcnParams
    from netsim.packet import PacketConfig

    c, d = PacketConfig(), DcqcnParams()
    return {"ecn_kmin_bytes": c.ecn_kmin_bytes, "ecn_kmax_ratio": c.ecn_kmax_bytes / c.ecn_kmin_bytes,
            "ecn_pmax": c.ecn_pmax, "rpg_time_reset_us": d.rpg_time_reset_us,
            "rpg_byte_reset_bytes": d.rpg_byte_reset_bytes, "rpg_ai_rate_mbps": d.rpg_ai_rate_mbps,
            "rpg_hai_rate_mbps": d.rpg_hai_rate_mbps,
            "dce_tcp_g": d.dce_tcp_g,
            "min_time_between_cnps_us": d.min_time_between_cnps_us}


def evaluate_cc(hot: HotSpot, params: dict, seeds: tuple[int, ...] = (0, 1),
                cc: str = "dcqcn") -> CcOutcome:
    """Run the hot spot in the packet engine with ``params`` (top level: picklable)."""
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter

    cfg_kw, cc_kw = to_engine(params)
    fab, flows = hot.testbed(), hot.flows()
    total_bits = 8.0 * sum(f.size_bytes for f in flows)
    rows = []
    failed = False
    for s in seeds:
        cfg = PacketConfig(cc=cc, cc_params=cc_kw, buffer_bytes=hot.buffer_bytes, **cfg_kw)
        r = simulate_packets(fab, flows, cfg, seed=s, router=ShortestPathRouter(fab, seed=s))
        fct = [f.fct_ns for f in r.flows]
        failed |= any(f.failed or f.fct_ns is None for f in r.flows)
        makespan = max(x for x in fct if x is not None) if any(x is not None for x in fct) else math.inf
        rows.append((total_bits / makespan / hot.bottleneck_gbps, makespan,
                     sum(p.paused_ns for p in r.ports), r.pfc_pauses, r.ecn_marks, r.cnps))
    m = np.mean(np.array(rows, dtype=float), axis=0)
    return CcOutcome(dict(params), float(m[0]), float(m[1]), float(m[2]), float(m[3]),
                     float(m[4]), float(m[5]), failed)


# ---------------------------------------------------------------- the search

def _to_unit(params: dict) -> np.ndarray:
    out = []
    for name, lo, hi, log, _ in SPACE:
        v = float(np.clip(params[name], lo, hi))
        out.append((math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)) if log
                   else (v - lo) / (hi - lo))
    return np.array(out)


def _from_unit(u: np.ndarray) -> dict:
    out = {}
    for x, (name, lo, hi, log, integer) in zip(np.clip(u, 0, 1), SPACE, strict=False):
        v = math.exp(math.log(lo) + x * (math.log(hi) - math.log(lo))) if log else lo + x * (hi - lo)
        out[name] = int(round(v)) if integer else float(v)
    return out


@dataclass
class CcChoice:
    """Defaults, the recommendation and every evaluation."""

    hot: HotSpot
    default: CcOutcome
    best: CcOutcome
    feasible: bool
    evaluations: list[CcOutcome] = field(default_factory=list)
    pause_bound_ns: float = 0.0
    status: str = ""

    @property
    def pause_reduction(self) -> float:
        d = self.default.pause_ns
        return 0.0 if d <= 0 else 1.0 - self.best.pause_ns / d

    @property
    def goodput_change(self) -> float:
        return self.best.goodput / self.default.goodput - 1.0


def _merit(o: CcOutcome, d: CcOutcome, bound_ns: float, max_loss: float) -> float:
    """Lower is better: ``-(goodput) + 0.05 ln(tail FCT / defaults')`` plus penalties that
    grow with the PFC pause over the bound (in units of the defaults' pause) and the goodput
    lost beyond ``max_loss``; goodput is absolute (fraction of the bottleneck), so a setting
    cannot buy goodput with PFC pauses."""
    fct = max(o.tail_fct_ns, 1.0) / max(d.tail_fct_ns, 1.0)
    score = -o.goodput + 0.05 * math.log(fct)
    over_pause = max(0.0, o.pause_ns - bound_ns) / max(d.pause_ns, 1000.0)
    lost = max(0.0, (1 - max_loss) * d.goodput - o.goodput) / max(d.goodput, 1e-9)
    return score + 10.0 * (over_pause + lost) + (100.0 if o.failed else 0.0)


def _ok(o: CcOutcome, d: CcOutcome, pause_limit_ns: float, max_loss: float) -> bool:
    return (not o.failed and o.pause_ns <= pause_limit_ns
            and o.goodput >= (1 - max_loss) * d.goodput)


def make_executor(scheduler: str | None = None, workers: int | None = None):
    """Local process pool, or a Dask cluster's executor when ``scheduler`` is an address."""
    if scheduler:
        try:
            from dask.distributed import Client  # optional: pip install "dask[distributed]"
        except ImportError as exc:
            raise ValueError("--scheduler needs dask.distributed: "
                             "pip install \"dask[distributed]\"") from exc
        return Client(scheduler).get_executor()
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers or 2)


def search_cc(hot: HotSpot, budget: int = 16, executor=None, seed: int = 0,
              pause_bound: float = PAUSE_BOUND, max_goodput_loss: float = MAX_GOODPUT_LOSS,
              batch: int = 4, progress=None) -> CcChoice:
    """Search DCQCN/ECN parameters on ``hot`` with ``budget`` packet-engine evaluations.

    Parameters
    ----------
    hot
        The scenario (:func:`hot_spot`).
    budget
        Evaluations besides the defaults' (at least one batch).
    executor
        A ``concurrent.futures`` executor (:func:`make_executor`); None evaluates in-process.
    seed
        Seeds the design and the surrogate's candidate draws.
    pause_bound
        The recommendation's PFC pause time must be below ``pause_bound`` x the defaults'.
    max_goodput_loss
        Largest goodput loss against the defaults that is still feasible.
    """
    from scipy.interpolate import RBFInterpolator
    from scipy.stats import qmc

    rng = np.random.default_rng(seed)
    run = (lambda pts: list(executor.map(evaluate_cc, [hot] * len(pts), pts))) if executor \
        else (lambda pts: [evaluate_cc(hot, p) for p in pts])
    default = run([vendor_defaults()])[0]
    bound = pause_bound * default.pause_ns
    evals: list[CcOutcome] = []
    first = max(1, min(budget, 2 * batch))
    design = qmc.LatinHypercube(d=len(SPACE), seed=rng).random(first)
    evals += run([_from_unit(u) for u in design])
    if progress:
        progress(len(evals))
    while len(evals) < budget:
        x = np.array([_to_unit(o.params) for o in evals])
        y = np.array([_merit(o, default, bound, max_goodput_loss) for o in evals])
        k = min(batch, budget - len(evals))
        if len(evals) > len(SPACE) + 1:
            surrogate = RBFInterpolator(x, y, kernel="thin_plate_spline", smoothing=1e-3)
            cand = np.clip(x[np.argmin(y)] + rng.normal(0, 0.15, (400, len(SPACE))), 0, 1)
            cand = np.vstack([cand, rng.random((200, len(SPACE)))])
            picks = cand[np.argsort(surrogate(cand))[:k]]
        else:  # too few points for the surrogate: perturb the best
            picks = np.clip(x[np.argmin(y)] + rng.normal(0, 0.2, (k, len(SPACE))), 0, 1)
        evals += run([_from_unit(u) for u in picks])
        if progress:
            progress(len(evals))
    merits = [_merit(o, default, bound, max_goodput_loss) for o in evals]
    order = np.argsort(merits, kind="stable")
    within = [evals[i] for i in order if _ok(evals[i], default, bound, max_goodput_loss)]
    # second choice: any pause reduction at all (the bound not met within the budget)
    reduced = [evals[i] for i in order
               if _ok(evals[i], default, default.pause_ns, max_goodput_loss)
               and evals[i].pause_ns < default.pause_ns]
    if within:
        best, status = within[0], "met the PFC pause bound"
    elif reduced:
        best, status = reduced[0], "reduced PFC pause, bound not met within the budget"
    else:
        best, status = default, "no better setting within the budget: vendor defaults kept"
    return CcChoice(hot, default, best, bool(within), evals, bound, status)
