"""Deployable artifacts of a recommendation: files an operator applies as written.

``netsim recommend -o DIR`` keeps its six files (contract) and adds:

* ``nic_setup.sh``: bash script for every ConnectX NIC of a server, with ``--dry-run`` (print
  the commands instead of running them) and ``--persistent`` (also write the firmware
  defaults with ``mlxconfig``). Runtime part: ``mlnx_qos -i IF --trust dscp`` and
  ``mlnx_qos -i IF --pfc 0,0,0,1,0,0,0,0`` (PFC on the RoCE priority), DCQCN enabled on that
  priority and its parameters written to ``/sys/class/net/IF/ecn/roce_{rp,np}/``.
* ``sonic_config_db_<role>.json``: a SONiC ``config_db.json`` fragment per switch role (ToR,
  agg, core), to load with ``sudo config load FILE`` or merge into ``/etc/sonic/config_db.json``.
* ``switch_nvue_<role>.txt``: NVIDIA Cumulus Linux 5.14 NVUE commands (``nv set qos ...``, ``nv config
  apply``), one per line, for Spectrum switches.
* ``nccl.env`` gains NCCL_SOCKET_IFNAME, NCCL_IB_GID_INDEX, NCCL_NET_GDR_LEVEL,
  NCCL_TUNER_PLUGIN (the absolute path of the suite's plugin, ``libnccl-tuner-netsim.so``,
  built from the ``netsim_tuner.c`` written beside it; ``tuner.tunerplugin``) and an absolute
  NCCL_TUNER_CONFIG_FILE (``complete_env``).

Sources of every command and key (see also ``docs/recommend.md``, "Deployable files"):

* ``mlnx_qos`` flags ``--trust dscp``, ``--pfc 0,0,0,1,0,0,0,0``: MLNX_OFED host-side QoS as
  in ``shared/reference/nccl-roce.md`` 5.4 and NVIDIA network-operator's RoCE optimisation
  ("configure pfc for priority 3, set trust to dscp").
* sysfs ``ecn/roce_rp/{enable/<prio>,<param>}`` and ``ecn/roce_np/...``: MLNX_OFED/DOCA, as in
  nccl-roce.md 5.1 (the names of ``nic_dcqcn.conf``).
* ``mlxconfig -y -d PCI set NAME_P1=V``: mstflint ``mlxconfig`` parameters ``ROCE_CC_PRIO_MASK_P1``,
  ``RPG_TIME_RESET_P1``, ``RPG_BYTE_RESET_P1``, ``RPG_AI_RATE_P1``, ``RPG_HAI_RATE_P1``,
  ``DCE_TCP_G_P1``, ``MIN_TIME_BETWEEN_CNPS_P1``, ``CNP_DSCP_P1``, ``CNP_802P_PRIO_P1`` (its
  ``mlxconfig q`` dump and help text; nccl-roce.md 5.1).
* SONiC tables and keys: sonic-buildimage ``src/sonic-yang-models/doc/Configuration.md``
  (DSCP_TO_TC_MAP, TC_TO_QUEUE_MAP, TC_TO_PRIORITY_GROUP_MAP, MAP_PFC_PRIORITY_TO_QUEUE,
  PORT_QOS_MAP with ``pfc_enable``, QUEUE ``PORT|q`` with ``scheduler``/``wred_profile``,
  SCHEDULER ``type``/``weight``, WRED_PROFILE ``ecn``/``green_*``, BUFFER_PROFILE
  ``pool``/``xon``/``xoff``/``size``/``dynamic_th``, BUFFER_PG ``PORT|3``, CABLE_LENGTH).
* NVUE: Cumulus Linux NVUE reference, "Set and Unset Commands / QoS" (``nv set qos roce mode``,
  ``roce cable-length``, ``congestion-control <profile> traffic-class <tc> {ecn,min-threshold,
  max-threshold,probability}``, ``egress-scheduler <profile> traffic-class <tc> {mode,
  bw-percent}``, ``mapping <profile> {trust,dscp <d> switch-priority <p>}``, ``pfc <profile>
  {switch-priority,tx,rx,cable-length}``) and ``nv config apply``.
* NCCL: NCCL_TUNER_PLUGIN takes a path (``src/plugin/plugin_open.cc`` opens a name with a
  ``/`` as it is); the plugin's interface and versions: ``tuner.tunerplugin``;
  NCCL_IB_GID_INDEX ``-1`` is NCCL's automatic choice (2.21+); NCCL_NET_GDR_LEVEL levels
  LOC/PIX/PXB/PHB/SYS; NCCL_SOCKET_IFNAME ``^`` excludes prefixes (nccl-roce.md, table 1).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES = ("tor", "agg", "core")
#: The one Cumulus Linux release the NVUE files are written for (its QoS and RoCE guides).
NVUE_RELEASE = "5.14"
#: MTU of the lossless class in the headroom/xon arithmetic (RoCE path MTU 4096).
MTU_BYTES = 4096
#: RoCE's active MTU is the largest IB MTU (256..4096) not above the netdev MTU less the RoCE
#: headers: GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 = 96 B (Linux
#: include/rdma/ib_addr.h ``iboe_get_mtu``, sizes from include/rdma/ib_pack.h). 4096 needs a
#: netdev MTU of at least 4096 + 96 = 4192; the script refuses less than 4200 (the figure
#: NVIDIA's RoCE guides give, 8 B of margin) and sets 9000 (jumbo frames, below the switches'
#: 9100/9216 port MTU: SONiC's default port MTU is 9100, nccl-roce.md 5.4).
ROCE_HEADER_BYTES = 96
MIN_NETDEV_MTU = 4200
NETDEV_MTU = 9000


@dataclass(frozen=True)
class DeployOptions:
    """Host-specific choices the simulator cannot see; each is a parameter with a default."""

    socket_ifname: str = "^lo,docker"
    """NCCL bootstrap interfaces: every interface except lo and docker* (``^`` excludes)."""
    gid_index: int = -1
    """-1: NCCL (2.21+) picks the RoCEv2 IPv4 GID itself; older NCCL: the index `show_gids`
    lists for RoCE v2 / IPv4 (often 3). NCCL's docs advise not to set it (nccl-roce.md)."""
    gdr_level: str = "PXB"
    """GPUDirect RDMA up to GPU and NIC behind PCIe switches (not through the CPU): HGX/DGX."""
    tuner_plugin: str = "netsim"
    """``netsim``: the suite's tuner plugin (``tuner.tunerplugin``), built from the
    ``netsim_tuner.c`` written beside nccl.env; any other value is written as it is (``none``
    turns tuner plugins off)."""


