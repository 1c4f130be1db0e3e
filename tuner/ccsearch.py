"""Congestion-control settings searched on the job's own traffic (packet engine).

Scenarios (:func:`job_scenarios`): for every kind of network collective the job runs (the DP
rings of all stages at once, the PP stage pairs), the flow engine finds the fabric link that
the most QPs share (:func:`tuner.collision.collision_slowdown`, with the QP count the job will
use). Where that link is offered more than its capacity, the collision is rebuilt packet by
packet: ``n`` QPs at the NIC rate through one cable of the link's rate (a dumbbell). A job
whose collectives offer no link more than its capacity has no congestion point: no queue
builds on the RoCE class, ECN never marks and DCQCN never acts, so no setting can change what
the job sees and the vendor defaults stand (the report says so and why).

Search (:func:`search_job_cc`), a statistical decision made out of sample:

1. every parameter of :data:`GRID` moved alone to each of its values, up to a budget, runs on
   the in-sample families (:mod:`tuner.ccfamily`: each congestion point at two degrees, three
   flow sizes, starts at once or spread, both byte-counter readings) for
   :data:`SCREEN_SAMPLES` seeds, paired with the defaults on the same draws; a setting worse
   than a metric's margin on every one of those samples of a scenario is dropped there (a
   clear loser); the two best survivors combined are tried too;
2. the :data:`FINALISTS` best by score run to all :data:`tuner.ccfamily.SAMPLES` seeds;
3. a finalist is *accepted* when it is no worse than the defaults on every scenario and
   every metric of :data:`METRICS` (one-sided Student-t bound of the paired log ratio within
   the metric's margin, :mod:`tuner.acceptance`), and a candidate when its score (mean paired
   log ratio of p99 FCT plus ``PAUSE_WEIGHT`` x that of PFC pause time) is better than the
   defaults' with the same confidence; the best candidate (ties within :data:`TIE_MARGIN`: the
   closest to the defaults) is
4. confirmed on the held-out families (other seeds, sizes, degrees, 8:1 and 4:1 incasts),
   no worse on every one, or *refused*: then the defaults stand and the report says why.

Where no setting is better with confidence, the defaults stand. Effects are reported per
scenario, in sample and held out, as ratios to the defaults with 90% intervals (whose ends are
the one-sided 95% bounds the tests use).

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

import math
from dataclasses import dataclass, field

import numpy as np

from tuner import ccfamily
from tuner.acceptance import Metric, better, clearly_worse, interval, log_ratios, no_worse
from tuner.ccrun import (  # noqa: F401  (re-exported: the search's unit of work)
    BUFFER_PER_PORT_BYTES,
    BYTE_COUNTER_READINGS,
    CcOutcome,
    HotSpot,
    evaluate_cc,
    mean_outcome,
    run_once,
    to_engine,
    vendor_defaults,
)

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
#: Metrics a setting is judged on against the defaults, each with the loss tolerated
#: (non-inferiority margin): goodput and p99 FCT 2%, PFC pause time 10% (+1 us on both sides,
#: so that a scenario with no pause on either side is a tie).
METRICS = (Metric("goodput", True, 0.02), Metric("p99_fct", False, 0.02),
           Metric("pause", False, 0.10, offset=1e3))
#: Weight of the PFC pause-time log ratio in the score (the p99 FCT log ratio has weight 1).
PAUSE_WEIGHT = 0.1
#: A change must make the score better than the defaults' (:func:`tuner.acceptance.better`).
SCORE = Metric("score", False, 0.0)
#: Settings whose mean score is within this of the best (log units) are ties; the closest to
#: the defaults wins.
TIE_MARGIN = 0.01
#: Seeds every candidate first runs on; only the :data:`FINALISTS` best go on to all seeds.
SCREEN_SAMPLES = 2
FINALISTS = 3


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


# ---------------------------------------------------------------- settings and their verdicts

@dataclass
class CcSetting:
    """One candidate: its parameters, its runs on every scenario and the verdict on it."""

    params: dict
    outcomes: list[CcOutcome]            # per scenario: the mean over its seeds
    accepted: bool = False               # no worse than the defaults on every scenario/metric
    score: float = math.inf              # mean paired log-ratio score against the defaults
    samples: list[list[CcOutcome]] = field(default_factory=list)  # per scenario, per seed
    better: bool = False                 # score better than the defaults' with confidence
    verdict: str = ""


_VALUE = {"goodput": lambda o: o.goodput, "p99_fct": lambda o: o.p99_fct_ns,
          "pause": lambda o: o.pause_ns}


def _setting(runs, params: dict, fams, seeds) -> CcSetting:
    samples = [[runs.get(params, f, s) for s in seeds] for f in fams]
    return CcSetting(dict(params), [mean_outcome(x) for x in samples], samples=samples)


def ratios(s: CcSetting, d: CcSetting, metric: Metric) -> list[np.ndarray]:
    """Per scenario, the paired log ratios of *metric* (setting over defaults, seed by seed)."""
    get = _VALUE[metric.name]
    return [log_ratios([get(o) for o in xs], [get(o) for o in ds], metric.offset)
            for xs, ds in zip(s.samples, d.samples, strict=True)]


def scores(s: CcSetting, d: CcSetting) -> np.ndarray:
    """Per (scenario, seed): log p99 FCT ratio + ``PAUSE_WEIGHT`` x log pause ratio (lower better)."""
    fct, pause = (np.concatenate(ratios(s, d, m)) for m in METRICS[1:])
    return fct + PAUSE_WEIGHT * pause


def judge(s: CcSetting, d: CcSetting) -> None:
    """Set ``accepted`` (no worse everywhere), ``better`` and ``score`` against the defaults."""
    s.accepted = all(no_worse(interval(x), m) for m in METRICS for x in ratios(s, d, m))
    sc = scores(s, d)
    s.score = float(np.mean(sc))
    s.better = better(interval(sc), SCORE)


def first_loss(s: CcSetting, d: CcSetting, fams) -> str:
    """The scenario and metric where *s* is not shown no worse, worst mean first (empty: none)."""
    losses = []
    for m in METRICS:
        for f, x in zip(fams, ratios(s, d, m), strict=True):
            iv = interval(x)
            if not no_worse(iv, m):
                losses.append((-iv.mean if m.higher_is_better else iv.mean, m, f, iv))
    if not losses:
        return ""
    _, m, f, iv = max(losses, key=lambda t: t[0])
    return (f"{m.name} x{iv.ratio:.3f} [{iv.ratio_lo:.3f}, {iv.ratio_hi:.3f}] on {f.name} "
            f"(margin {m.margin:.0%})")


def effects(s: CcSetting, d: CcSetting, fams) -> list[dict]:
    """Per scenario: means of defaults and setting, and each metric's ratio with its interval."""
    out = []
    per = {m.name: ratios(s, d, m) for m in METRICS}
    for i, (f, o, od) in enumerate(zip(fams, s.outcomes, d.outcomes, strict=True)):
        row = {"scenario": f.name, "goodput_default": od.goodput, "goodput": o.goodput,
               "p99_fct_us_default": od.p99_fct_ns / 1e3, "p99_fct_us": o.p99_fct_ns / 1e3,
               "pause_us_default": od.pause_ns / 1e3, "pause_us": o.pause_ns / 1e3,
               "seeds": len(s.samples[i])}
        for m in METRICS:
            row |= interval(per[m.name][i]).as_dict(m.name)
        out.append(row)
    return out


