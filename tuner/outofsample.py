"""Paired out-of-sample checks of recommend's flow-engine choices (QPs per connection, placement).

The flow engine's predicted iteration depends on the ECMP hash: each QP's UDP source port is
drawn from the seed, so a QP count or a placement that wins on the search's seed may only have
won that draw. A change is kept only when, paired seed by seed against the default (1 QP; the
scheduler's order):

* **in sample** (seeds ``seed .. seed + samples - 1``): its iteration is shorter with the stated
  confidence (:func:`tuner.acceptance.better`), and
* **held out** (seeds ``seed + 1000 ..``, which no search ran): no longer than the default's by
  more than :data:`ITERATION_MARGIN` (:func:`tuner.acceptance.no_worse`).

Otherwise the default stands and the report says why, with both intervals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tuner.acceptance import Interval, Metric, better, interval, log_ratios, no_worse

#: Iteration-time loss tolerated held out (relative): 0.5%.
ITERATION_MARGIN = 0.005
ITERATION = Metric("iteration", False, ITERATION_MARGIN)
SAMPLES = 5
HELD_OUT_SEED_OFFSET = 1000


@dataclass(frozen=True)
class PairedCheck:
    """A change against its default over paired seeds, in sample and held out."""

    what: str
    in_sample: Interval
    held_out: Interval
    seeds: tuple[int, ...]
    held_out_seeds: tuple[int, ...]
    versus: str = "iteration vs the default"

    @property
    def accepted(self) -> bool:
        return better(self.in_sample, ITERATION) and no_worse(self.held_out, ITERATION)

    @property
    def reason(self) -> str:
        verdict = "kept" if self.accepted else (
            "refused: not shorter with confidence in sample" if not better(self.in_sample, ITERATION)
            else f"refused: held out, longer than the default by more than {ITERATION_MARGIN:.1%}")
        return (f"{self.what} {verdict}; {self.versus}, paired over seeds: in sample "
                f"{_iv(self.in_sample)} ({len(self.seeds)} seeds), held out "
                f"{_iv(self.held_out)} ({len(self.held_out_seeds)} other seeds)")

    def as_dict(self) -> dict:
        return {"accepted": self.accepted, "reason": self.reason,
                **{f"in_sample_{k}": v for k, v in self.in_sample.as_dict("iteration").items()},
                **{f"held_out_{k}": v for k, v in self.held_out.as_dict("iteration").items()},
                "seeds": list(self.seeds), "held_out_seeds": list(self.held_out_seeds),
                "margin": ITERATION_MARGIN}


def _iv(iv: Interval) -> str:
    return f"x{iv.ratio:.4f} [{iv.ratio_lo:.4f}, {iv.ratio_hi:.4f}]"


def seeds_of(seed: int, samples: int = SAMPLES) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(in-sample seeds, held-out seeds)."""
    s = int(seed)
    return (tuple(range(s, s + samples)),
            tuple(range(s + HELD_OUT_SEED_OFFSET, s + HELD_OUT_SEED_OFFSET + samples)))


def paired_check(what: str, default_s: Callable[[int], float], change_s: Callable[[int], float],
                 seed: int = 0, samples: int = SAMPLES) -> PairedCheck:
    """Iteration times of the change and the default on the same seeds, in sample and held out."""
    return PairedCheck(what, *_intervals(default_s, change_s, seed, samples))


def check_qps(fabric, job, gpu_of_rank, qps: int, seed: int = 0, calibration=None,
              background=None, samples: int = SAMPLES,
              known_s: dict[tuple[int, int], float] | None = None) -> PairedCheck:
    """``qps`` QPs per connection against 1, on the same placement, paired over ECMP seeds.

    ``known_s``: iteration times already predicted by the same scorer on ``gpu_of_rank``,
    keyed by (QPs, seed) (the QP search's, on the search seed): not predicted again."""
    from tuner.placement import iteration_scorer

    known = dict(known_s or {})

    def at(q):
        def t(s):
            if (q, s) not in known:
                known[q, s] = iteration_scorer(fabric, job, calibration=calibration, qps=q,
                                               seed=s, background=background)(gpu_of_rank)
            return known[q, s]
        return t

    return paired_check(f"{qps} QPs per connection", at(1), at(qps), seed, samples)


