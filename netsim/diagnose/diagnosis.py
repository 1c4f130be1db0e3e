"""Find stragglers, slow links and rank skew in a training run's traces (``netsim diagnose``).

Input is a :class:`netsim.traces.records.TraceRun`, read from native trainer traces or from
torch.profiler traces (``netsim.traces.kineto``). Every statistic is robust (medians, minima, rank tests),
and compares like with like, as MegaScale's per-rank heat maps do (Jiang et al. 2024,
section 4):

- **compute and communication per rank and step**: a rank's compute is the sum of its compute
  records (forward, backward, optimizer) minus the blocking collectives inside them (a forward
  record holds its block's tensor-parallel all-reduces, and waiting there is not compute); its
  communication is the sum of its blocking collectives (waits included). Records that carry
  the thread's CPU time (``cpu_s``: the CPU trainer) count that instead: on a host whose cores
  the ranks time-slice, wall time measures the scheduler as much as the rank.
- **stragglers**: ranks of one role (the same pipeline stage: the same work) compared step by
  step by their *least-disturbed work* (``least_work``: per kind of compute record, the
  shortest record of the step times the number of records; another process on the core only
  ever adds time to a record, a slower rank is slower in every record). A stage of at least
  ``MIN_PEERS`` ranks: each rank against the median of the others; ``slowdown`` is the median
  ratio over steps; ``confidence`` is one minus the chance that an ordinary rank is the
  slowest of its role, by at least half the threshold, in as many steps as it was. A stage of
  two ranks: the pair against each other, ``confidence`` from Wilcoxon's signed-rank test over
  steps, the noise floor from the other pairs of the run. A rank alone in its stage: its mean
  per-layer compute against every rank's (every stage runs the same layer), from
  ``SMALL_STAGE_SLOWDOWN`` (stages differ per layer by up to ~20% on a shared host).
- **slow links**: the calls of one family (kind, operation, bytes) are compared group against
  group. The k-th call of a group on each member is the same call; its time is the *shortest*
  of its members' durations (the member that arrived last waited least, so a late member, a
  straggler, does not make its group look slow, while a slow link delays every member). A
  group's time of a step is a low percentile (``LINK_QUANTILE``) of its calls' times: a
  shared host only adds time to a call. Point-to-point transfers are families of their own
  (the sends from one stage to another: the same place in the schedule), the group (sender,
  receiver), the members' records the sender's send and the receiver's receive; transfers
  posted in a 1F1B exchange (a send and a receive waited together, so either's end is the
  other's) are left out. Slowdown and
  confidence as for stragglers.
- **skew at the last data-parallel reduction** of each step: the spread of its start times
  over the members of each DP group (clocks aligned on the world's loss all-reduce), and which
  rank came last.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netsim.traces.records import RankTrace, TraceRun

COMPUTE_PHASES = ("forward", "backward", "optimizer")
MIN_PEERS = 3
"""Smallest role (ranks) or family (groups) compared."""
STRAGGLER_SLOWDOWN = 1.12
"""A rank this much slower than its peers is named. MegaScale removed hosts ~10% slower. On
the 2-core host of ``experiments/diagnose`` (seeds 1-2, the runs this was set on) the clean
ranks' least-disturbed work reaches x1.09 of their peers' in clean runs (x1.16 once, in a run
with a slow link elsewhere), injected x1.2 stragglers measure x1.13 to x1.28."""
SHARED_HOST_FRACTION = 0.1
"""A host is shared when processes outside the run kept at least this fraction of its cores
busy during the traced steps (the trainer's ``host`` records: the host's busy cores minus
the run's own CPU time, ``netsim.traces.records.hosts_from_records``)."""
SHARED_HOST_SLOWDOWN = 1.2
"""On a shared host, stragglers named below this slowdown carry a caution: on the 2-core
host of ``experiments/diagnose``, with other processes keeping 0.26 to 1.4 of its 2 cores
busy (seeds 1-8 and the ``--background 4`` seeds 10-12), ranks nothing was injected into
measured up to x1.18 over a whole run; alone on the host, no clean run named anyone
(`docs/diagnose.md`)."""
LINK_SLOWDOWN = 2.0
"""A group this much slower than the other groups of its family is named (a 400G port
trained down to 200G doubles its transfers' time)."""
LINK_PERSIST = 0.75
"""Fraction of the steps in which a slow group must be ``LINK_SLOWDOWN`` slower."""
MIN_CONFIDENCE = 0.99
NOISE_SIGMAS = 3.0
"""A slowdown must stand this many standard errors of its family's noise above 1."""


@dataclass
class StepTimes:
    """Per-rank, per-step seconds (rows: ranks in trace order; columns: ``steps``)."""

    steps: list[int]
    compute_s: np.ndarray
    comm_s: np.ndarray
    layer_s: np.ndarray
    """Mean compute of one transformer-layer record (forward or backward), per rank-step."""
    work_s: np.ndarray | None = None
    """The step's compute as its least-disturbed records measure it (``least_work``): per
    record kind, the shortest record of the step times the number of records of the kind."""
    steady_s: np.ndarray | None = None
    """``work_s`` with each kind's step value clipped to the kind's median over the steps
    (``steady_work``): a stall of one step is left out."""


@dataclass
class Straggler:
    rank: int
    host: str
    slowdown: float
    confidence: float
    role: str = ""
    host_shared: bool = False
    """The rank's host was shared with other processes (``SHARED_HOST_FRACTION``)."""


@dataclass
class SlowLink:
    ranks: list[int]
    slowdown: float
    confidence: float = 0.0
    family: str = ""
    excess_s: float = 0.0
    """Median over steps of the time the group's calls take beyond the other groups'."""


@dataclass
class Diagnosis:
    """What ``netsim diagnose`` reports (``to_json`` gives the contract keys first)."""

    times: StepTimes
    ranks: list[int]
    hosts: list[str]
    stragglers: list[Straggler] = field(default_factory=list)
    slow_links: list[SlowLink] = field(default_factory=list)
    dp_skew: dict[str, Any] = field(default_factory=dict)
    whatif: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    host_sharing: list[dict[str, Any]] = field(default_factory=list)
    """Per host: cores, the cores the run used, the cores other processes kept busy, shared."""

    def to_json(self) -> dict[str, Any]:
        return {
            "stragglers": [{"rank": s.rank, "host": s.host, "slowdown": s.slowdown,
                            "confidence": s.confidence, "role": s.role,
                            "host_shared": s.host_shared}
                           for s in self.stragglers],
            "slow_links": [{"ranks": sl.ranks, "slowdown": sl.slowdown,
                            "confidence": sl.confidence, "family": sl.family,
                            "excess_s": sl.excess_s}
                           for sl in self.slow_links],
            "whatif": self.whatif,
            "dp_skew": self.dp_skew,
            "per_rank": [{"rank": r, "host": h,
                          "compute_s": self.times.compute_s[i].tolist(),
                          "comm_s": self.times.comm_s[i].tolist()}
                         for i, (r, h) in enumerate(zip(self.ranks, self.hosts, strict=True))],
            "steps": self.times.steps,
            "host_sharing": self.host_sharing,
            "notes": self.notes,
        }


# ---------------------------------------------------------------------------------------------
def _blocking(rank: RankTrace) -> list[tuple[float, float]]:
    return sorted((c["start_s"], c["end_s"]) for c in rank.collectives if not c.get("overlapped"))


def _overlap_s(spans: list[tuple[float, float]], s: float, e: float) -> float:
    return sum(max(0.0, min(ce, e) - max(cs, s)) for cs, ce in spans if cs < e and ce > s)


def step_times(run: TraceRun, skip: int = 1) -> StepTimes:
    """Compute and communication seconds of every rank and step (steps < ``skip`` dropped)."""
    steps = sorted({c["step"] for r in run.ranks for c in r.compute if c["step"] >= skip})
    if not steps:
        steps = sorted({c["step"] for r in run.ranks for c in r.compute})
    col = {s: j for j, s in enumerate(steps)}
    n = len(run.ranks)
    comp, comm = np.zeros((n, len(steps))), np.zeros((n, len(steps)))
    layer_sum, layer_n = np.zeros((n, len(steps))), np.zeros((n, len(steps)))
    work, steady = np.zeros((n, len(steps))), np.zeros((n, len(steps)))
    for i, rank in enumerate(run.ranks):
        spans = _blocking(rank)
        kinds: dict[tuple, list[float]] = defaultdict(list)
        for c in rank.compute:
            j = col.get(c["step"])
            if j is None or c["phase"] not in COMPUTE_PHASES:
                continue
            t = c.get("cpu_s")
            if t is None:
                t = max(0.0, c["end_s"] - c["start_s"] - _overlap_s(spans, c["start_s"],
                                                                    c["end_s"]))
            comp[i, j] += t
            kinds[(j, c["phase"], c.get("name", "layer"))].append(t)
            if c.get("name", "layer") == "layer" and c["phase"] != "optimizer":
                layer_sum[i, j] += t
                layer_n[i, j] += 1
        for c in rank.collectives:
            j = col.get(c["step"])
            if j is not None and not c.get("overlapped"):
                comm[i, j] += c["end_s"] - c["start_s"]
        for (j, _phase, _name), ts in kinds.items():
            work[i, j] += least_work(ts)
        steady[i] = steady_work(kinds, len(steps))
    layer = np.divide(layer_sum, layer_n, out=np.zeros_like(layer_sum), where=layer_n > 0)
    return StepTimes(steps=steps, compute_s=comp, comm_s=comm, layer_s=layer, work_s=work,
                     steady_s=steady)


def least_work(times_s: list[float]) -> float:
    """The work of a step's records of one kind (the same phase and module: the same
    computation, repeated over micro-batches and layers) as its least-disturbed record
    measures it: the shortest record times their number. Another process sharing the core
    only ever adds time to a record (its CPU time too: the caches it evicts are refilled on
    this rank's account), while a slower rank is slower in every record."""
    return min(times_s) * len(times_s)


def steady_work(kinds: dict[tuple, list[float]], n_steps: int) -> np.ndarray:
    """(steps,) work of one rank from its records ``{(step column, phase, name): [seconds]}``:
    per kind, the step's ``least_work`` clipped to the kind's median over the steps. A kind
    done once a step (the optimizer's ``zero_grad``) has no second record to see past a stall,
    and a stall only adds time; a rank that is slower all along keeps its level (its median)."""
    per: dict[tuple, dict[int, float]] = defaultdict(dict)
    for (j, phase, name), ts in kinds.items():
        per[(phase, name)][j] = least_work(ts)
    out = np.zeros(n_steps)
    for by_step in per.values():
        cap = float(np.median(list(by_step.values())))
        for j, w in by_step.items():
            out[j] += min(w, cap)
    return out


def max_confidence(k: int, n: int, rows: int) -> float:
    """One minus P(a given row of ``rows`` exchangeable rows is the largest in at least ``k``
    of ``n`` steps): the binomial tail with p = 1 / rows."""
    if n == 0:
        return 0.0
    p = 1.0 / rows
    tail = sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))
    return 1.0 - tail


