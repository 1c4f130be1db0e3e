"""Congestion-control settings searched on the job's own traffic (packet engine).

Scenarios (:func:`job_scenarios`): for every kind of network collective the job runs (the DP
rings of all stages at once, the PP stage pairs), the flow engine finds the fabric link that
the most QPs share (:func:`tuner.collision.collision_slowdown`, with the QP count the job will
use). Where that link is offered more than its capacity, the collision is rebuilt packet by
packet: ``n`` QPs at the NIC rate through one cable of the link's rate (a dumbbell). A job
whose collectives offer no link more than its capacity has no congestion point: no queue
builds on the RoCE class, ECN never marks and DCQCN never acts, so no setting can change what
the job sees and the vendor defaults stand (the report says so and why).

Search (:func:`search_job_cc`): the vendor defaults, then every parameter of :data:`GRID`
moved alone to each of its values, then pairs of the two best single moves, up to a budget;
every setting runs on every scenario through the sweep runner (:func:`sweeps.run_points`).
A setting is *accepted* only if on every scenario it is no worse than the defaults: goodput at
least ``1 - ACCEPT_TOL`` of theirs and p99 FCT at most ``1 + ACCEPT_TOL`` of theirs. Accepted
settings are scored (lower is better) by the mean over scenarios of the p99 FCT ratio to the
defaults plus ``PAUSE_WEIGHT`` x the mean PFC pause-time ratio. Among the accepted settings
within ``TIE_MARGIN`` of the best score, the one closest to the defaults wins (the defaults
themselves when they are within the margin). The effect is reported per scenario.

Every scenario runs under both readings of ``rpg_byte_reset``'s unit
(:data:`BYTE_COUNTER_READINGS`: 64 B, the engine's default, and bytes): the sources disagree
(``docs/congestion-control.md``) and the two readings move DCQCN's recovery by a factor of 64,
so a setting is accepted only if it is no worse than the defaults under each. What the search
recommends then holds whichever way the firmware counts.

Names follow ``netsim.cc.params`` and ``PacketConfig``: ``ecn_kmin_bytes``,
``ecn_kmax_ratio`` (Kmax = Kmin x ratio), ``ecn_pmax``, ``rpg_time_reset_us``,
``rpg_byte_reset`` (the firmware value, in ``DcqcnParams.rpg_byte_reset_unit_bytes`` units: the
value ``nic_dcqcn.conf`` gets), ``rpg_ai_rate_mbps``, ``rpg_hai_rate_mbps``, ``dce_tcp_g`` and
``min_time_between_cnps_us``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

#: Values each parameter is tried at (the defaults are the other value); integers where the
#: ConnectX firmware takes integers, so what is evaluated is exactly what nic_dcqcn.conf gets.
GRID = {
    "ecn_kmin_bytes": (75_000, 300_000),
    "ecn_kmax_ratio": (5.0, 20.0),
    "ecn_pmax": (0.1, 0.5),
    "rpg_time_reset_us": (50, 150),
    # firmware value x 64 B (the default unit): 512 KB and 1 MB; 32767 is the largest 15-bit value
    "rpg_byte_reset": (8192, 16384),
    "rpg_ai_rate_mbps": (20,),
    "rpg_hai_rate_mbps": (200,),
    "min_time_between_cnps_us": (2, 8),
}
#: Largest goodput loss / p99 FCT increase against the defaults, on any scenario, accepted.
ACCEPT_TOL = 0.01
#: Settings whose score is within this of the best are ties; the closest to the defaults wins.
TIE_MARGIN = 0.01
#: Weight of the PFC pause-time ratio in the score (the p99 FCT ratio has weight 1).
PAUSE_WEIGHT = 0.1
#: Readings of ``rpg_byte_reset``'s unit every setting is judged under (64 B units, the engine's
#: default, and bytes, mstflint's sentence): the sources do not settle it
#: (docs/congestion-control.md), so a setting is accepted only if it is no worse than the
#: defaults under both. The advice then does not rest on the disputed semantics.
BYTE_COUNTER_READINGS = (64, 1)
#: Switch buffer of a scenario per port (assumption: a shallow shared buffer, about 1 MB per
#: port of a 64-port switch; deep-buffer switches make PFC rarer).
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
    #: unit of the DCQCN byte counter this scenario runs with (None: the engine's default,
    #: ``DcqcnParams.rpg_byte_reset_unit_bytes``); see :data:`BYTE_COUNTER_READINGS`
    byte_unit_bytes: int | None = None

    def testbed(self):
        from netsim.packet.testbeds import dumbbell, star

        if self.kind == "incast":
            return star(self.senders + 1, host_gbps=self.nic_gbps)
        return dumbbell(self.senders, self.senders, host_gbps=self.nic_gbps,
                        core_gbps=self.link_gbps)

    def flows(self):
        from netsim.scenario.traffic import Flow

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
    p99_fct_ns: float = 0.0   # 99th percentile of the flows' completion times


def to_engine(params: dict) -> tuple[dict, dict]:
    """Search point -> (PacketConfig overrides, DcqcnParams overrides)."""
    from topologies.units import PS_PER_US

    kmin = int(params["ecn_kmin_bytes"])
    cfg = {"ecn_kmin_bytes": kmin, "ecn_kmax_bytes": int(kmin * params["ecn_kmax_ratio"]),
           "ecn_pmax": float(params["ecn_pmax"]),
           "cnp_interval_ps": int(round(params["min_time_between_cnps_us"] * PS_PER_US))}
    cc = {"rpg_time_reset_us": float(params["rpg_time_reset_us"]),
          "rpg_byte_reset": int(params["rpg_byte_reset"]),
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
            "rpg_byte_reset": d.rpg_byte_reset, "rpg_ai_rate_mbps": d.rpg_ai_rate_mbps,
            "rpg_hai_rate_mbps": d.rpg_hai_rate_mbps,
            "dce_tcp_g": d.dce_tcp_g,
            "min_time_between_cnps_us": d.min_time_between_cnps_us}


def evaluate_cc(hot: HotSpot, params: dict, seeds: tuple[int, ...] = (0, 1),
                cc: str = "dcqcn") -> CcOutcome:
    """Run the hot spot in the packet engine with ``params`` (top level: picklable)."""
    from netsim.packet import PacketConfig, simulate_packets
    from netsim.packet.testbeds import ShortestPathRouter

    cfg_kw, cc_kw = to_engine(params)
    if hot.byte_unit_bytes is not None:
        cc_kw["rpg_byte_reset_unit_bytes"] = int(hot.byte_unit_bytes)
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
        done = [x for x in fct if x is not None]
        p99 = float(np.percentile(done, 99)) if len(done) == len(fct) else math.inf
        rows.append((total_bits / makespan / hot.bottleneck_gbps, makespan,
                     sum(p.paused_ns for p in r.ports), r.pfc_pauses, r.ecn_marks, r.cnps, p99))
    m = np.mean(np.array(rows, dtype=float), axis=0)
    return CcOutcome(dict(params), float(m[0]), float(m[1]), float(m[2]), float(m[3]),
                     float(m[4]), float(m[5]), failed, float(m[6]))




# ---------------------------------------------------------------- the job's scenarios

def nic_gbps_of(fabric) -> float:
    """The NIC (host link) rate of *fabric* in Gb/s."""
    return float(np.asarray(fabric.link_capacity_bps)[np.asarray(fabric.wiring.nic_up_link)[0]]) / 1e9


def job_scenarios(fabric, job, gpu_of_rank, qps: int = 1, seed: int = 0,
                  flow_bytes: int = 1_000_000) -> tuple[list[HotSpot], list[str]]:
    """The congestion points of the job's own collectives, and one line per collective kind.

    Returns the packet scenarios (one per kind whose hottest link is offered more than its
    capacity) and, for every kind, what the flow engine found on its hottest link.
    """
    from tuner.collision import collision_slowdown
    from tuner.search import job_groups

    nic = nic_gbps_of(fabric)
    scenarios, found = [], []
    for kind, groups in job_groups(job, gpu_of_rank).items():
        link = collision_slowdown(fabric, groups, qps=qps, seed=seed).hot_link
        name = {"dp": "DP rings", "pp": "PP sends", "cp": "CP rings",
                "ep": "EP all-to-all (shift rings)"}.get(kind, kind)
        if not link:
            found.append(f"{name}: no switch-to-switch link carries them")
            continue
        where = (f"{link['qps']} QPs on {link['src']}->{link['dst']} ({link['gbps']:g}G "
                 f"{link['kind']}), offered {link['over']:.2f}x its capacity")
        found.append(f"{name}: {where}")
        if link["over"] > 1.0:
            n = int(link["qps"])
            scenarios.append(HotSpot("collision", n, nic, link["gbps"], flow_bytes,
                                     BUFFER_PER_PORT_BYTES * (n + 1), f"{name}: {where}"))
    return scenarios, found


# ---------------------------------------------------------------- the search

@dataclass
class CcSetting:
    """One candidate: its parameters and its outcome on every scenario."""

    params: dict
    outcomes: list[CcOutcome]
    accepted: bool = False
    score: float = math.inf


@dataclass
class CcJobChoice:
    """The search's result: scenarios, defaults, the choice and every evaluated setting."""

    scenarios: list[HotSpot]
    found: list[str]
    default: CcSetting
    best: CcSetting
    evaluated: list[CcSetting] = field(default_factory=list)
    status: str = ""

    @property
    def changed(self) -> dict:
        """Parameters the choice moves away from the defaults: name -> (default, chosen)."""
        d, b = self.default.params, self.best.params
        return {k: (d[k], b[k]) for k in d if b[k] != d[k]}

    def effects(self) -> list[dict]:
        """Per scenario: goodput, p99 FCT and PFC pause time, defaults vs choice."""
        out = []
        for hot, d, b in zip(self.scenarios, self.default.outcomes, self.best.outcomes, strict=True):
            out.append({"scenario": hot.source, "goodput_default": d.goodput, "goodput": b.goodput,
                        "p99_fct_us_default": d.p99_fct_ns / 1e3, "p99_fct_us": b.p99_fct_ns / 1e3,
                        "pause_us_default": d.pause_ns / 1e3, "pause_us": b.pause_ns / 1e3})
        return out


