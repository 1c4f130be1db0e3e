"""CC advice is a statistical decision made out of sample (issue #26, item 1).

The decision logic runs on a model of the packet engine whose effects are known (fast); the
issue's own case runs the real engine (slow).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tuner import ccreport, ccsearch
from tuner.ccrun import CcOutcome, HotSpot

POINT = HotSpot("collision", 8, 200.0, 400.0, 1_000_000, 9_000_000, "PP sends: 8 QPs on t0->a0")


def _model(effect):
    """A stand-in for the engine: seed-to-seed spread shared by all settings, and *effect*."""

    def run(hot, params, seed, cc="dcqcn"):
        rng = np.random.default_rng([seed, hot.senders, hot.flow_bytes, hot.start_spread_ps])
        g = 0.8 * (1 + 0.1 * rng.standard_normal()) * effect(hot, params, rng)
        return CcOutcome(dict(params), g, 1e6 / g, 1e3, 0.0, 0.0, 0.0, False, 1e6 / g)
    return run


def _fast_reset(on_incast: float):
    def effect(hot, params, rng):
        if params["rpg_time_reset_us"] != 50:
            return 1.0
        return 1.15 if hot.kind == "collision" else on_incast
    return effect


def _search(monkeypatch, effect, budget=16):
    monkeypatch.setattr(ccsearch, "run_once", _model(effect))
    return ccsearch.search_job_cc([POINT], ["PP sends"], budget=budget, seed=0, workers=0)


def test_a_setting_that_wins_in_sample_and_loses_held_out_is_refused(monkeypatch) -> None:
    # faster recovery helps the job's collisions and hurts an 8:1 incast the search never ran
    cc = _search(monkeypatch, _fast_reset(on_incast=0.85))
    assert not cc.changed and cc.best is cc.default
    assert cc.status.startswith("defaults stand") and "refused" in cc.status
    (r,) = cc.refused
    assert r.params["rpg_time_reset_us"] == 50 and r.verdict.startswith("refused held out")
    assert "incast" in r.verdict
    # in sample it was better with confidence on every scenario; held out worse on the incasts
    assert all(e["goodput_ratio_lo"] > 1 for e in cc.candidate_effects())
    held = {e["scenario"]: e for e in cc.held_out_effects()}
    assert all(e["goodput_ratio_hi"] < 0.98 for k, e in held.items() if "incast" in k)
    # shown as refused in the report and the JSON
    assert "refused setting" in ccreport.effect_text(cc)
    doc = json.loads(json.dumps(ccreport.details(cc)))
    assert doc["refused"][0]["params"]["rpg_time_reset_us"] == 50
    assert doc["chosen"] == doc["default"] and doc["held_out_effects"]


def test_a_setting_better_in_and_out_of_sample_is_chosen_with_intervals(monkeypatch) -> None:
    cc = _search(monkeypatch, _fast_reset(on_incast=1.05))
    assert cc.changed == {"rpg_time_reset_us": (300.0, 50)}
    assert cc.status.startswith("changed") and not cc.refused
    assert len(cc.seeds) >= 5 and set(cc.seeds).isdisjoint(cc.held_out_seeds)
    for e in cc.effects() + cc.held_out_effects():
        assert e["seeds"] >= 5 and e["goodput_ratio_lo"] <= e["goodput_ratio"] <= e["goodput_ratio_hi"]
        # the report's old keys stay
        assert {"goodput_default", "goodput", "p99_fct_us_default", "p99_fct_us",
                "pause_us_default", "pause_us"} <= set(e)
    names = {f.name for f in cc.held_out}
    assert any("8:1 incast" in n for n in names) and any("4:1 incast" in n for n in names)
    assert not names & {f.name for f in cc.scenarios}
    rows = []
    ccreport.settings_rows(cc, rows)
    row = next(r for r in rows if r.name == "roce_rp/rpg_time_reset")
    assert row.recommended == 50 and "confirmed no worse" in row.reason


def test_no_setting_better_with_confidence_keeps_the_defaults(monkeypatch) -> None:
    # a 1% mean gain inside a 5% run-to-run spread of its own: not evidence (one seed at a
    # 1% tolerance used to be)
    def small(hot, params, rng):
        if params["rpg_time_reset_us"] != 50:
            return 1.0
        own = np.random.default_rng([int(rng.integers(1 << 30)), 50])
        return 1.01 * (1 + 0.05 * own.standard_normal())
    cc = _search(monkeypatch, small)
    assert not cc.changed and not cc.refused and not cc.held_out
    assert "better than the defaults with 95% confidence" in cc.status


def test_clear_losers_stop_after_the_screening_seeds(monkeypatch) -> None:
    def bad_kmin(hot, params, rng):
        return 0.5 if params["ecn_kmin_bytes"] == 75_000 else 1.0
    cc = _search(monkeypatch, bad_kmin, budget=3)
    loser = next(s for s in cc.evaluated if s.params["ecn_kmin_bytes"] == 75_000)
    assert loser.verdict.startswith("clear loser")
    assert len(loser.samples[0]) == ccsearch.SCREEN_SAMPLES
    # the defaults run once per draw, shared by every candidate
    assert len(cc.default.samples[0]) == len(cc.seeds)


ISSUE_CASES = [  # issue #26: scenarios the old search never ran (200G NICs)
    ("8:1 incast 25 MB, 64 B reading", HotSpot("incast", 8, 200.0, 200.0, 25_000_000,
                                               9_000_000, "x", 64), "goodput"),
    ("4:1 incast 25 MB, bytes reading", HotSpot("incast", 4, 200.0, 200.0, 25_000_000,
                                                5_000_000, "x", 1), "goodput"),
    ("47:1 collision 4 MB", HotSpot("collision", 47, 200.0, 400.0, 4_000_000, 48_000_000,
                                    "x", 64), "pause"),
]


@pytest.fixture(scope="module")
def clos21_choice(tmp_path_factory) -> dict:
    """``netsim recommend`` on the issue's 2:1 CLOS at 200G (gpt3-13b, tp8 pp2 dp16): the
    chosen CC search point."""
    import subprocess
    import sys

    d = tmp_path_factory.mktemp("clos21")
    (d / "f.yaml").write_text("kind: clos3\nname: clos21\nservers: 32\nswitch_radix: 12\n"
                              "tor_down_up: [2, 1]\nservers_per_tor_group: 16\n")
    out = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "recommend", "--fabric", str(d / "f.yaml"),
         "--model", "gpt3-13b", "--gpu", "h100", "--tp", "8", "--pp", "2", "--dp", "16",
         "--global-batch", "256", "--micro-batch", "1", "-o", str(d / "out"), "--json"],
        capture_output=True, text=True, check=True).stdout
    return json.loads(out)["details"]["cc"]["chosen"]


@pytest.mark.slow
@pytest.mark.parametrize("name,hot,metric", ISSUE_CASES, ids=[c[0] for c in ISSUE_CASES])
def test_clos21_advice_is_no_worse_on_the_issues_held_out_cases(clos21_choice, name, hot,
                                                                metric) -> None:
    # the old search moved rpg_time_reset 300 -> 50: goodput 0.87 -> 0.73 on the 8:1 incast,
    # PFC pause x3 on the 47:1 collision; whatever is recommended now must not lose there
    from tuner.acceptance import interval, log_ratios, no_worse

    chosen, d = clos21_choice, ccsearch.vendor_defaults()
    seeds = range(1, 6)
    base = [ccsearch.run_once(hot, d, s) for s in seeds]
    ours = [ccsearch.run_once(hot, chosen, s) for s in seeds]
    m = next(m for m in ccsearch.METRICS if m.name == metric)
    get = {"goodput": lambda o: o.goodput, "pause": lambda o: o.pause_ns}[metric]
    iv = interval(log_ratios([get(o) for o in ours], [get(o) for o in base], m.offset))
    assert no_worse(iv, m) or iv.mean == 0.0, (name, iv)
