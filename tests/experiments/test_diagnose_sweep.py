"""experiments/diagnose: the sweep's scenarios (layouts, faults, expected answers) and its
result table, without running the trainer."""

from __future__ import annotations

from experiments.diagnose.run import Scenario, markdown, scenarios, summary


def test_full_sweep_covers_the_layouts_and_faults():
    scs = scenarios(True, (1, 2))
    layouts = {(s.tp, s.pp, s.dp) for s in scs}
    assert layouts == {(1, 1, 8), (2, 1, 4), (1, 2, 4), (2, 2, 2), (2, 4, 1)}
    assert not any(s.fault == "link" for s in scs if (s.tp, s.pp) == (1, 1))  # dp8: no family
    assert sum(s.fault == "clean" for s in scs) == 10
    assert {s.factor for s in scs if s.fault == "straggler" and s.pp == 4} == {1.2, 1.5}
    assert len(scs) == 30


def test_expected_answers_keep_the_pipeline_direction():
    fwd, bwd = Scenario(1, 2, 4, 1, "link", delay_us=5000), Scenario(1, 2, 4, 2, "link",
                                                                        delay_us=5000)
    assert fwd.expected() == ([], [[1, 5]]) and bwd.expected() == ([], [[6, 2]])
    assert Scenario(2, 1, 4, 3, "link", delay_us=5000).expected() == ([], [[0, 1]])
    assert Scenario(2, 2, 2, 1, "straggler", factor=1.2).expected() == ([4], [])
    assert "--inject-slow-link" in fwd.trainer_args() and "1:5" in fwd.trainer_args()


def test_markdown_table():
    row = {"layout": "tp1-pp2-dp4", "seed": 2, "factor": 1.0, "delay_us": 5000,
           "injected_stragglers": [], "named_stragglers": [5], "slowdowns": [1.18],
           "injected_links": [[6, 2]], "named_links": [[6, 2]], "link_slowdowns": [74.1],
           "correct": False, "other_cores": 0.64}
    lines = markdown([row, dict(row, other_cores=None, correct="True")]).splitlines()
    assert lines[2] == ("| tp1-pp2-dp4 | 2 | 0.64 | link [6, 2] +5 ms | rank 5 x1.18, link "
                        "[6, 2] x74.1 | no |")
    assert lines[3].startswith("| tp1-pp2-dp4 | 2 | ? |") and lines[3].endswith("| yes |")


def test_summary_counts_each_class():
    def row(layout, fault, factor, correct):
        return {"layout": layout, "fault": fault, "factor": factor, "correct": correct}

    rows = [row("tp2-pp4-dp1", "straggler", 1.2, True), row("tp2-pp4-dp1", "straggler", 1.2,
                                                            False),
            row("tp1-pp1-dp8", "straggler", 1.2, "True"), row("tp2-pp1-dp4", "clean", 1.0, True),
            row("tp2-pp1-dp4", "link", 1.0, False)]
    assert summary(rows) == {"x1.2 straggler, stages of two ranks, named alone": (1, 2),
                             "x1.2 straggler, stages of 4 or 8 ranks, named alone": (1, 1),
                             "clean: nobody named": (1, 1), "5 ms link named alone": (0, 1)}


def test_runs_are_sweep_points_that_resume(tmp_path, monkeypatch):
    from experiments.diagnose import run

    ran = []
    monkeypatch.setattr(run, "run_trainer", lambda sc, d, background=0: ran.append(sc.name))
    monkeypatch.setattr(run, "judge", lambda sc, d: {"scenario": sc.name, "correct": True})
    scs = scenarios(False)[:3]
    rows = run.run_sweep(tmp_path, scs, workers=0)
    assert [r["scenario"] for r in rows] == [s.name for s in scs] and len(ran) == 3
    assert (tmp_path / "sweep" / "results.jsonl").exists()
    assert run.run_sweep(tmp_path, scs, workers=0) == rows and len(ran) == 3  # resumed