def sign_confidence(k: int, n: int) -> float:
    """One minus P(at least ``k`` of ``n`` fair coin flips come up heads)."""
    return max_confidence(k, n, 2)


def signed_rank_confidence(x: np.ndarray) -> float:
    """One minus the one-sided p-value of Wilcoxon's signed-rank test that ``x`` (one value
    per step) is centred above 0 (exact for fewer than 50 values)."""
    from scipy.stats import wilcoxon

    x = np.asarray(x, dtype=float)
    if len(x) == 0 or not np.any(x):
        return 0.0
    return float(1.0 - wilcoxon(x, alternative="greater").pvalue)


def noise_sigma(values: np.ndarray) -> float:
    """Robust spread (1.4826 MAD) of log(value / the step's median over rows), pooled."""
    logs = np.log(np.maximum(values, 1e-12))
    dev = (logs - np.median(logs, axis=0)).ravel()
    return float(1.4826 * np.median(np.abs(dev - np.median(dev))))


def outliers(values: np.ndarray, threshold: float, leave_one_out: bool = False,
             persist: float = 0.0, every_step: bool = False
             ) -> list[tuple[int, float, float]]:
    """Rows of ``values`` (members x steps, > 0) slower than the other rows
    (``_outliers_once``), peeled: the rows found are set aside and the rest tested again, so a
    second straggler of a role, never the slowest while the first is there, is found too.
    Returns (row, slowdown, confidence) for each, in the order found."""
    rows = list(range(values.shape[0]))
    out: list[tuple[int, float, float]] = []
    while len(rows) >= MIN_PEERS:
        found = _outliers_once(values[rows], threshold, leave_one_out, persist, every_step)
        if not found:
            break
        out += [(rows[i], slow, conf) for i, slow, conf in found]
        named = {i for i, _, _ in found}
        rows = [r for k, r in enumerate(rows) if k not in named]
    return out


