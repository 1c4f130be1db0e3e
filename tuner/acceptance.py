"""Paired comparisons over seeds: when recommend may call a change no worse, or better.

A candidate setting and the defaults run on the same samples (same seed, same drawn scenario),
so each sample gives one log ratio ``log(candidate / defaults)`` per metric and the seed-to-seed
spread of the scenario cancels in the pair. The mean log ratio gets a Student-t interval; its
one-sided bounds at :data:`CONFIDENCE` are the tests:

* **no worse** (non-inferiority): the bound on the bad side stays within the metric's margin,
  ``lo >= log(1 - margin)`` for a metric where higher is better, ``hi <= log(1 + margin)``
  where lower is better;
* **better**: the bound on the good side is past zero.

A setting is no worse on a family of scenarios only if it is no worse on every scenario and
every metric (an intersection-union test: each test at the stated confidence, no correction
needed). Reported intervals are two-sided at ``2 x CONFIDENCE - 1`` (90%), whose ends are the
one-sided bounds the tests use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: One-sided confidence of every test (the reported two-sided interval is 2c - 1).
CONFIDENCE = 0.95
#: Fewest paired samples a decision is made on; fewer and the defaults stand.
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Metric:
    """A metric a change is judged on: its direction and the loss tolerated (relative)."""

    name: str
    higher_is_better: bool
    margin: float
    #: added to both sides before the ratio (a metric that can be zero: PFC pause time)
    offset: float = 0.0


@dataclass(frozen=True)
class Interval:
    """Mean log ratio of paired samples with its one-sided bounds at :data:`CONFIDENCE`."""

    n: int
    mean: float
    lo: float
    hi: float

    @property
    def ratio(self) -> float:
        return math.exp(self.mean)

    @property
    def ratio_lo(self) -> float:
        return math.exp(self.lo)

    @property
    def ratio_hi(self) -> float:
        return math.exp(self.hi)

    def as_dict(self, prefix: str) -> dict:
        """``{prefix}_ratio``, ``_ratio_lo`` and ``_ratio_hi`` (candidate / defaults)."""
        return {f"{prefix}_ratio": self.ratio, f"{prefix}_ratio_lo": self.ratio_lo,
                f"{prefix}_ratio_hi": self.ratio_hi}


def log_ratios(candidate, defaults, offset: float = 0.0) -> np.ndarray:
    """``log((c + offset) / (d + offset))`` per pair; an infinite metric gives +-inf."""
    c = np.asarray(candidate, dtype=float) + offset
    d = np.asarray(defaults, dtype=float) + offset
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(c) - np.log(d)
    return np.where(np.isnan(r), 0.0, r)  # inf / inf: both failed alike


def interval(x, confidence: float = CONFIDENCE) -> Interval:
    """Student-t bounds of the mean of *x* (paired log ratios), one-sided at *confidence*."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    n = int(x.size)
    if n == 0:
        return Interval(0, 0.0, -math.inf, math.inf)
    mean = float(np.mean(x))
    if n < 2 or not np.all(np.isfinite(x)):
        return Interval(n, mean, -math.inf if n < 2 else min(mean, float(np.min(x))),
                        math.inf if n < 2 else max(mean, float(np.max(x))))
    half = float(stats.t.ppf(confidence, n - 1)) * float(np.std(x, ddof=1)) / math.sqrt(n)
    return Interval(n, mean, mean - half, mean + half)


def no_worse(iv: Interval, metric: Metric) -> bool:
    """Non-inferiority: the bad-side bound within the metric's margin (and enough samples)."""
    if iv.n < MIN_SAMPLES:
        return False
    if metric.higher_is_better:
        return iv.lo >= math.log1p(-metric.margin)
    return iv.hi <= math.log1p(metric.margin)


def better(iv: Interval, metric: Metric) -> bool:
    """Superiority: the good-side bound past zero (and enough samples)."""
    if iv.n < MIN_SAMPLES:
        return False
    return iv.lo > 0.0 if metric.higher_is_better else iv.hi < 0.0


def clearly_worse(x, metric: Metric) -> bool:
    """Early stop: every sample so far is worse than the margin (no interval needed to drop it)."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return False
    if metric.higher_is_better:
        return bool(np.all(x < math.log1p(-metric.margin)))
    return bool(np.all(x > math.log1p(metric.margin)))
