"""Writers of the recommendation files: nccl.env, nccl_tuner.csv, nic_dcqcn.conf,
switch_qos.yaml, placement.json and report.md.

Formats and names (../shared/reference/nccl-roce.md):

* ``nccl.env``: ``export VAR=value`` lines (also valid for ``/etc/nccl.conf`` once the
  ``export`` is dropped, section 2).
* ``nccl_tuner.csv``: the CSV the suite's tuner plugin reads (``tuner.tunerplugin``; the
  format of NCCL's example plugin, ``plugins/tuner/example``,
  ``NCCL_TUNER_CONFIG_FILE``): ``collective,min_bytes,max_bytes,algorithm,protocol,channels,
  nNodes,nRanks,numPipeOps,regBuff``, ``-1`` a wildcard, ``#`` comment lines (section 3.1).
* ``nic_dcqcn.conf``: ConnectX parameter names of ``/sys/class/net/<if>/ecn/roce_{rp,np}/``
  (MLNX_OFED/DOCA; section 5.1), an INI file with one section per reaction/notification point.
* ``switch_qos.yaml``: trust DSCP, RoCE on priority 3 with PFC, CNP on priority 6 strict
  (NVIDIA Cumulus ``nv set qos roce`` defaults, section 5.4), ECN ramp, PFC headroom per port
  speed and cable length by SONiC's formula (section 5.4).
* ``placement.json``: the trainer's placement format ``{"ranks": [{"rank", "host",
  "local_rank", "gpu"}]}`` plus the torchrun host order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

#: Column names of the tuner CSV (tuner/nccl_plugin/netsim_tuner.c; the format of NCCL's
#: plugins/tuner/example/plugin.c).
TUNER_CSV_COLUMNS = ("collective", "min_bytes", "max_bytes", "algorithm", "protocol",
                     "channels", "nNodes", "nRanks", "numPipeOps", "regBuff")
TUNER_COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
TUNER_ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
TUNER_PROTOCOLS = ("ll", "ll128", "simple")
#: NCCL's example plugin reads its file with ``fgets(line, 256, f)`` (a longer line is cut in
#: two: plugins/tuner/example/plugin.c, MAX_LINE_LENGTH); lines stay under it so the CSV
#: stays readable by both plugins.
TUNER_MAX_LINE = 256
#: Light in fibre: ~5 ns per metre (refractive index ~1.5): a cable's delay in the headroom.
CABLE_NS_PER_M = 5.0


@dataclass(frozen=True)
class Setting:
    """One row of the report: a knob, its default, the recommendation, why and the effect."""

    name: str
    scope: str            # "nccl", "nic", "switch", "placement"
    default: Any
    recommended: Any
    reason: str
    effect: str           # predicted effect, text made from simulator outputs

    @property
    def changed(self) -> bool:
        return str(self.default) != str(self.recommended)


@dataclass(frozen=True)
class TunerRow:
    """One line of ``nccl_tuner.csv``; -1 means "any"."""

    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int = -1
    n_nodes: int = -1
    n_ranks: int = -1
    num_pipe_ops: int = -1
    reg_buff: int = -1

    def __post_init__(self) -> None:
        if self.collective not in TUNER_COLLECTIVES:
            raise ValueError(f"TunerRow.collective={self.collective!r}: use {TUNER_COLLECTIVES}")
        if self.algorithm not in TUNER_ALGORITHMS:
            raise ValueError(f"TunerRow.algorithm={self.algorithm!r}: use {TUNER_ALGORITHMS}")
        if self.protocol not in TUNER_PROTOCOLS:
            raise ValueError(f"TunerRow.protocol={self.protocol!r}: use {TUNER_PROTOCOLS}")
        if not 0 <= self.min_bytes <= self.max_bytes:
            raise ValueError(f"TunerRow byte range {self.min_bytes}..{self.max_bytes} is empty")

    def cells(self) -> list[str]:
        return [self.collective, str(self.min_bytes), str(self.max_bytes), self.algorithm,
                self.protocol, str(self.channels), str(self.n_nodes), str(self.n_ranks),
                str(self.num_pipe_ops), str(self.reg_buff)]


_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def write_nccl_env(path: Path, env: Mapping[str, str], reasons: Mapping[str, str] | None = None) -> None:
    """``export NAME=value`` lines, each preceded by a ``#`` line with its reason."""
    lines = ["# NCCL settings recommended by `netsim recommend` (source this file)"]
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"environment name {name!r} is not a shell variable name")
        if re.search(r"[\s'\"$`\\]", str(value)):
            raise ValueError(f"{name}={value!r}: value needs no quoting; got shell metacharacters")
        if reasons and name in reasons:
            lines.append(f"# {reasons[name]}")
        lines.append(f"export {name}={value}")
    path.write_text("\n".join(lines) + "\n")