def _outliers_once(values: np.ndarray, threshold: float, leave_one_out: bool = False,
                   persist: float = 0.0, every_step: bool = False
                   ) -> list[tuple[int, float, float]]:
    """Rows of ``values`` (members x steps, > 0) slower than the other rows.

    A row's ratio of a step is its value over the median of the other rows; its slowdown is
    the median ratio over steps. Its confidence is one minus the chance that an ordinary row
    (exchangeable with the others) is the largest of all rows, by at least half the threshold,
    in as many steps as it was (``max_confidence``). Returns (row, slowdown, confidence) for
    every row whose slowdown is at least ``threshold`` and at least ``NOISE_SIGMAS`` standard
    errors of the step-to-step noise (``noise_sigma`` over all rows; a median over ``n`` steps
    has a standard error of 1.2533 sigma / sqrt(n)), and whose confidence is at least
    ``MIN_CONFIDENCE``. ``leave_one_out``: the noise of a row's test is that of the other
    rows (when the rows are few, one slow row would widen the pooled spread). ``persist``:
    the fraction of steps in which the row's ratio must reach the threshold (a slow link
    slows every transfer; a stalled process comes and goes). ``every_step``: the confidence
    is also the sign test's (``sign_confidence``) of the steps in which the row reached the
    threshold: an ordinary row is above the median of the others in a step with a chance of
    at most one half, however heavy the others' stalls, so a row that is ``threshold`` x
    slower in (nearly) every step is named even when a stall elsewhere outranks it now and
    then; the larger of the two confidences is taken (a false alarm at most twice as likely
    as either test's).
    """
    rows, n = values.shape
    out = []
    if rows < MIN_PEERS or n == 0:
        return out
    floor = math.exp(NOISE_SIGMAS * 1.2533 * noise_sigma(values) / math.sqrt(n))
    top = values.argmax(axis=0)
    for i in range(rows):
        others = np.median(np.delete(values, i, axis=0), axis=0)
        ok = others > 0
        if not ok.any():
            continue
        ratio = values[i, ok] / others[ok]
        slow = float(np.median(ratio))
        if leave_one_out:
            rest = np.delete(values, i, axis=0)
            floor = math.exp(NOISE_SIGMAS * 1.2533 * noise_sigma(rest) / math.sqrt(n))
        if slow < max(threshold, floor) or np.mean(ratio >= threshold) < persist:
            continue
        k = int(np.sum((top[ok] == i) & (ratio >= 1.0 + (threshold - 1.0) / 2)))
        conf = max_confidence(k, int(ok.sum()), rows)
        if every_step:
            conf = max(conf, sign_confidence(int(np.sum(ratio >= threshold)), int(ok.sum())))
        if conf >= MIN_CONFIDENCE:
            out.append((i, slow, conf))
    return out


