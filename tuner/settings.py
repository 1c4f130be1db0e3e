"""Read a ``netsim recommend -o DIR`` output back: what ``netsim simulate --settings DIR`` applies.

:func:`read_settings` reads the three files that carry simulated settings and validates each on
load (``inputspec``: one line naming the file, the key and a good value; the CLI exits 2):

* ``nic_dcqcn.conf``: ConnectX DCQCN parameters by firmware name, an INI section per point
  (``roce_rp``, ``roce_np``); names from :data:`netsim.cc.params.FIRMWARE_PARAMS`;
* ``switch_qos.yaml``: classes, the ECN ramp (Kmin, Kmax, Pmax) and PFC headroom per port class;
* ``nccl.env``: ``export NAME=value`` lines; the QPs per connection and the retransmit timer.

Unknown keys are refused everywhere (an unknown firmware name, YAML key or NCCL variable), so a
change of a file's format fails the round-trip test (``tests/tuner/test_settings.py``) instead of
being skipped silently. :func:`packet_plan` and :func:`flow_plan` say, for every value read, what
the engine of that level does with it (applied to which knob, or why not).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inputspec import InputError, from_dict, read_data, read_text, rule

NIC_FILE, SWITCH_FILE, NCCL_FILE = "nic_dcqcn.conf", "switch_qos.yaml", "nccl.env"
SWITCH_SCHEMA = "netsim-switch-qos/1"
SECTIONS = ("roce_rp", "roce_np")

#: Every NCCL variable ``nccl.env`` may hold, with what ``netsim simulate`` does with it. Those
#: with a knob are applied (:data:`NCCL_KNOBS`); the others are host settings no engine models.
NCCL_VARIABLES: dict[str, str] = {
    "NCCL_IB_QPS_PER_CONNECTION": "QPs per connection (both levels)",
    "NCCL_IB_TIMEOUT": "retransmit timer 4.096 us x 2^N (packet level)",
    "NCCL_IB_RETRY_CNT": "retries before the QP errors (packet level)",
    "NCCL_IB_SPLIT_DATA_ON_QPS": "0 = whole messages round-robin over the QPs, 1 = each split "
                                 "over all; the engines spread a connection's bytes evenly over "
                                 "its QPs either way (the same for long transfers)",
    "NCCL_IB_TC": "traffic class (DSCP 26): the engines put RoCE in the lossless class anyway",
    "NCCL_IB_HCA": "which NICs NCCL uses: the fabric file's NICs are the simulated ones",
    "NCCL_IB_GID_INDEX": "GID choice on the host: not simulated",
    "NCCL_SOCKET_IFNAME": "bootstrap sockets: not simulated",
    "NCCL_NET_GDR_LEVEL": "GPUDirect RDMA on the host: not simulated",
    "NCCL_TUNER_PLUGIN": "NCCL tuner plugin: its algorithm rows are not simulated here",
    "NCCL_TUNER_CONFIG_FILE": "the tuner plugin's CSV: not simulated here",
}

#: Variables with a simulator knob: (knob, smallest, largest value; NCCL's ranges, nccl-roce.md 2).
NCCL_KNOBS: dict[str, tuple[str, int, int]] = {
    "NCCL_IB_QPS_PER_CONNECTION": ("qps", 1, 128),
    "NCCL_IB_TIMEOUT": ("ib_timeout", 1, 31),
    "NCCL_IB_RETRY_CNT": ("retry_cnt", 0, 7),
}


# --------------------------------------------------------------------------------- schemas


@dataclass(frozen=True)
class TrafficClass:
    """One class of ``switch_qos.yaml``'s ``traffic_classes``."""

    priority: int = rule(min=0, max=7, example=3)
    scheduling: str = rule(choices=("strict", "wrr"), example="wrr")
    dscp: int | None = rule(None, min=0, max=63, example=26)
    lossless: bool = False
    pfc: bool = False
    weight_percent: int | None = rule(None, min=0, max=100, example=50)


@dataclass(frozen=True)
class TrafficClasses:
    roce: TrafficClass
    cnp: TrafficClass
    default: TrafficClass