@dataclass
class CcJobChoice:
    """The search's result: scenarios, defaults, the choice, every evaluated setting, refusals."""

    scenarios: list              # in-sample families (tuner.ccfamily.Family)
    found: list[str]
    default: CcSetting
    best: CcSetting
    evaluated: list[CcSetting] = field(default_factory=list)
    status: str = ""
    held_out: list = field(default_factory=list)       # held-out families
    held_default: CcSetting | None = None
    held_candidate: CcSetting | None = None            # the in-sample best, held out
    refused: list[CcSetting] = field(default_factory=list)
    seeds: tuple[int, ...] = ()
    held_out_seeds: tuple[int, ...] = ()

    @property
    def changed(self) -> dict:
        """Parameters the choice moves away from the defaults: name -> (default, chosen)."""
        d, b = self.default.params, self.best.params
        return {k: (d[k], b[k]) for k in d if b[k] != d[k]}

    @property
    def candidate(self) -> CcSetting | None:
        """The in-sample best that went to the held-out check (chosen or refused), if any."""
        return self.refused[0] if self.refused else (
            None if self.best is self.default else self.best)

    def effects(self) -> list[dict]:
        """Per in-sample scenario: the choice against the defaults, with intervals."""
        return effects(self.best, self.default, self.scenarios) if self.scenarios else []

    def candidate_effects(self) -> list[dict]:
        """Per in-sample scenario: the in-sample best (chosen or refused) against the defaults."""
        c = self.candidate
        return effects(c, self.default, self.scenarios) if c is not None else []

    def held_out_effects(self) -> list[dict]:
        """Per held-out scenario: the in-sample best (chosen or refused) against the defaults."""
        if self.held_candidate is None:
            return []
        return effects(self.held_candidate, self.held_default, self.held_out)


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


