"""Read the RDMA NICs of this host: devices, ports, GID table and congestion settings.

Two sources, used together:

* **pyverbs** (rdma-core's Python binding; Debian/Ubuntu package ``python3-pyverbs``, not on
  the Python package index) for devices, port attributes (state, link layer, active MTU, lane
  speed x width) and the GID table with each entry's type (IB / RoCE v1 / RoCE v2);
* **sysfs** for what verbs does not expose: the ConnectX DCQCN parameters under
  ``/sys/class/net/<if>/ecn/roce_{rp,np}/`` (MLNX_OFED/DOCA layout), the DSCP trust mode, and a
  fallback view of ports and GIDs (``/sys/class/infiniband/<dev>/ports/<p>/...``, Linux
  Documentation/ABI/stable/sysfs-class-infiniband).

Sources for the names: ../shared/reference/nccl-roce.md sections 5.1 and 7 (rdma-core
pyverbs/device.pyx, libibverbs devinfo.c speed/width codes).

With no RDMA device, or no pyverbs and no ``/sys/class/infiniband``, :func:`probe` returns a
:class:`ProbeResult` with ``devices == []`` and a one-line ``reason``.
"""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

#: Where Debian's ``python3-pyverbs`` installs the package (outside any virtualenv).
DEBIAN_DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")

#: ``ibv_port_attr.active_mtu`` enum -> bytes (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5).
MTU_ENUM_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
#: ``active_width`` code -> lanes (rdma-core devinfo.c: 1=1X, 2=4X, 4=8X, 8=12X, 16=2X).
WIDTH_LANES = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
#: ``active_speed`` code -> Gb/s per lane (devinfo.c: SDR ... NDR, XDR).
LANE_GBPS = {1: 2.5, 2: 5.0, 4: 10.0, 8: 10.0, 16: 14.0, 32: 25.0, 64: 50.0, 128: 100.0,
             256: 200.0}
#: ``ibv_port_state`` enum names.
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
#: ``ibv_gid_type`` enum -> the sysfs spelling.
GID_TYPES = {0: "IB/RoCE v1", 1: "RoCE v1", 2: "RoCE v2"}
LINK_LAYERS = {0: "Unspecified", 1: "InfiniBand", 2: "Ethernet"}


@dataclass(frozen=True)
class GidEntry:
    """One GID table entry of a port."""

    index: int
    gid: str
    type: str          # "IB/RoCE v1" or "RoCE v2"
    netdev: str = ""   # the Ethernet interface behind it (RoCE)

    @property
    def is_roce_v2_ipv4(self) -> bool:
        """RoCE v2 with an IPv4-mapped GID (::ffff:a.b.c.d): what NCCL picks by default."""
        return self.type == "RoCE v2" and self.gid.lower().startswith("0000:0000:0000:0000:0000:ffff")


@dataclass
class PortInfo:
    """Attributes of one port of an RDMA device."""

    port: int
    state: str
    link_layer: str
    active_mtu_bytes: int | None = None
    speed_gbps: float | None = None
    phys_state: str = ""
    gids: list[GidEntry] = field(default_factory=list)

    @property
    def roce_v2_gid_indices(self) -> list[int]:
        return [g.index for g in self.gids if g.type == "RoCE v2"]

    @property
    def nccl_gid_index(self) -> int | None:
        """The GID NCCL's automatic choice lands on (RoCE v2, IPv4 family), if any."""
        for g in self.gids:
            if g.is_roce_v2_ipv4:
                return g.index
        return None


@dataclass
class DeviceInfo:
    """One RDMA device (HCA), its ports and its NIC-side congestion settings."""

    name: str
    fw_ver: str = ""
    netdevs: list[str] = field(default_factory=list)
    ports: list[PortInfo] = field(default_factory=list)
    #: netdev -> {"roce_rp": {param: value}, "roce_np": {...}, "trust": "dscp"}
    congestion: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ProbeResult:
    """What :func:`probe` found; ``devices`` is empty when there is nothing to read."""

    source: str                     # "pyverbs", "sysfs" or "none"
    devices: list[DeviceInfo] = field(default_factory=list)
    reason: str = ""

    @property
    def found(self) -> bool:
        return bool(self.devices)

    def to_json(self) -> dict[str, Any]:
        """JSON document of the ``netsim probe --json`` contract."""
        return {
            "source": self.source,
            "found": self.found,
            "reason": self.reason,
            "devices": [
                {
                    "name": d.name, "fw_ver": d.fw_ver, "netdevs": d.netdevs,
                    "ports": [
                        {"port": p.port, "state": p.state, "phys_state": p.phys_state,
                         "link_layer": p.link_layer, "active_mtu_bytes": p.active_mtu_bytes,
                         "speed_gbps": p.speed_gbps,
                         "roce_v2_gid_indices": p.roce_v2_gid_indices,
                         "nccl_gid_index": p.nccl_gid_index,
                         "gids": [{"index": g.index, "gid": g.gid, "type": g.type,
                                   "netdev": g.netdev} for g in p.gids]}
                        for p in d.ports
                    ],
                    "congestion": d.congestion,
                }
                for d in self.devices
            ],
        }