@dataclass(frozen=True)
class EcnThresholds:
    """The ECN ramp on the RoCE egress queue (the engine's ``ecn_kmin/kmax_bytes``, ``ecn_pmax``)."""

    priority: int = rule(min=0, max=7, example=3)
    kmin_bytes: int = rule(min=0, example=150_000)
    kmax_bytes: int = rule(min=0, example=1_500_000)
    pmax: float = rule(min=0.0, max=1.0, example=0.2)

    def __post_init__(self) -> None:
        if self.kmax_bytes < self.kmin_bytes:
            raise ValueError(f"ecn.kmax_bytes: got {self.kmax_bytes}; expected >= kmin_bytes "
                             f"{self.kmin_bytes} (e.g. kmax_bytes: {10 * self.kmin_bytes})")


@dataclass(frozen=True)
class PortHeadroom:
    """PFC headroom of one port class (link kind x speed x cable length)."""

    link_kind: str = rule(choices=("host", "tor-agg", "agg-core"), example="host")
    port_speed_gbps: float = rule(gt=0, example=400.0)
    cable_m: float = rule(min=0, example=100.0)
    headroom_bytes: int = rule(min=1, example=165_000)


@dataclass(frozen=True)
class PfcSettings:
    priority: int = rule(min=0, max=7, example=3)
    ports: tuple[PortHeadroom, ...] = ()


@dataclass(frozen=True)
class SwitchQos:
    """``switch_qos.yaml``: every key the file may hold (others are refused)."""

    schema: str = rule(choices=(SWITCH_SCHEMA,), example=SWITCH_SCHEMA)
    trust: str = rule(choices=("dscp", "pcp"), example="dscp")
    traffic_classes: TrafficClasses
    ecn: EcnThresholds
    pfc: PfcSettings
    sources: dict[str, str] | None = None

    def __post_init__(self) -> None:
        prio = self.traffic_classes.roce.priority
        for name, p in (("ecn.priority", self.ecn.priority), ("pfc.priority", self.pfc.priority)):
            if p != prio:
                raise ValueError(f"{name}: got {p}; expected the RoCE class's priority {prio} "
                                 f"(traffic_classes.roce.priority), e.g. {name.split('.')[1]}: {prio}")


@dataclass(frozen=True)
class NicSettings:
    """``nic_dcqcn.conf``: the priority DCQCN is enabled on and the values by firmware name."""

    enable_prio: int
    rp: Mapping[str, int]
    np: Mapping[str, int]

    def engine_params(self) -> dict[str, int]:
        """The simulated values, renamed to :class:`netsim.cc.params.DcqcnParams` fields."""
        from netsim.cc.params import FIRMWARE_BY_NAME

        out = {}
        for name, value in {**self.rp, **self.np}.items():
            engine = FIRMWARE_BY_NAME[name].engine
            if engine is not None:
                out[engine] = value
        return out


@dataclass(frozen=True)
class NcclSettings:
    """``nccl.env``: every variable, and the ones a simulator knob takes (None: not in the file)."""

    env: Mapping[str, str]
    qps: int | None
    ib_timeout: int | None
    retry_cnt: int | None


@dataclass(frozen=True)
class RecommendedSettings:
    """What ``netsim recommend -o DIR`` wrote into ``DIR`` and a simulator can apply."""

    directory: str
    nic: NicSettings
    switch: SwitchQos
    nccl: NcclSettings


# --------------------------------------------------------------------------------- readers


