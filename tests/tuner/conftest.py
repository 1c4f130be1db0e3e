"""Fixtures of the tuner tests: a sysfs-like tree with one ConnectX RoCE port."""

from __future__ import annotations

from pathlib import Path

import pytest


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    """A /sys look-alike: mlx5_0 port 1 on eth0, RoCE v1+v2 GIDs, DCQCN files, trust dscp."""
    root = tmp_path / "sys"
    dev = root / "class" / "infiniband" / "mlx5_0"
    _write(dev / "fw_ver", "28.39.1002")
    port = dev / "ports" / "1"
    _write(port / "state", "4: ACTIVE")
    _write(port / "phys_state", "5: LinkUp")
    _write(port / "rate", "200 Gb/sec (4X HDR)")
    _write(port / "link_layer", "Ethernet")
    gids = {
        0: ("fe80:0000:0000:0000:0a00:27ff:fe00:0001", "IB/RoCE v1"),
        1: ("fe80:0000:0000:0000:0a00:27ff:fe00:0001", "RoCE v2"),
        2: ("0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1"),
        3: ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"),
    }
    for i, (gid, kind) in gids.items():
        _write(port / "gids" / str(i), gid)
        _write(port / "gid_attrs" / "types" / str(i), kind)
        _write(port / "gid_attrs" / "ndevs" / str(i), "eth0")
    # an unpopulated slot: zero GID, empty type
    _write(port / "gids" / "4", "0000:0000:0000:0000:0000:0000:0000:0000")
    _write(port / "gid_attrs" / "types" / "4", "")
    net = root / "class" / "net" / "eth0"
    _write(net / "mtu", "9000")
    _write(net / "ifindex", "7")
    _write(net / "qos" / "trust", "dscp")
    rp = net / "ecn" / "roce_rp"
    for k, v in {"rpg_time_reset": 300, "rpg_byte_reset": 32767, "rpg_ai_rate": 5,
                 "rpg_hai_rate": 50, "dce_tcp_g": 1019}.items():
        _write(rp / k, str(v))
    for prio in range(8):
        _write(rp / "enable" / str(prio), "1" if prio == 3 else "0")
    _write(net / "ecn" / "roce_np" / "min_time_between_cnps", "4")
    _write(net / "ecn" / "roce_np" / "cnp_dscp", "48")
    return root


@pytest.fixture(scope="session")
def small_clos():
    """64 servers x 8 GPUs, 8 ToR sets, 1:1 ToRs without the 2x200G split: collisions matter."""
    from topologies import clos3
    from topologies.builders import Clos3Spec

    return clos3(Clos3Spec(name="small-clos", servers=64, switch_radix=16, port_speed_gbps=200,
                           nic_speed_gbps=200, tor_downlink_split=1, servers_per_tor_group=8))


@pytest.fixture(scope="session")
def small_clos_2to1():
    """``small_clos`` with 2:1 oversubscribed ToRs (8 hosts, 4 uplinks of 200G each)."""
    from topologies import clos3
    from topologies.builders import Clos3Spec

    return clos3(Clos3Spec(name="small-clos-2to1", servers=64, switch_radix=12,
                           port_speed_gbps=200, nic_speed_gbps=200, tor_downlink_split=1,
                           servers_per_tor_group=8, tor_down_up=(2, 1)))


@pytest.fixture(scope="session")
def small_job():
    from netsim.workload import JobSpec

    return JobSpec(model="gpt3-13b", tp=8, pp=2, dp=8, global_batch=128)


@pytest.fixture(scope="session")
def striped_free() -> list[int]:
    """A scheduler that hands out servers round-robin over the 8 ToR sets (40 of 64)."""
    return [s for r in range(8) for s in range(r, 64, 8)][:40]