def _rank_ids(run: TraceRun) -> tuple[list[int], list[str]]:
    return ([r.meta["rank"] for r in run.ranks], [str(r.meta.get("host", "?")) for r in run.ranks])


SMALL_STAGE_SLOWDOWN = 1.3
"""Threshold for ranks of stages too small to compare within: their per-layer compute is
compared with every rank's (the same layer work on every stage), and stages differ by up to
~20% per layer on a shared host (cache, placement), so only larger slowdowns are named."""


def _stages(run: TraceRun) -> dict[int, list[int]]:
    roles: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(run.ranks):
        roles[r.meta.get("pp_rank", 0)].append(i)
    return dict(sorted(roles.items()))


def find_stragglers(run: TraceRun, times: StepTimes,
                    threshold: float = STRAGGLER_SLOWDOWN) -> list[Straggler]:
    """Ranks slower than the other ranks of their role (module doc).

    A role is a pipeline stage (the same work); ranks are compared by their least-disturbed
    work per step (``StepTimes.work_s``). Stages of at least ``MIN_PEERS`` ranks: each rank
    against the median of the others (``outliers``). Stages of two ranks: the two against
    each other (``pair_outliers``), the noise measured on the other pairs. Ranks alone in
    their stage are compared by their mean per-layer compute with every rank's (threshold
    ``SMALL_STAGE_SLOWDOWN``), when there are at least ``MIN_PEERS`` ranks with layer records.
    """
    ranks, hosts = _rank_ids(run)
    stages = _stages(run)
    work = times.work_s if times.work_s is not None else times.compute_s
    found: list[tuple[str, int, float, float]] = []
    for s, idx in stages.items():
        if len(idx) >= MIN_PEERS:
            found += [(f"stage {s}", idx[row], slow, conf)
                      for row, slow, conf in outliers(work[idx], threshold)]
    pairs = [idx for idx in stages.values() if len(idx) == 2]
    for k, idx in enumerate(pairs):
        others = [work[p] for m, p in enumerate(pairs) if m != k]
        if others or times.steady_s is None:
            named = pair_outliers(work[idx], others, threshold)
        else:
            named = lone_pair_outliers(times.steady_s[idx], threshold)
        for row, slow, conf in named:
            found.append((f"stage of two ranks ({ranks[idx[0]]}, {ranks[idx[1]]})", idx[row],
                          slow, conf))
    found += _lone_rank_stragglers(stages, times, threshold)
    out = [Straggler(rank=ranks[i], host=hosts[i], slowdown=slow, confidence=conf, role=role)
           for role, i, slow, conf in found]
    return sorted(out, key=lambda s: -s.slowdown)