def read_settings(directory: str | Path) -> RecommendedSettings:
    """Read and validate ``nic_dcqcn.conf``, ``switch_qos.yaml`` and ``nccl.env`` of a
    ``netsim recommend -o DIR`` output; any bad or unknown value raises :class:`InputError`."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"--settings {d}", problem="is not a directory; give the -o DIR of "
                         "netsim recommend")
    switch = read_switch_qos(d / SWITCH_FILE)
    nic = read_nic_conf(d / NIC_FILE)
    roce = switch.traffic_classes.roce.priority
    if nic.enable_prio != roce:
        raise InputError(f"{NIC_FILE} {d / NIC_FILE}", "enable_prio", nic.enable_prio,
                         f"the RoCE priority of {SWITCH_FILE} ({roce}), or DCQCN does not act "
                         "on the RoCE class", roce)
    return RecommendedSettings(str(d), nic, switch, read_nccl_env(d / NCCL_FILE))


def read_switch_qos(path: Path) -> SwitchQos:
    """``switch_qos.yaml`` checked against :class:`SwitchQos`."""
    return from_dict(SwitchQos, read_data(path, SWITCH_FILE), f"{SWITCH_FILE} {path}")


def read_nic_conf(path: Path) -> NicSettings:
    """``nic_dcqcn.conf``: ``[roce_rp]`` and ``[roce_np]`` sections of ``name = integer`` lines,
    each name a firmware name of its section; the values checked by ``DcqcnParams``."""
    source = f"{NIC_FILE} {path}"
    sections = _ini_sections(read_text(path, NIC_FILE), source)
    prios = {s: sections[s].pop("enable_prio", None) for s in SECTIONS}
    for s, p in prios.items():
        if p is None or not 0 <= p <= 7:
            raise InputError(source, f"[{s}] enable_prio", p, "the RoCE priority 0..7", 3)
    if prios["roce_rp"] != prios["roce_np"]:
        raise InputError(source, "[roce_np] enable_prio", prios["roce_np"],
                         "the same priority as [roce_rp]", prios["roce_rp"])
    nic = NicSettings(prios["roce_rp"], sections["roce_rp"], sections["roce_np"])
    _check_dcqcn_values(nic, source)
    return nic


def _ini_sections(text: str, source: str) -> dict[str, dict[str, int]]:
    """Parse the INI text into {section: {name: int}}, refusing unknown sections and names."""
    from netsim.cc.params import FIRMWARE_PARAMS

    known = {s: ["enable_prio"] + [f.firmware for f in FIRMWARE_PARAMS if f.section == s]
             for s in SECTIONS}
    out: dict[str, dict[str, int]] = {}
    section = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            if section not in SECTIONS or section in out:
                raise InputError(source, problem=f"line {n}: section [{section}] is unknown or "
                                 f"repeated; expected each of [roce_rp] and [roce_np] once")
            out[section] = {}
            continue
        name, sep, value = (t.strip() for t in line.partition("="))
        if not sep or section is None:
            raise InputError(source, problem=f"line {n}: {raw.strip()!r} is not `name = value` "
                             "inside a [roce_rp] or [roce_np] section (e.g. rpg_time_reset = 300)")
        if name not in known[section]:
            raise InputError(source, problem=f"[{section}] {name}: unknown parameter; known "
                             f"ones: {', '.join(known[section])}")
        if name in out[section]:
            raise InputError(source, problem=f"[{section}] {name}: given twice; keep one line")
        try:
            out[section][name] = int(value)
        except ValueError:
            raise InputError(source, f"[{section}] {name}", value,
                             "an integer (firmware takes integers)", 300) from None
    missing = [s for s in SECTIONS if s not in out]
    if missing:
        raise InputError(source, problem=f"no [{missing[0]}] section; expected [roce_rp] and "
                         "[roce_np] as netsim recommend writes them")
    return out


def _check_dcqcn_values(nic: NicSettings, source: str) -> None:
    """Range checks of the engine's DcqcnParams (and CNP marking), errors by firmware name."""
    from netsim.cc.params import FIRMWARE_BY_NAME, DcqcnParams

    for section, values in (("roce_rp", nic.rp), ("roce_np", nic.np)):
        for name, value in values.items():
            engine = FIRMWARE_BY_NAME[name].engine
            if engine is None:
                top = 63 if name == "cnp_dscp" else 7
                if not 0 <= value <= top:
                    raise InputError(source, f"[{section}] {name}", value, f"0..{top}",
                                     48 if top == 63 else 6)
                continue
            try:
                DcqcnParams.from_dict({engine: value})
            except ValueError as exc:
                good = getattr(DcqcnParams(), engine)
                raise InputError(source, f"[{section}] {name}", value,
                                 f"a valid value ({str(exc).split(' is invalid: ')[-1]})",
                                 int(good)) from None