# ---------------------------------------------------------------- packet runs, shared

def _key(params: dict) -> tuple:
    return tuple(sorted((k, float(v)) for k, v in params.items()))


def _run_point(point: dict) -> dict:
    """Sweep-runner function: one setting on one drawn scenario (module level: picklable)."""
    return run_once(HotSpot(**point["hot"]), point["params"], point["seed"]).__dict__


class _Runs:
    """Packet runs by (setting, scenario, seed): each runs once, shared by every comparison.

    A context manager: one Dask cluster (if any) serves every stage of the search."""

    def __init__(self, workers, scheduler):
        import contextlib

        self.workers, self.scheduler, self.done = workers, scheduler, {}
        self.client, self._stack = None, contextlib.ExitStack()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stack.close()

    def get(self, params: dict, fam, seed: int) -> CcOutcome:
        return self.done[(_key(params), fam, seed)]

    def ensure(self, settings: list[dict], fams, seeds) -> None:
        """Run what is not run yet of every setting x scenario x seed."""
        todo = {(_key(p), f, s): (p, f, s) for p in settings for f in fams for s in seeds}
        todo = [v for k, v in todo.items() if k not in self.done]
        points = [{"params": dict(p), "hot": f.sample(s).__dict__, "seed": int(s)}
                  for p, f, s in todo]
        for (p, f, s), out in zip(todo, self._run(points), strict=True):
            self.done[(_key(p), f, s)] = CcOutcome(**out)

    def _run(self, points: list[dict]) -> list[dict]:
        if not points:
            return []
        try:
            from sweeps import run_points
        except ImportError:  # the sweep runner is not installed: run in this process
            return [_run_point(p) for p in points]
        if self.client is None and (self.workers != 0 or self.scheduler is not None):
            from sweeps.runner import dask_client

            self.client = self._stack.enter_context(dask_client(self.workers, self.scheduler))
        res = run_points(_run_point, points, workers=self.workers, scheduler=self.scheduler,
                         progress=False, desc="cc search", client=self.client)
        bad = [r.error for r in res if r.status != "ok"]
        if bad:
            raise RuntimeError(f"CC search: {len(bad)} packet runs failed, first: {bad[0]}")
        return [r.output for r in res]


# ---------------------------------------------------------------- the search