def write_tuner_csv(path: Path, rows: Iterable[TunerRow]) -> None:
    """The tuner plugin's CSV, with its column list as a ``#`` comment line."""
    lines = ["# NCCL tuner plugin config (NCCL_TUNER_CONFIG_FILE); -1 = any; channels -1 = "
             "NCCL's own count",
             "# " + ",".join(TUNER_CSV_COLUMNS)]
    lines += [",".join(r.cells()) for r in rows]
    for line in lines:
        if len(line) + 1 >= TUNER_MAX_LINE:
            raise ValueError(f"nccl_tuner.csv line {line[:40]!r}...: {len(line)} characters; "
                             f"the plugin reads at most {TUNER_MAX_LINE - 2} per line")
    path.write_text("\n".join(lines) + "\n")


def write_nic_conf(path: Path, rp: Mapping[str, int], np_: Mapping[str, int], priority: int = 3,
                   comments: Mapping[str, str] | None = None) -> None:
    """INI file of ConnectX DCQCN parameters; a section per point, a line per sysfs file.

    Apply with ``echo <value> > /sys/class/net/<if>/ecn/roce_rp/<name>`` (and ``roce_np``);
    ``enable_prio`` is the priority written to ``ecn/roce_{rp,np}/enable/<prio>``.
    """
    lines = ["# ConnectX DCQCN settings: /sys/class/net/<if>/ecn/<section>/<name> (MLNX_OFED/DOCA)",
             "# names and defaults: mlxconfig RPG_*/DCE_TCP_* dump, NVIDIA DOCA DCQCN parameters"]
    for section, params in (("roce_rp", rp), ("roce_np", np_)):
        lines += ["", f"[{section}]", f"enable_prio = {priority}"]
        for name, value in params.items():
            if comments and name in comments:
                lines.append(f"# {comments[name]}")
            lines.append(f"{name} = {int(value)}")
    path.write_text("\n".join(lines) + "\n")


def headroom_bytes(rate_bps: int, cable_m: float, mtu_bytes: int = 4096) -> int:
    """PFC headroom of one lossless ingress queue (SONiC's formula, nccl-roce.md 5.4).

    ``2 x frame + 2 x bytes on the cable + peer response (pause quanta x 512 / 8)``: the
    packet being sent when XOFF leaves, the cable's round trip, and the peer's reaction. The
    frame is a full RoCE packet of *mtu_bytes* payload on the wire (headers, preamble and gap:
    4,178 B for 4096), exactly what ``netsim simulate``'s headroom check asks for
    (``netsim.packet.headroom.needed_headroom_bytes``).
    """
    from netsim.packet.config import PacketConfig
    from netsim.packet.headroom import needed_headroom_bytes  # one formula for engine and switch

    latency_ps = int(round(cable_m * CABLE_NS_PER_M * 1000))
    return needed_headroom_bytes(int(rate_bps), latency_ps, PacketConfig(mtu_bytes=mtu_bytes))


