"""netsim probe: the no-device path, sysfs parsing from a fixture tree, pyverbs field mapping."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from tuner import probe as probe_mod
from tuner.cli import main


def test_no_device_one_line_exit_zero(tmp_path: Path, capsys) -> None:
    rc = main(["probe", "--sysfs", str(tmp_path), "--no-pyverbs"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.count("\n") == 1 and "no RDMA device" in out


def test_no_device_json(tmp_path: Path, capsys) -> None:
    assert main(["probe", "--sysfs", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["found"] is False and doc["devices"] == [] and doc["reason"]


def test_sysfs_fixture_parsed(fake_sysfs: Path) -> None:
    res = probe_mod.probe(sysfs_root=fake_sysfs, use_pyverbs=False)
    assert res.source == "sysfs" and len(res.devices) == 1
    dev = res.devices[0]
    assert dev.name == "mlx5_0" and dev.fw_ver == "28.39.1002" and dev.netdevs == ["eth0"]
    (port,) = dev.ports
    assert (port.state, port.phys_state, port.link_layer) == ("ACTIVE", "LinkUp", "Ethernet")
    assert port.speed_gbps == 200.0
    assert port.active_mtu_bytes == 4096  # largest IB MTU inside a 9000-byte Ethernet MTU
    assert port.roce_v2_gid_indices == [1, 3]  # the empty slot 4 is skipped
    assert port.nccl_gid_index == 3           # RoCE v2 + IPv4-mapped, as NCCL's auto choice
    cc = dev.congestion["eth0"]
    assert cc["trust"] == "dscp"
    assert cc["roce_rp"]["rpg_time_reset"] == 300 and cc["roce_rp"]["dce_tcp_g"] == 1019
    assert cc["roce_rp"]["enable"] == {p: int(p == 3) for p in range(8)}
    assert cc["roce_np"]["min_time_between_cnps"] == 4


def test_cli_table_and_json(fake_sysfs: Path, capsys) -> None:
    assert main(["probe", "--sysfs", str(fake_sysfs), "--no-pyverbs"]) == 0
    out = capsys.readouterr().out
    assert "mlx5_0:1" in out and "rpg_time_reset=300" in out
    assert main(["probe", "--sysfs", str(fake_sysfs), "--no-pyverbs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["devices"][0]["ports"][0]["nccl_gid_index"] == 3


def test_port_text_parsers() -> None:
    assert probe_mod.parse_port_state("4: ACTIVE") == "ACTIVE"
    assert probe_mod.parse_rate_gbps("400 Gb/sec (4X NDR)") == 400.0
    assert probe_mod.parse_rate_gbps("garbage") is None


class _FakeContext:
    """Stands in for pyverbs.device.Context with one 4X HDR Ethernet port."""

    def __init__(self, name: str) -> None:
        self.name = name

    def query_device(self):
        return SimpleNamespace(fw_ver="28.1", phys_port_cnt=1)

    def query_port(self, port: int):
        return SimpleNamespace(state=4, phys_state=5, link_layer=2, active_mtu=5,
                               active_width=2, active_speed=64)

    def query_gid_table(self, n: int):
        return [SimpleNamespace(gid_index=0, port_num=1, gid_type=0, ndev_ifindex=7,
                                gid_str="0000:0000:0000:0000:0000:ffff:0a00:0001"),
                SimpleNamespace(gid_index=1, port_num=1, gid_type=2, ndev_ifindex=7,
                                gid_str="0000:0000:0000:0000:0000:ffff:0a00:0001")]

    def close(self) -> None:
        pass


def test_pyverbs_mapping(fake_sysfs: Path, monkeypatch) -> None:
    fake = SimpleNamespace(get_device_list=lambda: [SimpleNamespace(name=b"mlx5_0")],
                           Context=lambda name: _FakeContext(name))
    monkeypatch.setattr(probe_mod, "import_pyverbs", lambda: fake)
    res = probe_mod.probe(sysfs_root=fake_sysfs)
    assert res.source == "pyverbs"
    (port,) = res.devices[0].ports
    # 4X (code 2) lanes of HDR (code 64 = 50 Gb/s) = 200 Gb/s; MTU enum 5 = 4096 B
    assert port.speed_gbps == 200.0 and port.active_mtu_bytes == 4096
    assert port.link_layer == "Ethernet" and port.state == "ACTIVE"
    assert port.nccl_gid_index == 1 and port.gids[0].netdev == "eth0"
    assert res.devices[0].congestion["eth0"]["roce_np"]["cnp_dscp"] == 48