def accepted(s: CcSetting, d: CcSetting, tol: float = ACCEPT_TOL) -> bool:
    """No worse than the defaults on every scenario: goodput and p99 FCT within ``tol``."""
    return all(not o.failed and o.goodput >= (1 - tol) * od.goodput
               and o.p99_fct_ns <= (1 + tol) * od.p99_fct_ns
               for o, od in zip(s.outcomes, d.outcomes, strict=True))


def score(s: CcSetting, d: CcSetting) -> float:
    """Lower is better: mean p99 FCT ratio + ``PAUSE_WEIGHT`` x mean pause-time ratio."""
    fct = np.mean([o.p99_fct_ns / od.p99_fct_ns for o, od in zip(s.outcomes, d.outcomes, strict=True)])
    pause = np.mean([(o.pause_ns + 1e3) / (od.pause_ns + 1e3)
                     for o, od in zip(s.outcomes, d.outcomes, strict=True)])
    return float(fct + PAUSE_WEIGHT * pause)


def distance(params: dict, d: dict) -> float:
    """How far a setting is from the defaults: sum of |log ratio| over the parameters."""
    return float(sum(abs(math.log(float(params[k]) / float(d[k]))) for k in d
                     if float(d[k]) > 0 and float(params[k]) > 0))


def candidates(d: dict, budget: int) -> list[dict]:
    """Single moves of every :data:`GRID` parameter (in order), at most *budget* of them."""
    out = []
    for name, values in GRID.items():
        for v in values:
            if v != d[name]:
                out.append({**d, name: v})
    return out[:max(0, budget)]