def search_job_cc(scenarios: list[HotSpot], found: list[str] | None = None, budget: int = 16,
                  seed: int = 0, workers: int | None = 0, scheduler: str | None = None,
                  readings=BYTE_COUNTER_READINGS, samples: int = ccfamily.SAMPLES) -> CcJobChoice:
    """Search DCQCN/ECN settings on the job's scenarios (see the module docstring).

    Parameters
    ----------
    scenarios
        The job's congestion points, from :func:`job_scenarios`; empty means the job has none
        and the defaults stand without a packet run.
    found
        What the flow engine found per collective kind (reported).
    budget
        Settings evaluated besides the defaults (single moves, then the best pair).
    seed
        First in-sample seed (seeds ``seed .. seed + samples - 1``); held-out seeds are
        ``seed + 1000 ..``.
    workers, scheduler
        Sweep-runner fan-out (:func:`sweeps.run_points`): local processes (0 = this
        process) or a Dask scheduler address.
    readings
        Units of ``rpg_byte_reset`` every scenario runs under (:data:`BYTE_COUNTER_READINGS`).
    samples
        Paired seeds per scenario (at least :data:`tuner.acceptance.MIN_SAMPLES` to decide).
    """
    d = vendor_defaults()
    found = list(found or [])
    if not scenarios:
        default = CcSetting(d, [], True, 0.0, verdict="defaults")
        return CcJobChoice([], found, default, default, [default],
                           "defaults stand: the job has no congestion point")
    fams = ccfamily.in_sample(scenarios, readings)
    seeds = ccfamily.in_sample_seeds(seed, samples)
    with _Runs(workers, scheduler) as runs:
        return _search(runs, d, fams, found, budget, scenarios, readings, seed, seeds)


def _search(runs, d, fams, found, budget, scenarios, readings, seed, seeds) -> CcJobChoice:
    """Screen, decide on the finalists, confirm held out (see the module docstring)."""
    screened = _screen(runs, d, fams, seeds[:SCREEN_SAMPLES], budget)
    finalists = [s for s in screened if not s.verdict][:FINALISTS]
    for s in screened:
        if not s.verdict and s not in finalists:
            s.verdict = (f"screened out: score {s.score:+.3f} after {SCREEN_SAMPLES} seeds, "
                         f"not among the {FINALISTS} best")
    runs.ensure([d] + [s.params for s in finalists], fams, seeds)
    default = _setting(runs, d, fams, seeds)
    default.accepted, default.score, default.verdict = True, 0.0, "defaults"
    final = [_setting(runs, s.params, fams, seeds) for s in finalists]
    for s in final:
        judge(s, default)
        s.verdict = _verdict(s, default, fams)
    evaluated = [default] + final + [s for s in screened if s not in finalists]
    choice = CcJobChoice(fams, found, default, default, evaluated, "", seeds=seeds)
    return _confirm(choice, runs, _best(default, final), scenarios, readings, seed, len(seeds))


def _screen(runs, d: dict, fams, seeds, budget: int) -> list[CcSetting]:
    """Single moves (and the best pair) on the first seeds, best first; clear losers marked."""
    singles = candidates(d, budget)
    runs.ensure([d] + singles, fams, seeds)
    default = _setting(runs, d, fams, seeds)
    out = [_screened(runs, p, default, fams, seeds) for p in singles]
    pair = _pair(out, d, budget - len(singles))
    if pair:
        runs.ensure([pair], fams, seeds)
        out.append(_screened(runs, pair, default, fams, seeds))
    return sorted(out, key=lambda s: (bool(s.verdict), s.score))


def _screened(runs, params: dict, default: CcSetting, fams, seeds) -> CcSetting:
    s = _setting(runs, params, fams, seeds)
    s.score = float(np.mean(scores(s, default)))
    for m in METRICS:
        for f, x in zip(fams, ratios(s, default, m), strict=True):
            if not s.verdict and clearly_worse(x, m):
                s.verdict = (f"clear loser: {m.name} worse than its {m.margin:.0%} margin on "
                             f"every one of {len(seeds)} seeds of {f.name}")
    return s