def read_nccl_env(path: Path) -> NcclSettings:
    """``nccl.env``: ``export NAME=value`` lines of known NCCL variables (:data:`NCCL_VARIABLES`)."""
    from tuner.render import parse_env_file

    source = f"{NCCL_FILE} {path}"
    try:
        env = parse_env_file(read_text(path, NCCL_FILE))
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(source, problem=str(exc)) from None
    for name in env:
        if name not in NCCL_VARIABLES:
            raise InputError(source, problem=f"{name}: unknown variable; known ones: "
                             f"{', '.join(NCCL_VARIABLES)} (add it to tuner.settings."
                             "NCCL_VARIABLES with what the simulators do with it)")
    knobs = {knob: _env_int(env, name, lo, hi, source)
             for name, (knob, lo, hi) in NCCL_KNOBS.items()}
    return NcclSettings(env, **knobs)


def _env_int(env: Mapping[str, str], name: str, lo: int, hi: int, source: str) -> int | None:
    if name not in env:
        return None
    text = env[name]
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise InputError(source, name, text, f"an integer in {lo}..{hi}", max(lo, 1))
    return value


# --------------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class SettingUse:
    """What one level does with one value read: applied to ``knob``, or not and why."""

    file: str
    key: str
    value: Any
    knob: str | None      # the engine knob set (None: not applied)
    why: str = ""         # why not applied

    def to_json(self) -> dict[str, Any]:
        out = {"file": self.file, "key": self.key, "value": self.value}
        if self.knob is not None:
            out["knob"] = self.knob
        else:
            out["why"] = self.why
        return out


@dataclass(frozen=True)
class Plan:
    """The settings of one simulate run: knob values to set, and every value's use."""

    knobs: dict[str, Any]
    uses: tuple[SettingUse, ...]

    def to_json(self, directory: str) -> dict[str, Any]:
        return {"dir": directory,
                "applied": [u.to_json() for u in self.uses if u.knob is not None],
                "not_applied": [u.to_json() for u in self.uses if u.knob is None]}


def _nic_uses(rs: RecommendedSettings, cc: str, explicit_cc: set[str]) -> list[SettingUse]:
    """DCQCN firmware values -> ``cc_params.<field>`` (packet level)."""
    from netsim.cc.params import FIRMWARE_BY_NAME, PARAMS_BY_CC

    cls = PARAMS_BY_CC.get(cc)
    fields = set(cls.__dataclass_fields__) if cls is not None else set()
    uses = [SettingUse(NIC_FILE, "enable_prio", rs.nic.enable_prio, None,
                       "checked equal to the RoCE priority; the engine simulates that one class")]
    for section, values in (("roce_rp", rs.nic.rp), ("roce_np", rs.nic.np)):
        for name, value in values.items():
            engine = FIRMWARE_BY_NAME[name].engine
            key = f"[{section}] {name}"
            if engine is None:
                why = "CNP marking: the engine's CNPs travel in their own strict-priority class"
            elif engine in explicit_cc:
                why = f"overridden by --cc-param {engine}"
            elif engine not in fields:
                why = f"--cc {cc} has no parameter {engine}"
            else:
                uses.append(SettingUse(NIC_FILE, key, value, f"cc_params.{engine}"))
                continue
            uses.append(SettingUse(NIC_FILE, key, value, None, why))
    return uses


def _switch_uses(rs: RecommendedSettings, explicit: set[str]) -> list[SettingUse]:
    """ECN ramp and PFC of the RoCE class -> PacketConfig fields (packet level)."""
    e, roce = rs.switch.ecn, rs.switch.traffic_classes.roce
    rows = [("ecn.kmin_bytes", e.kmin_bytes, "ecn_kmin_bytes", "--ecn-kmin"),
            ("ecn.kmax_bytes", e.kmax_bytes, "ecn_kmax_bytes", "--ecn-kmax"),
            ("ecn.pmax", e.pmax, "ecn_pmax", None),
            ("traffic_classes.roce.pfc", roce.pfc, "pfc", "--pfc")]
    uses = [SettingUse(SWITCH_FILE, key, value, None, f"overridden by {flag}")
            if flag in explicit else SettingUse(SWITCH_FILE, key, value, knob)
            for key, value, knob, flag in rows]
    for p in rs.switch.pfc.ports:
        uses.append(SettingUse(
            SWITCH_FILE, f"pfc.ports[{p.link_kind} {p.port_speed_gbps:g}G {p.cable_m:g} m]"
            ".headroom_bytes", p.headroom_bytes, None,
            "the engine sizes each port's headroom by the same formula (netsim.packet.headroom) "
            "from the simulated fabric's own speeds and cable delays"))
    return uses