def complete_env(env: dict[str, str], why: dict[str, str], outdir: Path,
                 opts: DeployOptions = DeployOptions(), *,
                 final_dir: Path | None = None) -> list[Path]:
    """Add the host settings of a complete ``nccl.env`` to ``env`` in place; the tuner CSV's
    path becomes absolute so the file works from any directory. With the suite's tuner
    plugin, its C source is written into *outdir*; returns the files written. Paths in the
    settings name *final_dir* (default *outdir*): where the set lands once renamed into place."""
    from tuner import tunerplugin

    csv = Path(final_dir or outdir).resolve() / "nccl_tuner.csv"
    env["NCCL_TUNER_CONFIG_FILE"] = str(csv)
    written: list[Path] = []
    plugin, plugin_why = opts.tuner_plugin, "tuner plugin named by DeployOptions.tuner_plugin"
    if opts.tuner_plugin == "netsim":
        src, lib, build = tunerplugin.write_source(outdir, final_dir=final_dir)
        written.append(src)
        plugin = str(lib)
        plugin_why = (f"the suite's tuner plugin ({src.name}, tuner API v5/v4/v3: NCCL 2.28+, "
                      "2.24-2.27, 2.22-2.23): a collective no row of NCCL_TUNER_CONFIG_FILE "
                      "matches, and a row with channels -1, keep NCCL's own algorithm, "
                      "protocol and channel count; until the library is built NCCL finds "
                      f"none and tunes alone. Build it once: {build}")
    extra = {
        "NCCL_TUNER_PLUGIN": (plugin, plugin_why),
        "NCCL_SOCKET_IFNAME": (opts.socket_ifname, "bootstrap/out-of-band sockets on every "
                               "interface but lo and docker*; set =IF to pin one"),
        "NCCL_IB_GID_INDEX": (str(opts.gid_index), "-1 = NCCL (2.21+) chooses the RoCEv2 "
                              "IPv4 GID; for older NCCL use the index show_gids lists for "
                              "RoCE v2 / IPv4 (often 3)"),
        "NCCL_NET_GDR_LEVEL": (opts.gdr_level, "GPUDirect RDMA when GPU and NIC share PCIe "
                               "switches (PXB), as on HGX/DGX boards"),
    }
    for name, (value, reason) in extra.items():
        if name not in env:  # a probed value (e.g. the GID index) wins
            env[name] = value
            why[name] = reason
    return written