def check_placement(fabric, job, chosen, default, qps: int = 1, seed: int = 0,
                    calibration=None, background=None, samples: int = SAMPLES) -> PairedCheck:
    """Placement *chosen* against *default* (gpu_of_rank arrays), paired over ECMP seeds."""
    from tuner.placement import iteration_scorer

    def on(gpus):
        return lambda s: iteration_scorer(fabric, job, calibration=calibration, qps=qps, seed=s,
                                          background=background)(gpus)

    return paired_check("topology-aware placement", on(default), on(chosen), seed, samples)


def held_out_sizes(row: dict) -> tuple[int, ...]:
    """Sizes inside a ``nccl_tuner.csv`` bucket other than the one searched: the geometric
    middles of its lower and upper halves (an open last bucket: 2x and 4x the size)."""
    size, lo, hi = int(row["size"]), max(1, int(row["min_bytes"])), int(row["max_bytes"])
    upper = int((size * hi) ** 0.5) if hi < 1 << 39 else 4 * size
    lower = int((size * lo) ** 0.5) if lo > 1 else size // 2
    return tuple(sorted({lower, upper} - {size}))


def check_collective_row(fabric, ranks, row: dict, qps: int = 1, seed: int = 0,
                         samples: int = SAMPLES, baseline=("ring", "simple")) -> PairedCheck:
    """A row's (algorithm, protocol) against *baseline* on the row's communicator, paired over
    seeds: at the searched size in sample, at other sizes of its bucket held out."""
    import numpy as np

    from netsim.collectives import run_collective
    from netsim.collectives.nccl import NcclConfig

    base = NcclConfig().with_(qps_per_connection=qps)

    def t(algo, proto, size, s):
        cfg = base.with_(algo=algo, proto=proto)
        return float(run_collective(fabric, "allreduce", list(ranks), size, cfg, seed=s).time_s)

    def ratios(size, seeds):
        return log_ratios([t(row["algo"], row["proto"], size, s) for s in seeds],
                          [t(*baseline, size, s) for s in seeds])

    ins, held = seeds_of(seed, samples)
    held_r = np.concatenate([ratios(z, held) for z in held_out_sizes(row)])
    return PairedCheck(f"{row['algo']}/{row['proto']} for {row['min_bytes']}-{row['max_bytes']} B",
                       interval(ratios(int(row["size"]), ins)), interval(held_r), ins, held,
                       f"time vs {'/'.join(baseline)} (held out: other sizes of the bucket)")


def check_retransmit(flaps, default, recommended, restart_s: float = 600.0, seed: int = 0,
                     samples: int = SAMPLES, draws: int = 1000) -> PairedCheck:
    """A (timeout, retry count) against the defaults: the mean stall per flap (a flap not
    survived costs a restart, ``restart_s``) over *draws* flaps drawn from the flap model per
    seed, both settings on the same draws; held out: other seeds' draws."""
    import numpy as np

    def stall(setting):
        def at(s: int) -> float:
            rng = np.random.default_rng([int(s), 26])
            if flaps.kind == "list":
                d = rng.choice(np.asarray(flaps.durations_s, dtype=float), draws)
            else:
                d = flaps.quantile(rng.uniform(size=draws))
            st = setting.stall_s(d)
            return float(np.mean(np.where(np.isfinite(st), st, restart_s)))
        return at

    return PairedCheck(f"NCCL_IB_TIMEOUT/RETRY_CNT {recommended.timeout}/{recommended.retry_cnt}",
                       *_intervals(stall(default), stall(recommended), seed, samples),
                       versus=f"mean stall per flap vs {default.timeout}/{default.retry_cnt} "
                              f"({draws} flaps drawn from the flap model per seed; a flap not "
                              f"survived costs a {restart_s:g} s restart)")


def _intervals(default_s, change_s, seed: int, samples: int):
    """(in-sample interval, held-out interval, seeds, held-out seeds) of paired log ratios."""
    ins, held = seeds_of(seed, samples)

    def ratios(seeds):
        return log_ratios([change_s(s) for s in seeds], [default_s(s) for s in seeds])

    return interval(ratios(ins)), interval(ratios(held)), ins, held