def _nccl_uses(rs: RecommendedSettings, level: str, explicit: set[str]) -> list[SettingUse]:
    """NCCL variables: QPs at both levels, the retransmit timer at the packet level."""
    flags = {"qps": "--qps", "ib_timeout": "--ib-timeout", "retry_cnt": "--retry-cnt"}
    uses = []
    for name, text in rs.nccl.env.items():
        knob = NCCL_KNOBS.get(name, (None,))[0]
        if knob is None:
            uses.append(SettingUse(NCCL_FILE, name, text, None, NCCL_VARIABLES[name]))
        elif level == "flow" and knob != "qps":
            uses.append(SettingUse(NCCL_FILE, name, int(text), None,
                                   "the flow engine loses no packet: no retransmit timer"))
        elif flags[knob] in explicit:
            uses.append(SettingUse(NCCL_FILE, name, int(text), None, f"overridden by {flags[knob]}"))
        else:
            uses.append(SettingUse(NCCL_FILE, name, int(text), knob))
    return uses


def _knobs(uses: list[SettingUse]) -> dict[str, Any]:
    """Knob -> value of the applied uses; ``cc_params.X`` collected into one ``cc_params`` dict."""
    knobs: dict[str, Any] = {}
    for u in uses:
        if u.knob is None:
            continue
        if u.knob.startswith("cc_params."):
            knobs.setdefault("cc_params", {})[u.knob.split(".", 1)[1]] = u.value
        else:
            knobs[u.knob] = u.value
    return knobs


def packet_plan(rs: RecommendedSettings, cc: str, explicit: set[str],
                explicit_cc: set[str]) -> Plan:
    """What ``--level packet`` applies: DCQCN values of the algorithm ``cc`` (as ``cc_params``
    fields), the ECN ramp, PFC on the RoCE class, QPs and the retransmit timer.

    ``explicit``: the flags given on the command line (``--ecn-kmin``, ``--qps``, ...), which win
    over the file; ``explicit_cc``: the engine fields ``--cc-param`` set.
    """
    uses = (_nic_uses(rs, cc, explicit_cc) + _switch_uses(rs, explicit)
            + _nccl_uses(rs, "packet", explicit))
    return Plan(_knobs(uses), tuple(uses))


#: Why the flow engine ignores the NIC and switch files (docs/flow-engine.md).
FLOW_IGNORES = {
    NIC_FILE: "the flow engine's dcqcn model is max-min sharing scaled by a fitted efficiency "
              "(no DCQCN rate state): firmware parameters do not enter it",
    SWITCH_FILE: "the flow engine marks no ECN and sizes no buffer (its pfc model shares "
                 "per ingress port without byte thresholds): ECN thresholds do not enter it",
}


def flow_plan(rs: RecommendedSettings, explicit: set[str]) -> Plan:
    """What ``--level flow`` applies: the QPs per connection; every other value is listed with
    why the flow engine ignores it."""
    uses = [SettingUse(NIC_FILE, f"[{s}] {k}", v, None, FLOW_IGNORES[NIC_FILE])
            for s, vals in (("roce_rp", rs.nic.rp), ("roce_np", rs.nic.np)) for k, v in vals.items()]
    e = rs.switch.ecn
    uses += [SettingUse(SWITCH_FILE, k, v, None, FLOW_IGNORES[SWITCH_FILE])
             for k, v in (("ecn.kmin_bytes", e.kmin_bytes), ("ecn.kmax_bytes", e.kmax_bytes),
                          ("ecn.pmax", e.pmax))]
    uses += _nccl_uses(rs, "flow", explicit)
    return Plan(_knobs(uses), tuple(uses))