def pair_outliers(values: np.ndarray, others: list[np.ndarray],
                  threshold: float) -> list[tuple[int, float, float]]:
    """The slower row of a pair (2 x steps, > 0) when it is slower than the other row.

    Its slowdown is the median over steps of the ratio of the two rows; its confidence is
    Wilcoxon's signed-rank test over steps of the log ratio (``signed_rank_confidence``: it
    weighs how much slower as well as how often, which the sign test of two rows cannot
    afford with ten steps: 8 of 9 slower steps is only 0.98). Named at
    ``threshold``, ``MIN_CONFIDENCE`` and ``NOISE_SIGMAS`` standard errors of the noise of
    the log ratios of ``others`` (the other pairs of the run, 2 x steps each; pooled, 1.4826
    MAD) when there are any.
    """
    n = values.shape[1]
    if values.shape[0] != 2 or n == 0 or (values <= 0).any():
        return []
    ratio = values[0] / values[1]
    row = 0 if np.median(ratio) >= 1.0 else 1
    r = ratio if row == 0 else 1.0 / ratio
    slow = float(np.median(r))
    floor = 1.0
    logs = [np.log(o[0] / o[1]) for o in others if (o > 0).all()]
    if logs:
        dev = np.concatenate(logs)
        sigma = 1.4826 * float(np.median(np.abs(dev - np.median(dev))))
        floor = math.exp(NOISE_SIGMAS * 1.2533 * sigma / math.sqrt(n))
    conf = signed_rank_confidence(np.log(r))
    if slow >= max(threshold, floor) and conf >= MIN_CONFIDENCE:
        return [(row, slow, conf)]
    return []


def lone_pair_outliers(values: np.ndarray, threshold: float) -> list[tuple[int, float, float]]:
    """The slower row of the run's only pair (2 x steps, > 0: a 2-rank job), when it is
    slower than the other row in a way no clean pair of this host has shown.

    No other pair measures the host's noise, and a plain profiler trace cannot say whether
    the host was shared, so the threshold is at least ``SHARED_HOST_SLOWDOWN`` (what other
    processes alone have made a rank for a whole run). ``values`` are ``steady_work`` (a
    one-step stall left out). Its slowdown is the median over steps of the ratio of the two
    rows; its confidence is one minus the exact two-sided p-value of the Mann-Whitney
    rank-sum test of the two rows' step values (``rank_sum_confidence``): the 2n values of
    two exchangeable ranks fall in any order with equal chance, so with five steps only a
    rank slower in every one of its steps than the other in any of its (2 of 252 orders for
    either rank) reaches ``MIN_CONFIDENCE``, where the paired tests over five steps cannot
    go past 1 - 1/32. A step that slows both ranks (a hiccup of the host) only mixes the
    orders, so it never makes a false alarm."""
    n = values.shape[1]
    if values.shape[0] != 2 or n == 0 or (values <= 0).any():
        return []
    ratio = values[0] / values[1]
    row = 0 if np.median(ratio) >= 1.0 else 1
    slow = float(np.median(ratio if row == 0 else 1.0 / ratio))
    conf = rank_sum_confidence(values[row], values[1 - row])
    if slow >= max(threshold, SHARED_HOST_SLOWDOWN) and conf >= MIN_CONFIDENCE:
        return [(row, slow, conf)]
    return []


def rank_sum_confidence(a: np.ndarray, b: np.ndarray) -> float:
    """One minus the exact two-sided p-value of the Mann-Whitney rank-sum test of ``a``
    against ``b`` (independent samples from one distribution under the null)."""
    from scipy.stats import mannwhitneyu

    return float(1.0 - mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)