def write_switch_qos(path: Path, ecn: Mapping[str, Any], ports: Sequence[Mapping[str, Any]],
                     priority: int = 3, cnp_priority: int = 6, dscp: int = 26,
                     cnp_dscp: int = 48) -> dict[str, Any]:
    """Switch QoS as YAML: trust, classes, ECN ramp and PFC headroom per port class.

    ``ports`` rows carry ``link_kind``, ``port_speed_gbps``, ``cable_m``, ``headroom_bytes``.
    Returns the document written.
    """
    doc = {
        "schema": "netsim-switch-qos/1",
        "trust": "dscp",
        "traffic_classes": {
            "roce": {"dscp": dscp, "priority": priority, "lossless": True, "pfc": True,
                     "scheduling": "wrr", "weight_percent": 50},
            "cnp": {"dscp": cnp_dscp, "priority": cnp_priority, "lossless": False,
                    "scheduling": "strict"},
            "default": {"priority": 0, "scheduling": "wrr", "weight_percent": 50},
        },
        "ecn": {"priority": priority, **dict(ecn)},
        "pfc": {"priority": priority, "ports": [dict(p) for p in ports]},
        "sources": {
            "classes": "NVIDIA Cumulus Linux `nv set qos roce` defaults",
            "headroom": "SONiC doc/qos/dynamically-headroom-calculation.md; IEEE 802.3 31B.3.7 quanta",
            "cable_m": ("the tier's cable length in the fabric file (defaults: SONiC "
                        "buffers_config.j2 per-role cables, 5 m host, 40 m tor-agg, 300 m "
                        "agg-core)"),
            "ecn": ("starting point: Kmin/Kmax the Cumulus 5.14 RoCE default (SONiC's "
                    "AZURE_LOSSLESS WRED: 1048576/2097152 B, 5%); pmax 0.2 the HPCC ns-3 "
                    "simulator's value, no switch default (Cumulus RoCE: 100%); report.md "
                    "says whether the search moved them"),
        },
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return doc


def write_placement(path: Path, ranks: Sequence[Mapping[str, Any]], extra: Mapping[str, Any]) -> dict:
    """Trainer placement file: ``{"ranks": [{"rank", "host", "local_rank", "gpu"}], ...}``."""
    hosts: list[str] = []
    for r in sorted(ranks, key=lambda r: r["rank"]):
        if r["host"] not in hosts:
            hosts.append(r["host"])
    doc = {"schema": "netsim-placement/1", "ranks": [dict(r) for r in ranks],
           "torchrun_hosts": hosts, **dict(extra)}
    from tuner.outputs import write_file_atomic

    write_file_atomic(path, json.dumps(doc, indent=2) + "\n")
    return doc


def _md_cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def write_report(path: Path, title: str, settings: Sequence[Setting], summary: Mapping[str, Any],
                 notes: Sequence[str] = ()) -> None:
    """Markdown report: the summary, then every setting (default, recommended, reason, effect)."""
    lines = [f"# {title}", ""]
    for k, v in summary.items():
        lines.append(f"- **{k}**: {v}")
    lines += ["", "| setting | scope | default | recommended | reason | predicted effect |",
              "|---|---|---|---|---|---|"]
    for s in settings:
        lines.append("| " + " | ".join(_md_cell(x) for x in (s.name, s.scope, s.default,
                     s.recommended, s.reason, s.effect)) + " |")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    path.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- readers (for tests, checks)

def parse_env_file(text: str) -> dict[str, str]:
    """Parse ``export NAME=value`` lines (comments and blanks skipped); ValueError otherwise."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.fullmatch(r"export ([A-Z_][A-Z0-9_]*)=(\S+)", line.strip())
        if not m:
            raise ValueError(f"nccl.env line {n} is not `export NAME=value`: {line!r}")
        out[m.group(1)] = m.group(2)
    return out


def parse_tuner_csv(text: str) -> list[TunerRow]:
    """Parse the plugin CSV the way plugin.c does: skip ``#``/blank lines, 8 to 10 fields."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) + 1 >= TUNER_MAX_LINE:
            raise ValueError(f"nccl_tuner.csv line {n}: {len(line)} characters, the plugin's "
                             f"fgets buffer holds {TUNER_MAX_LINE - 2}")
        if not line.strip() or line.startswith("#"):
            continue
        f = [c.strip() for c in line.split(",")]
        if not 8 <= len(f) <= 10:
            raise ValueError(f"nccl_tuner.csv line {n}: {len(f)} fields, the plugin reads 8..10")
        ints = [int(x) for x in f[1:3] + f[5:]]
        rows.append(TunerRow(f[0], ints[0], ints[1], f[3], f[4], *ints[2:]))
    return rows