def import_pyverbs() -> ModuleType | None:
    """Import ``pyverbs.device``, looking in Debian's dist-packages when a venv hides it.

    Returns None when pyverbs is not installed. The system folder is appended (not
    prepended) for the import only, so it never shadows the virtualenv's own packages.
    """
    try:
        return importlib.import_module("pyverbs.device")
    except ImportError:
        pass
    folder = str(DEBIAN_DIST_PACKAGES)
    if not (DEBIAN_DIST_PACKAGES / "pyverbs").is_dir():
        return None
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        return importlib.import_module("pyverbs.device")
    except ImportError:
        return None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


# ---------------------------------------------------------------- sysfs

def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _number(text: str) -> int | float | str:
    """'300' -> 300, '0.5' -> 0.5, anything else unchanged."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_port_state(text: str) -> str:
    """sysfs ``state``/``phys_state`` ('4: ACTIVE', '5: LinkUp') -> 'ACTIVE' / 'LinkUp'."""
    return text.split(":", 1)[1].strip() if ":" in text else text.strip()


def parse_rate_gbps(text: str) -> float | None:
    """sysfs ``rate`` ('200 Gb/sec (4X HDR)') -> 200.0."""
    m = re.match(r"\s*([0-9.]+)\s*Gb/sec", text)
    return float(m.group(1)) if m else None


def read_congestion(net_root: Path, netdev: str) -> dict[str, Any]:
    """DCQCN settings of one netdev from ``<net_root>/<netdev>/ecn/roce_{rp,np}/``.

    ``enable/<prio>`` files become ``{"enable": {prio: 0|1}}``; every other file one
    ``param: value`` pair. Also reads ``qos/trust`` when present. Empty dict if absent.
    """
    out: dict[str, Any] = {}
    for point in ("roce_rp", "roce_np"):
        folder = net_root / netdev / "ecn" / point
        if not folder.is_dir():
            continue
        params: dict[str, Any] = {}
        for f in sorted(folder.iterdir()):
            if f.is_dir() and f.name == "enable":
                params["enable"] = {int(p.name): _number(_read(p)) for p in sorted(f.iterdir())
                                    if p.name.isdigit()}
            elif f.is_file():
                params[f.name] = _number(_read(f))
        out[point] = params
    trust = _read(net_root / netdev / "qos" / "trust")
    if trust:
        out["trust"] = trust
    return out


def _sysfs_gids(port_dir: Path) -> list[GidEntry]:
    types_dir = port_dir / "gid_attrs" / "types"
    entries = []
    if not types_dir.is_dir():
        return entries
    for f in sorted(types_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        gtype = _read(f)
        if not f.name.isdigit() or not gtype:
            continue  # unpopulated slots read as EINVAL / empty
        gid = _read(port_dir / "gids" / f.name)
        if not gid or set(gid.replace(":", "")) == {"0"}:
            continue
        entries.append(GidEntry(int(f.name), gid, gtype,
                                _read(port_dir / "gid_attrs" / "ndevs" / f.name)))
    return entries


def read_sysfs(root: Path = Path("/sys")) -> list[DeviceInfo]:
    """Devices, ports, GIDs and congestion settings from a sysfs tree rooted at ``root``.

    ``root`` is a parameter so tests can point it at a fixture directory.
    """
    ib_root = root / "class" / "infiniband"
    net_root = root / "class" / "net"
    if not ib_root.is_dir():
        return []
    devices = []
    for dev_dir in sorted(ib_root.iterdir()):
        dev = DeviceInfo(name=dev_dir.name, fw_ver=_read(dev_dir / "fw_ver"))
        ports_dir = dev_dir / "ports"
        for port_dir in sorted(ports_dir.iterdir() if ports_dir.is_dir() else [],
                               key=lambda p: int(p.name) if p.name.isdigit() else 0):
            gids = _sysfs_gids(port_dir)
            dev.ports.append(PortInfo(
                port=int(port_dir.name),
                state=parse_port_state(_read(port_dir / "state")),
                phys_state=parse_port_state(_read(port_dir / "phys_state")),
                link_layer=_read(port_dir / "link_layer"),
                speed_gbps=parse_rate_gbps(_read(port_dir / "rate")),
                gids=gids,
            ))
            for g in gids:
                if g.netdev and g.netdev not in dev.netdevs:
                    dev.netdevs.append(g.netdev)
        _attach_netdev_info(dev, net_root)
        devices.append(dev)
    return devices


def _attach_netdev_info(dev: DeviceInfo, net_root: Path) -> None:
    """Fill MTU (from the netdev when verbs gave none) and congestion settings per netdev."""
    for nd in dev.netdevs:
        cc = read_congestion(net_root, nd)
        if cc:
            dev.congestion[nd] = cc
        mtu = _read(net_root / nd / "mtu")
        for p in dev.ports:
            if p.active_mtu_bytes is None and mtu.isdigit() and any(g.netdev == nd for g in p.gids):
                # RoCE payload MTU is the largest IB MTU that fits the Ethernet MTU.
                fits = [b for b in MTU_ENUM_BYTES.values() if b <= int(mtu)]
                p.active_mtu_bytes = max(fits) if fits else None


# ---------------------------------------------------------------- pyverbs

def _ifname(ifindex: int, net_root: Path) -> str:
    for d in net_root.iterdir() if net_root.is_dir() else []:
        if _read(d / "ifindex") == str(ifindex):
            return d.name
    return ""


def read_pyverbs(pv: ModuleType, net_root: Path = Path("/sys/class/net")) -> list[DeviceInfo]:
    """Devices, ports and GID tables through pyverbs (``pv`` is ``pyverbs.device``)."""
    devices = []
    for d in pv.get_device_list():
        name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
        ctx = pv.Context(name=name)
        try:
            attr = ctx.query_device()
            dev = DeviceInfo(name=name, fw_ver=str(getattr(attr, "fw_ver", "")))
            gid_entries = ctx.query_gid_table(1024)
            for port in range(1, int(attr.phys_port_cnt) + 1):
                pa = ctx.query_port(port)
                gids = [GidEntry(int(g.gid_index), str(g.gid_str), GID_TYPES.get(int(g.gid_type), "?"),
                                 _ifname(int(g.ndev_ifindex), net_root))
                        for g in gid_entries if int(g.port_num) == port]
                lanes = WIDTH_LANES.get(int(pa.active_width))
                lane = LANE_GBPS.get(int(pa.active_speed))
                dev.ports.append(PortInfo(
                    port=port,
                    state=PORT_STATES.get(int(pa.state), str(pa.state)),
                    phys_state=str(pa.phys_state),
                    link_layer=LINK_LAYERS.get(int(pa.link_layer), str(pa.link_layer)),
                    active_mtu_bytes=MTU_ENUM_BYTES.get(int(pa.active_mtu)),
                    speed_gbps=lanes * lane if lanes and lane else None,
                    gids=gids))
                for g in gids:
                    if g.netdev and g.netdev not in dev.netdevs:
                        dev.netdevs.append(g.netdev)
        finally:
            ctx.close()
        _attach_netdev_info(dev, net_root)
        devices.append(dev)
    return devices


def probe(sysfs_root: Path = Path("/sys"), use_pyverbs: bool = True) -> ProbeResult:
    """Probe the host's RDMA NICs: pyverbs first, sysfs as the fallback.

    Parameters
    ----------
    sysfs_root
        Root of the sysfs tree (tests pass a fixture directory).
    use_pyverbs
        Try pyverbs first (False reads sysfs only).

    Returns
    -------
    ProbeResult
        ``devices`` empty and ``reason`` set to one line when nothing can be read.
    """
    pv = import_pyverbs() if use_pyverbs else None
    if pv is not None:
        try:
            devices = read_pyverbs(pv, sysfs_root / "class" / "net")
        except Exception as exc:  # noqa: BLE001 - pyverbs raises PyverbsRDMAError with no devices
            devices = []
            why = f"pyverbs found no RDMA device ({exc})"
        else:
            why = "pyverbs found no RDMA device"
        if devices:
            return ProbeResult("pyverbs", devices)
    else:
        why = ("pyverbs is not installed (apt-get install python3-pyverbs; see docs/probe.md)"
               if use_pyverbs else "pyverbs not used")
    devices = read_sysfs(sysfs_root)
    if devices:
        return ProbeResult("sysfs", devices, reason=why)
    return ProbeResult("none", [], reason=f"no RDMA device on this host: {why}; "
                       f"{sysfs_root / 'class' / 'infiniband'} is absent or empty")
