"""Analysis closed forms (bisection via max-flow, diameter via BFS) and ``netsim topo``."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from topologies import Clos3Spec, clos3, fat_tree
from topologies.analysis import analyze, bisection_bps, diameter_hops
from tuner.cli import main


def _pod_halves_maxflow(fabric) -> int:
    """Max flow from the NICs of the first half of the pods to those of the second half."""
    g = nx.DiGraph()
    for u, v, d in fabric.graph.edges(data=True):
        if d["kind"] in ("host", "tor-agg", "agg-core"):
            g.add_edge(u, v, capacity=d["capacity_bps"])
    pods = fabric.wiring.tor_pod[fabric.wiring.nic_tor]
    half = fabric.wiring.pods // 2
    for i, nic in enumerate(fabric.nics):
        side = "S" if pods[i] < half else "T"
        cap = int(fabric.link_capacity_bps[fabric.wiring.nic_up_link[i]])
        g.add_edge("S", nic, capacity=cap) if side == "S" else g.add_edge(nic, "T", capacity=cap)
    return int(nx.maximum_flow_value(g, "S", "T"))


@pytest.mark.parametrize("k", [4, 6])
def test_fat_tree_bisection_closed_form(k):
    f = fat_tree(k, link_speed_gbps=100)
    closed = k ** 3 // 8 * 100 * 10 ** 9
    assert bisection_bps(f) == closed == _pod_halves_maxflow(f)


def test_oversubscribed_bisection_and_ratios():
    # 2:1 at the agg tier: the core cut is half the host capacity
    f = clos3(Clos3Spec(name="o", servers=96, gpus_per_server=1, nics_per_server=1,
                        nic_speed_gbps=100, port_speed_gbps=100, switch_radix=12,
                        tor_downlink_split=1, agg_down_up=(2, 1), servers_per_tor_group=6))
    rep = analyze(f)
    assert rep.oversubscription == {"tor": 1.0, "agg": 2.0}
    host = 96 * 100 * 10 ** 9  # 2 pods x 8 ToRs x 6 servers at 100G
    assert rep.bisection_bps == _pod_halves_maxflow(f) == host // 2 // 2


def test_diameter_matches_bfs(k4, k8, leafspine, net_graph):
    for fab in (k4, k8, leafspine):
        g = net_graph(fab)
        nics = set(fab.nics)
        longest = max(d for n in fab.nics
                      for m, d in nx.single_source_shortest_path_length(g, n).items()
                      if m in nics)
        assert diameter_hops(fab) == longest


def test_megascale_report(megascale):
    rep = analyze(megascale)
    assert rep.bisection_bps == 12_288 * 200 * 10 ** 9 // 2   # full bisection, 1:1 tiers
    assert rep.oversubscription == {"tor": 1.0, "agg": 1.0}
    assert rep.diameter_hops == 6
    assert rep.ecmp_width == {"same_tor": 1, "same_pod": 32, "cross_pod": 32 * 32 * 8}


def test_cli_json_keys(capsys):
    assert main(["topo", "fat-tree-k4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("gpus", "servers", "nics", "switches", "links", "bisection_bps",
                "oversubscription", "diameter_hops"):
        assert key in out
    assert out["gpus"] == 16 and out["switches"] == {"tor": 8, "agg": 8, "core": 4}
    assert out["links"] == 64 and out["ecmp_width"]["cross_pod"] == 4


def test_cli_table_and_default(capsys):
    assert main(["topo"]) == 0
    text = capsys.readouterr().out
    assert "megascale" in text and "12288" in text


def test_cli_draw_and_save(tmp_path, capsys):
    png, spec = tmp_path / "k4.png", tmp_path / "k4.yaml"
    assert main(["topo", "fat-tree-k4", "--draw", str(png), "--save", str(spec)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()
    assert main(["topo", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nics"] == 16


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["topo", "megascale", "--draw", str(tmp_path / "m.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "at most" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: clos3\nport_speed_gbps: -1\n")
    assert main(["topo", str(bad)]) == 2
    assert "port_speed_gbps" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:
        main(["topo", "--help"])
    assert ex.value.code == 0