def _eval_point(scenarios: list[HotSpot], point: dict) -> dict:
    """Sweep-runner function: one setting on one scenario (module level: picklable)."""
    o = evaluate_cc(scenarios[point["scenario"]], point["params"], seeds=(point["seed"],))
    return o.__dict__


def _evaluate(scenarios, settings: list[dict], seed: int, workers, scheduler) -> list[CcSetting]:
    """Every setting on every scenario, fanned out through the sweep runner."""
    points = [{"setting": i, "scenario": j, "params": p, "seed": seed}
              for i, p in enumerate(settings) for j in range(len(scenarios))]
    if not points:
        return []
    fn = functools.partial(_eval_point, scenarios)
    try:
        from sweeps import run_points
    except ImportError:  # the sweep runner is not installed: evaluate in this process
        outs = [fn(p) for p in points]
    else:
        res = run_points(fn, points, workers=workers, scheduler=scheduler, progress=False,
                         desc="cc search")
        bad = [r.error for r in res if r.status != "ok"]
        if bad:
            raise RuntimeError(f"CC search: {len(bad)} packet runs failed, first: {bad[0]}")
        outs = [r.output for r in res]
    by = {}
    for p, o in zip(points, outs, strict=True):
        by.setdefault(p["setting"], []).append(CcOutcome(**o))
    return [CcSetting(dict(settings[i]), by[i]) for i in range(len(settings))]