def _lone_rank_stragglers(stages: dict[int, list[int]], times: StepTimes,
                          threshold: float) -> list[tuple[str, int, float, float]]:
    """Ranks alone in their stage, against every rank's mean per-layer compute."""
    alone = {idx[0] for idx in stages.values() if len(idx) == 1}
    with_layers = [i for i in range(times.layer_s.shape[0]) if (times.layer_s[i] > 0).all()]
    if not alone or len(with_layers) < MIN_PEERS:
        return []
    return [("per-layer compute, all stages", with_layers[row], slow, conf)
            for row, slow, conf in outliers(times.layer_s[with_layers],
                                            max(threshold, SMALL_STAGE_SLOWDOWN))
            if with_layers[row] in alone]


LINK_QUANTILE = 10.0
"""Percentile of a step's calls taken as the group's time of the step: a shared host only
ever adds time to a call, so a low percentile sees the link through the scheduling noise (on
seeds 1-2 of ``experiments/diagnose`` clean tensor-parallel pairs reach x1.6 of the others
at the 10th percentile, x2.3 at the 25th; a 5 ms link hides in at most 17% of a step's calls,
none in the median step)."""


def _exchanged(p2p: list[dict]) -> set[int]:
    """Indices (into ``p2p``, one rank's sends and receives sorted by start) of the records
    posted together with one of the other direction: a 1F1B exchange waits for both, so
    either one's end is the other's."""
    out = set()
    for k in range(len(p2p) - 1):
        a, b = p2p[k], p2p[k + 1]
        if a["op"] != b["op"] and b["start_s"] <= a["end_s"]:
            out |= {k, k + 1}
    return out


def _member_calls(run: TraceRun, skip: int) -> dict[tuple, dict[int, list[float | None]]]:
    """{(family, group, step): {member: [duration of each call, in posting order]}}.

    Collectives: family (kind, op, bytes), group the sorted ranks. Point-to-point: family
    (kind, "send forward|backward stage A to B", bytes), group (sender, receiver), the members'
    records the sender's sends and the receiver's receives; a record posted in an exchange
    (``_exchanged``) keeps its place as None."""
    per: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    kinds = {c["kind"] for r in run.ranks for c in r.collectives}
    skip_kinds = {"other"} if kinds & {"tp", "dp"} else set()
    stage = {r.meta["rank"]: r.meta.get("pp_rank", 0) for r in run.ranks}
    for rank in run.ranks:
        me = rank.meta["rank"]
        calls = sorted((c for c in rank.collectives if c["step"] >= skip
                        and not c.get("overlapped") and len(c["group"]) >= 2
                        and c["kind"] not in skip_kinds), key=lambda c: c["start_s"])
        p2p = [c for c in calls if c["op"] in ("send", "recv")]
        mixed = _exchanged(p2p)
        for k, c in enumerate(p2p):
            src, dst = c["group"][0], c["group"][-1]
            a, b = stage.get(src, 0), stage.get(dst, 0)
            way = "forward" if a < b else "backward"
            fam = (c["kind"], f"send {way} stage {a} to {b}", int(c["bytes"]))
            dur = None if k in mixed else c["end_s"] - c["start_s"]
            per[(fam, (src, dst), c["step"])][me].append(dur)
        for c in calls:
            if c["op"] not in ("send", "recv"):
                fam = (c["kind"], c["op"], int(c["bytes"]))
                per[(fam, tuple(sorted(c["group"])), c["step"])][me].append(
                    c["end_s"] - c["start_s"])
    return per


def _call_times(members: dict[int, list[float | None]]) -> list[float]:
    """Each call's time: the shortest of its members' durations (the member that arrived last
    waited least, so a late member does not make the call look slow, while a slow link delays
    every member); calls with a member's record left out (None) are dropped."""
    n = min(len(v) for v in members.values())
    out = []
    for k in range(n):
        durs = [v[k] for v in members.values()]
        if all(d is not None for d in durs):
            out.append(min(durs))
    return out


