"""``netsim diagnose`` on the real trainer (8 gloo ranks on this host) where the layout's
stages have two ranks (tp 2, pp 4: each stage's pair is compared with itself, the noise
measured on the other pairs) and, marked slow, at the smallest slowdown the issue asks for
(x1.2) and on a pipeline link. ``experiments/diagnose`` measures the hit rates over seeds."""

from __future__ import annotations

import subprocess

import pytest


def run_trainer(python, env, out, *args, steps=10, timeout=900):
    cmd = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8",
           "-m", "trainer", "--model", "tiny", "--micro-batches", "4", "--steps", str(steps),
           "--device", "cpu", "--backend", "gloo", "--trace-dir", str(out), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def diagnosed(d):
    from netsim.diagnose.diagnosis import diagnose
    from netsim.traces.records import read_trace_dir

    return diagnose(read_trace_dir(d))


TP2_PP4 = ("--tp", "2", "--pp", "4", "--dp", "1", "--global-batch", "4")
# A pair is judged by Wilcoxon's signed-rank test over the steps after the warm-up: over 9
# steps its confidence is at most 0.996 and one reversed step (a slice of the host's load
# landing on the clean rank) drops it under MIN_CONFIDENCE = 0.99; CI's 2-core host, shared,
# missed x1.2 stragglers so. 19 steps leave room for several reversed steps.
PAIR_STEPS = 20


def test_straggler_in_a_stage_of_two_ranks_is_named_alone(python, subprocess_env, tmp_path):
    d = diagnosed(run_trainer(python, subprocess_env, tmp_path / "t", *TP2_PP4,
                              "--inject-slow-rank", "5", "--slow-factor", "1.5",
                              steps=PAIR_STEPS))
    assert [s.rank for s in d.stragglers] == [5] and d.slow_links == []
    assert d.stragglers[0].role == "stage of two ranks (4, 5)"
    assert d.stragglers[0].slowdown > 1.3 and d.stragglers[0].confidence >= 0.99


@pytest.mark.slow
def test_two_stragglers_in_two_stages_are_both_named(python, subprocess_env, tmp_path):
    """A repeated ``--inject-slow-rank`` (issue #27 item 6) slows each rank named, each by
    its own factor, in separate processes: both are named, and no other rank."""
    d = diagnosed(run_trainer(python, subprocess_env, tmp_path / "t", *TP2_PP4,
                              "--inject-slow-rank", "2:1.5", "--inject-slow-rank", "7:1.8",
                              steps=PAIR_STEPS))
    assert sorted(s.rank for s in d.stragglers) == [2, 7] and d.slow_links == []
    by_rank = {s.rank: s.slowdown for s in d.stragglers}
    assert by_rank[7] > by_rank[2] > 1.3


@pytest.mark.slow
@pytest.mark.parametrize("rank", [2, 7])
def test_x1_2_straggler_in_a_stage_of_two_ranks(python, subprocess_env, tmp_path, rank):
    d = diagnosed(run_trainer(python, subprocess_env, tmp_path / "t", *TP2_PP4,
                              "--hidden", "128", "--seq", "64",
                              "--inject-slow-rank", str(rank), "--slow-factor", "1.2",
                              steps=PAIR_STEPS))
    assert [s.rank for s in d.stragglers] == [rank] and d.slow_links == []


# Study tier, not CI's: 8 ranks share 2 cores, and the named link depends on timing. It passes
# 6 of 6 on an idle machine; in a fresh .ci/run (load about 3) link0 named no link, and with
# two CPU hogs beside it one run missed the link and one named a second link (7, 3) too. Open
# defect (issue #30): the slow-link test of diagnose is not robust to a shared host.
@pytest.mark.study
@pytest.mark.parametrize("link", [(1, 5), (6, 2)])
def test_pipeline_link_is_named_in_its_direction(python, subprocess_env, tmp_path, link):
    d = diagnosed(run_trainer(python, subprocess_env, tmp_path / "t", "--tp", "1", "--pp",
                              "2", "--dp", "4", "--global-batch", "16", "--hidden", "128",
                              "--seq", "64", "--inject-slow-link", f"{link[0]}:{link[1]}",
                              "--link-delay-us", "5000"))
    assert [sl.ranks for sl in d.slow_links] == [list(link)] and d.stragglers == []


@pytest.mark.slow
def test_clean_stages_of_two_ranks_name_nobody(python, subprocess_env, tmp_path):
    d = diagnosed(run_trainer(python, subprocess_env, tmp_path / "t", *TP2_PP4,
                              "--hidden", "128", "--seq", "64", "--seed", "11"))
    assert d.stragglers == [] and d.slow_links == []