def under_readings(scenarios: list[HotSpot], readings=BYTE_COUNTER_READINGS) -> list[HotSpot]:
    """Each scenario once per reading of the byte counter's unit, labelled with it."""
    import dataclasses

    if not readings:
        return list(scenarios)
    return [dataclasses.replace(h, byte_unit_bytes=int(u),
                                source=f"{h.source} [rpg_byte_reset in {int(u)} B units]")
            for h in scenarios for u in readings]


def search_job_cc(scenarios: list[HotSpot], found: list[str] | None = None, budget: int = 16,
                  seed: int = 0, workers: int | None = 0, scheduler: str | None = None,
                  readings=BYTE_COUNTER_READINGS) -> CcJobChoice:
    """Search DCQCN/ECN settings on the job's scenarios (see the module docstring).

    Parameters
    ----------
    scenarios
        From :func:`job_scenarios`; empty means the job has no congestion point and the
        defaults stand without a packet run.
    found
        What the flow engine found per collective kind (reported).
    budget
        Settings evaluated besides the defaults (each on every scenario).
    seed
        Seed of the packet runs.
    workers, scheduler
        Sweep-runner fan-out (:func:`sweeps.run_points`): local processes (0 = this
        process) or a Dask scheduler address.
    readings
        Units of ``rpg_byte_reset`` every scenario runs under (:data:`BYTE_COUNTER_READINGS`);
        the choice's scenarios are the scenario x reading pairs. Empty: the engine's default only.
    """
    d = vendor_defaults()
    scenarios = under_readings(scenarios, readings)
    found = list(found or [])
    if not scenarios:
        default = CcSetting(d, [], True, 0.0)
        return CcJobChoice([], found, default, default, [default],
                           "defaults stand: the job has no congestion point")
    default = _evaluate(scenarios, [d], seed, workers, scheduler)[0]
    singles = _evaluate(scenarios, candidates(d, budget), seed, workers, scheduler)
    pairs = _pairs(default, singles, d, budget - len(singles))
    evaluated = [default] + singles + _evaluate(scenarios, pairs, seed, workers, scheduler)
    for s in evaluated:
        s.accepted = accepted(s, default)
        s.score = score(s, default)
    return _choose(scenarios, found, default, evaluated)


def _pairs(default: CcSetting, singles: list[CcSetting], d: dict, room: int) -> list[dict]:
    """The two best accepted single moves combined (if budget is left and they differ)."""
    good = sorted((s for s in singles if accepted(s, default)), key=lambda s: score(s, default))
    if room <= 0 or len(good) < 2:
        return []
    a, b = good[0].params, good[1].params
    moved = {k: a[k] for k in d if a[k] != d[k]} | {k: b[k] for k in d if b[k] != d[k]}
    if len(moved) < 2:
        return []
    return [{**d, **moved}]


def _where(scenarios: list[HotSpot]) -> str:
    """The scenarios in words: congestion points, and the byte-counter readings they ran under."""
    units = sorted({h.byte_unit_bytes for h in scenarios if h.byte_unit_bytes is not None},
                   reverse=True)
    points = len(scenarios) // max(1, len(units))
    if len(units) < 2:
        return f"{points} congestion point(s)"
    return (f"{points} congestion point(s), each under both readings of rpg_byte_reset's unit "
            f"({' and '.join(f'{u} B' for u in units)})")


def _choose(scenarios, found, default: CcSetting, evaluated: list[CcSetting]) -> CcJobChoice:
    ok = [s for s in evaluated if s.accepted]
    best_score = min(s.score for s in ok)
    ties = [s for s in ok if s.score <= best_score + TIE_MARGIN]
    best = min(ties, key=lambda s: distance(s.params, default.params))
    if best is default:
        status = (f"defaults stand: no accepted setting beats them by more than the tie margin "
                  f"({TIE_MARGIN:.0%} of the score) on the job's {_where(scenarios)}")
    else:
        status = (f"changed: no worse than the defaults on every scenario (goodput and p99 FCT "
                  f"within {ACCEPT_TOL:.0%}) on the job's {_where(scenarios)}, score "
                  f"{default.score:.3f} -> {best.score:.3f}")
    return CcJobChoice(scenarios, found, default, best, evaluated, status)