# ---------------------------------------------------------------------------------------------
# NIC script


def _mlxconfig_args(rp: Mapping[str, int], np_: Mapping[str, int], priority: int) -> list[str]:
    pairs = [("ROCE_CC_PRIO_MASK", 1 << priority)]
    pairs += [(k.upper(), int(v)) for k, v in {**rp, **np_}.items()]
    return [f"{name}_P1={value}" for name, value in pairs]


def nic_script(rp: Mapping[str, int], np_: Mapping[str, int], priority: int,
               devices: Sequence[str], mtu: int = NETDEV_MTU) -> str:
    """The bash text of ``nic_setup.sh``."""
    if mtu < MIN_NETDEV_MTU:
        raise ValueError(f"netdev MTU {mtu} < {MIN_NETDEV_MTU}: RoCE's active MTU would fall "
                         f"below {MTU_BYTES} (every headroom and CC figure assumes {MTU_BYTES})")
    pfc = ",".join("1" if p == priority else "0" for p in range(8))
    sysfs = [f'write {int(v)} "$SYS/class/net/$ifc/ecn/roce_rp/{k}"' for k, v in rp.items()]
    sysfs += [f'write {int(v)} "$SYS/class/net/$ifc/ecn/roce_np/{k}"' for k, v in np_.items()]
    mlx = " ".join(_mlxconfig_args(rp, np_, priority))
    lines = [
        "#!/usr/bin/env bash",
        "# ConnectX RoCE settings recommended by `netsim recommend` (sources: tuner/deploy.py).",
        "# Usage: sudo ./nic_setup.sh [--dry-run] [--persistent] [RDMA_DEVICE ...]",
        f"#   RDMA_DEVICE defaults to {' '.join(devices)}; each one's netdev and PCI address",
        "#   are read from /sys/class/infiniband/DEV/device.",
        "#   --dry-run     print the commands instead of running them (DRY_RUN=1 works too)",
        "#   --persistent  also write the firmware defaults with mlxconfig (reboot to apply)",
        "set -euo pipefail",
        "",
        'DRY_RUN="${DRY_RUN:-0}"',
        "# sysfs root: /sys (NIC_SETUP_SYSFS points it at another tree, e.g. in tests)",
        'SYS="${NIC_SETUP_SYSFS:-/sys}"',
        "PERSISTENT=0",
        "DEVICES=()",
        'for arg in "$@"; do',
        '  case "$arg" in',
        "    --dry-run) DRY_RUN=1 ;;",
        "    --persistent) PERSISTENT=1 ;;",
        "    -h|--help) sed -n '2,7p' \"$0\"; exit 0 ;;",
        '    -*) echo "nic_setup.sh: unknown option $arg" >&2; exit 2 ;;',
        '    *) DEVICES+=("$arg") ;;',
        "  esac",
        "done",
        f"if [ ${{#DEVICES[@]}} -eq 0 ]; then DEVICES=({' '.join(devices)}); fi",
        "",
        f"MTU={int(mtu)}",
        f"MIN_MTU={MIN_NETDEV_MTU}",
        'run() { if [ "$DRY_RUN" = 1 ]; then echo "+ $*"; else "$@"; fi; }',
        'write() { if [ "$DRY_RUN" = 1 ]; then echo "+ echo $1 > $2"; else echo "$1" > "$2"; fi; }',
        "sysdir() { echo \"$SYS/class/infiniband/$1/device\"; }",
        "netdev_of() {",
        '  for n in "$(sysdir "$1")"/net/*; do',
        '    if [ -e "$n" ]; then basename "$n"; return; fi',
        "  done",
        '  if [ "$DRY_RUN" = 1 ]; then echo "${1}_netdev";',
        '  else echo "nic_setup.sh: no netdev for $1" >&2; exit 2; fi',
        "}",
        "# RoCE active MTU 4096 needs netdev MTU >= 4096 + 96 B of RoCE headers (kernel",
        "# iboe_get_mtu); at 1500 it is 1024. Set it, then refuse to go on below MIN_MTU.",
        "set_mtu() {",
        '  run ip link set dev "$1" mtu "$MTU"',
        '  if [ "$DRY_RUN" = 1 ]; then echo "+ test \\$(cat $SYS/class/net/$1/mtu) -ge $MIN_MTU"; return; fi',
        '  local now',
        '  now="$(cat "$SYS/class/net/$1/mtu")"',
        '  if [ "$now" -lt "$MIN_MTU" ]; then',
        '    echo "nic_setup.sh: $1 has MTU $now < $MIN_MTU: RoCE active MTU would be below 4096" >&2',
        "    exit 2",
        "  fi",
        "}",
        "pci_of() {",
        '  if [ -e "$(sysdir "$1")" ]; then basename "$(readlink -f "$(sysdir "$1")")";',
        '  else echo "${1}_pci"; fi',
        "}",
        "",
        'for dev in "${DEVICES[@]}"; do',
        '  ifc="$(netdev_of "$dev")"',
        '  set_mtu "$ifc"',
        f"  # trust DSCP, PFC on priority {priority} only (mlnx_qos, MLNX_OFED)",
        '  run mlnx_qos -i "$ifc" --trust dscp',
        f'  run mlnx_qos -i "$ifc" --pfc {pfc}',
        f"  # DCQCN reaction and notification point on priority {priority} (MLNX_OFED sysfs)",
        f'  write 1 "$SYS/class/net/$ifc/ecn/roce_rp/enable/{priority}"',
        f'  write 1 "$SYS/class/net/$ifc/ecn/roce_np/enable/{priority}"',
        *[f"  {s}" for s in sysfs],
        '  if [ "$PERSISTENT" = 1 ]; then',
        "    # firmware defaults (mstflint mlxconfig names); applied after a reboot/fw reset",
        f'    run mlxconfig -y -d "$(pci_of "$dev")" set {mlx}',
        "  fi",
        "done",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Switch files


@dataclass(frozen=True)
class PortClass:
    """Ports of one switch role with the same speed and cable."""

    role: str
    link_kind: str
    ports: tuple[int, ...]
    speed_gbps: float
    cable_m: float
    headroom_bytes: int


def port_classes(fabric) -> list[PortClass]:
    """Per switch role, the ports of its first switch grouped by link kind and speed; the
    cable length is the tier's, from the fabric file (``tuner.switchports``)."""
    import numpy as np

    from tuner.render import headroom_bytes
    from tuner.switchports import cable_lengths_m

    cables = cable_lengths_m(fabric)
    out = []
    for role in ROLES:
        names = fabric.switches.get(role) or []
        if not names:
            continue
        node = fabric.node_index[names[0]]
        links = np.flatnonzero(np.asarray(fabric.link_src) == node)
        groups: dict[tuple[str, float], list[int]] = {}
        for lid in links.tolist():
            key = (str(fabric.link_kind[lid]), float(fabric.link_capacity_bps[lid]))
            groups.setdefault(key, []).append(int(fabric.link_port[lid]))
        for (kind, cap), ports in sorted(groups.items()):
            cable = cables[kind]
            out.append(PortClass(role, kind, tuple(sorted(ports)), cap / 1e9, cable,
                                 headroom_bytes(int(cap), cable)))
    return out


def sonic_fragment(classes: Sequence[PortClass], ecn: Mapping[str, Any], priority: int,
                   cnp_priority: int, dscp: int, cnp_dscp: int) -> dict[str, Any]:
    """SONiC config_db tables for one switch role (values are strings, as in config_db):
    ``tuner.sonic.fragment`` with the simulator's switch buffer for the pools."""
    from netsim.packet.config import PacketConfig
    from tuner import sonic

    return sonic.fragment(classes, ecn, priority, cnp_priority, dscp, cnp_dscp,
                          buffer_bytes=PacketConfig().buffer_bytes, mtu_bytes=MTU_BYTES)


def _swp_ranges(ports: Sequence[int]) -> str:
    """Cumulus interface names of model ports (port N is ``swp{N+1}``), as NVUE ranges."""
    runs: list[list[int]] = []
    for n in sorted(p + 1 for p in ports):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(f"swp{a}" if a == b else f"swp{a}-{b}" for a, b in runs)


def nvue_commands(ecn: Mapping[str, Any], priority: int, cnp_priority: int, dscp: int,
                  cnp_dscp: int, cable_m: float, ports: Sequence[int] = ()) -> list[str]:
    """Cumulus Linux 5.14 NVUE commands (profile ``default-global``), ending with
    ``nv config apply``. *cable_m* is the longest cable of the switch's ports: the headroom
    it sizes covers every shorter one. ``nv set qos roce cable-length`` (Cumulus 5.3 and
    earlier) is not used: 5.4 and later take the PFC profile's ``cable-length``. The PFC
    watchdog is enabled on *ports* with Cumulus's default polling (``tuner.provenance``)."""
    from tuner import provenance

    prob = max(1, min(100, round(100 * float(ecn["pmax"]))))
    cable = max(1, int(math.ceil(cable_m)))
    tc, cc = priority, "nv set qos congestion-control default-global traffic-class"
    es = "nv set qos egress-scheduler default-global traffic-class"
    cmds = [
        "nv set qos roce mode lossless",
        "nv set qos mapping default-global trust l3",
        f"nv set qos mapping default-global dscp {dscp} switch-priority {priority}",
        f"nv set qos mapping default-global dscp {cnp_dscp} switch-priority {cnp_priority}",
        f"nv set qos pfc default-global switch-priority {priority}",
        "nv set qos pfc default-global tx enable",
        "nv set qos pfc default-global rx enable",
        f"nv set qos pfc default-global cable-length {cable}",
        f"{cc} {tc} ecn enable",
        f"{cc} {tc} min-threshold {int(ecn['kmin_bytes'])}",
        f"{cc} {tc} max-threshold {int(ecn['kmax_bytes'])}",
        f"{cc} {tc} probability {prob}",
        f"{es} {cnp_priority} mode strict",
        f"{es} {priority} mode dwrr",
        f"{es} {priority} bw-percent 50",
        f"{es} 0 mode dwrr",
        f"{es} 0 bw-percent 50",
        f"nv set qos pfc-watchdog polling-interval {provenance.CUMULUS_PFCWD_POLL_MS}",
        f"nv set qos pfc-watchdog robustness {provenance.CUMULUS_PFCWD_ROBUSTNESS}",
    ]
    if ports:
        cmds.append(f"nv set interface {_swp_ranges(ports)} qos pfc-watchdog")
    return cmds + ["nv config apply"]


# ---------------------------------------------------------------------------------------------
# Writing


def write_deployables(outdir: Path, fabric, *, rp: Mapping[str, int], np_: Mapping[str, int],
                      ecn: Mapping[str, Any], priority: int, cnp_priority: int, dscp: int,
                      cnp_dscp: int) -> list[Path]:
    """Write nic_setup.sh, sonic_config_db_<role>.json and switch_nvue_<role>.txt; their
    paths."""
    outdir = Path(outdir)
    devices = [f"mlx5_{i}" for i in range(int(fabric.nics_per_server))]
    paths = [outdir / "nic_setup.sh"]
    paths[0].write_text(nic_script(rp, np_, priority, devices))
    paths[0].chmod(0o755)
    classes = port_classes(fabric)
    for role in ROLES:
        mine = [c for c in classes if c.role == role]
        if mine:
            path = outdir / f"sonic_config_db_{role}.json"
            doc = sonic_fragment(mine, ecn, priority, cnp_priority, dscp, cnp_dscp)
            path.write_text(json.dumps(doc, indent=2) + "\n")
            paths.append(path)
    for role in ROLES:
        mine = [c for c in classes if c.role == role]
        if not mine:
            continue
        cables = ", ".join(f"{c.cable_m:g} m ({c.link_kind})" for c in mine)
        nvue = outdir / f"switch_nvue_{role}.txt"
        header = [f"# NVIDIA Cumulus Linux {NVUE_RELEASE} NVUE commands recommended by "
                  f"`netsim recommend` for every {role} switch (sources: tuner/deploy.py).",
                  f"# Cables: {cables}; the PFC cable-length is the longest, whose headroom "
                  "covers the others.",
                  "# Interfaces: the model's port N is swpN+1; rename where the front panel "
                  "differs."]
        ports = sorted({p for c in mine for p in c.ports})
        cmds = nvue_commands(ecn, priority, cnp_priority, dscp, cnp_dscp,
                             max(c.cable_m for c in mine), ports)
        nvue.write_text("\n".join(header + cmds) + "\n")
        paths.append(nvue)
    return paths


def shell_words(line: str) -> list[str]:
    """Split a command line as a POSIX shell would (for the NVUE grammar check)."""
    return shlex.split(line, comments=True)