def _pair(screened: list[CcSetting], d: dict, room: int) -> dict | None:
    """The two best surviving single moves combined (if budget is left and they differ)."""
    good = sorted((s for s in screened if not s.verdict and s.score < 0), key=lambda s: s.score)
    if room <= 0 or len(good) < 2:
        return None
    a, b = good[0].params, good[1].params
    moved = {k: a[k] for k in d if a[k] != d[k]} | {k: b[k] for k in d if b[k] != d[k]}
    return {**d, **moved} if len(moved) >= 2 else None


def _verdict(s: CcSetting, d: CcSetting, fams) -> str:
    if not s.accepted:
        return f"not shown no worse: {first_loss(s, d, fams)}"
    if not s.better:
        iv = interval(scores(s, d))
        return (f"no worse, but not better with confidence (score {iv.mean:+.3f}, "
                f"interval [{iv.lo:+.3f}, {iv.hi:+.3f}])")
    return "candidate"


def _best(default: CcSetting, final: list[CcSetting]) -> CcSetting | None:
    """The best accepted and better setting; ties within the margin go to the nearest."""
    ok = [s for s in final if s.accepted and s.better]
    if not ok:
        return None
    top = min(s.score for s in ok)
    return min((s for s in ok if s.score <= top + TIE_MARGIN),
               key=lambda s: distance(s.params, default.params))


def _confirm(choice: CcJobChoice, runs, best, points, readings, seed, samples) -> CcJobChoice:
    """Run the in-sample best on the held-out families: chosen if no worse on each, else refused."""
    where = _where(choice.scenarios, samples)
    if best is None:
        choice.status = (f"defaults stand: no setting was both no worse on every scenario and "
                         f"better than the defaults with {_conf()} confidence on the job's {where}")
        return choice
    held, hseeds = ccfamily.held_out(points, readings), ccfamily.held_out_seeds(seed, samples)
    runs.ensure([choice.default.params, best.params], held, hseeds)
    hd, hb = (_setting(runs, p, held, hseeds) for p in (choice.default.params, best.params))
    loss = first_loss(hb, hd, held)
    choice.held_out, choice.held_default, choice.held_candidate = held, hd, hb
    choice.held_out_seeds = hseeds
    moved = ", ".join(f"{k} {choice.default.params[k]:g} -> {best.params[k]:g}"
                      for k in best.params if best.params[k] != choice.default.params[k])
    if loss:
        best.verdict = f"refused held out: {loss}"
        choice.refused = [best]
        choice.status = (f"defaults stand: the in-sample best ({moved}) was refused on the "
                         f"held-out scenarios: {loss}")
        return choice
    best.verdict = "chosen: confirmed held out"
    choice.best = best
    iv = interval(scores(best, choice.default))
    choice.status = (f"changed: better than the defaults (score {iv.mean:+.3f}, 90% interval "
                     f"[{iv.lo:+.3f}, {iv.hi:+.3f}]) and no worse on every scenario and metric "
                     f"with {_conf()} confidence on the job's {where}; confirmed no worse on "
                     f"{len(held)} held-out scenarios ({samples} other seeds each)")
    return choice


def _conf() -> str:
    from tuner.acceptance import CONFIDENCE

    return f"{CONFIDENCE:.0%}"


def _where(fams, samples: int) -> str:
    """The in-sample scenarios in words."""
    units = sorted({f.base.byte_unit_bytes for f in fams if f.base.byte_unit_bytes is not None},
                   reverse=True)
    points = len(fams) // max(1, len(units))
    text = f"{points} congestion point(s), {samples} paired seeds each"
    if len(units) < 2:
        return text
    return f"{text}, under both readings of rpg_byte_reset's unit ({' and '.join(f'{u} B' for u in units)})"
