"""Settings search and the recommendation run: QPs, CC vs vendor defaults, files, report."""

from __future__ import annotations

import configparser
import json

import pytest
import yaml

from tuner import render
from tuner.ccsearch import evaluate_cc, job_scenarios, search_job_cc
from tuner.placement import place
from tuner.search import search_qps


@pytest.fixture(scope="module")
def linear_gpus(small_clos, small_job, striped_free):
    return place(small_clos, small_job, "linear", striped_free).gpu_of_rank


@pytest.fixture(scope="module")
def cc_choice(small_clos, small_job, linear_gpus):
    scenarios, found = job_scenarios(small_clos, small_job, linear_gpus, qps=1)
    return search_job_cc(scenarios, found, budget=4, seed=0, workers=0)


def test_cc_search_runs_on_the_jobs_own_congestion_points(cc_choice) -> None:
    # the striped placement collides: the job's own DP/PP traffic offers a link > capacity
    from tuner.acceptance import interval, no_worse
    from tuner.ccsearch import BYTE_COUNTER_READINGS, METRICS, ratios, run_once
    assert cc_choice.scenarios and all("offered" in f.name for f in cc_choice.scenarios)
    # each congestion point once per reading of the byte counter's unit (64 B and bytes)
    units = [f.base.byte_unit_bytes for f in cc_choice.scenarios]
    assert sorted(set(units)) == sorted(BYTE_COUNTER_READINGS)
    assert all(units.count(u) == len(units) // len(BYTE_COUNTER_READINGS) for u in set(units))
    d, b = cc_choice.default, cc_choice.best
    assert len(b.outcomes) == len(d.outcomes) == len(cc_choice.scenarios)
    assert all(len(x) == len(cc_choice.seeds) >= 5 for x in d.samples)
    # accepted = no worse on every scenario and metric by the paired interval over the seeds
    for s in cc_choice.evaluated:
        if len(s.samples[0]) == len(cc_choice.seeds) and s is not d:
            assert s.accepted == all(no_worse(interval(x), m) for m in METRICS
                                     for x in ratios(s, d, m))
    # the reported outcome is the packet engine's: re-running a draw reproduces it
    fam, seed = cc_choice.scenarios[0], cc_choice.seeds[0]
    again = run_once(fam.sample(seed), b.params, seed)
    assert again.p99_fct_ns == pytest.approx(b.samples[0][0].p99_fct_ns)
    assert len(cc_choice.effects()) == len(cc_choice.scenarios)


def test_no_congestion_point_keeps_the_defaults_and_says_why() -> None:
    from tuner import ccreport
    from tuner.render import Setting

    cc = search_job_cc([], ["DP rings: 2 QPs on t0->a0 (400G tor-agg), offered 0.50x its capacity"])
    assert cc.best.params == cc.default.params and not cc.changed
    assert cc.status.startswith("defaults stand")
    rows: list[Setting] = []
    rp, np_, ecn = ccreport.settings_rows(cc, rows)
    assert rows and all("no congestion point" in r.reason and "0.50x" in r.reason for r in rows)
    assert all(str(r.default) == str(r.recommended) for r in rows)


@pytest.fixture(scope="module")
def reco(small_clos, small_job, striped_free, tmp_path_factory):
    from tuner.recommend import RecommendOptions, recommend, write_outputs

    rec = recommend(small_clos, small_job, RecommendOptions(budget=4, free_servers=striped_free,
                                                            place_iterations=500))
    out = tmp_path_factory.mktemp("reco")
    return rec, out, write_outputs(rec, out)


def test_every_file_parses(reco) -> None:
    rec, out, paths = reco
    assert {p.name for p in paths} == {"nccl.env", "nccl_tuner.csv", "nic_dcqcn.conf",
                                       "switch_qos.yaml", "placement.json", "report.md",
                                       "netsim_tuner.c", "manifest.json"}
    env = render.parse_env_file((out / "nccl.env").read_text())
    assert {"NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
            "NCCL_IB_TC"} <= set(env)
    assert env == rec.env
    assert _sourced_by_bash(out / "nccl.env", env) == env
    csv_text = (out / "nccl_tuner.csv").read_text()
    rows = render.parse_tuner_csv(csv_text)
    assert rows
    assert all(a.max_bytes < b.min_bytes for a, b in zip(rows, rows[1:], strict=False))  # in order
    # a row for exactly the buckets whose choice held out of sample (NCCL keeps the others)
    kept = [(r["min_bytes"], r["max_bytes"]) for r in rec.details["collectives"]
            if r["check"]["accepted"]]
    assert [(r.min_bytes, r.max_bytes) for r in rows] == kept
    # the plugin's column order as its header comment, '#' in column 0 (plugin.c skips
    # line[0] == '#'); every row leaves the channel count to NCCL (-1): the suite's plugin
    # touches *nChannels only for a row with channels > 0 (tests/tuner/test_tuner_plugin.py)
    header = [ln for ln in csv_text.splitlines() if ln.startswith("# collective")]
    assert header and header[0][2:].split(",") == list(render.TUNER_CSV_COLUMNS)
    assert all(r.channels == -1 and r.n_ranks == rec.job["dp"] for r in rows)
    assert all(len(ln) < render.TUNER_MAX_LINE - 1 for ln in csv_text.splitlines())
    ini = configparser.ConfigParser()
    ini.read_string((out / "nic_dcqcn.conf").read_text())
    assert "rpg_time_reset" in ini["roce_rp"] and "min_time_between_cnps" in ini["roce_np"]
    qos = yaml.safe_load((out / "switch_qos.yaml").read_text())
    assert qos["ecn"]["kmin_bytes"] <= qos["ecn"]["kmax_bytes"]
    placement = json.loads((out / "placement.json").read_text())
    assert len({r["gpu"] for r in placement["ranks"]}) == len(placement["ranks"])


def _sourced_by_bash(path, names) -> dict:
    """What ``. nccl.env`` exports in a real shell (skipped where there is no bash)."""
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to source nccl.env with")
    script = f". {path} && " + " && ".join(f'printf "%s\\0" "${n}"' for n in names)
    out = subprocess.run([bash, "--norc", "--noprofile", "-euc", script], check=True,
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout
    return dict(zip(names, out.split("\0")[:-1], strict=True))


def test_report_effects_are_simulator_outputs(reco, small_clos, small_job, striped_free) -> None:
    from tuner.placement import iteration_scorer

    rec, out, _ = reco
    report = (out / "report.md").read_text()
    for s in rec.settings:
        assert f"| {s.name} |" in report
    t_def = iteration_scorer(small_clos, small_job, qps=1)(
        place(small_clos, small_job, "linear", striped_free).gpu_of_rank)
    assert t_def == pytest.approx(rec.iteration_default_s)
    assert f"{rec.iteration_default_s:.4f} s" in report
    assert f"{rec.iteration_recommended_s:.4f} s" in report
    # the recommended time is predict() on the written placement with the recommended QPs
    import numpy as np

    pos = {g: i for i, g in enumerate(small_clos.gpus)}
    gpus = np.array([pos[r["gpu"]] for r in sorted(rec.ranks, key=lambda r: r["rank"])])
    qps = int(rec.env["NCCL_IB_QPS_PER_CONNECTION"])
    assert iteration_scorer(small_clos, small_job, qps=qps)(gpus) == pytest.approx(
        rec.iteration_recommended_s)
    cc = rec.details["cc"]
    assert cc["status"] in report
    for e in cc["effects"]:  # every scenario's effect is in the report, from the packet runs
        assert f"goodput {e['goodput_default']:.3f}" in report
    for e in cc["candidate_effects"] + cc["held_out_effects"]:  # with the paired interval
        assert (f"goodput {e['goodput_default']:.3f} -> {e['goodput']:.3f} "
                f"(x{e['goodput_ratio']:.3f} [{e['goodput_ratio_lo']:.3f}") in report
    # every CC value written to the files has a row that says why
    rows = {s.name: s for s in rec.settings}
    for name in ("roce_rp/rpg_time_reset", "roce_np/min_time_between_cnps", "ECN Kmin (bytes)",
                 "ECN Pmax"):
        assert rows[name].reason and rows[name].effect


def test_report_qp_and_retransmit_rows_are_simulator_outputs(reco, small_clos, small_job) -> None:
    from tuner.retransmit import RetransmitSetting, evaluate, parse_flaps

    rec, out, _ = reco
    rows = {s.name: s for s in rec.settings}
    # QPs: predict's iteration time on the written placement per QP count, recomputed
    pos = {g: i for i, g in enumerate(small_clos.gpus)}
    import numpy as np

    gpus = np.array([pos[r["gpu"]] for r in sorted(rec.ranks, key=lambda r: r["rank"])])
    qp = search_qps(small_clos, small_job, gpus)
    row = rows["NCCL_IB_QPS_PER_CONNECTION"]
    # more than 1 QP only with a passing paired check over seeds (tuner.outofsample)
    check = rec.details["qps"]["check"]
    if qp.qps != 1:
        from tuner.outofsample import check_qps
        assert check == check_qps(small_clos, small_job, gpus, qp.qps).as_dict()
    chosen = qp.qps if qp.qps == 1 or check["accepted"] else 1
    assert row.recommended == chosen == int(rec.env["NCCL_IB_QPS_PER_CONNECTION"])
    assert row.effect == (f"predicted iteration {qp.iteration_s[1]:.4f} -> "
                          f"{qp.iteration_s[chosen]:.4f} s")
    assert rec.iteration_recommended_s == qp.iteration_s[chosen] <= qp.iteration_s[1]
    # retransmit: the survival model of the written timeout / retry count
    env = rec.env
    s = RetransmitSetting(int(env["NCCL_IB_TIMEOUT"]), int(env["NCCL_IB_RETRY_CNT"]))
    r = evaluate(s, parse_flaps(rec.details["retransmit"]["flaps"]))
    assert f"job {rec.details['retransmit']['default']['job_survival']:.3f} -> " \
           f"{r.job_survival:.3f}" in rows["NCCL_IB_TIMEOUT"].effect
    assert s.survivable_flap_s > rec.details["retransmit"]["design_flap_s"]


def test_a_setting_must_hold_under_both_readings_of_the_byte_counter() -> None:
    # the unit of rpg_byte_reset is disputed (64 B vs bytes): the same hot spot behaves
    # differently under the two readings, and acceptance needs both
    import dataclasses

    from tuner.ccsearch import CcSetting, HotSpot, judge, vendor_defaults

    hot = HotSpot("collision", 2, 400.0, 400.0, 2_000_000, 3_000_000, "test")
    d = vendor_defaults()
    o64, o1 = (evaluate_cc(dataclasses.replace(hot, byte_unit_bytes=u), d, seeds=(0,))
               for u in (64, 1))
    assert o64.p99_fct_ns != o1.p99_fct_ns   # the reading reaches the engine
    choice = search_job_cc([hot], ["test"], budget=0, seed=0, workers=0)
    assert [f.base.byte_unit_bytes for f in choice.scenarios] == [64, 1]
    run = choice.scenarios[0].sample(0)
    assert choice.default.samples[0][0].p99_fct_ns == pytest.approx(
        evaluate_cc(run, d, seeds=(0,)).p99_fct_ns)
    # a setting as good as the defaults under one reading and worse under the other is refused
    same, worse = choice.default.samples
    worse = [dataclasses.replace(o, goodput=o.goodput * 0.9, p99_fct_ns=o.p99_fct_ns * 1.2)
             for o in worse]
    s = CcSetting(d, [], samples=[list(same), worse])
    judge(s, choice.default)
    assert not s.accepted


def test_no_placement_gain_keeps_the_schedulers_order(small_clos, tmp_path) -> None:
    # issue 26: the text said "topo gives no gain" while the table recommended topo. Two
    # servers under one ToR set: the scheduler's order is already ToR-aligned, so topo gains
    # nothing, and the row, placement.json and the placement the later steps use say linear
    import json

    from netsim.workload import JobSpec
    from tuner.placement import place as place_job
    from tuner.recommend import RecommendOptions, recommend, write_outputs

    job = JobSpec(model="gpt3-1.3b", tp=8, pp=1, dp=2, global_batch=16)
    rec = recommend(small_clos, job, RecommendOptions(budget=2, place_iterations=100))
    row = next(s for s in rec.settings if s.name == "rank placement")
    assert "topo gives no gain over linear" in row.effect
    assert "recommended: linear, the scheduler's order" in row.effect
    assert row.recommended == row.default == "linear (scheduler order)"
    write_outputs(rec, tmp_path)
    doc = json.loads((tmp_path / "placement.json").read_text())
    assert doc["strategy"] == rec.placement_strategy == "linear"
    linear = place_job(small_clos, job, "linear").gpu_of_rank
    pos = {g: i for i, g in enumerate(small_clos.gpus)}
    assert [pos[r["gpu"]] for r in sorted(rec.ranks, key=lambda r: r["rank"])] == linear.tolist()


def test_topo_is_applied_only_with_a_passing_paired_check(small_clos, small_job, striped_free,
                                                          monkeypatch) -> None:
    # wherever topo is predicted faster on the search's seed, it is applied only if shorter
    # than the scheduler's order with confidence over paired ECMP seeds and no longer held out
    import tuner.placement
    from tuner.outofsample import check_placement
    from tuner.placement import compare_strategies
    from tuner.recommend import RecommendOptions, recommend

    monkeypatch.setattr(tuner.placement, "topo_gains", lambda places: True)
    rec = recommend(small_clos, small_job, RecommendOptions(budget=1, free_servers=striped_free,
                                                            place_iterations=500))
    check = rec.details["placement_check"]
    places = compare_strategies(small_clos, small_job, striped_free, search_iterations=500,
                                strategies=("topo", "linear"))
    assert check == check_placement(small_clos, small_job, places["topo"].gpu_of_rank,
                                    places["linear"].gpu_of_rank).as_dict()
    assert rec.placement_strategy == ("topo" if check["accepted"] else "linear")
    row = next(s for s in rec.settings if s.name == "rank placement")
    assert check["reason"] in row.effect
