"""Typed parameters of the congestion-control algorithms and of the switch's ECN marking.

Every field carries its unit in its name and a comment naming its source; the sources are
collected in ``docs/congestion-control.md`` and ``../shared/reference/nccl-roce.md`` (section
5.1, NVIDIA ConnectX firmware defaults) and ``peer-simulators.md`` (sections 1.2, 4.2, 6, 7).

Each dataclass has ``from_dict`` (rejects unknown keys, naming them) and ``to_dict`` so the CLI
and the tuner can read and set every parameter. ``parse_cc_params`` turns ``KEY=VALUE`` strings
(as a ``--cc-param`` flag would collect them) into such a dictionary.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from topologies.units import PS_PER_US

P = TypeVar("P", bound="_Params")

_KINDS = {"int": int, "float": float, "bool": bool, "str": str, "int | None": int}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(cls_name: str, name: str, kind: type, value: Any) -> Any:
    """Convert ``value`` to the field's type, or raise a ValueError naming the field."""
    try:
        if kind is bool:
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            if isinstance(value, (bool, int, np.integer)) and int(value) in (0, 1):
                return bool(value)
            raise ValueError
        if kind is str:
            return str(value).strip()
        if kind is int:
            as_float = float(value)
            if not as_float.is_integer():
                raise ValueError
            return int(as_float)
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{cls_name}.{name}: {value!r} is not a valid {kind.__name__}; "
            f"give a {kind.__name__} value, e.g. {name}={'1' if kind is not bool else 'true'}"
        ) from None


@dataclass(frozen=True)
class FirmwareParam:
    """One ConnectX DCQCN parameter: its firmware name and the engine field that models it."""

    firmware: str         # file under /sys/class/net/<if>/ecn/<section>/, key of nic_dcqcn.conf
    section: str          # "roce_rp" (reaction point, sender) or "roce_np" (notification point)
    engine: str | None    # DcqcnParams field (same unit: the name says it); None = not simulated


#: ConnectX DCQCN parameters by the names MLNX_OFED/DOCA give their sysfs files
#: (``/sys/class/net/<if>/ecn/roce_{rp,np}/<name>``) and mlxconfig its ``RPG_*`` / ``DCE_TCP_*``
#: settings, next to the engine field of each. Sources (../shared/reference/nccl-roce.md 5.1):
#: NVIDIA DOCA "DCQCN CC Parameters" (networking-docs.nvidia.com/doca/archive/3-4-0/
#: dcqcn-cc-parameters), a public ``mlxconfig q`` dump, Mellanox community DOC-2790 "DCQCN
#: Parameters" (dce_tcp_g) and the mstflint mlxconfig descriptions (clamp_tgt_rate*). The
#: firmware units are the engine's (us, Mb/s, percent, /1024 fixed point), so the map is a rename.
FIRMWARE_PARAMS: tuple[FirmwareParam, ...] = (
    FirmwareParam("rpg_time_reset", "roce_rp", "rpg_time_reset_us"),
    FirmwareParam("rpg_byte_reset", "roce_rp", "rpg_byte_reset"),
    FirmwareParam("rpg_threshold", "roce_rp", "rpg_threshold"),
    FirmwareParam("rpg_ai_rate", "roce_rp", "rpg_ai_rate_mbps"),
    FirmwareParam("rpg_hai_rate", "roce_rp", "rpg_hai_rate_mbps"),
    FirmwareParam("rpg_max_rate", "roce_rp", "rpg_max_rate_mbps"),
    FirmwareParam("rpg_min_rate", "roce_rp", "rpg_min_rate_mbps"),
    FirmwareParam("rpg_gd", "roce_rp", "rpg_gd"),
    FirmwareParam("rpg_min_dec_fac", "roce_rp", "rpg_min_dec_fac_pct"),
    FirmwareParam("rate_to_set_on_first_cnp", "roce_rp", "rate_to_set_on_first_cnp_mbps"),
    FirmwareParam("dce_tcp_g", "roce_rp", "dce_tcp_g"),
    FirmwareParam("dce_tcp_rtt", "roce_rp", "dce_tcp_rtt_us"),
    FirmwareParam("initial_alpha_value", "roce_rp", "initial_alpha_value"),
    FirmwareParam("rate_reduce_monitor_period", "roce_rp", "rate_reduce_monitor_period_us"),
    FirmwareParam("clamp_tgt_rate", "roce_rp", "clamp_tgt_rate"),
    FirmwareParam("clamp_tgt_rate_after_time_inc", "roce_rp", "clamp_tgt_rate_after_time_inc"),
    FirmwareParam("min_time_between_cnps", "roce_np", "min_time_between_cnps_us"),
    # CNP marking (CS6, priority 6): the engine sends CNPs in their own strict-priority class
    # whatever the values (PacketConfig.cnp_class), so they are read but not simulated.
    FirmwareParam("cnp_dscp", "roce_np", None),
    FirmwareParam("cnp_802p_prio", "roce_np", None),
)

