"""Fabric files: round trips, presets, and one named error per kind of mistake."""

from __future__ import annotations

import json

import pytest
import yaml

from topologies import PRESETS, load_fabric, read_spec, save_fabric


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_round_trip(name, suffix, tmp_path):
    if name == "megascale-4x" and suffix == ".json":
        pytest.skip("one format is enough for the big preset")
    fab = load_fabric(name)
    path = save_fabric(fab, tmp_path / f"f{suffix}")
    assert read_spec(path) == PRESETS[name]
    again = load_fabric(str(path))
    assert again.nodes == fab.nodes and again.num_links == fab.num_links
    assert (again.link_dst == fab.link_dst).all()


def test_base_preset_with_override(tmp_path):
    p = tmp_path / "half.yaml"
    p.write_text("base: megascale\nname: half\nservers: 768\n")
    fab = load_fabric(p)
    assert len(fab.gpus) == 768 * 8 and fab.name == "half"
    assert len(fab.switches["tor"]) == 96 and fab.wiring.pods == 3


def _write(tmp_path, data, suffix=".yaml"):
    p = tmp_path / f"bad{suffix}"
    p.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    return p


BAD = [
    ({"kind": "clos3", "servers": 64, "colour": "red"}, "unknown key 'colour'"),
    ({"kind": "clos3", "port_speed_gbps": 0}, "port_speed_gbps: got 0; expected a finite number >= 0.01"),
    ({"kind": "clos3", "nic_speed_gbps": -100}, "nic_speed_gbps: got -100; expected a finite number >= 0.01"),
    ({"kind": "leaf_spine", "host_speed_gbps": 0}, "host_speed_gbps: got 0; expected a finite number >= 0.01"),
    ({"kind": "clos3", "switch_radix": 32}, "switch_radix=32 is too small for tor_downlink_split"),
    ({"kind": "clos3", "tor_downlink_split": 1}, "too small for tor_downlink_split=1"),
    ({"kind": "clos3", "tor_down_up": [2, 1]}, "tor_down_up 2:1 does not split switch_radix"),
    ({"kind": "clos3", "agg_down_up": [1]}, "agg_down_up: got [1]; expected a list of 2 integers"),
    ({"kind": "clos3", "nic_speed_gbps": 400}, "nic_speed_gbps=400 exceeds the ToR host port"),
    ({"kind": "clos3", "servers": 100000}, "servers=100000 needs"),
    ({"kind": "clos3", "planes": 3}, "planes=3 must divide"),
    ({"kind": "clos3", "servers": 12.5}, "servers: got 12.5; expected an integer >= 1"),
    ({"kind": "clos3", "servers": "many"}, "servers: got 'many'; expected an integer >= 1 (e.g. servers: 1536)"),
    ({"kind": "clos3", "host_latency_ns": -1}, "host_latency_ns: got -1; expected a finite number >= 0"),
    ({"kind": "fat_tree", "k": 5}, "k must be even"),
    ({"kind": "fat_tree", "link_speed_gbps": 0}, "link_speed_gbps: got 0; expected a finite number >= 0.01"),
    ({"kind": "fat_tree", "k": 0}, "k: got 0; expected an integer >= 1"),
    ({"kind": "leaf_spine", "uplink_latency_ns": -5}, "uplink_latency_ns: got -5; expected a finite number >= 0"),
    ({"kind": "clos3", "planes": 0}, "planes: got 0; expected an integer >= 1"),
    ({"kind": "fat_tree", "k": 8, "nics_per_server": 3}, "nics_per_server=3 must divide k/2"),
    ({"kind": "leaf_spine", "servers_per_leaf": 40}, "switch_radix=16 is too small for a leaf"),
    ({"kind": "leaf_spine", "leaves": 7, "nics_per_server": 2}, "leaves=7 must be a multiple"),
    ({"kind": "torus"}, "kind: got 'torus'; expected one of clos3, fat_tree, leaf_spine"),
    ({"servers": 4}, "missing key 'kind'"),
    ({"base": "nope"}, "base: got 'nope'; expected one of megascale"),
    ({"base": "megascale", "kind": "fat_tree"}, "kind: got 'fat_tree'; expected 'clos3', the kind of base"),
    ([1, 2, 3], "got [1, 2, 3]; expected a mapping"),
    ({"kind": "clos3", "host_cable_m": 0}, "host_cable_m: got 0; expected a finite number > 0"),
    ({"kind": "clos3", "agg_core_cable_m": 20000}, "agg_core_cable_m: got 20000; expected a finite number > 0 and <= 10,000"),
    ({"kind": "leaf_spine", "uplink_cable_m": -3}, "uplink_cable_m: got -3; expected a finite number > 0"),
    ({"kind": "fat_tree", "tor_agg_cable_m": "long"}, "tor_agg_cable_m: got 'long'"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m for _, m in BAD])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_bad_file_gives_named_error(data, message, suffix, tmp_path):
    with pytest.raises(ValueError) as err:
        load_fabric(_write(tmp_path, data, suffix))
    assert message in str(err.value)


def test_unparsable_and_missing_files(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("kind: [clos3\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_fabric(p)
    j = tmp_path / "x.json"
    j.write_text("{kind: 1")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_fabric(j)
    with pytest.raises(ValueError, match="does not exist"):
        load_fabric(tmp_path / "none.yaml")
    with pytest.raises(ValueError, match="unknown fabric 'nope'"):
        load_fabric("nope")
    with pytest.raises(ValueError, match="must end in"):
        save_fabric(load_fabric("fat-tree-k4"), tmp_path / "f.txt")
