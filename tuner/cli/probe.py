"""``netsim probe``: list this host's RDMA NICs (pyverbs, sysfs) and their RoCE settings."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.cli._output import add_command, add_json_flag, format_table, print_json


def register(sub) -> argparse.ArgumentParser:
    p = add_command(
        sub, "probe",
        "read RDMA NICs: ports, link layer, MTU, speed, RoCE v2 GIDs, DCQCN settings",
        "Read the host's RDMA devices through pyverbs (rdma-core; Debian package "
        "python3-pyverbs) and the NIC congestion settings from sysfs. With no RDMA device it "
        "says so in one line and exits 0.")
    p.add_argument("--sysfs", default="/sys", type=Path,
                   help="root of the sysfs tree to read (default /sys)")
    p.add_argument("--no-pyverbs", action="store_true", help="read sysfs only")
    add_json_flag(p)
    return p


def run(args: argparse.Namespace) -> int:
    from tuner.probe import probe

    result = probe(sysfs_root=args.sysfs, use_pyverbs=not args.no_pyverbs)
    if args.json:
        print_json(result.to_json())
        return 0
    if not result.found:
        print(f"netsim probe: {result.reason}")
        return 0
    rows = []
    for d in result.devices:
        for p in d.ports:
            rows.append([f"{d.name}:{p.port}", p.state, p.link_layer,
                         p.active_mtu_bytes or "-", p.speed_gbps or "-",
                         ",".join(map(str, p.roce_v2_gid_indices)) or "-",
                         "-" if p.nccl_gid_index is None else p.nccl_gid_index,
                         ",".join(d.netdevs) or "-"])
    print(format_table(["port", "state", "link", "mtu_B", "Gb/s", "roce_v2_gids",
                        "nccl_gid", "netdev"], rows, floatfmt=".0f"))
    for d in result.devices:
        for nd, cc in d.congestion.items():
            rp = cc.get("roce_rp", {})
            np_ = cc.get("roce_np", {})
            keys = ("rpg_time_reset", "rpg_byte_reset", "rpg_ai_rate", "rpg_hai_rate", "dce_tcp_g")
            shown = " ".join(f"{k}={rp[k]}" for k in keys if k in rp)
            cnp = np_.get("min_time_between_cnps")
            print(f"{d.name} {nd}: trust={cc.get('trust', '?')} {shown}"
                  + (f" min_time_between_cnps={cnp}" if cnp is not None else ""))
    print(f"source: {result.source}")
    return 0
