"""Traffic generators, flow files, flap parsing, determinism on a fat-tree, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from netsim.packet import PacketConfig, simulate_packets
from netsim.scenario.faults import LinkFlap, parse_flap
from netsim.scenario.traffic import Flow, alltoall, incast, load_flows, permutation
from topologies import fat_tree
from tuner.cli import main


@pytest.fixture(scope="module")
def k4():
    return fat_tree(4)


def test_permutation_is_a_derangement(k4, rng):
    flows = permutation(k4, 1000, rng)
    assert sorted(f.src for f in flows) == sorted(k4.nics)
    assert sorted(f.dst for f in flows) == sorted(k4.nics)
    assert all(f.src != f.dst for f in flows)


def test_incast_and_alltoall_shapes(k4, rng):
    flows = incast(k4, 8, 1000, rng)
    assert len(flows) == 8 and len({f.dst for f in flows}) == 1
    assert len({f.src for f in flows}) == 8 and flows[0].dst not in {f.src for f in flows}
    n = len(k4.nics)
    assert len(alltoall(k4, 10)) == n * (n - 1)
    with pytest.raises(ValueError, match="incast n"):
        incast(k4, n, 1000, rng)


def test_flow_validation_and_files(tmp_path):
    with pytest.raises(ValueError, match="size_bytes"):
        Flow("a", "b", 0)
    with pytest.raises(ValueError, match="same node"):
        Flow("a", "a", 10)
    p = tmp_path / "f.yaml"
    p.write_text("flows:\n  - {src: a, dst: b, size: 2MB, start_ns: 5, qps: 2}\n")
    (f,) = load_flows(p)
    assert (f.size_bytes, f.start_ps, f.qps) == (2_000_000, 5000, 2)
    j = tmp_path / "f.json"
    j.write_text(json.dumps([{"src": "a", "dst": "b"}]))
    with pytest.raises(ValueError, match="bytes"):
        load_flows(j)


def test_parse_flap_forms(k4):
    assert parse_flap("3@1ms+300us") == LinkFlap(3, 10**9, 3 * 10**8)
    u, v = k4.nics[0], k4.graph.successors(k4.nics[0]).__next__()
    assert parse_flap(f"{u}~{v}@0s+1s", k4).link_id == k4.link_id(u, v)
    assert parse_flap("first-hop@1us+1us", first_hop=7).link_id == 7
    for bad in ("3@1ms", "x@1ms+1ms", f"{k4.num_links}@1us+1us"):
        with pytest.raises(ValueError):
            parse_flap(bad, k4)


def _run_k4(k4, seed, **cfg):
    flows = permutation(k4, 200_000, np.random.default_rng(1), qps=2)
    return simulate_packets(k4, flows, PacketConfig(**cfg), seed=seed)


def test_same_seed_same_result_other_seed_other_paths(k4):
    a = _run_k4(k4, 3, cc="dcqcn").to_json()
    b = _run_k4(k4, 3, cc="dcqcn").to_json()
    for d in (a, b):
        d.pop("wall_s")
    assert a == b
    c = _run_k4(k4, 4, cc="dcqcn")
    assert [f.paths for f in c.flows] != [f.paths for f in _run_k4(k4, 3, cc="dcqcn").flows]


def test_gpu_endpoints_send_through_their_nic(k4):
    gpu_a, gpu_b = k4.gpus[0], k4.gpus[-1]
    res = simulate_packets(k4, [Flow(gpu_a, gpu_b, 50_000)], PacketConfig(), seed=0)
    f = res.flows[0]
    assert f.delivered_bytes == 50_000
    assert all(str(k4.link_kind[lid]) not in ("pcie", "nvlink") for lid in f.paths[0])


def test_cli_json_has_the_contract_keys(capsys, tmp_path):
    rc = main(["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic",
               "incast:4", "--size", "64KB", "--cc", "none", "--pfc", "on", "--json",
               "--plot", str(tmp_path)])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    for key in ("flows", "drops", "pfc_pauses", "ecn_marks", "cnps", "sim_time_ns"):
        assert key in doc
    assert len(doc["flows"]) == 4
    for f in doc["flows"]:
        assert {"src", "dst", "bytes", "fct_ns", "retransmits", "failed"} <= f.keys()
        assert f["bytes"] == 64_000 and not f["failed"]
    assert (tmp_path / "queues.csv").exists() and (tmp_path / "flow_rates.png").exists()


def test_cli_flap_fails_the_flow_and_bad_input_is_one_line(capsys):
    rc = main(["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic",
               "incast:1", "--size", "200KB", "--cc", "none", "--ib-timeout", "3",
               "--retry-cnt", "1", "--flap", "first-hop@5us+1ms", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["flows"][0]["failed"] and doc["failed_flows"] == 1
    assert main(["simulate", "--level", "packet", "--traffic", "incast:x"]) == 2
    assert main(["simulate", "--level", "packet", "--retry-cnt", "9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("netsim simulate: error:") for line in err)


def test_cli_stuck_flows_preset_and_engine_flags(capsys):
    rc = main(["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic",
               "incast:4", "--size", "2MB", "--cc", "dcqcn", "--cc-param", "preset=paper",
               "--ecn-mark-at", "enqueue", "--ack-class", "priority", "--link-detect", "off",
               "--pfc-watchdog", "200ms", "--max-time", "20us", "--json"])
    assert rc == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["stuck"] == 4 and "paused_at_end" in doc and "pfc_counters" in doc
    assert out.err.startswith("warning: 4 flow(s) unfinished")
    rc = main(["simulate", "--level", "packet", "--fabric", "fat-tree-k4", "--traffic",
               "incast:2", "--size", "64KB", "--cc", "none"])
    assert rc == 0 and "stuck" in capsys.readouterr().out