#: Firmware name -> its :class:`FirmwareParam`.
FIRMWARE_BY_NAME: dict[str, FirmwareParam] = {f.firmware: f for f in FIRMWARE_PARAMS}


def engine_names(data: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """``data`` with every firmware name (``rpg_time_reset``) whose engine field is one of
    ``fields`` renamed to that field (``rpg_time_reset_us``); other keys pass unchanged.

    >>> engine_names({"rpg_time_reset": "50", "rpg_gd": 11}, ["rpg_time_reset_us", "rpg_gd"])
    {'rpg_time_reset_us': '50', 'rpg_gd': 11}
    """
    fields = set(fields)
    out: dict[str, Any] = {}
    for key, value in data.items():
        fw = FIRMWARE_BY_NAME.get(key)
        name = fw.engine if fw is not None and fw.engine in fields else key
        if name in out:
            raise ValueError(f"parameter {name} given twice (as {name} and as its firmware "
                             f"name {key}); give one")
        out[name] = value
    return out


@dataclass(frozen=True)
class _Params:
    """Common ``from_dict``/``to_dict``/validation of the parameter dataclasses."""

    @classmethod
    def from_dict(cls: type[P], data: Mapping[str, Any] | None = None) -> P:
        """Build from a mapping of field name to value; unknown keys raise ``ValueError``.

        Parameters
        ----------
        data : mapping or None
            Field values (numbers, bools or numeric strings). Missing fields keep defaults.
            A ConnectX firmware name of :data:`FIRMWARE_PARAMS` (``rpg_time_reset``, the
            name ``nic_dcqcn.conf`` writes) stands for its engine field when the class has it.

        Returns
        -------
        The validated dataclass.

        Raises
        ------
        ValueError
            On an unknown key (the message lists the valid ones) or a bad value.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        data = engine_names(data or {}, fields)
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(
                f"unknown {cls.__name__} parameter(s) {', '.join(unknown)}; "
                f"valid ones are: {', '.join(fields)}"
            )
        kinds = {name: _KINDS[str(f.type)] for name, f in fields.items()}
        values = {k: v if v is None and "None" in str(fields[k].type)
                  else _coerce(cls.__name__, k, kinds[k], v) for k, v in data.items()}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Return every field as a plain dictionary (the inverse of ``from_dict``)."""
        return dataclasses.asdict(self)

    def replace(self: P, **changes: Any) -> P:
        """Return a copy with ``changes`` applied (validated like ``from_dict``)."""
        return type(self).from_dict({**self.to_dict(), **changes})

    def _check(self, name: str, ok: bool, hint: str) -> None:
        if not ok:
            raise ValueError(
                f"{type(self).__name__}.{name} = {getattr(self, name)!r} is invalid: {hint}"
            )


@dataclass(frozen=True)
class EcnParams(_Params):
    """RED-style ECN marking of a switch egress queue (the DCQCN congestion point).

    The probability is 0 up to ``kmin_bytes``, rises linearly to ``pmax`` at ``kmax_bytes`` and
    is 1 above ``kmax_bytes`` (DCQCN paper section 3; HPCC ns-3 ``switch-mmu.cc``).
    """

    # NVIDIA Cumulus Linux / Onyx "roce lossless" default: ECN min 150 KB on the RoCE class
    # (nccl-roce.md 5.4).
    kmin_bytes: int = 150_000
    # Same source: ECN max 1500 KB.
    kmax_bytes: int = 1_500_000
    # The Cumulus default probability is not in our sources; 0.2 is the HPCC ns-3 simulator's
    # PMAX_MAP at every rate (peer-simulators.md 1.2). The DCQCN paper used 1%.
    pmax: float = 0.2

    def __post_init__(self) -> None:
        self._check("kmin_bytes", self.kmin_bytes >= 0, "must be >= 0 bytes")
        self._check("kmax_bytes", self.kmax_bytes >= self.kmin_bytes,
                    "must be >= kmin_bytes (set both, e.g. kmin_bytes=150000 kmax_bytes=1500000)")
        self._check("pmax", 0.0 <= self.pmax <= 1.0, "must be a probability in [0, 1]")

    def mark_probability(self, queue_bytes):
        """Probability that a packet leaving a queue of ``queue_bytes`` gets ECN-marked.

        Parameters
        ----------
        queue_bytes : float or numpy.ndarray
            Egress queue occupancy in bytes (scalar or array).

        Returns
        -------
        float or numpy.ndarray
            0 for ``q <= kmin``; ``pmax * (q - kmin) / (kmax - kmin)`` for ``kmin < q <= kmax``;
            1 for ``q > kmax``.

        Examples
        --------
        >>> e = EcnParams(kmin_bytes=100, kmax_bytes=300, pmax=0.5)
        >>> e.mark_probability(50), e.mark_probability(200), e.mark_probability(301)
        (0.0, 0.25, 1.0)
        """
        q = np.asarray(queue_bytes, dtype=float)
        span = max(self.kmax_bytes - self.kmin_bytes, 1e-12)
        ramp = self.pmax * np.clip((q - self.kmin_bytes) / span, 0.0, 1.0)
        p = np.where(q > self.kmax_bytes, 1.0, np.where(q > self.kmin_bytes, ramp, 0.0))
        return float(p) if p.ndim == 0 else p


@dataclass(frozen=True)
class DcqcnParams(_Params):
    """DCQCN reaction point (sender NIC) and notification point (receiver NIC) parameters.

    Defaults are NVIDIA ConnectX firmware defaults (``mlxconfig`` dump cross-checked with
    NVIDIA DOCA "DCQCN CC Parameters", nccl-roce.md 5.1); the algorithm is the DCQCN paper's
    (Zhu et al., SIGCOMM 2015) as the firmware implements it. Fixed-point firmware values are
    kept in firmware units; the conversions are in ``docs/congestion-control.md``.
    """

    # rpg_time_reset: us between timer-driven rate-increase events (the paper's timer T).
    rpg_time_reset_us: float = 300.0
    # rpg_byte_reset: the firmware value of the byte counter B (paper's B; 0 = off), as
    # nic_dcqcn.conf / mlxconfig carry it (ConnectX default 32767, the largest 15-bit value).
    rpg_byte_reset: int = 32767
    # Bytes per unit of rpg_byte_reset. 64 (default): B = 32767 x 64 B = 2 MB, the reading under
    # which NIC-default DCQCN keeps a 2:1 incast near line rate (as real NICs do), Spirent's
    # DCQCN emulation default (2 MB) and the DCQCN paper's order (10 MB). 1: mstflint's literal
    # "Given in Bytes" (B = 32 KB). docs/congestion-control.md gives both readings.
    rpg_byte_reset_unit_bytes: int = 64
    # Override of B in bytes (None: rpg_byte_reset x rpg_byte_reset_unit_bytes; 0 = off). Kept
    # for the flags and keys written before the unit was a parameter.
    rpg_byte_reset_bytes: int | None = None
    # rpg_threshold: the paper's F, number of fast-recovery events before additive increase.
    rpg_threshold: int = 1
    # rpg_ai_rate: additive increase of the target rate per event.
    rpg_ai_rate_mbps: float = 5.0
    # rpg_hai_rate: hyper-additive increase of the target rate per event.
    rpg_hai_rate_mbps: float = 50.0
    # rpg_max_rate: 0 means the line rate.
    rpg_max_rate_mbps: float = 0.0
    # rpg_min_rate: per-QP rate floor.
    rpg_min_rate_mbps: float = 1.0
    # rpg_gd: log2 divisor of the fixed-point alpha in the cut, Rc *= 1 - alpha_fp / 2^gd; with
    # alpha_fp = 1024 alpha, gd = 11 gives the paper's Rc *= 1 - alpha/2.
    rpg_gd: int = 11
    # rpg_min_dec_fac: a single cut keeps at least this percent of the rate.
    rpg_min_dec_fac_pct: float = 50.0
    # rate_to_set_on_first_cnp: 0 = cut as usual on the first CNP.
    rate_to_set_on_first_cnp_mbps: float = 0.0
    # dce_tcp_g: alpha EWMA constant in /1024, read as set by ``dce_tcp_g_reading``. Default
    # reading "old_weight" (Mellanox community DOC-2790 "DCQCN Parameters", later revisions):
    # every dce_tcp_rtt, alpha <- (G/1024) alpha + (1 - G/1024) [CNP in the period] or
    # alpha <- (G/1024) alpha, i.e. the paper's gain g = 1 - G/1024 = 5/1024 for G = 1019 (the
    # DCQCN paper uses g = 1/256 = 4/1024, HPCC ns-3 the same). An early revision of that page
    # gives (1024 - G)/1024 x alpha for the decrease: "new_weight", g = G/1024.
    dce_tcp_g: int = 1019
    # How dce_tcp_g is read: "old_weight" (default, the later DOC-2790 revisions and the
    # ConnectX default 1019 giving a gain close to the paper's 1/256) or "new_weight".
    dce_tcp_g_reading: str = "old_weight"
    # dce_tcp_rtt: us between alpha updates (firmware; HPCC ns-3 ALPHA_RESUME_INTERVAL 1 us).
    dce_tcp_rtt_us: float = 1.0
    # initial_alpha_value: alpha set on the first CNP, in /1024.
    initial_alpha_value: int = 1023
    # rate_reduce_monitor_period: at most one rate cut per this many us (HPCC ns-3: 4 us).
    rate_reduce_monitor_period_us: float = 4.0
    # clamp_tgt_rate (mstflint mlxconfig description): "whenever a CNP is processed, the
    # target rate is updated to be the current rate"; ConnectX default 0 (mlxconfig dumps).
    clamp_tgt_rate: bool = False
    # clamp_tgt_rate_after_time_inc (mstflint): on a CNP the target rate is updated "if the
    # transmission rate was increased due to the timer, and not only due to the byte counter";
    # ConnectX default 1. The sentence reads two ways (clamp_ati_reading): "any_increase"
    # (default: timer increases count too, not only byte-counter ones, i.e. clamp after any
    # increase event) or "timer_only" (clamp only after a timer increase). HPCC ns-3 has no
    # byte counter and clamps iff rpTimeStage != 0, which both readings give there.
    # With both clamps 0 the target rate is never set from the current rate by a cut.
    clamp_tgt_rate_after_time_inc: bool = True
    # Reading of clamp_tgt_rate_after_time_inc: "any_increase" or "timer_only" (see above and
    # docs/congestion-control.md for why the default is any_increase).
    clamp_ati_reading: str = "any_increase"
    # min_time_between_cnps (notification point): us between CNPs of one QP. Two public
    # ``mlxconfig q`` dumps of current ConnectX firmware show 4 (MIN_TIME_BETWEEN_CNPS_P1 4,
    # next to CNP_DSCP 48 / CNP_802P_PRIO 6); nccl-roce.md 5.1 read 2 from another dump and
    # older mstflint descriptions give 0. The DCQCN paper used 50 us. See docs.
    min_time_between_cnps_us: float = 4.0

    def __post_init__(self) -> None:
        for name in ("rpg_time_reset_us", "dce_tcp_rtt_us", "rate_reduce_monitor_period_us"):
            self._check(name, getattr(self, name) > 0, "must be > 0 us")
        self._check("rpg_byte_reset", self.rpg_byte_reset >= 0, "0 (off) or a count > 0")
        self._check("rpg_byte_reset_unit_bytes", self.rpg_byte_reset_unit_bytes >= 1,
                    "bytes per unit of rpg_byte_reset: 64 (default) or 1 (mstflint's bytes)")
        self._check("rpg_byte_reset_bytes",
                    self.rpg_byte_reset_bytes is None or self.rpg_byte_reset_bytes >= 0,
                    "unset (rpg_byte_reset x rpg_byte_reset_unit_bytes), 0 (off) or bytes > 0")
        self._check("rpg_threshold", self.rpg_threshold >= 0, "must be a count >= 0")
        for name in ("rpg_ai_rate_mbps", "rpg_hai_rate_mbps", "rpg_max_rate_mbps",
                     "rate_to_set_on_first_cnp_mbps", "min_time_between_cnps_us"):
            self._check(name, getattr(self, name) >= 0, "must be >= 0")
        self._check("rpg_min_rate_mbps", self.rpg_min_rate_mbps > 0, "must be > 0 Mb/s")
        self._check("rpg_gd", 1 <= self.rpg_gd <= 20, "log2 shift, firmware range 10..11")
        self._check("rpg_min_dec_fac_pct", 0 < self.rpg_min_dec_fac_pct <= 100,
                    "a percentage in (0, 100]")
        self._check("dce_tcp_g", 0 <= self.dce_tcp_g <= 1024, "fixed point /1024 in [0, 1024]")
        self._check("initial_alpha_value", 0 <= self.initial_alpha_value <= 1024,
                    "fixed point /1024 in [0, 1024]")
        self._check("dce_tcp_g_reading", self.dce_tcp_g_reading in G_READINGS,
                    f"one of {', '.join(G_READINGS)}")
        self._check("clamp_ati_reading", self.clamp_ati_reading in CLAMP_READINGS,
                    f"one of {', '.join(CLAMP_READINGS)}")

    @property
    def g(self) -> float:
        """The DCQCN paper's EWMA gain g per alpha update (see ``dce_tcp_g_reading``)."""
        return alpha_gain(self.dce_tcp_g, self.dce_tcp_g_reading)

    @property
    def byte_reset_bytes(self) -> int:
        """The byte counter B in bytes: ``rpg_byte_reset_bytes`` if set, else
        ``rpg_byte_reset x rpg_byte_reset_unit_bytes`` (2,097,088 B by default); 0 = off.

        >>> DcqcnParams().byte_reset_bytes, DcqcnParams(rpg_byte_reset_unit_bytes=1).byte_reset_bytes
        (2097088, 32767)
        """
        if self.rpg_byte_reset_bytes is not None:
            return self.rpg_byte_reset_bytes
        return self.rpg_byte_reset * self.rpg_byte_reset_unit_bytes

    @property
    def cut_scale(self) -> float:
        """Multiplier of alpha in the cut: ``1024 / 2**rpg_gd`` (0.5 for the default gd 11)."""
        return 1024.0 / float(1 << self.rpg_gd)

    @classmethod
    def preset(cls, name: str, line_rate_bps: int | None = None) -> DcqcnParams:
        """Named parameter sets from published sources.

        Parameters
        ----------
        name : str
            ``firmware`` (ConnectX defaults, the class defaults), ``hpcc`` (HPCC ns-3 ``dcqcn``
            preset: g = 1/256, AI/HAI 5/50 Mb/s scaled by line rate / 25 Gb/s, no byte
            counter) or ``paper`` (HPCC ns-3 ``dcqcn_paper``: alpha and decrease every 50 us,
            timer 55 us, DCQCN paper's CNP interval 50 us).
        line_rate_bps : int, optional
            Needed for ``hpcc`` and ``paper``, whose increase steps scale with the line rate.
        """
        if name == "firmware":
            return cls()
        if name not in ("hpcc", "paper"):
            raise ValueError(f"unknown DCQCN preset {name!r}: use firmware, hpcc or paper")
        if not line_rate_bps:
            raise ValueError(f"DCQCN preset {name!r} needs line_rate_bps (its steps scale with it)")
        scale = line_rate_bps / 25e9  # peer-simulators.md 1.2: AI = 5*bw/25, HAI = 50*bw/25
        common = dict(rpg_byte_reset=0, dce_tcp_g=1020, rpg_ai_rate_mbps=5.0 * scale,
                      rpg_hai_rate_mbps=50.0 * scale, clamp_tgt_rate=False)
        if name == "hpcc":  # g = 1/256 -> dce_tcp_g = 1024 - 4
            return cls(**common)
        return cls(**common, dce_tcp_rtt_us=50.0, rate_reduce_monitor_period_us=50.0,
                   rpg_time_reset_us=55.0, min_time_between_cnps_us=50.0)


#: Readings of ``clamp_tgt_rate_after_time_inc``: clamp after any increase or a timer one only.
CLAMP_READINGS = ("any_increase", "timer_only")

#: Readings of ``dce_tcp_g``: the weight of the old alpha (default) or of the new sample.
G_READINGS = ("old_weight", "new_weight")


def alpha_gain(dce_tcp_g: int, reading: str = "old_weight") -> float:
    """The paper's EWMA gain g from the firmware's ``dce_tcp_g`` under ``reading``.

    >>> alpha_gain(1019), alpha_gain(1019, "new_weight")
    (0.0048828125, 0.9951171875)
    """
    if reading == "new_weight":
        return dce_tcp_g / 1024.0
    return 1.0 - dce_tcp_g / 1024.0


def _swift_check(p: SwiftParams | HybridParams) -> None:
    """Validation shared by the two delay-based parameter sets."""
    for name in ("base_target_us", "hop_scaling_us", "fs_range_us"):
        p._check(name, getattr(p, name) >= 0, "must be >= 0 us")
    p._check("hops", p.hops >= 0, "a hop count >= 0")
    p._check("ai_pkts", p.ai_pkts > 0, "packets per RTT, > 0")
    p._check("beta", 0 < p.beta <= 1, "in (0, 1]")
    p._check("max_mdf", 0 < p.max_mdf < 1, "in (0, 1)")
    p._check("mtu_bytes", p.mtu_bytes > 0, "bytes > 0, e.g. 4096")
    p._check("fs_max_cwnd_pkts", p.fs_max_cwnd_pkts > p.fs_min_cwnd_pkts > 0,
             "need 0 < fs_min_cwnd_pkts < fs_max_cwnd_pkts")
    p._check("min_cwnd_bytes", p.min_cwnd_bytes > 0, "bytes > 0")
    p._check("max_cwnd_pkts", p.max_cwnd_pkts * p.mtu_bytes > p.min_cwnd_bytes,
             "must exceed min_cwnd_bytes")
    p._check("retx_reset_threshold", p.retx_reset_threshold >= 1, "a count >= 1")


@dataclass(frozen=True)
class SwiftParams(_Params):
    """Swift (Kumar et al., SIGCOMM 2020): delay target, AI per RTT, bounded MD.

    The target compared with each measured RTT is ``base RTT of the QP + base_target +
    hops * hop_scaling + flow_scaling(cwnd)``; see ``docs/congestion-control.md`` for why the
    QP's unloaded RTT is added (Swift's base target includes the unloaded fabric RTT of a
    one-hop path; our QPs see very different unloaded RTTs).
    """

    # Queueing budget above the unloaded RTT. Swift's published base target is tens of us for
    # 50-100 G fabrics (htsim's Swift model: 20 us); at 400 G that is >1 MB of queue, so we keep
    # 5 us (250 KB at 400 G, between the Cumulus ECN Kmin and Kmax). Derived, not published.
    base_target_us: float = 5.0
    # Per-hop scaling h; htsim's Swift uses base_target / 6.55 (peer-simulators.md 4.2).
    hop_scaling_us: float = 5.0 / 6.55
    # Hops of this QP's path (the engine passes it per QP); 0 = no per-hop term.
    hops: int = 0
    # Flow-based scaling range: Swift / htsim use 5 x base target.
    fs_range_us: float = 25.0
    # Swift / htsim: flow scaling is fs_range at this cwnd ...
    fs_min_cwnd_pkts: float = 0.1
    # ... and 0 at this cwnd (packets).
    fs_max_cwnd_pkts: float = 100.0
    # Additive increment, packets per RTT (Swift / htsim ai = 1.0).
    ai_pkts: float = 1.0
    # Multiplicative-decrease constant (Swift / htsim beta = 0.8).
    beta: float = 0.8
    # Largest single decrease fraction (Swift / htsim max_mdf = 0.5).
    max_mdf: float = 0.5
    # Window floor; htsim's Swift: 10 bytes (cwnd below one packet is paced).
    min_cwnd_bytes: float = 10.0
    # Window ceiling; htsim's Swift: 1000 MSS.
    max_cwnd_pkts: float = 1000.0
    # Consecutive timeouts after which cwnd drops to the floor (Swift's RETX_RESET_THRESHOLD;
    # the value is ours, the paper gives none in our sources).
    retx_reset_threshold: int = 5
    # Packet size for window/packet conversions: the default RoCE MTU.
    mtu_bytes: int = 4096

    def __post_init__(self) -> None:
        _swift_check(self)


@dataclass(frozen=True)
class HybridParams(_Params):
    """DCQCN+Swift hybrid in the spirit of MegaScale (NSDI'24 section 3.6); design in the docs.

    Precise RTTs drive a Swift window (AI, bounded MD) toward a delay target set below the ECN
    Kmin's queueing delay; ECN/CNP gives DCQCN's alpha-scaled fast cut of that window (same
    fields and firmware defaults as :class:`DcqcnParams`).
    """

    # DCQCN part (same meaning and source as DcqcnParams; the window has its own floor,
    # min_cwnd_bytes, instead of rpg_min_rate).
    rpg_gd: int = 11
    rpg_min_dec_fac_pct: float = 50.0
    dce_tcp_g: int = 1019
    dce_tcp_rtt_us: float = 1.0
    initial_alpha_value: int = 1023
    rate_reduce_monitor_period_us: float = 4.0
    min_time_between_cnps_us: float = 4.0
    # Swift part (same meaning and source as SwiftParams) except the queueing budget: 2 us
    # (100 KB at 400 G) is below the Cumulus ECN Kmin of 150 KB (3 us at 400 G), so delay
    # control acts before ECN and ECN only catches bursts. Derived, not published.
    base_target_us: float = 2.0
    hop_scaling_us: float = 2.0 / 6.55
    hops: int = 0
    fs_range_us: float = 10.0  # 5 x base target, as Swift
    fs_min_cwnd_pkts: float = 0.1
    fs_max_cwnd_pkts: float = 100.0
    ai_pkts: float = 1.0
    beta: float = 0.8
    max_mdf: float = 0.5
    min_cwnd_bytes: float = 10.0
    max_cwnd_pkts: float = 1000.0
    retx_reset_threshold: int = 5
    mtu_bytes: int = 4096

    def __post_init__(self) -> None:
        _swift_check(self)
        for name in ("dce_tcp_rtt_us", "rate_reduce_monitor_period_us"):
            self._check(name, getattr(self, name) > 0, "must be > 0 us")
        self._check("min_time_between_cnps_us", self.min_time_between_cnps_us >= 0, "us >= 0")
        self._check("rpg_gd", 1 <= self.rpg_gd <= 20, "log2 shift, firmware range 10..11")
        self._check("rpg_min_dec_fac_pct", 0 < self.rpg_min_dec_fac_pct <= 100, "percent")
        self._check("dce_tcp_g", 0 <= self.dce_tcp_g <= 1024, "fixed point /1024")
        self._check("initial_alpha_value", 0 <= self.initial_alpha_value <= 1024,
                    "fixed point /1024")


PARAMS_BY_CC: dict[str, type[_Params] | None] = {
    "none": None, "dcqcn": DcqcnParams, "swift": SwiftParams, "hybrid": HybridParams,
}


def params_for(name: str, params: Mapping[str, Any] | _Params | None = None) -> _Params | None:
    """Return the validated parameter dataclass of algorithm ``name`` (None for ``none``).

    ``params`` may be a mapping (checked by ``from_dict``) or already the right dataclass.
    """
    if name not in PARAMS_BY_CC:
        raise ValueError(f"unknown congestion control {name!r}: use one of {', '.join(PARAMS_BY_CC)}")
    cls = PARAMS_BY_CC[name]
    if cls is None:
        if params:
            raise ValueError(f"congestion control 'none' takes no parameters, got {sorted(params)}")
        return None
    if isinstance(params, cls):
        return params
    if isinstance(params, _Params):
        raise ValueError(f"cc {name!r} needs {cls.__name__}, got {type(params).__name__}")
    return cls.from_dict(params)


def parse_cc_params(pairs: Iterable[str]) -> dict[str, str]:
    """Parse ``KEY=VALUE`` strings (e.g. from a repeated ``--cc-param`` flag) into a dict.

    Values stay strings; ``from_dict`` converts them to each field's type.

    >>> parse_cc_params(["rpg_ai_rate_mbps=10", "clamp_tgt_rate=true"])
    {'rpg_ai_rate_mbps': '10', 'clamp_tgt_rate': 'true'}
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"cc parameter {pair!r} must look like KEY=VALUE, e.g. rpg_gd=11")
        out[key.strip()] = value.strip()
    return out


def us_ps(us: float) -> int:
    """Microseconds (a parameter value) to integer picoseconds, at least 1 ps."""
    return max(1, int(round(us * PS_PER_US)))


def mbps_bps(mbps: float) -> float:
    """Mb/s (a firmware rate parameter) to bit/s."""
    return mbps * 1e6


def flow_scaling_ps(cwnd_pkts: float, fs_range_us: float, fs_min_cwnd_pkts: float,
                    fs_max_cwnd_pkts: float) -> float:
    """Swift's flow-based target scaling, in picoseconds.

    ``clamp(alpha / sqrt(cwnd) + beta, 0, fs_range)`` with ``alpha = fs_range /
    (1/sqrt(fs_min) - 1/sqrt(fs_max))`` and ``beta = -alpha / sqrt(fs_max)`` (Swift, SIGCOMM'20;
    peer-simulators.md 7): fs_range at ``fs_min_cwnd``, 0 at ``fs_max_cwnd``.
    """
    if fs_range_us <= 0:
        return 0.0
    alpha = fs_range_us / (1.0 / math.sqrt(fs_min_cwnd_pkts) - 1.0 / math.sqrt(fs_max_cwnd_pkts))
    beta = -alpha / math.sqrt(fs_max_cwnd_pkts)
    fs_us = alpha / math.sqrt(max(cwnd_pkts, 1e-9)) + beta
    return min(max(fs_us, 0.0), fs_range_us) * PS_PER_US
