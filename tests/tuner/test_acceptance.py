"""The paired tests recommend decides by, checked against scipy's own one-sample t-test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tuner.acceptance import (
    CONFIDENCE,
    MIN_SAMPLES,
    Metric,
    better,
    clearly_worse,
    interval,
    log_ratios,
    no_worse,
)

GOODPUT = Metric("goodput", True, 0.02)
FCT = Metric("p99_fct", False, 0.02)


def test_interval_is_the_student_t_interval() -> None:
    x = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    iv = interval(x)
    lo, hi = stats.t.interval(2 * CONFIDENCE - 1, df=4, loc=0.3, scale=stats.sem(x))
    assert (iv.n, iv.mean) == (5, pytest.approx(0.3))
    assert (iv.lo, iv.hi) == (pytest.approx(lo), pytest.approx(hi))
    # by hand: t(0.95, 4) = 2.1318, s = 0.1581, half width 2.1318 x 0.1581 / sqrt(5) = 0.1508
    assert iv.hi - iv.mean == pytest.approx(0.1508, abs=1e-4)


@pytest.mark.parametrize("seed", range(20))
def test_no_worse_is_scipys_one_sided_test_against_the_margin(seed) -> None:
    # non-inferiority at the margin m is the one-sided t-test of mean > log(1 - m)
    rng = np.random.default_rng(seed)
    x = rng.normal(rng.uniform(-0.05, 0.05), rng.uniform(0.005, 0.05), 6)
    p_good = stats.ttest_1samp(x, math.log(0.98), alternative="greater").pvalue
    assert no_worse(interval(x), GOODPUT) == (p_good < 1 - CONFIDENCE)
    p_fct = stats.ttest_1samp(x, math.log(1.02), alternative="less").pvalue
    assert no_worse(interval(x), FCT) == (p_fct < 1 - CONFIDENCE)
    p_better = stats.ttest_1samp(x, 0.0, alternative="greater").pvalue
    assert better(interval(x), GOODPUT) == (p_better < 1 - CONFIDENCE)


def test_too_few_samples_decide_nothing() -> None:
    x = np.full(MIN_SAMPLES - 1, 0.5)      # four seeds all much better
    assert not no_worse(interval(x), GOODPUT) and not better(interval(x), GOODPUT)
    assert no_worse(interval(np.full(MIN_SAMPLES, 0.5)), GOODPUT)


def test_identical_runs_are_a_tie_not_an_improvement() -> None:
    r = log_ratios([3.0, 0.0, 2.0, 5.0, 1.0], [3.0, 0.0, 2.0, 5.0, 1.0], offset=1e3)
    assert np.all(r == 0)
    assert no_worse(interval(r), FCT) and not better(interval(r), FCT)


def test_a_failed_run_is_never_no_worse() -> None:
    r = log_ratios([0.0, 0.9, 0.9, 0.9, 0.9], [0.9] * 5)    # goodput 0: the run failed
    assert np.isneginf(r[0]) and not no_worse(interval(r), GOODPUT)


def test_clear_losers_are_worse_than_the_margin_on_every_seed() -> None:
    assert clearly_worse(np.log([0.9, 0.95]), GOODPUT)
    assert not clearly_worse(np.log([0.9, 1.0]), GOODPUT)
    assert clearly_worse(np.log([1.1, 1.05]), FCT) and not clearly_worse([], FCT)
