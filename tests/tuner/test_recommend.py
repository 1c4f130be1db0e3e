"""Settings search and the recommendation run: QPs, CC vs vendor defaults, files, report."""

from __future__ import annotations

import configparser
import json

import pytest
import yaml

from tuner import render
from tuner.ccsearch import evaluate_cc, hot_spot, search_cc
from tuner.placement import place
from tuner.search import search_qps


@pytest.fixture(scope="module")
def linear_gpus(small_clos, small_job, striped_free):
    return place(small_clos, small_job, "linear", striped_free).gpu_of_rank


def test_recommended_qps_lower_collision_slowdown(small_clos, small_job, linear_gpus) -> None:
    qp = search_qps(small_clos, small_job, linear_gpus)
    assert qp.slowdown[1] > 1.0                 # the striped placement does collide
    assert qp.qps > 1 and qp.slowdown[qp.qps] < qp.slowdown[1]


@pytest.fixture(scope="module")
def cc_choice(small_clos, small_job, linear_gpus):
    hot = hot_spot(small_clos, small_job, linear_gpus)
    return search_cc(hot, budget=8, seed=0)


def test_cc_reduces_pfc_pause_within_two_percent_goodput(cc_choice) -> None:
    d, b = cc_choice.default, cc_choice.best
    print(f"hot spot {cc_choice.hot.source}: pause {d.pause_ns:.0f} -> {b.pause_ns:.0f} ns, "
          f"goodput {d.goodput:.3f} -> {b.goodput:.3f}")
    assert cc_choice.hot.kind == "collision"
    assert d.pause_ns > 0 and b.pause_ns < d.pause_ns
    assert b.goodput >= 0.98 * d.goodput
    # the reported outcome is the packet engine's: re-running the setting reproduces it
    again = evaluate_cc(cc_choice.hot, b.params)
    assert again.pause_ns == pytest.approx(b.pause_ns) and again.goodput == pytest.approx(b.goodput)


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
                                       "switch_qos.yaml", "placement.json", "report.md"}
    env = render.parse_env_file((out / "nccl.env").read_text())
    assert {"NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
            "NCCL_IB_TC"} <= set(env)
    assert env == rec.env
    assert _sourced_by_bash(out / "nccl.env", env) == env
    csv_text = (out / "nccl_tuner.csv").read_text()
    rows = render.parse_tuner_csv(csv_text)
    assert rows and rows[0].min_bytes == 0
    assert all(a.max_bytes + 1 == b.min_bytes for a, b in zip(rows, rows[1:], strict=False))   # no gaps
    # the plugin's column order as its header comment, '#' in column 0 (plugin.c skips
    # line[0] == '#'); every row names its channels: the plugin sets *nChannels = 1 first
    # and keeps it for -1, which would pin NCCL to one channel
    header = [ln for ln in csv_text.splitlines() if ln.startswith("# collective")]
    assert header and header[0][2:].split(",") == list(render.TUNER_CSV_COLUMNS)
    assert all(r.channels >= 1 and r.n_ranks == rec.job["dp"] for r in rows)
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
    assert f"{cc['default']['pause_ns'] / 1e3:.1f} -> {cc['best']['pause_ns'] / 1e3:.1f} us" in report
    assert f"goodput {cc['default']['goodput']:.3f} -> {cc['best']['goodput']:.3f}" in report


def test_report_qp_and_retransmit_rows_are_simulator_outputs(reco, small_clos, small_job) -> None:
    from tuner.retransmit import RetransmitSetting, evaluate, parse_flaps

    rec, out, _ = reco
    rows = {s.name: s for s in rec.settings}
    # QPs: the flow engine's collision slowdown of the written placement, recomputed
    pos = {g: i for i, g in enumerate(small_clos.gpus)}
    import numpy as np

    gpus = np.array([pos[r["gpu"]] for r in sorted(rec.ranks, key=lambda r: r["rank"])])
    qp = search_qps(small_clos, small_job, gpus, seeds=(0, 1))
    row = rows["NCCL_IB_QPS_PER_CONNECTION"]
    assert row.recommended == qp.qps
    assert row.effect == f"collision slowdown {qp.slowdown[1]:.3f}x -> {qp.slowdown[qp.qps]:.3f}x"
    # retransmit: the survival model of the written timeout / retry count
    env = rec.env
    s = RetransmitSetting(int(env["NCCL_IB_TIMEOUT"]), int(env["NCCL_IB_RETRY_CNT"]))
    r = evaluate(s, parse_flaps(rec.details["retransmit"]["flaps"]))
    assert f"job {rec.details['retransmit']['default']['job_survival']:.3f} -> " \
           f"{r.job_survival:.3f}" in rows["NCCL_IB_TIMEOUT"].effect
    assert s.survivable_flap_s > rec.details["retransmit"]["design_flap_s"]
