"""QPs per connection and placement: kept only when shorter in sample and no longer held out."""

from __future__ import annotations

import math

import pytest

from tuner.outofsample import ITERATION_MARGIN, check_qps, paired_check, seeds_of


def test_a_win_on_the_search_seed_alone_is_refused() -> None:
    # the old QP search ranked on one ECMP seed: a count that wins that draw and loses the
    # others was advice; now it is not shorter with confidence
    c = paired_check("8 QPs", lambda s: 1.0, lambda s: 0.97 if s == 0 else 1.004)
    assert not c.accepted and "not shorter with confidence" in c.reason


def test_a_change_that_wins_in_sample_and_loses_held_out_is_refused() -> None:
    ins, held = seeds_of(0)
    assert set(ins).isdisjoint(held) and len(ins) == len(held) == 5
    c = paired_check("topo", lambda s: 1.0,
                     lambda s: (0.98 + 0.001 * (s % 3)) if s in ins else 1.0 + 2 * ITERATION_MARGIN)
    assert not c.accepted and "held out" in c.reason
    assert c.in_sample.ratio_hi < 1 and c.held_out.ratio_lo > 1 + ITERATION_MARGIN


def test_a_consistent_gain_is_kept_with_both_intervals() -> None:
    c = paired_check("8 QPs", lambda s: 1.0 + 0.01 * math.sin(s), lambda s: 0.99 + 0.01 * math.sin(s))
    assert c.accepted and c.reason.startswith("8 QPs kept")
    d = c.as_dict()
    assert d["in_sample_iteration_ratio_lo"] <= d["in_sample_iteration_ratio"] <= d[
        "in_sample_iteration_ratio_hi"] < 1
    assert d["held_out_seeds"] == list(seeds_of(0)[1])


def test_check_qps_pairs_the_flow_engines_own_predictions(small_clos, small_job,
                                                         striped_free) -> None:
    import numpy as np

    from tuner.placement import iteration_scorer, place

    gpus = place(small_clos, small_job, "linear", striped_free).gpu_of_rank
    c = check_qps(small_clos, small_job, gpus, 8, seed=0)
    logs = [math.log(iteration_scorer(small_clos, small_job, qps=8, seed=s)(gpus)
                     / iteration_scorer(small_clos, small_job, qps=1, seed=s)(gpus))
            for s in c.seeds]
    assert c.in_sample.n == 5 and c.in_sample.mean == pytest.approx(float(np.mean(logs)))
    assert c.in_sample.lo <= c.in_sample.mean <= c.in_sample.hi


def test_held_out_sizes_stay_inside_the_bucket_and_off_the_searched_size() -> None:
    from tuner.outofsample import held_out_sizes

    row = {"size": 1 << 20, "min_bytes": 524288, "max_bytes": 2097151}
    sizes = held_out_sizes(row)
    assert len(sizes) == 2 and all(524288 <= z <= 2097151 and z != 1 << 20 for z in sizes)
    last = {"size": 1 << 30, "min_bytes": 1 << 29, "max_bytes": 1 << 40}
    assert max(held_out_sizes(last)) == 4 << 30


def test_a_tuner_row_is_written_only_when_it_beats_ring_simple_out_of_sample(small_clos) -> None:
    from tuner.outofsample import check_collective_row

    ranks = list(range(0, len(small_clos.gpus), 8))
    bucket = {"min_bytes": 0, "max_bytes": 131071, "size": 65536}
    # LL on a small all-reduce: latency-bound, the protocol built for it wins everywhere
    ll = check_collective_row(small_clos, ranks, {**bucket, "algo": "ring", "proto": "ll"})
    assert ll.accepted and ll.in_sample.ratio_hi < 1 and ll.held_out.ratio_hi < 1
    # a row that only restates the baseline is no evidence: NCCL's own tuner keeps the bucket
    same = check_collective_row(small_clos, ranks, {**bucket, "algo": "ring", "proto": "simple"})
    assert not same.accepted and "not shorter with confidence" in same.reason


def test_retransmit_kept_only_when_it_shortens_the_stall_per_flap() -> None:
    from tuner import retransmit
    from tuner.outofsample import check_retransmit

    # flaps of at most 5 s: 18/7 (T = 1.07 s) recovers sooner after each flap than 20/7
    # (T = 4.3 s) and survives them all
    fl = retransmit.parse_flaps("max=5s")
    rt = retransmit.recommend_retransmit(fl)
    ok = check_retransmit(fl, rt.default.setting, rt.recommended.setting)
    assert ok.accepted and ok.held_out.ratio_hi < 1
    # lognormal flaps: the search trades survival for faster dead-link detection (20/4); the
    # restarts it costs lengthen the mean stall, so it is not kept
    fl = retransmit.parse_flaps("lognormal:median=1s,p99=6s")
    rt = retransmit.recommend_retransmit(fl)
    assert (rt.recommended.setting.timeout, rt.recommended.setting.retry_cnt) != (20, 7)
    bad = check_retransmit(fl, rt.default.setting, rt.recommended.setting)
    assert not bad.accepted and bad.in_sample.ratio > 1


def test_recommend_keeps_the_retransmit_defaults_when_the_check_refuses(small_clos,
                                                                         small_job) -> None:
    from tuner.recommend import RecommendOptions, recommend

    rec = recommend(small_clos, small_job, RecommendOptions(
        budget=1, place_iterations=100, flaps="lognormal:median=1s,p99=6s"))
    assert (rec.env["NCCL_IB_TIMEOUT"], rec.env["NCCL_IB_RETRY_CNT"]) == ("20", "7")
    check = rec.details["retransmit_check"]
    assert check and not check["accepted"]
    assert rec.env_reasons["NCCL_IB_TIMEOUT"].startswith("defaults kept")


def test_check_qps_reuses_known_scores_with_the_same_answer(small_clos, small_job, striped_free,
                                                            monkeypatch) -> None:
    import tuner.placement as placement

    gpus = placement.place(small_clos, small_job, "linear", striped_free).gpu_of_rank
    plain = check_qps(small_clos, small_job, gpus, 8, seed=0)
    known = {(q, 0): placement.iteration_scorer(small_clos, small_job, qps=q, seed=0)(gpus)
             for q in (1, 8)}
    calls = []
    real = placement.iteration_scorer
    monkeypatch.setattr(placement, "iteration_scorer",
                        lambda *a, **k: calls.append((k["qps"], k["seed"])) or real(*a, **k))
    reused = check_qps(small_clos, small_job, gpus, 8, seed=0, known_s=known)
    assert reused == plain
    assert len(calls) == 2 * 2 * 5 - 2 and not set(calls) & set(known)