def _call_durations(run: TraceRun, skip: int) -> dict[tuple, dict[tuple, dict[int, float]]]:
    """{family: {group: {step: the LINK_QUANTILE percentile of the step's call times}}}."""
    out: dict[tuple, dict[tuple, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for (fam, group, step), members in _member_calls(run, skip).items():
        if len(members) < 2:
            continue
        times = _call_times(members)
        if times:
            out[fam][group][step] = float(np.percentile(times, LINK_QUANTILE))
    return out


def find_slow_links(run: TraceRun, skip: int = 1,
                    threshold: float = LINK_SLOWDOWN) -> list[SlowLink]:
    """Collective groups (or send/receive pairs) slower than the others of their family."""
    out = []
    for (kind, op, size), groups in _call_durations(run, skip).items():
        names = sorted(groups)
        steps = sorted({s for g in names for s in groups[g]})
        if len(names) < MIN_PEERS or not steps:
            continue
        values = np.array([[groups[g].get(s, np.nan) for s in steps] for g in names])
        keep = ~np.isnan(values).any(axis=0)
        v = values[:, keep]
        for row, slow, conf in outliers(v, threshold, leave_one_out=True,
                                        persist=LINK_PERSIST, every_step=True):
            excess = float(np.median(v[row] - np.median(np.delete(v, row, axis=0), axis=0)))
            out.append(SlowLink(ranks=list(names[row]), slowdown=slow, confidence=conf,
                                family=f"{kind} {op} {size} B", excess_s=excess))
    return _merge_links(out)


def _judged_families(run: TraceRun, skip: int) -> int:
    """How many families of calls have enough groups for ``find_slow_links``."""
    return sum(len(groups) >= MIN_PEERS for groups in _call_durations(run, skip).values())


def _merge_links(links: list[SlowLink]) -> list[SlowLink]:
    """One entry per group of ranks (its largest slowdown over the families it is slow in),
    the group adding the most time per call first: a slow link adds its delay to its own
    calls and part of it to the calls of groups that wait for a member (their ratio can be
    larger when their calls are short, as point-to-point transfers are)."""
    best: dict[tuple, SlowLink] = {}
    for sl in links:
        key = tuple(sl.ranks)
        if key not in best or sl.slowdown > best[key].slowdown:
            best[key] = sl
    return sorted(best.values(), key=lambda s: -s.excess_s)


def last_dp_skew(run: TraceRun, skip: int = 1) -> dict[str, Any]:
    """Spread of the start of each step's last data-parallel reduction over its DP group."""
    from netsim.diagnose.calibration import _clock_offsets

    offset = _clock_offsets(run)
    ranks, _ = _rank_ids(run)
    starts: dict[tuple, dict[int, float]] = defaultdict(dict)  # (step, group) -> rank -> start
    for i, rank in enumerate(run.ranks):
        last: dict[int, dict] = {}
        for c in rank.collectives:
            if c["kind"] == "dp" and c["op"] in ("reduce_scatter", "all_reduce") \
                    and c["step"] >= skip:
                if c["step"] not in last or c["start_s"] >= last[c["step"]]["start_s"]:
                    last[c["step"]] = c
        for step, c in last.items():
            starts[(step, tuple(c["group"]))][ranks[i]] = c["start_s"] - offset[i]
    skews, late = [], defaultdict(int)
    for (_step, _group), by_rank in starts.items():
        if len(by_rank) < 2:
            continue
        t = np.array(list(by_rank.values()))
        skews.append(float(t.max() - t.min()))
        late[max(by_rank, key=by_rank.get)] += 1
    if not skews:
        return {}
    worst = max(late, key=late.get)
    return {"median_s": float(np.median(skews)), "max_s": float(np.max(skews)),
            "samples": len(skews), "most_often_last": {"rank": worst, "times": late[worst]}}


def diagnose(run: TraceRun, skip: int = 1) -> Diagnosis:
    """Step times, stragglers, slow links and the last-DP-reduction skew of ``run``."""
    times = step_times(run, skip)
    ranks, hosts = _rank_ids(run)
    d = Diagnosis(times=times, ranks=ranks, hosts=hosts)
    for sl in find_slow_links(run, skip):
        echo = next((o for o in d.slow_links if set(o.ranks) & set(sl.ranks)), None)
        if echo is None:
            d.slow_links.append(sl)
        else:
            d.notes.append(f"group {sl.ranks} is x{sl.slowdown:.2f} slower ({sl.family}) but "
                           f"shares a rank with group {echo.ranks}, which adds more time per call: "
                           "taken as its echo")
    if not _judged_families(run, skip):
        d.notes.append(f"no family of synchronous calls has {MIN_PEERS} groups to compare (a "
                       "link is named against the other groups of its family): slow links "
                       "are not judged in this run")
    on_links = {r for sl in d.slow_links for r in sl.ranks}
    for s in find_stragglers(run, times):
        if s.rank in on_links:
            d.notes.append(f"rank {s.rank} computes x{s.slowdown:.2f} slower but is a member of "
                           "a slow group: attributed to the link")
        else:
            d.stragglers.append(s)
    _flag_shared_hosts(run, d)
    d.dp_skew = last_dp_skew(run, skip)
    alone = [s for s, idx in _stages(run).items() if len(idx) == 1]
    if alone:
        d.notes.append(f"stages {alone} have one rank: it is compared by per-layer compute "
                       f"with every rank, and named from x{SMALL_STAGE_SLOWDOWN:g} (stages "
                       "differ per layer on a shared host)")
    if len(times.steps) < 4:
        d.notes.append(f"only {len(times.steps)} steps after the warm-up: confidence is low; "
                       "trace at least 5 steps")
    return d


def host_sharing(run: TraceRun) -> list[dict[str, Any]]:
    """Per host with ``host`` records: its cores, the cores the run used, the cores other
    processes kept busy and whether that makes it shared (``SHARED_HOST_FRACTION``)."""
    from netsim.traces.records import hosts_from_records

    out = []
    for h in hosts_from_records(run.ranks):
        cores = h.get("host_cores")
        out.append({"host": h["host"], "host_cores": cores, "ranks": h["ranks"],
                    "run_cores": round(h["trainer_cores"], 3),
                    "other_cores": round(h["other_cores"], 3),
                    "shared": bool(cores) and h["other_cores"] >= SHARED_HOST_FRACTION * cores})
    return out


def _flag_shared_hosts(run: TraceRun, d: Diagnosis) -> None:
    """Fill ``d.host_sharing``; flag the stragglers on shared hosts and say why in a note."""
    d.host_sharing = host_sharing(run)
    shared = {h["host"]: h for h in d.host_sharing if h["shared"]}
    for h in shared.values():
        d.notes.append(f"host {h['host']} was shared: other processes kept "
                       f"{h['other_cores']:.2f} of its {h['host_cores']:g} cores busy (the run "
                       f"used {h['run_cores']:.2f}); they slow some ranks more than others")
    for s in d.stragglers:
        s.host_shared = s.host in shared
        if s.host_shared and s.slowdown < SHARED_HOST_SLOWDOWN:
            d.notes.append(f"rank {s.rank} (x{s.slowdown:.2f}) is on a shared host and below "
                           f"x{SHARED_HOST_SLOWDOWN:g}: other processes alone have made ranks "
                           "that much slower for a whole run; rerun on an idle host to confirm")


def plot_heatmap(d: Diagnosis, path) -> None:
    """Two panels, rank x step: compute and communication seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 0.35 * len(d.ranks) + 2.0))
    for ax, data, title in ((axes[0], d.times.compute_s, "compute"),
                            (axes[1], d.times.comm_s, "communication (blocking)")):
        im = ax.imshow(data * 1e3, aspect="auto", cmap="viridis", interpolation="nearest")
        ax.set_xticks(range(len(d.times.steps)), [str(s) for s in d.times.steps])
        ax.set_yticks(range(len(d.ranks)), [f"{r} ({h})" for r, h in zip(d.ranks, d.hosts,
                                                                        strict=True)])
        ax.set_xlabel("step")
        ax.set_ylabel("rank (host)")
        ax.set_title(f"{title} per rank and step")
        fig.colorbar(im, ax=ax, label="ms")
    for s in d.stragglers:
        axes[0].annotate("straggler", (len(d.times.steps) - 0.5, d.ranks.index(s.rank)),
                         color="red", fontsize=8, ha="right", va="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
def whatifs(run: TraceRun, stragglers: list[Straggler], at_scale: int | None = None,
            calibration=None, scale_job=None, gpu: str | None = None) -> list[dict[str, Any]]:
    """MFU before and after replacing each straggler (and all of them) with a healthy rank,
    predicted at the traced scale and at ``at_scale`` GPUs.

    The traced scale is priced calibrated on ``run`` itself unless ``calibration`` is given;
    the projection (``netsim.diagnose.atscale``) on a GPU profile (``gpu``, default the
    job's) as ``netsim predict --straggler`` prices it, of ``scale_job`` (default: the traced
    job) with its data parallelism scaled; a straggler's compute is ``slowdown`` times slower.
    """
    from netsim.diagnose.atscale import Projection, whatif_rows
    from netsim.diagnose.atscale import at_scale as project
    from netsim.diagnose.calibration import fit_calibration, job_from_trace

    if not stragglers or not run.meta.get("model"):
        return []  # a foreign job's profiler trace: no model to predict (its run.notes say so)
    cal = calibration or fit_calibration([run])
    traced = job_from_trace(run)
    rows = whatif_rows(Projection(traced, cal.hardware(), cal, "traced"), traced, stragglers)
    if at_scale:
        rows += whatif_rows(project(traced, at_scale, cal, scale_job, gpu), traced, stragglers)
    return rows
