"""Background jobs share the fabric with the new job: fair share on a saturated uplink,
the plain prediction without background, overlapping GPUs refused, RUNNING.yaml parsing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from netsim.model.hardware import A100
from netsim.workload import JobSpec, predict
from netsim.workload.flowcomm import FlowCommModel
from topologies import Clos3Spec, clos3
from tuner.background import BackgroundJob, load_background, parse_gpus, predict_shared

# 8 servers of 8 GPUs, 4 per ToR set, one 200G uplink per ToR (7:1): a DP ring of two servers
# in different ToR sets crosses the uplink of both sets on its rail, at the NIC rate (200G)
# when alone; the aggs have 3x more up than down capacity, so the uplink is the only bottleneck.
TINY = Clos3Spec(name="tiny-7to1", servers=8, switch_radix=8, port_speed_gbps=200,
                 tor_downlink_split=1, tor_down_up=(7, 1), agg_down_up=(1, 3),
                 servers_per_tor_group=4)
JOB = JobSpec(model="gpt3-1.3b", tp=8, pp=1, dp=2, global_batch=8)


@pytest.fixture(scope="module")
def tiny():
    return clos3(TINY)


def on(servers):
    """Rank -> GPU of a tp 8 job whose replicas sit on ``servers`` (all 8 GPUs each)."""
    return np.array([8 * s + i for s in servers for i in range(8)])


def _bandwidth_term(comm_s: float) -> float:
    n = JOB.dp
    return comm_s - (8.4e-6 + 2 * (n - 1) * A100.net_latency_s)  # NCCL base + ring steps


@pytest.mark.parametrize("k", [1, 2, 3])
def test_saturating_background_slows_by_the_fair_share_factor(tiny, k):
    """k background jobs whose DP rings cross the same ToR uplinks: the new job's DP ring
    gets 1/(k+1) of each uplink, so the bandwidth part of its all-reduce is (k+1)x."""
    alone = predict(JOB, tiny, A100, placement=on([1, 5]), comm_model=FlowCommModel(tiny, A100))
    bg = [BackgroundJob(f"b{i}", JOB, on(s)) for i, s in enumerate([[0, 4], [2, 6], [3, 7]][:k])]
    shared = predict_shared(JOB, tiny, A100, bg, placement=on([1, 5]))
    ratio = _bandwidth_term(shared.prediction.comm_s["dp"]) / _bandwidth_term(alone.comm_s["dp"])
    assert ratio == pytest.approx(k + 1, rel=1e-6)
    assert shared.prediction.iteration_s > alone.iteration_s
    for row in shared.background:  # symmetric: every background job sees the same factor
        assert row["slowdown"] > 1
        assert row["iteration_s_shared"] == pytest.approx(shared.prediction.iteration_s, rel=1e-9)


def test_background_under_other_tors_does_not_slow(tiny):
    """A background job that stays inside one ToR set uses no uplink: no slowdown."""
    alone = predict(JOB, tiny, A100, placement=on([1, 5]), comm_model=FlowCommModel(tiny, A100))
    shared = predict_shared(JOB, tiny, A100, [BackgroundJob("b", JOB, on([2, 3]))],
                            placement=on([1, 5]))
    assert shared.prediction.iteration_s == pytest.approx(alone.iteration_s, rel=1e-12)
    assert shared.background[0]["slowdown"] == pytest.approx(1.0, rel=1e-12)


def test_empty_background_is_the_plain_prediction(tiny):
    alone = predict(JOB, tiny, A100, placement=on([1, 5]), comm_model=FlowCommModel(tiny, A100))
    shared = predict_shared(JOB, tiny, A100, [], placement=on([1, 5]))
    assert shared.prediction.to_json() == alone.to_json()
    assert shared.background == []


def test_overlapping_gpus_are_refused(tiny):
    with pytest.raises(ValueError, match="GPU 8 is used by both"):
        predict_shared(JOB, tiny, A100, [BackgroundJob("b", JOB, on([1, 4]))],
                       placement=on([1, 5]))


def test_running_yaml(tiny, tmp_path):
    (tmp_path / "b.txt").write_text(" ".join(str(g) for g in on([2, 6])))
    (tmp_path / "RUNNING.yaml").write_text(
        "jobs:\n"
        "  - {name: a, job: {model: gpt3-1.3b, tp: 8, pp: 1, dp: 2, global_batch: 8}, "
        "gpus: \"0-7,32-39\"}\n"
        "  - {name: b, job: {model: gpt3-1.3b, tp: 8, pp: 1, dp: 2, global_batch: 8}, "
        "placement: b.txt}\n")
    jobs = load_background(tmp_path / "RUNNING.yaml", tiny)
    assert [j.name for j in jobs] == ["a", "b"]
    assert jobs[0].gpu_of_rank.tolist() == on([0, 4]).tolist()
    assert jobs[1].gpu_of_rank.tolist() == on([2, 6]).tolist()
    names = [tiny.gpus[g] for g in (0, 1, 2)]
    assert parse_gpus(names, tiny, "x").tolist() == [0, 1, 2]
    (tmp_path / "bad.yaml").write_text(
        "jobs:\n  - {name: a, job: tiny, gpus: \"0-63\"}\n  - {name: b, job: tiny, gpus: \"60-123\"}\n")
    with pytest.raises(ValueError, match="GPU 60 is used by both 'a' and 'b'"):
        load_background(tmp_path / "bad.yaml", clos3(Clos3Spec(name="x", servers=16,
                                                                servers_per_tor_group=8)))
    (tmp_path / "wrong.yaml").write_text("jobs:\n  - {name: a, job: tiny, gpus: \"0-7\"}\n")
    with pytest.raises(ValueError, match="8 GPUs for a job of 64 ranks"):
        load_background(tmp_path / "wrong.yaml", tiny)


def test_cli_predict_background_json(tiny, tmp_path, capsys):
    from tuner.cli import main

    fabric_file = tmp_path / "fabric.json"
    from topologies.files import save_fabric

    save_fabric(tiny, fabric_file)
    (tmp_path / "job.yaml").write_text("model: gpt3-1.3b\ntp: 8\npp: 1\ndp: 2\nglobal_batch: 8\n")
    (tmp_path / "RUNNING.yaml").write_text("jobs:\n  - {name: a, job: job.yaml, gpus: \"8-15,40-47\"}\n")
    place = tmp_path / "p.txt"
    place.write_text(" ".join(map(str, on([2, 6]))))
    args = ["predict", "--fabric", str(fabric_file), "--job", str(tmp_path / "job.yaml"),
            "--placement", str(place), "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    empty = tmp_path / "EMPTY.yaml"
    empty.write_text("jobs: []\n")
    assert main(args + ["--background", str(empty)]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same.pop("background") == []
    assert same == plain
    assert main(args + ["--background", str(tmp_path / "RUNNING.yaml")]) == 0
    shared = json.loads(capsys.readouterr().out)
    assert shared["iteration_s"] > plain["iteration_s"]
    (row,) = shared["background"]
    assert set(row) == {"name", "iteration_s_alone", "iteration_s_shared", "slowdown"}
    assert row["name"] == "a" and row["slowdown"] > 1
    bad = tmp_path / "BAD.yaml"
    bad.write_text("jobs:\n  - {name: a, job: job.yaml, gpus: \"16-23,48-55\"}\n")
    assert main(args + ["--background", str(bad)]) == 2
    assert "used by both" in capsys.readouterr().err


# 16 servers, four ToR sets of 4, one 200G uplink per ToR (7:1)
QUAD = Clos3Spec(name="quad-7to1", servers=16, switch_radix=8, port_speed_gbps=200,
                 tor_downlink_split=1, tor_down_up=(7, 1), agg_down_up=(1, 1),
                 servers_per_tor_group=4)


def test_topo_placement_avoids_busy_uplinks():
    """A background job on servers 0 and 4 keeps the uplinks of ToR sets A and B busy. The
    scheduler lists one free server per set (1, 5, 9, 13): linear takes 1 and 5, across both
    busy sets; topo takes 9 and 13, under the idle sets, and is predicted as fast as alone."""
    from tuner.placement import compare_strategies, verdict

    quad = clos3(QUAD)
    bg = [BackgroundJob("b", JOB, on([0, 4]))]
    res = compare_strategies(quad, JOB, [1, 5, 9, 13], seed=0, search_iterations=300,
                             background=bg)
    servers = {k: sorted(set((p.gpu_of_rank // 8).tolist())) for k, p in res.items()}
    assert servers["linear"] == [1, 5]
    assert servers["topo"] == [9, 13]
    alone = predict(JOB, quad, A100, placement=res["topo"].gpu_of_rank,
                    comm_model=FlowCommModel(quad, A100))
    assert res["topo"].iteration_s == pytest.approx(alone.iteration_s, rel=1e-9)
    assert res["linear"].iteration_s > res["topo"].iteration_s * 1.1
    assert "quieter" not in verdict(res) and "background leaves free" in verdict(res)
    # the background's servers are never handed out
    assert not set(servers["random"]) & {0, 4}


def test_exact_drop_gives_the_rates_of_the_plain_merge():
    """Dropping dominated links after merging the background (``exact_drop``) leaves every
    time bit for bit as the plain merged incidence gives, for scattered and packed jobs."""
    from netsim.workload.comm import CommBatch, fabric_locality
    from tuner.background import SharedFabricCommModel, network_batches

    fabric = clos3(Clos3Spec(name="m128", servers=16, servers_per_tor_group=4))
    rng = np.random.default_rng(3)
    gpus = rng.permutation(len(fabric.gpus))
    bg_job = JobSpec(model="gpt3-1.3b", tp=8, pp=2, dp=3)
    bg = network_batches(bg_job, gpus[:48])
    loc = fabric_locality(fabric)
    new = gpus[48:112].reshape(8, 8)
    batches = [CommBatch("all_reduce", "dp", new.T.copy(), 3e8),
               CommBatch("all_reduce", "embedding", new[:, :2].copy(), 5e7),
               CommBatch("send", "pp", new[:, :2].copy(), 1e7)]
    for batch in batches:
        times, entries = [], []
        for drop in (True, False):
            cm = SharedFabricCommModel(fabric, A100, bg, cache={})
            cm.exact_drop = drop
            times.append(cm.batch_s(batch, loc))
            entries.append(sum(m.inc.e_flow.size for m in cm._merged.values()))
        np.testing.assert_array_equal(times[0], times[1])
        assert entries[0] < entries[1]  # the drop did drop links


@pytest.mark.parametrize("extra", [["--straggler", "3:1.5"], ["--megascale"],
                                   ["--ptb", "--swa", "256", "--straggler", "0:2"]])
def test_background_takes_the_compute_model(tiny, tmp_path, capsys, extra):
    """--background combines with --straggler and the MegaScale switches: an empty
    background gives exactly the plain prediction with them, a busy one a slower one."""
    from topologies.files import save_fabric
    from tuner.cli import main

    save_fabric(tiny, tmp_path / "fabric.json")
    (tmp_path / "job.yaml").write_text("model: gpt3-1.3b\ntp: 8\npp: 1\ndp: 2\n"
                                       "global_batch: 8\n")
    (tmp_path / "EMPTY.yaml").write_text("jobs: []\n")
    (tmp_path / "RUNNING.yaml").write_text(
        "jobs:\n  - {name: a, job: job.yaml, gpus: \"8-15,40-47\"}\n")
    (tmp_path / "p.txt").write_text(" ".join(map(str, on([2, 6]))))
    args = ["predict", "--fabric", str(tmp_path / "fabric.json"), "--job",
            str(tmp_path / "job.yaml"), "--placement", str(tmp_path / "p.txt"), "--json"]
    runs = []
    for more in ([], ["--background", str(tmp_path / "EMPTY.yaml")],
                 ["--background", str(tmp_path / "RUNNING.yaml")]):
        assert main(args + extra + more) == 0
        runs.append(json.loads(capsys.readouterr().out))
    plain, empty, busy = runs
    assert empty.pop("background") == []
    assert empty == plain
    assert busy["iteration_s"] > plain["iteration_s"]
    assert busy["compute_s"] == plain["compute_s"]  # the same compute model
    assert main(args + ["--json"]) == 0
    assert plain["iteration_s"] != json.loads(capsys.readouterr().out)["iteration_s"]
