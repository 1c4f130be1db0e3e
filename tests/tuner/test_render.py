"""Output files parse: env syntax, the tuner plugin's CSV, INI, YAML, JSON; headroom formula."""

from __future__ import annotations

import configparser
import json

import pytest
import yaml

from tuner import render


def test_env_roundtrip_and_rejects_metacharacters(tmp_path) -> None:
    p = tmp_path / "nccl.env"
    render.write_nccl_env(p, {"NCCL_IB_TIMEOUT": "18", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"},
                          {"NCCL_IB_TIMEOUT": "why"})
    assert render.parse_env_file(p.read_text()) == {"NCCL_IB_TIMEOUT": "18",
                                                    "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    with pytest.raises(ValueError, match="metacharacters"):
        render.write_nccl_env(p, {"NCCL_X": "a b"})
    with pytest.raises(ValueError, match="not `export"):
        render.parse_env_file("NCCL_X=1\n")


def test_tuner_csv_columns_of_the_plugin(tmp_path) -> None:
    p = tmp_path / "nccl_tuner.csv"
    rows = [render.TunerRow("allreduce", 0, 65535, "ring", "ll", -1, 16, 16),
            render.TunerRow("allreduce", 65536, 1 << 40, "tree", "simple", 8, 16, 16)]
    render.write_tuner_csv(p, rows)
    text = p.read_text()
    header = [ln for ln in text.splitlines() if ln.startswith("# collective")][0]
    assert header[2:].split(",") == list(render.TUNER_CSV_COLUMNS)
    assert render.parse_tuner_csv(text) == rows
    with pytest.raises(ValueError, match="algorithm"):
        render.TunerRow("allreduce", 0, 1, "butterfly", "ll")


def test_nic_conf_is_ini(tmp_path) -> None:
    p = tmp_path / "nic_dcqcn.conf"
    render.write_nic_conf(p, {"rpg_time_reset": 300}, {"min_time_between_cnps": 2})
    ini = configparser.ConfigParser()
    ini.read_string(p.read_text())
    assert ini["roce_rp"].getint("rpg_time_reset") == 300
    assert ini["roce_np"].getint("min_time_between_cnps") == 2
    assert ini["roce_rp"].getint("enable_prio") == 3


def test_headroom_sonic_formula() -> None:
    # 2 x frame + 2 x bytes on the cable + pause quanta x 512 / 8 (SONiC; IEEE quanta 400G =
    # 905); the frame is the MTU's packet on the wire (62 B headers + 20 B preamble and gap)
    mtu, rate, cable_m = 4096, 400 * 10**9, 100.0
    cable_bytes = rate * (cable_m * 5e-9) / 8
    expect = 2 * (mtu + 82) + 2 * cable_bytes + 905 * 512 / 8
    assert render.headroom_bytes(rate, cable_m, mtu) == pytest.approx(expect, abs=2)
    assert render.headroom_bytes(rate, 300.0) > render.headroom_bytes(rate, 100.0)


def test_switch_qos_and_placement_parse(tmp_path) -> None:
    q = tmp_path / "switch_qos.yaml"
    render.write_switch_qos(q, {"kmin_bytes": 1, "kmax_bytes": 2, "pmax": 0.1},
                            [{"link_kind": "host", "port_speed_gbps": 200.0, "cable_m": 3.0,
                              "headroom_bytes": 1000}])
    doc = yaml.safe_load(q.read_text())
    assert doc["traffic_classes"]["roce"]["priority"] == 3 and doc["pfc"]["ports"][0]["cable_m"] == 3.0
    pl = tmp_path / "placement.json"
    render.write_placement(pl, [{"rank": 1, "host": "b", "local_rank": 0, "gpu": "b-gpu0"},
                                {"rank": 0, "host": "a", "local_rank": 0, "gpu": "a-gpu0"}], {})
    assert json.loads(pl.read_text())["torchrun_hosts"] == ["a", "b"]
